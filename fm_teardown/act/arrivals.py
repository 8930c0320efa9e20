"""Arrivals after the decision (spec §15.4): right before each destructive call (the
processes step's signals, the pool's return, the branch delete) the world is looked at again
(`Seams.recheck`) and compared with what the decision saw.

Someone who came to work in the slot since (a new agent, a terminal, another task's endpoint:
the census kinds 2-5, or a process whose place cannot be told), a decision whose conditions no
longer hold (a refusal now: a `git worktree lock`, a new live owner, the pool's lease
changed), or for a batch's task a selection that no longer holds (`selection.guard`) stops
the run before that call: its step fails with an `Arrived` result, nothing of it is done, the
record is kept and a re-run decides again. A batch goes on with its next task.

Compared with the decision made under the slot lock (`Run.decided`), whose census already
holds TASK's own endpoint processes as TASK's (the snapshot taken before its window was
killed, `Run.remembered`). Right before the branch delete the slot is the pool's again: only
the census is compared there.
"""

from __future__ import annotations

import time

from fm_teardown.act import faults
from fm_teardown.act.run_state import DecidedOtherwise, Rechecked, Run
from fm_teardown.decide.census import Kind, Member, census
from fm_teardown.model.errors import Verdict
from fm_teardown.model.plan import Decision, Planned, StepName
from fm_teardown.model.process_kind import ProcessClass, classify_proc
from fm_teardown.model.results import Arrived, RecheckAt
from fm_teardown.model.world import Observation

__all__ = ["QUIET_SECS", "check", "look_again", "newcomers", "quiet"]


# How long a look after which nothing was done still is the look right before the pool's
# return (`quiet`). What runs between the processes step and the return (a save, fm's hooks
# removed) takes milliseconds, about what a look itself takes from its scan to its answer.
QUIET_SECS = 0.1


def look_again(r: Run, at: RecheckAt, step: StepName, target: str) -> Rechecked:
    """Look at the world again right before the destructive call of `step`: the fresh look
    when the decision acted on (`Run.decided`) still holds, else StepFailed (an `Arrived`
    result for `step`).

    Right before the pool's return, the processes step's look is that look when the step
    signalled nothing and it is younger than `QUIET_SECS` (`quiet`): it was made and checked
    as this one would be, and nothing was done since, so the world is not read twice in a
    row. A test's pause in between (`faults`) always means a new look."""
    quiet, r.quiet = r.quiet, None
    if (
        quiet is not None
        and at == RecheckAt.POOL
        and time.monotonic() - quiet[0] < QUIET_SECS
        and faults.pauses() == quiet[1]
    ):
        return quiet[2]
    fresh = r.seams.recheck(at, r.remembered, r.decided.landed)
    check(r, r.decided, fresh, at, step, target)
    return fresh


def quiet(r: Run, look: Rechecked) -> None:
    """`look`, just checked, is the last look at the world, and nothing was done since: the
    next destructive call may go on from it (`look_again`)."""
    r.quiet = (time.monotonic(), faults.pauses(), look)


def check(
    r: Run, decided: Planned, fresh: Rechecked, at: RecheckAt, step: StepName, target: str
) -> None:
    """Raise when `fresh` no longer holds what `decided` (a decision, with the observation it
    was made from) saw, in this order:

    1. newcomers in the census of its observation (someone came to work in the slot):
       StepFailed with `Arrived`, exit 1, whatever the decision made now says (its verdict and
       why are said with them);
    2. a decision that now refuses: `DecidedOtherwise`, reported as that refusal (under the
       slot lock the caller compares the whole decision and reports it itself);
    3. a batch's selection that no longer holds, or conditions that changed (a lease to
       return, a live owner it did not know): StepFailed with `Arrived`, exit 1.

    Before the branch delete the slot is the pool's again: only the census counts there (the
    decision made now differs from the decided one by design, and so may a selection)."""
    d, before = decided.decision, decided.observation
    now = fresh.planned.decision
    came = tuple(str(m) for m in newcomers(d.task, before, fresh.planned.observation))
    returned = at == RecheckAt.BRANCH
    mid_act = at != RecheckAt.LOCKED and not returned
    changed = mid_act and _conditions_changed(d, now)
    refused = now.refused and not returned
    not_selected = None if returned or now.refused else fresh.not_selected
    if came:
        raise r.fail(
            step,
            target,
            Arrived(
                at,
                came,
                now.verdict if changed or refused else None,
                now.headline if refused else None,
                not_selected,
            ),
        )
    if refused:
        if mid_act:
            raise DecidedOtherwise(now)
        return  # under the slot lock: the caller reports the changed decision
    if not_selected is not None or changed:
        raise r.fail(
            step, target, Arrived(at, (), now.verdict if changed else None, None, not_selected)
        )


def newcomers(task: str, before: Observation, now: Observation) -> tuple[Member, ...]:
    """Who works in TASK's slot or temp dir now that the census of `before` did not see
    there: a process of kinds 2-5 (or one whose place cannot be told), by pid and start
    time, that was not there, or was there as nobody's (kind 6: a build that exec'd an
    agent is an agent that came). TASK's own endpoint is never one."""
    seen = {(m.proc.pid, m.proc.start_time): m for m in census(task, before)}
    out = []
    for m in census(task, now):
        if m.kind == Kind.OWN or not (m.kind.working or _doubt(m)):
            continue
        was = seen.get((m.proc.pid, m.proc.start_time))
        if was is not None and (was.kind == Kind.OWN or was.kind.working or _doubt(was)):
            continue  # seen by the decision as what it is
        out.append(m)
    return tuple(out)


def _doubt(m: Member) -> bool:
    """Where it runs, or whether it is an agent (an interpreter whose script cannot be
    read), cannot be told."""
    return bool(m.place.doubt) or (
        m.kind == Kind.OTHER and classify_proc(m.proc) == ProcessClass.UNSURE
    )


def _conditions_changed(d: Decision, now: Decision) -> bool:
    """Whether the decision made now no longer holds the decided one's conditions: it
    refuses (a lock, a new live owner, the census in doubt, ...), the slot or the pool's lease
    to return is another, or a live owner it did not know is there. An owner no longer live
    (the processes step ended the one `--discard-live-owner` named) is no change; nor is the
    slot then reading as that owner's, stale."""
    if now.refused or now.slot != d.slot:
        return True
    live = {o.id for o in d.owners if o.live}
    if any(o.live and o.id not in live for o in now.owners):
        return True
    if now.verdict != d.verdict:
        return not (
            d.discarded_owner is not None
            and now.verdict == Verdict.STALE
            and now.stale_owner == d.discarded_owner
        )
    return now.verdict == Verdict.PROCEED and now.pool_return != d.pool_return
