"""Several tasks at once (spec §9): `fm teardown A B C` and `fm teardown --landed`.

Each task is torn down exactly as `fm teardown TASK` alone would be, one after another: its
own decision (made again at its turn), its own slot lock and re-check, its own journal line.
A refusal changes nothing and the batch goes on; a failure stops it and the tasks after it are
`skipped`; an interrupt stops the current task at a step boundary and skips the rest. What a
batch shows, as it goes and at its end, is the command's (`commands/batch.py`): it is told
through a `Watch`.
"""

from __future__ import annotations

from typing import Protocol

from fm_teardown.adapters import interrupts
from fm_teardown.model.errors import ExitCode, FmError
from fm_teardown.model.outcome import Outcome, Result, Skipped
from fm_teardown.model.plan import Planned
from fm_teardown.model.reasons import NotSelectedReason, NotSelectedWhy
from fm_teardown.model.request import Asked, Request
from fm_teardown.model.results import arrived
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.pipeline.one_task import teardown_task
from fm_teardown.pipeline.selection import NotChosen, Selection, guard, named, select_landed
from fm_teardown.pipeline.stages import Guard, NotSelected, TaskRun

__all__ = ["Batch", "Done", "Watch", "exit_code", "run", "select"]


@value
class Batch:
    """What a batch will tear down, in order, and what `--landed` did not select: the
    selection with the approved tokens' tasks (`--expect-plan`) added."""

    tasks: tuple[str, ...]
    not_selected: tuple[NotChosen, ...]


@value
class Done:
    """A batch as it ended: each task's result, its exit code, and for a stopped batch the
    tasks not done and one command that finishes them."""

    results: tuple[Result, ...]
    code: int
    not_done: tuple[str, ...] = ()
    finish: str | None = None


class Watch(Protocol):
    """What the command shows of a batch as it runs (none of it changes what is done)."""

    def unselectable(self, err: FmError) -> None: ...  # the fleet could not be looked at
    def interrupted(self) -> None: ...  # while selecting: nothing was done
    def selected(self, batch: Batch) -> None: ...
    def starting(self, number: int, of: int, task: str) -> None: ...
    def done(self, outcome: Outcome) -> None: ...
    def finished(self, batch: Batch, done: Done) -> None: ...


def select(s: Settings, request: Request) -> Selection:
    """What the batch tears down: `--landed`'s finished tasks, or the launches named.
    Raises FmError when the fleet cannot be looked at (KeyboardInterrupt when interrupted)."""
    if request.asked == Asked.LANDED:
        return select_landed(s, request.select)
    return named(s, list(request.tasks))


def _batch_of(selection: Selection, request: Request) -> Batch:
    """The tasks in the order they run. An approved task is never dropped: one `--landed` no
    longer selects is decided at its turn all the same, and its changed plan refuses
    (plan-changed) and counts."""
    plans = request.plans
    if request.asked != Asked.LANDED or plans is None:
        return Batch(selection.tasks, selection.not_selected)
    return Batch(
        tuple(sorted({*selection.tasks, *plans})),
        tuple(n for n in selection.not_selected if n.task not in plans),
    )


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


def run(s: Settings, request: Request, watch: Watch) -> int:
    """Select the batch's tasks and tear them down one after another; its exit code. An
    interrupt while selecting ends it at once (nothing was done yet); from the first task on,
    an interrupt is noted and the batch stops at the next step boundary."""
    with interrupts.while_deciding():
        try:
            selection = select(s, request)
        except FmError as err:
            watch.unselectable(err)
            return int(err.exit_code)
        except KeyboardInterrupt:
            watch.interrupted()
            return int(ExitCode.INTERRUPTED)
        return _run(s, request, selection, watch)


def _run(s: Settings, request: Request, selection: Selection, watch: Watch) -> int:
    batch = _batch_of(selection, request)
    tasks = list(batch.tasks)
    results: list[Result] = []
    watch.selected(batch)
    returned: dict[str, str] = {}  # slot -> the task of this batch that returned it
    stopped = False
    with interrupts.while_batch():
        for i, task in enumerate(tasks):
            if interrupts.requested():
                stopped = True
                results += [Skipped(t) for t in tasks[i:]]
                break
            watch.starting(i + 1, len(tasks), task)
            again = _guard(request, selection, returned, task)
            try:
                outcome = teardown_task(TaskRun(s, task, request.flags_for(task), again))
            except NotSelected as skip:
                results.append(Skipped(task, not_selected=skip.reason))
                continue
            results.append(outcome)
            d = outcome.decision
            if d is not None and d.slot is not None and outcome.returned_slot:
                returned[d.slot] = task
            watch.done(outcome)
            stopped = outcome.interrupted or interrupts.requested()
            # Someone who came to work in a slot stops that task only (spec §15.4).
            came = arrived(s.result for s in outcome.steps)
            if stopped or (outcome.exit_code == ExitCode.FAILED and not came):
                failed = None if stopped else task
                results += [Skipped(t, failed) for t in tasks[i + 1 :]]
                break
        done = _done(s, request, results, stopped, batch.not_selected)
        watch.finished(batch, done)
    return done.code


def _guard(request: Request, selection: Selection, returned: dict[str, str], task: str) -> Guard:
    """TASK's re-selection at its turn (`selection.guard`), through its approved token."""
    landed = request.asked == Asked.LANDED
    again = guard(task, selection, returned, request.select if landed else None)
    plans = request.plans
    if landed and plans is not None and task in plans:
        return _approved(again, plans[task])
    return again


def _done(
    s: Settings,
    request: Request,
    results: list[Result],
    stopped: bool,
    not_selected: tuple[NotChosen, ...],
) -> Done:
    code = _with_refusals(exit_code(results, interrupted=stopped), not_selected)
    not_done = _not_done(results)
    if not not_done:
        return Done(tuple(results), code)
    again = ("--state-dir", str(s.state_dir)) if request.state_dir else ()
    finish = _finish_command(request, not_done, _acted(results), again)
    return Done(tuple(results), code, tuple(not_done), finish)


def _with_refusals(code: int, not_selected: tuple[NotChosen, ...]) -> int:
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
    request: Request, left: list[str], acted: set[str], again: tuple[str, ...]
) -> str:
    """One command that finishes what a stopped batch left, runnable as printed; `again`:
    the options it repeats (`--state-dir DIR`).

    `--landed` again when the batch selected by itself without approved tokens; else the
    tasks not done, by name, after `--` (a task id may start with `-`); a task finished
    meanwhile is reported `already torn down`. Approved tokens are repeated only when every
    one of them can still hold: a task whose run started acting has another plan now, and a
    token of it would only refuse (the command then names the tasks without tokens: review
    with its `--dry-run`)."""
    import shlex

    plans, opts = request.plans, request.select
    by_itself = request.asked == Asked.LANDED and plans is None
    words = ["fm", "teardown"]
    if by_itself:
        words.append("--landed")
        words += ["--include-live"] if opts.include_live else []
        words += ["--include-pushed"] if opts.include_pushed else []
        words += ["--min-age", f"{int(opts.min_age)}s"]  # never `1e+06s`
    elif plans is not None and all(t in plans and t not in acted for t in left):
        for task in left:
            words += ["--expect-plan", f"{task}={plans[task]}"]
    if request.flags.dry_run:
        words.append("--dry-run")
    if request.flags.no_journal:
        words.append("--no-journal")
    words += again
    if not by_itself:
        words += ["--", *left]
    return shlex.join(words)
