"""Several tasks at once (spec §9): `fm teardown A B C` and `fm teardown --landed`.

Each task is torn down exactly as `fm teardown TASK` alone would be, one after another: its
own decision (made again at its turn), its own slot lock and re-check, its own journal line.
A refusal changes nothing and the batch goes on; a failure stops it and the tasks after it are
`skipped`; an interrupt stops the current task at a step boundary and skips the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fm_teardown.adapters import interrupts
from fm_teardown.model import messages
from fm_teardown.model.errors import ExitCode, Verdict
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import Flags, Step, StepName, StepOutcome
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.pipeline import (
    NotSelected,
    interrupted_before_acting,
    journalled,
    with_expected_plan,
)
from fm_teardown.report import human, journal
from fm_teardown.report import render as report
from fm_teardown.report.human import VERDICT_STYLE
from fm_teardown.selection import Selection, guard

if TYPE_CHECKING:
    from collections.abc import Iterable

    from fm_teardown.decide.finished import Options
    from fm_teardown.pipeline import Guard

__all__ = ["Result", "Skipped", "exit_code", "run"]


@value
class Skipped:
    """A task the batch did not reach."""

    task: str
    why: str


Result = Outcome | Skipped


def exit_code(results: list[Result], *, interrupted: bool = False) -> int:
    """0 when every task exited 0; else 1 when any failed or was skipped (130 when the batch
    was interrupted); else the largest refusal code."""
    codes = [r.exit_code for r in results if isinstance(r, Outcome)]
    if interrupted or any(isinstance(r, Outcome) and r.interrupted for r in results):
        return int(ExitCode.INTERRUPTED)
    if all(c == 0 for c in codes) and len(codes) == len(results):
        return 0
    if any(c == ExitCode.FAILED for c in codes) or len(codes) < len(results):
        return int(ExitCode.FAILED)
    return max(codes)


def run(
    s: Settings,
    selection: Selection,
    flags: Flags,
    *,
    json_out: bool,
    one: Callable[[Settings, str, Flags, Guard | None], Outcome],
    landed: bool = False,
    opts: Options | None = None,
    plans: dict[str, str] | None = None,
    again: tuple[str, ...] = (),
) -> int:
    """Tear down `selection` one task after another; the batch's exit code. `again`: the
    options a command finishing this batch repeats (`--state-dir DIR`)."""
    tasks = list(selection.tasks)
    results: list[Result] = []
    progress = not json_out and sys.stderr.isatty()
    if landed and not json_out:
        _render_selection(selection)
    returned: dict[str, str] = {}  # slot -> the task of this batch that returned it
    stopped = False
    with interrupts.while_batch():
        for i, task in enumerate(tasks):
            if interrupts.requested():
                stopped = True
                results += [Skipped(t, "not run: interrupted") for t in tasks[i:]]
                break
            if progress:
                left = len(tasks) - i - 1
                sys.stderr.write(f"[{i + 1}/{len(tasks)}] fm teardown {task} ({left} left)\n")
            again_selected = guard(task, selection, returned, opts if landed else None)
            try:
                mine = flags if plans is None else with_expected_plan(flags, task, plans)
                outcome = one(s, task, mine, again_selected)
            except NotSelected as skip:
                results.append(Skipped(task, messages.not_selected_reason(skip.reason)))
                continue
            except KeyboardInterrupt:
                # Interrupted while deciding: this task changed nothing.
                outcome = interrupted_before_acting(task, flags)
            if journalled(outcome, task) and not flags.no_journal:
                journal.append(s.data_dir, journal.result_entry(outcome, flags))
            results.append(outcome)
            d = outcome.decision
            if d is not None and d.slot is not None and _returned(outcome.steps):
                returned[d.slot] = task
            if not json_out:
                report.render(outcome, json_out=False)
            stopped = outcome.interrupted or interrupts.requested()
            if stopped or outcome.exit_code == ExitCode.FAILED:
                why = "interrupted" if stopped else f"{task} failed"
                results += [Skipped(t, f"not run: {why}") for t in tasks[i + 1 :]]
                break
        code = exit_code(results, interrupted=stopped)
        not_done = _not_done(results)
        finish = _finish_command(not_done, flags, plans, landed, opts, again) if not_done else None
        if json_out:
            doc = _batch_json(results, dry_run=flags.dry_run, code=code)
            if finish is not None:
                doc["not_done"] = not_done
                doc["finish"] = finish
            if landed:
                doc["not_selected"] = [
                    {
                        "task": n.task,
                        "verdict": n.verdict,
                        "reason": messages.finished_reason(n.finished),
                        "opt_in": n.finished.opt_in,
                    }
                    for n in selection.not_selected
                ]
            report.emit_json(doc)
        else:
            _render_summary(results, code, not_done, finish)
    return code


def _not_done(results: list[Result]) -> list[str]:
    """The tasks a stopped batch did not finish: interrupted, failed or never reached.
    A refusal is not among them: it needs the operator first (its hints say what)."""
    return [
        r.task or ""
        for r in results
        if isinstance(r, Skipped) or r.interrupted or r.exit_code == ExitCode.FAILED
    ]


def _finish_command(
    left: list[str],
    flags: Flags,
    plans: dict[str, str] | None,
    landed: bool,
    opts: Options | None,
    again: tuple[str, ...],
) -> str:
    """One command that finishes what a stopped batch left: the tasks not done, by name (a
    task finished meanwhile is reported `already torn down`), or `--landed` again."""
    import shlex

    if landed:
        words = ["fm", "teardown", "--landed"]
        if opts is not None:
            words += ["--include-live"] if opts.include_live else []
            words += ["--include-pushed"] if opts.include_pushed else []
            words += ["--min-age", f"{opts.min_age:g}s"]
    else:
        words = ["fm", "teardown", *left]
        for task in left:
            if plans is not None and task in plans:
                words += ["--expect-plan", f"{task}={plans[task]}"]
    if flags.dry_run:
        words.append("--dry-run")
    if flags.no_journal:
        words.append("--no-journal")
    return shlex.join([*words, *again])


def _render_selection(selection: Selection) -> None:
    p = human.Printer(sys.stdout)
    tasks = selection.tasks
    p.line(
        f"--landed selected {len(tasks)} task{'s' if len(tasks) != 1 else ''}: "
        + (", ".join(tasks) if tasks else "none"),
        "bold",
    )
    if selection.not_selected:
        p.line(f"not selected ({len(selection.not_selected)}):", "bold")
        width = max(len(n.task) for n in selection.not_selected)
        for n in selection.not_selected:
            opt = f" [include with {n.finished.opt_in}]" if n.finished.opt_in else ""
            p.line(f"  {n.task:<{width}}  {messages.finished_reason(n.finished)}{opt}")


def _result_json(r: Result) -> dict[str, Any]:
    if isinstance(r, Skipped):
        return {"task": r.task, "verdict": "skipped", "exit_code": None, "reasons": [r.why]}
    return report.outcome_json(r)


def _batch_json(results: list[Result], *, dry_run: bool, code: int) -> dict[str, Any]:
    return {
        "schema": report.SCHEMA,
        "batch": True,
        "dry_run": dry_run,
        "exit_code": code,
        "results": [_result_json(r) for r in results],
    }


def _what_was_done(r: Result) -> str:
    if isinstance(r, Skipped):
        return r.why
    d = r.decision
    reasons = messages.reasons(r)
    headline = d.headline if d is not None else (reasons[0] if reasons else "")
    if r.interrupted:
        return "interrupted; the record is kept: re-run to finish"
    if r.exit_code == ExitCode.FAILED:
        failed = next((s for s in r.steps if s.outcome == "failed"), None)
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
    return "torn down" + ("; slot returned" if _returned(r.steps) else "")


def _returned(steps: Iterable[Step]) -> bool:
    """Did the run return its slot to the pool?"""
    return any(st.step == StepName.POOL and st.outcome == StepOutcome.DONE for st in steps)


def _render_summary(results: list[Result], code: int, left: list[str], finish: str | None) -> None:
    p = human.Printer(sys.stdout)
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
            f"  {task:<{width}}  {verdict:<10}  {ec:>3}  {_what_was_done(r)}",
            VERDICT_STYLE.get(verdict),
        )
    if finish is not None:
        p.line(f"not done: {', '.join(left)}; to finish them: {finish}", "bold")
