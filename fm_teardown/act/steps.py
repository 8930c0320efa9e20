"""Acting on a plan (spec §5 "Then act", §7a, §10): the steps, in the one order they run.

`run` carries out a decided plan and returns an `Outcome`; it prints, journals and renders
nothing. Each step records a typed result (`results`: what happened, and so its outcome:
done, absent, skipped, failed), never a sentence; a failed step stops the
run before the next destructive step, keeps the record and exits 1, so that running the same
command again finishes the job. Just before the first step that touches the slot, the slot
lock is taken and the world is observed and decided again (through the `recheck` seam): if the
decision changed, nothing more is done and the new verdict is reported. Right before each
destructive call the world is looked at again through that same seam (`arrivals`: the census,
the decision's conditions, a batch's selection; someone who came to work in the slot since
stops the run, exit 1) and checked again (the window, the pool's lease, tasktmp, the branch's
users, the claim): the checks that read the world come through `Seams`, built by the
pipeline, so act imports nothing from observe.

Each step's act function lives in a step module (`parked_run_step`, `endpoint_step`,
`processes_step`, `pool_step`, `record_step`), sharing `Run` and `Seams` (`run_state`), and is
found by the step's name in the table below (`BEFORE_THE_LOCK`, `UNDER_THE_LOCK`), one row per
step in the order they run; `run` walks it, acting on each step the plan has (with its action)
and saying skipped, with why, each the plan leaves out (`Decision.left_out`). The order is here
only.

The order, and why (written here only; docs/architecture.md points here):
0. intent: the journal gets the run's intent (task, plan token, steps) before anything is
   destroyed; a journal that cannot take it refuses the run (unless --no-journal);
0a. parked-run (spec §15.5b): a ship task's own no-mistakes run parked at a gate is aborted
   before anything of TASK's goes: with its worker gone nothing would ever answer it, and it
   would hold a fleet slot for good (firstmate's order: the abort, then the process reap, then
   the return). It touches nothing in the slot, so it needs no slot lock; a run not read back
   stopped stops the run here, nothing of TASK's touched;
1. endpoint: TASK's own window first, whatever the slot: its agent must stop writing before
   the slot is judged again, and it is TASK's, so it never needs the slot lock. Right before
   the quit keys and again right before the kill, the window must be the one the decision
   saw (same server, panes, pane processes and foreground processes: `Seams.window_drift`),
   else nothing more is typed or killed and the run decides again (`EndpointChanged`). Its
   agent is first asked to quit with its own harness's keys (`graceful`; none while
   `synchronize-panes` is on); then only the window ids seen when deciding are killed;
2. (lock, re-observe, re-decide): under the slot's flock, rule 5 included: late writes
   count, new claimants are seen; a changed decision stops the run; so does someone who came
   to work in the slot since the first decision, or a batch's selection no longer met;
3. processes: nothing may run in the slot when it is saved and reset. Right before the first
   signal the world is looked at again (that look is the step's first scan); every process a
   scan finds is classified first and only TASK's own are signalled (someone's new work stops
   the step); tmux, other endpoints and fm's own ancestry are never signalled;
4. save-discarded (--force): after the processes are ended, so nothing writes to it any more;
   before the pool's reset destroys it;
5. hooks (spec §10): the fleet's hook files leave the slot before the return, so the next
   task in it never fires turn-end signals for a dead one;
6. pool: last of the steps in the slot, since it resets it: the world is looked at again
   (the locks included) and the pool's state read again right before `treehouse return`
   (conditional on the lease seen; unforced without --force, so that work written after the
   decision is declined by the pool and preserved), then the return is verified in the state
   file and, unforced, by the tree; an unleased slot the pool would reuse as it is is not
   returned at all (spec §13.7);
7. branch, claim (spec §10, duties.py): only after a verified return (or a slot the pool
   reuses as it is): TASK's branch by compare-and-swap, the slot's census taken again right
   before the delete; TASK's own slot claim;
8. auth, attribution: the hook auth entries TASK's token files name, one cost row, whenever
   the record goes;
9. record: tasktmp, the sidecars, the meta last, so that a crash anywhere before leaves the
   record, and the same command re-checks ownership from scratch and finishes the job.
A stale slot runs intent, endpoint, auth, attribution and record only: the tree is someone
else's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fm_teardown.act import (
    arrivals,
    endpoint_step,
    parked_run_step,
    pool_step,
    processes_step,
    record_step,
)
from fm_teardown.act.lock import slot_lock
from fm_teardown.act.run_state import (
    DecidedOtherwise,
    EndpointChanged,
    Run,
    Seams,
    StepFailed,
    boundary,
)
from fm_teardown.adapters import interrupts
from fm_teardown.adapters.interrupts import Interrupted
from fm_teardown.decide.before_acting import own_file_blocked
from fm_teardown.model.errors import ExitCode, FmError, Lead, Verdict
from fm_teardown.model.outcome import Framing, Outcome
from fm_teardown.model.plan import Decision, Planned, Step, StepName, StepOutcome
from fm_teardown.model.request import Flags
from fm_teardown.model.results import (
    NotNeeded,
    NotRun,
    NotRunCause,
    RecheckAt,
    SaveResult,
    SaveWhat,
)
from fm_teardown.model.settings import Settings
from fm_teardown.model.step_warnings import (
    DecidedAgain,
    DecisionChanged,
    RerunForNewDecision,
    RunWarning,
    SavedForOther,
)
from fm_teardown.model.values import value

__all__ = ["BEFORE_THE_LOCK", "UNDER_THE_LOCK", "ActStep", "changed", "outcome", "run"]


# -- the table ----------------------------------------------------------------------------------


@value
class ActStep:
    """A step as a run carries it out: its name (the plan's `Step.step`), its act function
    (given the run and the plan's step, with its action), and the boundaries around it (a
    fault hook for the tests, where an interrupt stops the run): `before` right before it when
    the plan has it, `after` right after it when it ran or was said left out. `duties`: the
    plan's steps (and the ones noted only when something was there) its act function carries
    out with it."""

    name: StepName
    act: Callable[[Run, Step], None]
    before: str | None = None
    after: str | None = None
    duties: tuple[StepName, ...] = ()


# The steps in the order they run (the why: this module's docstring, numbered as it is);
# `decide/plan_builder.py` builds the plan in the same order (tests/test_step_table.py).
# 1. TASK's own, before the slot lock.
BEFORE_THE_LOCK: tuple[ActStep, ...] = (
    ActStep(StepName.PARKED_RUN, parked_run_step.act, "before-parked-run", "after-parked-run"),
    ActStep(StepName.ENDPOINT, endpoint_step.act, "before-endpoint", "after-endpoint"),
)
# 3-9. In the slot, under its lock, once the world was looked at and decided again (2).
UNDER_THE_LOCK: tuple[ActStep, ...] = (
    ActStep(StepName.PROCESSES, processes_step.act, "before-processes", "after-processes"),
    ActStep(StepName.SAVE_DISCARDED, processes_step.act_save, after="after-save"),
    ActStep(StepName.HOOKS, pool_step.act_hooks),
    ActStep(StepName.POOL, pool_step.act_pool, "before-pool", "after-pool"),
    ActStep(StepName.BRANCH, pool_step.act_branch),
    ActStep(StepName.CLAIM, pool_step.act_claim),
    ActStep(
        StepName.RECORD,
        record_step.act,
        duties=(StepName.AUTH, StepName.ATTRIBUTION, StepName.BROWSER, StepName.REMOTE_JOBS),
    ),
)


def _walk(r: Run, d: Decision, table: tuple[ActStep, ...]) -> None:
    """Carry out `d`'s plan, the table's steps in the table's order: a step the plan has is
    acted on; one it leaves out is said skipped, and why, when the plan says so (`left_out`)."""
    planned = {s.step: s for s in d.plan}
    left_out = {left.step: left for left in d.left_out}
    for row in table:
        step, left = planned.get(row.name), left_out.get(row.name)
        if step is not None:
            if row.before is not None:
                boundary(row.before)
            row.act(r, step)
        elif left is not None:
            r.note(left.step, left.target, NotNeeded(left.why))
        else:
            continue
        if row.after is not None:
            boundary(row.after)


_LOCKED = frozenset(n for row in UNDER_THE_LOCK for n in (row.name, *row.duties))


# -- the run ------------------------------------------------------------------------------------


def run(settings: Settings, planned: Planned, flags: Flags, seams: Seams) -> Outcome:
    d = planned.decision
    if d.verdict not in (Verdict.PROCEED, Verdict.STALE) or d.slot is None:
        return Outcome.of_decision(d, dry_run=False)
    r = Run(settings, flags, d.task, planned.fleet, seams, planned)
    unjournalled = seams.intent(d)
    if unjournalled is not None:
        # The words and hint its dry run gave (decide/before_acting.py).
        return Outcome.of_decision(own_file_blocked(d, unjournalled), dry_run=False)
    try:
        with interrupts.while_acting():
            # 0. intent: journalled above, before anything is destroyed.
            _walk(r, d, BEFORE_THE_LOCK)
            with slot_lock(settings.state_dir, d.slot, settings.lock_timeout, settings.places):
                d2 = _recheck(r, planned)
                if _key(d2) != _key(d):
                    return changed(r, d, d2)
                # Report the endpoint as it was before this run ended it.
                d = replace(d2, where=replace(d2.where, endpoint=d.endpoint))
                _walk(r, d, UNDER_THE_LOCK)
    except DecidedOtherwise as exc:
        r.steps.extend(_left(d, r, NotRunCause.REFUSED))
        return changed(r, d, exc.decision)
    except EndpointChanged as exc:
        r.steps.append(exc.step)
        return _decided_again(r, d)
    except Interrupted:
        r.steps.extend(_left(d, r, NotRunCause.INTERRUPTED))
        return outcome(r, d, Verdict.FAILED, interrupted=True)
    except StepFailed as exc:
        r.steps.append(exc.step)
        interrupted = interrupts.requested()
        cause = NotRunCause.INTERRUPTED if interrupted else NotRunCause.EARLIER_FAILED
        r.steps.extend(_left(d, r, cause))
        return outcome(r, d, Verdict.FAILED, interrupted=interrupted)
    except FmError as err:
        r.steps.extend(_left(d, r, NotRunCause.REFUSED))
        refused = replace(d, verdict=err.verdict, reasons=(err.note,), hints=err.hints)
        if refused.refused:
            # Shown with what the run had done by then. A refusal of the pool's (a new
            # lease) adds nothing when nothing was done; a record refused at the re-check
            # says that nothing was changed.
            return outcome(r, refused, err.verdict, tail=err.unchanged or _ran(r))
        r.warnings.append(err.note)
        return outcome(r, d, Verdict.FAILED)
    return outcome(r, d, d.verdict)


def _recheck(r: Run, planned: Planned) -> Decision:
    """2. Under the slot lock, the world looked at and decided again (rule 5 included): the
    decision made now, which the run then acts on (`Run.decided`). Someone who came to work in
    the slot stops the run (exit 1) before the decisions are compared (a stale slot is left to
    its owner: only TASK's window and record go, whoever works there); so does, for a batch's
    task, a selection that no longer holds."""
    d = planned.decision
    boundary("before-recheck")
    again = r.seams.recheck(RecheckAt.LOCKED, r.remembered, None)
    first = next((s for s in d.plan if s.step in _LOCKED), None)
    if first is not None and d.verdict == Verdict.PROCEED:
        arrivals.check(r, planned, again, RecheckAt.LOCKED, first.step, first.target)
    r.fleet, r.decided = again.planned.fleet, again.planned
    return again.planned.decision


def _key(d: Decision) -> tuple[Any, ...]:
    """What must not change between deciding and acting (the endpoint state may: it is ours)."""
    live = tuple(sorted(o.id for o in d.owners if o.live))
    return (
        d.verdict,
        d.slot,
        live,
        d.pool_return,
        d.discarded_owner,
        tuple(s.step for s in d.plan),
    )


def _left(d: Decision, r: Run, cause: NotRunCause) -> list[Step]:
    done = {s.step for s in r.steps}
    return [
        replace(s, outcome=StepOutcome.SKIPPED, result=NotRun(cause))
        for s in d.plan
        if s.step not in done
    ]


def _ran(r: Run) -> bool:
    return any(s.outcome == StepOutcome.DONE for s in r.steps)


def changed(r: Run, before: Decision, after: Decision) -> Outcome:
    r.warnings.append(DecisionChanged(before.verdict, after.verdict))
    if after.verdict in (Verdict.PROCEED, Verdict.STALE):
        r.warnings.append(RerunForNewDecision())
        return outcome(r, after, Verdict.FAILED)
    return outcome(r, after, after.verdict)


def _decided_again(r: Run, d: Decision) -> Outcome:
    """TASK's window changed under the endpoint step: decide again (under the slot lock, as
    the re-check does) and report that decision; nothing more was typed or killed."""
    assert d.slot is not None
    with slot_lock(r.settings.state_dir, d.slot, r.settings.lock_timeout, r.settings.places):
        after = r.seams.recheck(RecheckAt.LOCKED, (), None).planned.decision
    r.warnings.append(DecidedAgain(d.task, d.verdict, after.verdict))
    if after.verdict in (Verdict.PROCEED, Verdict.STALE):
        r.warnings.append(RerunForNewDecision())
        return outcome(r, after, Verdict.FAILED)
    return outcome(r, after, after.verdict)


# -- the outcome --------------------------------------------------------------------------------


def outcome(
    r: Run, d: Decision, verdict: Verdict, *, interrupted: bool = False, tail: bool | None = None
) -> Outcome:
    """The run's Outcome. `tail`: whether the reasons are shown with what the run changed
    (by default: a refusal the decision made)."""
    code = int(ExitCode.INTERRUPTED) if interrupted else int(verdict.exit_code)
    warnings: list[RunWarning] = [*d.warnings, *r.warnings]
    hints = d.hints
    saved = next(
        (
            s.result
            for s in r.steps
            if isinstance(s.result, SaveResult) and s.result.what == SaveWhat.SAVED
        ),
        None,
    )
    if saved is not None and saved.owner != d.task:
        warnings.append(SavedForOther(saved.ref, saved.owner, d.task))
        if code == 0:
            hints = (
                *hints,
                f"{saved.owner}'s record now names a returned slot: clear it with "
                f"fm teardown {saved.owner}",
            )
    refused = verdict == d.verdict and d.refused
    return Outcome(
        task=d.task,
        dry_run=False,
        verdict=verdict,
        exit_code=code,
        reasons=d.reasons,
        decision=d,
        steps=tuple(r.steps),
        warnings=tuple(warnings),
        hints=hints,
        framing=Framing(Lead.REFUSED if refused else Lead.PLAIN, refused if tail is None else tail),
    )
