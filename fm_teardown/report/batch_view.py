"""What a batch prints (spec §9): the `--landed` selection, the summary (one line a task,
and for a stopped batch the tasks not done and one command that finishes them) and the
batch's JSON document. `pipeline/batch.py` runs the batch; every line it shows is here."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from fm_teardown.model.errors import ExitCode, Verdict
from fm_teardown.model.outcome import Result, Skipped
from fm_teardown.model.plan import StepOutcome
from fm_teardown.model.reasons import Finished
from fm_teardown.report import human, messages
from fm_teardown.report import render as report
from fm_teardown.report.human import VERDICT_STYLE
from fm_teardown.report.json_out import SCHEMA

__all__ = ["batch_json", "not_selected_json", "render_selection", "render_summary"]


# Below a table whose rows' reasons were cut (`human.ROW_REASON`): each said once in full.
_IN_FULL = "in full (cut above; --json has every task's):"


def render_selection(tasks: Sequence[str], not_selected: Sequence[tuple[str, Finished]]) -> None:
    p = human.Printer(sys.stdout)
    p.line(
        f"--landed selected {len(tasks)} task{'s' if len(tasks) != 1 else ''}: "
        + (", ".join(tasks) if tasks else "none"),
        "bold",
    )
    if not_selected:
        p.line(f"not selected ({len(not_selected)}):", "bold")
        width = max(len(task) for task, _ in not_selected)
        whys = [(task, messages.finished_reason(finished)) for task, finished in not_selected]
        for (task, why), (_, finished) in zip(whys, not_selected, strict=True):
            opt = f" [include with {finished.opt_in}]" if finished.opt_in else ""
            p.line(f"  {task:<{width}}  {human.cut(why, human.ROW_REASON)}{opt}")
        human.said_once(p, whys, _IN_FULL, human.ROW_REASON)


def _result_json(r: Result) -> dict[str, Any]:
    if isinstance(r, Skipped):
        why = messages.skipped_reason(r)
        return {
            "task": r.task,
            "verdict": "skipped",
            "exit_code": None,
            "reasons": [why],
            "reason_codes": [r.code],
        }
    return report.outcome_json(r)


def batch_json(results: list[Result], *, dry_run: bool, code: int) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "batch": True,
        "dry_run": dry_run,
        "exit_code": code,
        "results": [_result_json(r) for r in results],
    }


def _what_was_done(r: Result) -> str:
    if isinstance(r, Skipped):
        return messages.skipped_reason(r)
    d = r.decision
    reasons = messages.reasons(r)
    headline = messages.said_text(d.headline) if d is not None else (reasons[0] if reasons else "")
    if r.interrupted:
        return "interrupted; the record is kept: re-run to finish"
    if r.exit_code == ExitCode.FAILED:
        failed = next((s for s in r.steps if s.outcome == StepOutcome.FAILED), None)
        return f"stopped at {failed.step}" if failed else "stopped"
    if r.exit_code != 0:
        return f"refused: {headline}"
    if r.verdict == Verdict.ALREADY:
        return reasons[0] if reasons else "already torn down"
    if r.dry_run:
        return (
            f"would {'clear its window and record' if r.verdict == Verdict.STALE else 'tear down'}"
        )
    if r.verdict == Verdict.STALE:
        return "window and record cleared; the slot left to its owner"
    return "torn down" + ("; slot returned" if r.returned_slot else "")


def not_selected_json(not_selected: Sequence[tuple[str, str, Finished]]) -> list[dict[str, Any]]:
    """The tasks `--landed` did not select (task, verdict, why), for the batch's JSON."""
    return [
        {
            "task": task,
            "verdict": verdict,
            "reason": messages.finished_reason(finished),
            "code": finished.code,
            "opt_in": finished.opt_in,
        }
        for task, verdict, finished in not_selected
    ]


def render_summary(results: list[Result], code: int, left: list[str], finish: str | None) -> None:
    p = human.Printer(sys.stdout)
    p.line(f"summary ({len(results)} task{'s' if len(results) != 1 else ''}, exit {code}):", "bold")
    if not results:
        p.line("  nothing to do")
        return
    width = max(len(str(getattr(r, "task", ""))) for r in results)
    done = [(r.task or "", _what_was_done(r)) for r in results]
    for r, (task, what) in zip(results, done, strict=True):
        verdict = "skipped" if isinstance(r, Skipped) else str(r.verdict)
        ec = "-" if isinstance(r, Skipped) else str(r.exit_code)
        p.line(
            f"  {task:<{width}}  {verdict:<10}  {ec:>3}  {human.cut(what, human.ROW_REASON)}",
            VERDICT_STYLE.get(verdict),
        )
    human.said_once(p, done, _IN_FULL, human.ROW_REASON)
    if finish is not None:
        p.line(f"not done: {', '.join(left)}; to finish them: {finish}", "bold")
