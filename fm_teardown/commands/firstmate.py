"""`fm-teardown <id> [--force]`: the drop-in for firstmate's `bin/fm-teardown.sh` (spec §10).

firstmate's callers run the script with its argument shape and read its output: the success
line on stdout, the backlog reminder after it, on failure a first stderr line that starts
with `REFUSED:` (a refusal) or `error:` (anything else), the script's exit codes (0 done, 1
every refusal and error, 2 a bad request, 3 the gate refusal) and the few operator lines its
callers grep for. This console script keeps all of that and does what `fm teardown <id>
[--force]` does (same decision, same steps, same journal line). `fm teardown` keeps fm's
distinct exit codes. docs/firstmate.md says how to swap it in and what differs.
"""

from __future__ import annotations

import os
import shutil
import sys

__all__ = ["USAGE", "main", "run"]

USAGE = "usage: fm-teardown <task-id> [--force]"


def main(argv: list[str] | None = None) -> None:
    from fm_teardown.report import closed_stdout

    closed_stdout.guard()  # a reader that closes early never changes the exit code
    args = sys.argv[1:] if argv is None else argv
    try:
        code = run(args)
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        code = 130
    except Exception as exc:  # the last line of defence: one line, never a traceback
        sys.stderr.write(f"error: unexpected error: {type(exc).__name__}: {exc}\n")
        code = 1
    closed_stdout.settle()
    sys.exit(code)


def run(args: list[str]) -> int:
    from fm_teardown.model import settings
    from fm_teardown.model.errors import ExitCode, FmError
    from fm_teardown.model.plan import Flags
    from fm_teardown.model.records import load_record, task_id_problem
    from fm_teardown.pipeline import journalled, run_one
    from fm_teardown.report import journal
    from fm_teardown.report import render as report

    if args[:1] in (["--help"], ["-h"]):
        sys.stdout.write(
            f"{USAGE}\n\nTear down a finished task as firstmate's bin/fm-teardown.sh does, "
            "through fm (`fm teardown <task-id> [--force]`).\n"
        )
        return 0
    if not args or task_id_problem(args[0]) is not None:
        # The script's own words for a missing or unsafe task id, alone on stderr.
        sys.stderr.write("error: invalid teardown request\n")
        return int(ExitCode.INVALID)
    task = args[0]
    force = len(args) > 1 and args[1] == "--force"
    # Argument 2 counts only when it is exactly --force; everything else is ignored, loudly.
    for extra in args[1 if not force else 2 :]:
        sys.stderr.write(f"warning: ignoring argument {extra!r} ({USAGE})\n")
    try:
        s = settings.load(None)
    except FmError as err:
        sys.stderr.write(f"error: {err.message}\n")
        return _script_exit(int(err.exit_code), gate=err.gate)
    try:
        record = load_record(s.state_dir, task)
    except FmError:
        record = None  # the run below refuses it, with the same message
    flags = Flags(force=force)
    # The script had no journal: a journal that cannot be written only warns here.
    outcome = run_one(s, task, flags, journal_required=False, converge=False)
    if journalled(outcome, task):
        journal.append(s.data_dir, journal.result_entry(outcome, flags))
    for line in _operator_lines(outcome):
        sys.stderr.write(line + "\n")
    lead, said_first = _lead_line(outcome)
    if outcome.decision is None:
        sys.stderr.write(lead + "\n")
        for hint in outcome.hints:
            sys.stderr.write(f"hint: {hint}\n")
        return _script_exit(outcome.exit_code, gate=outcome.gate)
    if outcome.exit_code != 0:
        report.render_firstmate(outcome, lead=lead, lead_is_first_reason=said_first)
        return _script_exit(outcome.exit_code, gate=outcome.gate)
    report.render_firstmate(outcome, lead=None)
    assert record is not None
    print(f"teardown {task} complete (window {record.window}, worktree {record.worktree})")
    reminder = _backlog_reminder(s, record)
    if reminder:
        print(reminder)
    return 0


def _script_exit(code: int, *, gate: bool = False) -> int:
    """The script's exit code for fm's, once the task id is valid: 0 done, 3 the gate refusal
    (the script's own code for it), 130 an interrupt, 1 for every other refusal and error
    (a missing record included: the script's `error: no meta for task`)."""
    if code in (0, 130):
        return code
    return 3 if gate else 1


def _operator_lines(outcome: object) -> list[str]:
    """The script's progress lines its callers read, said of what fm did: the processes it
    ended in the slot or the task's temp dir (`teardown: reaping leaked worktree process(es)
    for <id>: <pids>`)."""
    from fm_teardown.model.outcome import Outcome

    assert isinstance(outcome, Outcome)
    if not outcome.signalled:
        return []
    pids = " ".join(str(sig.pid) for sig in outcome.signalled)
    return [f"teardown: reaping leaked worktree process(es) for {outcome.task}: {pids}"]


def _lead_line(outcome: object) -> tuple[str, bool]:
    """The first stderr line the script's callers read, and whether it is the outcome's own
    first reason (then fm's detail lines do not say it again): `REFUSED: …` for a refusal
    (3, 4, 5), `error: …` for anything else; the gate refusal keeps the script's `error:`
    wording."""
    from fm_teardown.model import messages
    from fm_teardown.model.errors import Lead
    from fm_teardown.model.outcome import Outcome

    assert isinstance(outcome, Outcome)
    said = messages.bare_reasons(outcome)
    first = said[0] if said else str(outcome.verdict)
    if outcome.lead == Lead.ERROR:
        return messages.led(Lead.ERROR, first), bool(said)
    if outcome.exit_code in (3, 4, 5):
        return messages.refusal_line(first), bool(said) and outcome.lead == Lead.REFUSED
    if outcome.exit_code == 1 or outcome.interrupted:
        failed = next((st for st in outcome.steps if st.outcome == "failed"), None)
        cause = f"{failed.step}: {messages.detail(failed)}" if failed else first
        if outcome.interrupted:
            cause = "interrupted" + (f" ({cause})" if failed else "")
        return f"error: teardown {outcome.task} stopped: {cause}; the record is kept", False
    return messages.led(Lead.ERROR, first), False


def _backlog_reminder(s: object, record: object) -> str | None:
    """The script's backlog reminder (spec §10): none for a secondmate; the tasks-axi
    form when `tasks-axi` is on PATH and the backlog backend is not `manual`; else manual."""
    from fm_teardown.model.records import Record
    from fm_teardown.model.settings import Settings

    assert isinstance(s, Settings) and isinstance(record, Record)
    task = record.task_id
    if record.kind == "secondmate":
        return None
    backend = ""
    if s.config_dir is not None:
        try:
            with open(os.path.join(s.config_dir, "backlog-backend"), encoding="utf-8") as f:
                backend = f.read().strip()
        except OSError:
            backend = ""
    if shutil.which("tasks-axi") and backend != "manual":
        if record.kind == "scout":
            extra = f"--report data/{task}/report.md"
        elif record.mode == "local-only":
            extra = '--note "local main"'
        elif record.pr:
            extra = f"--pr {record.pr}"
        else:
            extra = "--pr PR_URL"
        return (
            f"Backlog: {task} just finished. Run tasks-axi done {task} {extra}, then run "
            "tasks-axi ready for dependency-cleared candidates, check date gates, and dispatch "
            "only work whose blockers are gone and date is due."
        )
    return (
        f"Backlog: {task} just finished. Update data/backlog.md - move {task} to Done, keep "
        "Done to the 10 most recent, then re-scan Queued and dispatch only work whose "
        "blockers are gone and date is due."
    )


if __name__ == "__main__":
    main()
