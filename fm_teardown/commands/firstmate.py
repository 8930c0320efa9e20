"""`fm-teardown <id> [--force]`: the drop-in for firstmate's `bin/fm-teardown.sh` (spec §10).

firstmate's callers run the script with its argument shape and read its output: the success
line on stdout, the backlog reminder after it, on failure a first stderr line that starts
with `REFUSED:` (a refusal) or `error:` (anything else), the script's exit codes (0 done, 1
every refusal and error, 2 a bad request, 3 the gate refusal) and the few operator lines its
callers grep for. This console script keeps all of that and does what `fm teardown <id>
[--force]` does (same decision, same steps, same journal line: `pipeline/one_task.py`).
`fm teardown` keeps fm's distinct exit codes. docs/firstmate.md says how to swap it in and
what differs.
"""

from __future__ import annotations

import sys

__all__ = ["main", "run"]


def main(argv: list[str] | None = None) -> None:
    from fm_teardown.report import closed_stdout, firstmate_view

    closed_stdout.guard()  # a reader that closes early never changes the exit code
    args = sys.argv[1:] if argv is None else argv
    try:
        code = run(args)
    except KeyboardInterrupt:
        firstmate_view.error("interrupted")
        code = 130
    except Exception as exc:  # the last line of defence: one line, never a traceback
        firstmate_view.error(f"unexpected error: {type(exc).__name__}: {exc}")
        code = 1
    closed_stdout.settle()
    sys.exit(code)


def run(args: list[str]) -> int:
    from fm_teardown.model import settings
    from fm_teardown.model.errors import ExitCode, FmError
    from fm_teardown.model.records import load_record, task_id_problem
    from fm_teardown.model.request import Caller, Discard, Flags
    from fm_teardown.pipeline.one_task import teardown_task
    from fm_teardown.pipeline.stages import TaskRun
    from fm_teardown.report import firstmate_view as view
    from fm_teardown.report import render as report

    if args[:1] in (["--help"], ["-h"]):
        view.help_text()
        return 0
    if not args or task_id_problem(args[0]) is not None:
        view.invalid_request()
        return int(ExitCode.INVALID)
    task = args[0]
    force = len(args) > 1 and args[1] == "--force"
    # Argument 2 counts only when it is exactly --force; everything else is ignored, loudly.
    for extra in args[1 if not force else 2 :]:
        view.ignored_argument(extra)
    try:
        s = settings.load(None)
    except FmError as err:
        view.error(err.message)
        return _script_exit(int(err.exit_code), gate=err.gate)
    try:
        record = load_record(s.state_dir, task)
    except FmError:
        record = None  # the run below refuses it, with the same message
    # The script had no journal: a journal that cannot be written only warns here.
    flags = Flags(discard=Discard.OWN_WORK if force else Discard.NOTHING, caller=Caller.DROP_IN)
    outcome = teardown_task(TaskRun(s, task, flags))
    view.operator_lines(outcome)
    lead, said_first = view.lead_line(outcome)
    if outcome.decision is None:
        view.refusal_lines(lead, outcome.hints)
        return _script_exit(outcome.exit_code, gate=outcome.gate)
    if outcome.exit_code != 0:
        report.render_firstmate(outcome, lead=lead, lead_is_first_reason=said_first)
        return _script_exit(outcome.exit_code, gate=outcome.gate)
    report.render_firstmate(outcome, lead=None)
    assert record is not None
    view.success(record, view.backlog_reminder(s, record))
    return 0


def _script_exit(code: int, *, gate: bool = False) -> int:
    """The script's exit code for fm's, once the task id is valid: 0 done, 3 the gate refusal
    (the script's own code for it), 130 an interrupt, 1 for every other refusal and error
    (a missing record included: the script's `error: no meta for task`)."""
    if code in (0, 130):
        return code
    return 3 if gate else 1


if __name__ == "__main__":
    main()
