"""What `fm-teardown`, the drop-in for firstmate's `bin/fm-teardown.sh`, prints (spec §10).

The script's callers read its lines: the success line and the backlog reminder on stdout, on
failure a first stderr line that starts with `REFUSED:` (a refusal) or `error:` (anything
else), `warning:` lines, and the progress line for the processes it reaped. Their words are
kept here, where every line the drop-in prints is written; `commands/firstmate.py` decides
which to show.
"""

from __future__ import annotations

import os
import shutil
import sys

from fm_teardown.model.errors import Lead
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import StepOutcome
from fm_teardown.model.records import Mode, Record, RecordKind
from fm_teardown.model.settings import Settings
from fm_teardown.report import messages, step_words

__all__ = [
    "USAGE",
    "backlog_reminder",
    "error",
    "help_text",
    "ignored_argument",
    "invalid_request",
    "lead_line",
    "operator_lines",
    "refusal_lines",
    "success",
]

USAGE = "usage: fm-teardown <task-id> [--force]"


def help_text() -> None:
    sys.stdout.write(
        f"{USAGE}\n\nTear down a finished task as firstmate's bin/fm-teardown.sh does, "
        "through fm (`fm teardown <task-id> [--force]`).\n"
    )


def invalid_request() -> None:
    # The script's own words for a missing or unsafe task id, alone on stderr.
    sys.stderr.write("error: invalid teardown request\n")


def ignored_argument(extra: str) -> None:
    sys.stderr.write(f"warning: ignoring argument {extra!r} ({USAGE})\n")


def error(message: str) -> None:
    """An `error:` line: a setting that cannot be used, an interrupt, an unexpected error."""
    sys.stderr.write(f"error: {message}\n")


def refusal_lines(lead: str, hints: tuple[str, ...]) -> None:
    """An error before deciding: its lead line, then its hints."""
    sys.stderr.write(lead + "\n")
    for hint in hints:
        sys.stderr.write(f"hint: {hint}\n")


def success(record: Record, reminder: str | None) -> None:
    print(
        f"teardown {record.task_id} complete (window {record.window}, worktree {record.worktree})"
    )
    if reminder:
        print(reminder)


def operator_lines(outcome: Outcome) -> None:
    """The script's progress lines its callers read, said of what fm did: TASK's own
    no-mistakes run aborted at its gate (`teardown: no-mistakes run for <id> is parked at a
    gate; aborting before the worker is removed`), TASK's browser
    stack closed (`browser reap: …`, firstmate's reaper's words), the processes it ended in
    the slot or the task's temp dir (`teardown: reaping leaked worktree process(es) for <id>:
    <pids>`), then each process group of which the step ended the leader and left nothing
    (`teardown: reaping leaked worktree process group for <id>: <pgid>`), then the remote-job
    workers of a pruned code root it ended (`reaped abandoned remote job worker …`)."""
    from fm_teardown.model.leaks import BrowserResult, RemoteJobsResult
    from fm_teardown.model.parked_run import ParkedRunResult
    from fm_teardown.report import leak_words

    for st in outcome.steps:
        if isinstance(st.result, ParkedRunResult) and st.result.aborted:
            sys.stderr.write(_aborting_line(outcome.task or "?") + "\n")
    for st in outcome.steps:
        if isinstance(st.result, BrowserResult):
            for line in leak_words.browser_lines(st.result):
                sys.stderr.write(line + "\n")
    _process_lines(outcome)
    for st in outcome.steps:
        if isinstance(st.result, RemoteJobsResult):
            for line in leak_words.remote_jobs_lines(st.result):
                sys.stderr.write(line + "\n")


def _process_lines(outcome: Outcome) -> None:
    from fm_teardown.model.results import ProcessesResult

    if not outcome.signalled:
        return
    pids = " ".join(str(sig.pid) for sig in outcome.signalled)
    sys.stderr.write(f"teardown: reaping leaked worktree process(es) for {outcome.task}: {pids}\n")
    for st in outcome.steps:
        if isinstance(st.result, ProcessesResult):
            for group in st.result.groups:
                sys.stderr.write(
                    f"teardown: reaping leaked worktree process group for {outcome.task}: {group}\n"
                )


def lead_line(outcome: Outcome) -> tuple[str, bool]:
    """The first stderr line the script's callers read, and whether it is the outcome's own
    first reason (then fm's detail lines do not say it again): `REFUSED: …` for a refusal
    (3, 4, 5), `error: …` for anything else; the gate refusal keeps the script's `error:`
    wording."""
    said = messages.bare_reasons(outcome)
    first = said[0] if said else str(outcome.verdict)
    if outcome.lead == Lead.ERROR:
        return messages.led(Lead.ERROR, first), bool(said)
    if outcome.exit_code in (3, 4, 5):
        return messages.refusal_line(first), bool(said) and outcome.lead == Lead.REFUSED
    if outcome.exit_code == 1 or outcome.interrupted:
        failed = next((st for st in outcome.steps if st.outcome == StepOutcome.FAILED), None)
        if failed is not None and _parked_run_refused(failed.result) and not outcome.interrupted:
            # The script refuses a run it could not read back stopped, in these words.
            return messages.refusal_line(_parked_refusal(outcome.task or "?")), False
        cause = f"{failed.step}: {step_words.detail(failed)}" if failed else first
        if outcome.interrupted:
            cause = "interrupted" + (f" ({cause})" if failed else "")
        return f"error: teardown {outcome.task} stopped: {cause}; the record is kept", False
    return messages.led(Lead.ERROR, first), False


def _aborting_line(task: str) -> str:
    """firstmate's progress line, as its script prints it before the abort (spec §15.5b)."""
    return (
        f"teardown: no-mistakes run for {task} is parked at a gate; aborting before the "
        "worker is removed"
    )


def _parked_refusal(task: str) -> str:
    """firstmate's refusal of a run not read back stopped, in its script's words, without its
    `REFUSED: ` lead (`<id>` is the script's own placeholder)."""
    return (
        f"no-mistakes run for {task} is still parked after axi abort; confirm it stopped "
        "(no-mistakes axi status) or abort it manually (no-mistakes axi abort --run <id>) "
        "before retrying teardown."
    )


def _parked_run_refused(result: object) -> bool:
    from fm_teardown.model.parked_run import ParkedRunResult, ParkedRunWhat

    return isinstance(result, ParkedRunResult) and result.what == ParkedRunWhat.UNCONFIRMED


def backlog_reminder(s: Settings, record: Record) -> str | None:
    """The script's backlog reminder (spec §10): none for a secondmate; the tasks-axi
    form when `tasks-axi` is on PATH and the backlog backend is not `manual`; else manual."""
    task = record.task_id
    if record.kind == RecordKind.SECONDMATE:
        return None
    backend = ""
    if s.config_dir is not None:
        try:
            with open(os.path.join(s.config_dir, "backlog-backend"), encoding="utf-8") as f:
                backend = f.read().strip()
        except OSError:
            backend = ""
    if shutil.which("tasks-axi") and backend != "manual":
        if record.kind == RecordKind.SCOUT:
            extra = f"--report data/{task}/report.md"
        elif record.mode == Mode.LOCAL_ONLY:
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
