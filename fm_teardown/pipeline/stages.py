"""One task's stages: settings -> records -> observe -> decide (-> act) -> an Outcome.

`plan` loads, observes and decides (rule 5's facts gathered only once rules 1-4 let the task
go on) and makes the plan token; `decide_and_act` checks an approved token, stops a dry run
there and for a real run acts, handing `act` what it needs from the other stages through the
`Seams` built here (plain callables), so that `act` imports neither `observe` nor this
package. Where fm's own files never go (`WorkPlaces`) is worked out each time the fleet is
looked at and passed down with the plan and the outcome; nothing of one run is kept for the
next. What decide may not read itself (the clock, a meta's inode, fm's own pid) is read here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from fm_teardown.decide import fingerprint
from fm_teardown.decide import rules as decide
from fm_teardown.decide.before_acting import acts, own_file_blocked
from fm_teardown.model.causes import (
    Cause,
    NeverApproved,
    OwnFile,
    OwnFileBlocked,
    PlanChanged,
    PlanTokens,
)
from fm_teardown.model.errors import FmError, Verdict, plan_changed_exit
from fm_teardown.model.own_files import NOWHERE, WorkPlaces
from fm_teardown.model.paths import Canonicalizer
from fm_teardown.model.plan import Decision, LandedLike, Planned
from fm_teardown.model.reasons import NotSelectedReason
from fm_teardown.model.records import Fleet, Record, check_task_id, load_fleet, load_record
from fm_teardown.model.request import Flags
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.model.world import Observation, Proc, ProcessTable, TmuxInventory
from fm_teardown.observe.observation import assemble, observe

if TYPE_CHECKING:
    from fm_teardown.act.run_state import Seams

    # Imported where a run makes one: the audit imports this module (`lock_placed`,
    # `meta_inode`) and none of a run's results.
    from fm_teardown.model.outcome import Outcome

__all__ = [
    "Guard",
    "Intent",
    "NotSelected",
    "TaskRun",
    "decide_and_act",
    "load",
    "lock_placed",
    "meta_inode",
    "plan",
]


class NotSelected(Exception):
    """A batch's task that, at its turn, is no longer what was selected (relaunched, no
    longer finished, its slot already returned by this batch): nothing was done to it."""

    def __init__(self, reason: NotSelectedReason) -> None:
        super().__init__(reason.why)
        self.reason = reason


# A batch's re-selection of its task at its turn: why it is no longer selected, or None.
Guard = Callable[[Planned], NotSelectedReason | None]
# Journals a real run's intent right before its first destructive step: why it could not
# (the run then refuses), or None.
Intent = Callable[[Decision, Planned], OwnFileBlocked | None]


@value
class TaskRun:
    """One task's run as the pipeline carries it: where (the settings), which task, as asked
    (its flags), and for a batch's task its re-selection at its turn (`guard`)."""

    settings: Settings
    task: str
    flags: Flags
    guard: Guard | None = None


def load(settings: Settings, task: str, canon: Canonicalizer | None = None) -> Fleet:
    """TASK's record (refused if bad) and the fleet around it; `canon` is the run's
    canonicaliser, shared with the observation that follows."""
    check_task_id(task)
    record = load_record(settings.state_dir, task)
    fleet = load_fleet(settings.state_dir, canon)
    if task not in fleet.records:
        # Listed a moment after TASK's own read; keep the record we validated.
        fleet = replace(
            fleet,
            records={**fleet.records, task: record},
            invalid={k: v for k, v in fleet.invalid.items() if k != task},
        )
    return fleet


