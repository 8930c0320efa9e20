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

Each step lives in a module of its own (`endpoint_step`, `processes_step`, `pool_step`,
`record_step`), sharing `Run` and `Seams` (`run_state`); the order is here only.

The order, and why (written here only; docs/architecture.md points here):
0. intent: the journal gets the run's intent (task, plan token, steps) before anything is
   destroyed; a journal that cannot take it refuses the run (unless --no-journal);
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

from dataclasses import replace
from typing import Any

from fm_teardown.act import arrivals, faults
from fm_teardown.act.endpoint_step import step_endpoint
from fm_teardown.act.lock import slot_lock
from fm_teardown.act.pool_step import step_branch, step_claim, step_hooks, step_pool
from fm_teardown.act.processes_step import step_processes, step_save
from fm_teardown.act.record_step import step_record
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
from fm_teardown.model.outcome import Outcome, Signal
from fm_teardown.model.plan import Decision, Planned, Step, StepName, StepOutcome
from fm_teardown.model.request import Flags
from fm_teardown.model.results import NotNeeded, NotRun, NotRunCause, RecheckAt
from fm_teardown.model.settings import Settings
from fm_teardown.model.step_warnings import (
    DecidedAgain,
    DecisionChanged,
    RerunForNewDecision,
    RunWarning,
    SavedForOther,
)

__all__ = ["changed", "outcome", "run"]


# -- the run ------------------------------------------------------------------------------------


def run(settings: Settings, planned: Planned, flags: Flags, seams: Seams) -> Outcome:
    d = planned.decision
    r = Run(settings, flags, d.task, planned.fleet, seams)
    record = planned.fleet.records[d.task]
    if d.verdict not in (Verdict.PROCEED, Verdict.STALE) or d.slot is None:
        return Outcome.of_decision(d, dry_run=False)
    decided_endpoint = planned.observation.endpoints[d.task]
    unjournalled = seams.intent(d)
    if unjournalled is not None:
        # The words and hint its dry run gave (decide/before_acting.py).
        return Outcome.of_decision(own_file_blocked(d, unjournalled), dry_run=False)
    try:
        with interrupts.while_acting():
            # 0. intent: journalled above, before anything is destroyed.
            # 1. endpoint: TASK's own window, before the slot lock.
            boundary("before-endpoint")
            snapshot = step_endpoint(r, record, decided_endpoint, planned.observation.env.protected)
            boundary("after-endpoint")
            with slot_lock(settings.state_dir, d.slot, settings.lock_timeout, settings.places):
                # 2. lock, re-observe, re-decide: a changed decision stops the run; so does
                # someone who came to work in the slot since, or for a batch's task a
                # selection that no longer holds.
                boundary("before-recheck")
                r.remembered = tuple(snapshot)
                again = seams.recheck(RecheckAt.LOCKED, r.remembered, None)
                d2 = again.planned.decision
                # Someone who came to work in the slot stops the run (exit 1) before the
                # decision is compared (a stale slot is left to its owner: only TASK's window
                # and record go, whoever works there).
                first = next((s for s in d.plan if s.step != StepName.ENDPOINT), None)
                if first is not None and d.verdict == Verdict.PROCEED:
                    arrivals.check(
                        r,
                        d,
                        again,
                        RecheckAt.LOCKED,
                        first.step,
                        first.target,
                        before=planned.observation,
                    )
                if _key(d2) != _key(d):
                    return changed(r, d, d2)
                # Report the endpoint as it was before this run ended it.
                d, record = replace(d2, endpoint=d.endpoint), again.planned.fleet.records[d.task]
                r.fleet, r.decided = again.planned.fleet, again.planned
                assert d.slot is not None
                # 3. processes: nothing may run in the slot when it is saved and reset. Right
                # before the first signal the world is looked at again (`arrivals`); that look
                # is the step's first scan.
                # No owner but TASK (d.owners leaves TASK out): what starts in the slot as
                # its processes end may be ended as theirs (the processes step's later pass).
                sole = not d.owners
                ends = d.end_processes or any(s.step == StepName.PROCESSES for s in d.plan)
                if ends:
                    boundary("before-processes")
                    where = d.slot if d.end_processes else (record.tasktmp or d.slot)
                    look = arrivals.look_again(r, d, RecheckAt.PROCESSES, StepName.PROCESSES, where)
                    step_processes(
                        r,
                        record,
                        d.slot if d.end_processes else None,
                        d.discarded_owner,
                        sole_claimant=sole,
                        first=look.planned.observation,
                    )
                else:
                    r.note(StepName.PROCESSES, d.slot, NotNeeded(d.skip_reason))
                boundary("after-processes")
                # 4. save-discarded (--force): after the processes, before the reset.
                if d.save_discarded:
                    step_save(r, record, d.save_as or d.task)
                    boundary("after-save")
                # 5. hooks: out of the slot before the return.
                if any(s.step == StepName.HOOKS for s in d.plan):
                    step_hooks(r, d.slot)
                # 6. pool: the world looked at again (the locks included), then the lease
                # read again right before `treehouse return`.
                if d.pool_return is not None:
                    boundary("before-pool")
                    arrivals.look_again(r, d, RecheckAt.POOL, StepName.POOL, d.pool_return.path)
                    step_pool(r, record, d)
                else:
                    r.note(StepName.POOL, d.slot, NotNeeded(d.skip_reason))
                boundary("after-pool")
                # 7. branch, claim: only after a verified return (the branch step looks at
                # the slot's census again right before the delete).
                if d.branch is not None:
                    step_branch(r, record, d)
                if d.own_claim is not None:
                    step_claim(r, d.own_claim, d.task)
                # 8, 9. auth, attribution, then the record last (`step_record` runs both).
                step_record(r, record)
                faults.at("after-record")
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


def _key(d: Decision) -> tuple[Any, ...]:
    """What must not change between deciding and acting (the endpoint state may: it is ours)."""
    live = tuple(sorted(o.id for o in d.owners if o.live))
    return (
        d.verdict,
        d.slot,
        live,
        d.pool_return,
        d.discarded_owner,
        d.save_discarded,
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
    if r.saved_for and r.saved_for != d.task:
        warnings.append(SavedForOther(r.discarded_ref, r.saved_for, d.task))
    hints = d.hints
    if code == 0 and r.saved_for and r.saved_for != d.task:
        hints = (
            *hints,
            f"{r.saved_for}'s record now names a returned slot: clear it with "
            f"fm teardown {r.saved_for}",
        )
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
        signalled=tuple(
            Signal(s.pid, s.start_time, s.name, tuple(s.signals)) for s in r.signalled.values()
        ),
        hung_up=tuple(
            Signal(s.pid, s.start_time, s.name, tuple(s.signals)) for s in r.hung_up.values()
        ),
        discarded_ref=r.discarded_ref,
        restore=r.restore,
        interrupted=interrupted,
        acted=True,
        tail=(verdict == d.verdict and d.refused) if tail is None else tail,
        lead=Lead.REFUSED if verdict == d.verdict and d.refused else Lead.PLAIN,
    )
