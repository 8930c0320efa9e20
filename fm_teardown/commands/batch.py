"""Several tasks at once (spec §9): `fm teardown A B C` and `fm teardown --landed`.

Each task is torn down exactly as `fm teardown TASK` alone would be, one after another: its
own decision (made again at its turn), its own slot lock and re-check, its own journal line.
A refusal changes nothing and the batch goes on; a failure stops it and the tasks after it are
`skipped`; an interrupt stops the current task at a step boundary and skips the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from fm_teardown.adapters import interrupts
from fm_teardown.model.errors import ExitCode
from fm_teardown.model.outcome import Outcome, Result, Skipped
from fm_teardown.model.plan import Flags
from fm_teardown.model.reasons import NotSelectedReason, NotSelectedWhy
from fm_teardown.model.results import arrived
from fm_teardown.model.settings import Settings
from fm_teardown.pipeline import (
    NotSelected,
    interrupted_before_acting,
    journal_result,
    with_expected_plan,
)
from fm_teardown.report import batch_view, console
from fm_teardown.report import render as report
from fm_teardown.selection import NotChosen, Selection, guard

if TYPE_CHECKING:
    from fm_teardown.decide.finished import Options
    from fm_teardown.model.plan import Planned
    from fm_teardown.pipeline import Guard

__all__ = ["exit_code", "run"]


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
    not_selected = list(selection.not_selected)
    if landed and plans is not None:
        # An approved task is never dropped: one `--landed` no longer selects is decided at
        # its turn all the same, and its changed plan refuses (plan-changed) and counts.
        tasks = sorted({*tasks, *plans})
        not_selected = [n for n in not_selected if n.task not in plans]
    results: list[Result] = []
    progress = not json_out and sys.stderr.isatty()
    if landed and not json_out:
        batch_view.render_selection(tasks, [(n.task, n.finished) for n in not_selected])
    returned: dict[str, str] = {}  # slot -> the task of this batch that returned it
    stopped = False
    with interrupts.while_batch():
        for i, task in enumerate(tasks):
            if interrupts.requested():
                stopped = True
                results += [Skipped(t) for t in tasks[i:]]
                break
            if progress:
                console.progress(i + 1, len(tasks), task)
            again_selected = guard(task, selection, returned, opts if landed else None)
            if landed and plans is not None and task in plans:
                again_selected = _approved(again_selected, plans[task])
            try:
                mine = flags if plans is None else with_expected_plan(flags, task, plans)
                outcome = one(s, task, mine, again_selected)
            except NotSelected as skip:
                results.append(Skipped(task, not_selected=skip.reason))
                continue
            except KeyboardInterrupt:
                # Interrupted while deciding: this task changed nothing.
                outcome = interrupted_before_acting(task, flags)
            journal_result(s, outcome, task, flags)
            results.append(outcome)
            d = outcome.decision
            if d is not None and d.slot is not None and outcome.returned_slot:
                returned[d.slot] = task
            if not json_out:
                report.render(outcome, json_out=False)
            stopped = outcome.interrupted or interrupts.requested()
            # Someone who came to work in a slot stops that task only (spec §15.4).
            came = arrived(s.result for s in outcome.steps)
            if stopped or (outcome.exit_code == ExitCode.FAILED and not came):
                failed = None if stopped else task
                results += [Skipped(t, failed) for t in tasks[i + 1 :]]
                break
        code = _with_refusals(exit_code(results, interrupted=stopped), not_selected)
        not_done = _not_done(results)
        finish = (
            _finish_command(not_done, _acted(results), flags, plans, landed, opts, again)
            if not_done
            else None
        )
        if json_out:
            doc = batch_view.batch_json(results, dry_run=flags.dry_run, code=code)
            if finish is not None:
                doc["not_done"] = not_done
                doc["finish"] = finish
            if landed:
                doc["not_selected"] = batch_view.not_selected_json(
                    [(n.task, n.verdict, n.finished) for n in not_selected]
                )
            report.emit_json(doc)
        else:
            batch_view.render_summary(results, code, not_done, finish)
    return code


def _with_refusals(code: int, not_selected: list[NotChosen]) -> int:
    """The batch's exit code with the tasks `--landed` refused rather than passed over
    (`NotChosen.refused`: 4, as a live owner refuses; spec §15.4). A task that is merely not
    finished changes nothing."""
    if not any(n.refused for n in not_selected) or code in (ExitCode.FAILED, ExitCode.INTERRUPTED):
        return code
    return max(code, int(ExitCode.LIVE_OWNER))


def _approved(check: Guard, token: str) -> Guard:
    """A task's re-selection at its turn, when an approved token names it: a task that is no
    longer selected (relaunched, no longer finished) because its plan is no longer the one
    approved is not skipped but refused as a changed plan (the token check after the guard
    says what changed); a slot this batch already returned still skips it."""

    def check_approved(planned: Planned) -> NotSelectedReason | None:
        why = check(planned)
        if why is None or why.why == NotSelectedWhy.SLOT_RETURNED or planned.plan_id == token:
            return why
        return None

    return check_approved


def _not_done(results: list[Result]) -> list[str]:
    """The tasks a stopped batch did not finish: interrupted, failed or never reached.
    A refusal is not among them: it needs the operator first (its hints say what)."""
    return [
        r.task or ""
        for r in results
        if isinstance(r, Skipped) or r.interrupted or r.exit_code == ExitCode.FAILED
    ]


def _acted(results: list[Result]) -> set[str]:
    """The tasks of the batch whose real run started acting (their plan no longer holds)."""
    return {r.task or "" for r in results if isinstance(r, Outcome) and r.acted}


def _finish_command(
    left: list[str],
    acted: set[str],
    flags: Flags,
    plans: dict[str, str] | None,
    landed: bool,
    opts: Options | None,
    again: tuple[str, ...],
) -> str:
    """One command that finishes what a stopped batch left, runnable as printed.

    `--landed` again when the batch selected by itself without approved tokens; else the
    tasks not done, by name, after `--` (a task id may start with `-`); a task finished
    meanwhile is reported `already torn down`. Approved tokens are repeated only when every
    one of them can still hold: a task whose run started acting has another plan now, and a
    token of it would only refuse (the command then names the tasks without tokens: review
    with its `--dry-run`)."""
    import shlex

    words = ["fm", "teardown"]
    if landed and plans is None:
        words.append("--landed")
        if opts is not None:
            words += ["--include-live"] if opts.include_live else []
            words += ["--include-pushed"] if opts.include_pushed else []
            words += ["--min-age", f"{int(opts.min_age)}s"]  # never `1e+06s`
    elif plans is not None and all(t in plans and t not in acted for t in left):
        for task in left:
            words += ["--expect-plan", f"{task}={plans[task]}"]
    if flags.dry_run:
        words.append("--dry-run")
    if flags.no_journal:
        words.append("--no-journal")
    words += again
    if not (landed and plans is None):
        words += ["--", *left]
    return shlex.join(words)