def plan(
    settings: Settings,
    task: str,
    flags: Flags,
    *,
    remembered: Mapping[str, tuple[Proc, ...]] | None = None,
    fetch: bool | None = None,
    known: Callable[[Record], LandedLike] | None = None,
) -> Planned:
    """Decide; if rule 5 is reached, TASK's landed facts are gathered and it decides again.

    A real run fetches the default branch first (`fetch` None means: unless it is a dry run).
    `known`: rule 5's facts as already gathered (a look again right before a destructive
    call: no git); then the plan token is not made either (nothing compares it)."""
    if not flags.dry_run:
        from fm_teardown.model.record_files import keep_reads

        keep_reads()  # a real run looks at the fleet again: its records are not read twice
    canon = Canonicalizer()  # one per look at the world: loading and observing share it
    fleet = load(settings, task, canon)
    obs = observe(settings, fleet, remembered, deciding=(task,), canon=canon)
    fetching = (not flags.dry_run) if fetch is None else fetch

    def gather(records: Sequence[Record]) -> dict[str, LandedLike]:
        if known is not None:
            return {r.task_id: known(r) for r in records}
        return {r.task_id: _landed_facts(settings, r, fetch=fetching) for r in records}

    decision, landed = decide.decide_with_landed(task, fleet, obs, flags, gather)
    places = None
    # A look again right before a destructive call (`known`) needs none: the run's places
    # were worked out under the slot lock, and its lock is already taken.
    if known is None and (not flags.dry_run or acts(decision)):
        from fm_teardown.observe.own_places import work_places

        # fm's own files (journal, cost table, locks) never go inside these, for this run
        # only: worked out when a run may write them (a dry run that would act predicts).
        places = work_places(settings, fleet, canon)
        decision = lock_placed(settings, decision, places)
    if known is not None:
        return Planned(decision, fleet, obs, landed, None, None, places)
    me = os.getpid()
    words = fingerprint.words(decision, obs, landed, fm_pid=me)
    token = fingerprint.token(fingerprint.digests(decision, obs, landed, fm_pid=me))
    return Planned(decision, fleet, obs, landed, words, token, places)


def lock_placed(settings: Settings, d: Decision, places: WorkPlaces) -> Decision:
    """A plan that would act refuses (dry run and real run alike) when the slot lock it takes
    before touching the slot would be written inside a task's work (spec §14.8): before the
    endpoint step, not after it."""
    if not acts(d):
        return d
    from fm_teardown.adapters import safefile
    from fm_teardown.model.own_files import lock_path

    assert d.slot is not None
    path = lock_path(settings.state_dir, d.slot)
    inside = safefile.inside_work(str(path), places)
    if inside is None:
        return d
    return own_file_blocked(d, OwnFileBlocked(OwnFile.SLOT_LOCK, str(path), inside))


def _landed_facts(settings: Settings, record: Record, *, fetch: bool) -> LandedLike:
    """Rule 5's facts for TASK's own slot (gathered only once rules 1-4 let TASK go on)."""
    from fm_teardown.decide.landed import judge
    from fm_teardown.observe.home import with_homes
    from fm_teardown.observe.landed import gather

    verdict = judge(
        gather(
            record,
            settings.data_dir,
            fetch=fetch,
            fetch_timeout=settings.fetch_timeout,
            gh_bin=settings.gh_bin,
        )
    )
    # A secondmate's home is its own work too, on top of its task records' verdict.
    return with_homes([record], {record.task_id: verdict})[record.task_id]


def _expected_plan_refusal(planned: Planned, expected: str, *, dry_run: bool) -> Outcome | None:
    """`--expect-plan`: None when the first decision gives the approved token; else a refusal
    of its own (`plan-changed`, spec §14.5) naming each changed field as `before → now`, and
    nothing is done. It exits 4 only when the plan as it is now has a live owner, else 5."""
    from fm_teardown.model.outcome import Outcome

    d = planned.decision
    now, words = planned.plan_id or "", planned.plan_inputs
    if words is not None and now == expected:
        return None
    say: Cause
    if not expected or words is None:  # a --landed selection no token names
        changes: list[Cause] = []
        say = NeverApproved(d.task, now)
    else:
        # Only what changed: a field the plan now rests on no value of (rule 5's facts not
        # gathered, no pool return) reads as emptied, but nothing is known to have changed.
        unread = {"head", "dirty"} if planned.landed is None else set()
        unread |= {"lease"} if d.pool_return is None else set()
        names = [n for n in fingerprint.changed(expected, now) if n not in unread]
        before = fingerprint.recover(
            expected, d, planned.observation, planned.landed, fm_pid=os.getpid()
        )
        changes = fingerprint.describe(names, words, before)
        say = PlanChanged(tuple(names))
        changes.append(PlanTokens(expected, now))
    if d.refused:
        # Not an invitation to approve the new token: the new plan would refuse anyway. A
        # refusal's runbook bears its verdict's name (live-owner, unsafe, unlanded).
        from fm_teardown.report.messages import said_text

        why = said_text(d.headline or (d.reasons[0] if d.reasons else str(d.verdict)))
        hint = (
            f"the plan now refuses ({d.verdict}): {why}; "
            f"see fm runbook {d.verdict}, and fm teardown {d.task} --dry-run"
        )
    else:
        hint = (
            f"review the new plan: fm teardown {d.task} --dry-run; then run it with "
            f"--expect-plan {d.task}={now} if it is still what you want"
        )
    refused = replace(
        d,
        verdict=Verdict.PLAN_CHANGED,
        reasons=(say, *changes),
        headline=say,
        hints=(hint,),
        warnings=(),
    )
    out = Outcome.of_decision(refused, dry_run=dry_run)
    return replace(out, exit_code=int(plan_changed_exit(d.verdict)), plan_id=now)


