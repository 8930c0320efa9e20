"""Several tasks at once (CONTRACT §9): `fm teardown A B C` and `fm teardown --landed`.

Each task is torn down exactly as `fm teardown TASK` alone would be, one after another: its
own decision (made again at its turn), its own slot lock and re-check, its own journal line.
A refusal changes nothing and the batch goes on; a failure stops it and the tasks after it are
`skipped`; an interrupt stops the current task at a step boundary and skips the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from fm_teardown import journal, report
from fm_teardown.errors import ExitCode, Verdict
from fm_teardown.human import VERDICT_STYLE
from fm_teardown.outcome import Outcome
from fm_teardown.plan import Flags
from fm_teardown.settings import Settings
from fm_teardown.values import value


@value
class Skipped:
    """A task the batch did not reach."""

    task: str
    why: str


Result = Outcome | Skipped


def exit_code(results: list[Result]) -> int:
    """0 when every task exited 0; else 1 when any failed or was skipped (130 when the batch
    was interrupted); else the largest refusal code."""
    codes = [r.exit_code for r in results if isinstance(r, Outcome)]
    if any(isinstance(r, Outcome) and r.interrupted for r in results):
        return int(ExitCode.INTERRUPTED)
    if all(c == 0 for c in codes) and len(codes) == len(results):
        return 0
    if any(c == ExitCode.FAILED for c in codes) or len(codes) < len(results):
        return int(ExitCode.FAILED)
    return max(codes)


def select_landed(s: Settings) -> list[str]:
    """`--landed`: every task whose dry-run verdict is now proceed or stale, from one
    observation of the fleet (the audit's, rule 5 included), in task-id order."""
    from fm_teardown.audit import audit

    return sorted(r.task for r in audit(s).rows if r.verdict in (Verdict.PROCEED, Verdict.STALE))


def run(
    s: Settings,
    tasks: list[str],
    flags: Flags,
    *,
    json_out: bool,
    one: Callable[[Settings, str, Flags], Outcome],
    landed: bool = False,
) -> int:
    results: list[Result] = []
    progress = not json_out and sys.stderr.isatty()
    if landed and not json_out:
        report.Printer(sys.stdout).line(
            f"--landed selected {len(tasks)} task{'s' if len(tasks) != 1 else ''}: "
            + (", ".join(tasks) if tasks else "none"),
            "bold",
        )
    for i, task in enumerate(tasks):
        if progress:
            left = len(tasks) - i - 1
            sys.stderr.write(f"[{i + 1}/{len(tasks)}] fm teardown {task} ({left} left)\n")
        try:
            outcome = one(s, task, flags)
        except KeyboardInterrupt:
            # Interrupted while deciding: this task changed nothing.
            outcome = interrupted_before_acting(task, flags)
        if not flags.dry_run and outcome.verdict != Verdict.INVALID:
            journal.append(s.data_dir, journal.entry_of(outcome, flags))
        results.append(outcome)
        if not json_out:
            report.render(outcome, json_out=False)
        if outcome.interrupted or outcome.exit_code == ExitCode.FAILED:
            why = "interrupted" if outcome.interrupted else f"{task} failed"
            results += [Skipped(t, f"not run: {why}") for t in tasks[i + 1 :]]
            break
    code = exit_code(results)
    if json_out:
        report.emit_json(batch_json(results, dry_run=flags.dry_run, code=code))
    else:
        render_summary(results, code)
    return code


def interrupted_before_acting(task: str, flags: Flags) -> Outcome:
    return Outcome(
        task=task,
        dry_run=flags.dry_run,
        verdict=Verdict.FAILED,
        exit_code=int(ExitCode.INTERRUPTED),
        reasons=("interrupted while deciding; nothing was changed",),
        interrupted=True,
    )


def result_json(r: Result) -> dict[str, Any]:
    if isinstance(r, Skipped):
        return {"task": r.task, "verdict": "skipped", "exit_code": None, "reasons": [r.why]}
    return report.outcome_json(r)


def batch_json(results: list[Result], *, dry_run: bool, code: int) -> dict[str, Any]:
    return {
        "schema": report.SCHEMA,
        "batch": True,
        "dry_run": dry_run,
        "exit_code": code,
        "results": [result_json(r) for r in results],
    }


def what_was_done(r: Result) -> str:
    if isinstance(r, Skipped):
        return r.why
    d = r.decision
    headline = d.headline if d is not None else (r.reasons[0] if r.reasons else "")
    if r.interrupted:
        return "interrupted; the record is kept: re-run to finish"
    if r.exit_code == ExitCode.FAILED:
        failed = next((s for s in r.steps if s.outcome == "failed"), None)
        return f"stopped at {failed.step}" if failed else "stopped"
    if r.exit_code != 0:
        return f"refused: {headline}"
    if r.dry_run:
        return (
            f"would {'clear its window and record' if r.verdict == Verdict.STALE else 'tear down'}"
        )
    if r.verdict == Verdict.STALE:
        return "window and record cleared; the slot left to its owner"
    returned = any(s.step == "pool" and s.outcome == "done" for s in r.steps)
    return "torn down" + ("; slot returned" if returned else "")


def render_summary(results: list[Result], code: int) -> None:
    p = report.Printer(sys.stdout)
    p.line(f"summary ({len(results)} task{'s' if len(results) != 1 else ''}, exit {code}):", "bold")
    if not results:
        p.line("  nothing to do")
        return
    width = max(len(str(getattr(r, "task", ""))) for r in results)
    for r in results:
        verdict = "skipped" if isinstance(r, Skipped) else str(r.verdict)
        ec = "-" if isinstance(r, Skipped) else str(r.exit_code)
        task = r.task if isinstance(r, Skipped) else (r.task or "")
        p.line(
            f"  {task:<{width}}  {verdict:<10}  {ec:>3}  {what_was_done(r)}",
            VERDICT_STYLE.get(verdict),
        )