def meta_inode(record: Record) -> int | None:
    """The inode of TASK's meta as it is now (part of its launch identity); None when it
    cannot be read."""
    try:
        return os.lstat(record.meta_path).st_ino
    except OSError:
        return None


def decide_and_act(run: TaskRun, intent: Intent | None = None) -> Outcome:
    """`fm teardown TASK [--dry-run]`: decide, and for a real run act; never raises FmError.

    The run's `guard` (a batch's re-selection) sees the plan before anything is done and may
    stop the task there: NotSelected. `intent(decision, planned)` journals the run's intent
    right before its first destructive step and returns why it could not (the run then
    refuses), or None. Every outcome after the plan carries the places it found."""
    from fm_teardown.model.outcome import Outcome

    flags = run.flags
    try:
        planned = plan(run.settings, run.task, flags)
    except FmError as err:
        return Outcome.of_error(run.task, err, dry_run=flags.dry_run)
    if run.guard is not None:
        why = run.guard(planned)
        if why is not None:
            raise NotSelected(why)
    if flags.expect_plan is not None:
        refused = _expected_plan_refusal(planned, flags.expect_plan, dry_run=flags.dry_run)
        if refused is not None:
            return replace(refused, places=planned.places)
    if flags.dry_run:
        return replace(
            Outcome.of_decision(planned.decision, dry_run=True),
            plan_id=planned.plan_id,
            places=planned.places,
        )
    from fm_teardown.act import steps as act

    placed = replace(run.settings, places=planned.places or NOWHERE)  # for fm's own files
    try:
        done = act.run(placed, planned, flags, _seams(run, planned, intent))
    except FmError as err:  # the re-check found TASK's own record gone or unsafe
        done = Outcome.of_error(run.task, err, dry_run=False)
    return replace(done, plan_id=planned.plan_id, places=planned.places)


def _seams(run: TaskRun, planned: Planned, intent: Intent | None) -> Seams:
    """What `act` reads again of the world, and the intent line, as plain callables."""
    from fm_teardown.act.run_state import Rechecked, Seams
    from fm_teardown.model.results import RecheckAt
    from fm_teardown.observe.branch_use import held_by
    from fm_teardown.observe.claim import still_names
    from fm_teardown.observe.tasktmp import task_tmp
    from fm_teardown.observe.window_identity import drift

    settings, task = run.settings, run.task

    def recheck(
        at: RecheckAt, remembered: tuple[Proc, ...], landed: LandedLike | None
    ) -> Rechecked:
        # TASK's endpoint is gone; no fetch (the first decision fetched). Under the slot lock
        # rule 5's facts are gathered again (late writes count); right before a later
        # destructive call they are the last decision's: one process scan, one tmux listing,
        # no git (late writes are the pool step's to catch: the unforced return, proven).
        def reuse(record: Record) -> LandedLike:
            return landed if landed is not None else _landed_facts(settings, record, fetch=False)

        again = plan(
            settings,
            task,
            run.flags,
            remembered={task: remembered},
            fetch=False,
            known=None if at == RecheckAt.LOCKED else reuse,
        )
        # A batch's task is selected again, not only decided again.
        return Rechecked(again, run.guard(again) if run.guard is not None else None)

    def observe_now(
        fleet: Fleet, inventory: TmuxInventory, table: ProcessTable, remembered: tuple[Proc, ...]
    ) -> Observation:
        return assemble(settings, fleet, inventory, table, {task: remembered})

    def landed_now(record: Record) -> LandedLike:
        return _landed_facts(settings, record, fetch=False)

    def write_intent(d: Decision) -> OwnFileBlocked | None:
        return intent(d, planned) if intent is not None else None

    return Seams(
        recheck=recheck,
        observe=observe_now,
        landed=landed_now,
        window_drift=drift,
        tasktmp=task_tmp,
        branch_held=held_by,
        claim_names=still_names,
        intent=write_intent,
    )
