"""The pipeline: settings -> records -> observe -> decide (-> act) -> an Outcome.

With `audit.py` (the fleet audit) and `selection.py` (what a batch tears down), the only
module that strings the stages together. `run_one` is one task's run as every command runs
it: the gate, firstmate's lifecycle locks, a re-run that converges, the intent journalled
before acting, then the stages themselves. Where fm's own files never go (`WorkPlaces`) is
worked out each time the fleet is looked at and passed down with the plan and the outcome;
nothing of one run is kept for the next. `act` gets what it needs from the other stages
through the `Seams` built here (plain callables), so it imports neither `observe` nor this
module; `commands` journals the result and renders what `run_one` returns.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fm_teardown.decide import fingerprint
from fm_teardown.decide import rules as decide
from fm_teardown.decide.before_acting import acts, other_launch, own_file_blocked
from fm_teardown.model.causes import (
    Cause,
    NeverApproved,
    OtherLaunch,
    OwnFile,
    OwnFileBlocked,
    PlanChanged,
    PlanTokens,
)
from fm_teardown.model.errors import ExitCode, FmError, Verdict, invalid, plan_changed_exit
from fm_teardown.model.outcome import Framing, Outcome
from fm_teardown.model.own_files import NOWHERE, WorkPlaces
from fm_teardown.model.paths import Canonicalizer
from fm_teardown.model.plan import Decision, Flags, LandedLike, Planned
from fm_teardown.model.reasons import NotSelectedReason
from fm_teardown.model.records import (
    Fleet,
    Record,
    check_task_id,
    load_fleet,
    load_record,
    task_id_problem,
)
from fm_teardown.model.settings import Settings
from fm_teardown.model.world import Observation, Proc, ProcessTable, TmuxInventory
from fm_teardown.observe.observation import assemble, observe

if TYPE_CHECKING:
    from fm_teardown.report.journal import TornDown

__all__ = [
    "Guard",
    "NotSelected",
    "interrupted_before_acting",
    "journal_result",
    "journalled",
    "load",
    "meta_inode",
    "plan",
    "run_one",
    "with_expected_plan",
]


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
    """`known`: rule 5's facts as already gathered (a look again right before a destructive
    call: no git); then the plan token is not made either (nothing compares it)."""
    canon = Canonicalizer()  # one per look at the world: loading and observing share it
    fleet = load(settings, task, canon)
    obs = observe(settings, fleet, remembered, deciding=(task,), canon=canon)
    from fm_teardown.observe.own_places import work_places

    # fm's own files (journal, cost table, locks) never go inside these, for this run only.
    places = work_places(settings, fleet, canon)
    facts: list[LandedLike] = []
    decision = _decide_with_landed(
        settings, task, fleet, obs, flags, fetch=fetch, facts=facts, known=known
    )
    decision = _lock_placed(settings, decision, places)
    landed = facts[0] if facts else None
    if known is not None:
        return Planned(decision, fleet, obs, landed, None, None, places)
    me = os.getpid()
    words = fingerprint.words(decision, obs, landed, fm_pid=me)
    token = fingerprint.token(fingerprint.digests(decision, obs, landed, fm_pid=me))
    return Planned(decision, fleet, obs, landed, words, token, places)


def _lock_placed(settings: Settings, d: Decision, places: WorkPlaces) -> Decision:
    """A plan that would act refuses (dry run and real run alike) when the slot lock it takes
    before touching the slot would be written inside a task's work (spec §14.8): before the
    endpoint step, not after it."""
    if not acts(d):
        return d
    from fm_teardown.act.lock import lock_path
    from fm_teardown.adapters import safefile

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


def _decide_with_landed(
    settings: Settings,
    task: str,
    fleet: Fleet,
    obs: Observation,
    flags: Flags,
    *,
    fetch: bool | None = None,
    facts: list[LandedLike] | None = None,
    known: Callable[[Record], LandedLike] | None = None,
) -> Decision:
    """Decide; if rule 5 is reached, TASK's landed facts are gathered and it decides again.

    A real run fetches the default branch first (`fetch` None means: unless it is a dry run).
    The facts gathered are appended to `facts` when given.
    """
    fetching = (not flags.dry_run) if fetch is None else fetch

    def gather(records: Sequence[Record]) -> dict[str, LandedLike]:
        if known is not None:
            return {r.task_id: known(r) for r in records}
        return {r.task_id: _landed_facts(settings, r, fetch=fetching) for r in records}

    decision, found = decide.decide_with_landed(task, fleet, obs, flags, gather)
    if facts is not None and found is not None:
        facts.append(found)
    return decision


def _expected_plan_refusal(planned: Planned, expected: str, *, dry_run: bool) -> Outcome | None:
    """`--expect-plan`: None when the first decision gives the approved token; else a refusal
    of its own (`plan-changed`, spec §14.5) naming each changed field as `before → now`, and
    nothing is done. It exits 4 only when the plan as it is now has a live owner, else 5."""
    d = planned.decision
    now, words = planned.plan_id or "", planned.plan_inputs
    if words is not None and now == expected:
        return None
    say: Cause
    if not expected or words is None:  # a --landed selection no token names
        changes: list[Cause] = []
        say = NeverApproved(d.task, now)
    else:
        names = fingerprint.changed(expected, now)
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


class NotSelected(Exception):
    """A batch's task that, at its turn, is no longer what was selected (relaunched, no
    longer finished, its slot already returned by this batch): nothing was done to it."""

    def __init__(self, reason: NotSelectedReason) -> None:
        super().__init__(reason.why)
        self.reason = reason


Guard = Callable[[Planned], NotSelectedReason | None]


def meta_inode(record: Record) -> int | None:
    """The inode of TASK's meta as it is now (part of its launch identity); None when it
    cannot be read."""
    try:
        return os.lstat(record.meta_path).st_ino
    except OSError:
        return None


def _teardown(
    settings: Settings,
    task: str,
    flags: Flags,
    guard: Guard | None = None,
    intent: Callable[[Decision, Planned], OwnFileBlocked | None] | None = None,
) -> Outcome:
    """`fm teardown TASK [--dry-run]`: decide, and for a real run act; never raises FmError.

    `guard` (a batch's re-selection) sees the plan before anything is done and may stop the
    task there: NotSelected. `intent(decision, planned)` journals the run's intent right
    before its first destructive step and returns why it could not (the run then refuses),
    or None. Every outcome after the plan carries the places it found (`WorkPlaces`)."""
    try:
        planned = plan(settings, task, flags)
    except FmError as err:
        return Outcome.of_error(task, err, dry_run=flags.dry_run)
    if guard is not None:
        why = guard(planned)
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
    from fm_teardown.act.run_state import Rechecked, Seams
    from fm_teardown.model.results import RecheckAt
    from fm_teardown.observe.branch_use import held_by
    from fm_teardown.observe.claim import still_names
    from fm_teardown.observe.tasktmp import task_tmp
    from fm_teardown.observe.window_identity import drift

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
            flags,
            remembered={task: remembered},
            fetch=False,
            known=None if at == RecheckAt.LOCKED else reuse,
        )
        # A batch's task is selected again, not only decided again.
        return Rechecked(again, guard(again) if guard is not None else None)

    def observe_now(
        fleet: Fleet, inventory: TmuxInventory, table: ProcessTable, remembered: tuple[Proc, ...]
    ) -> Observation:
        return assemble(settings, fleet, inventory, table, {task: remembered})

    def landed_now(record: Record) -> LandedLike:
        return _landed_facts(settings, record, fetch=False)

    def write_intent(d: Decision) -> OwnFileBlocked | None:
        return intent(d, planned) if intent is not None else None

    seams = Seams(
        recheck=recheck,
        observe=observe_now,
        landed=landed_now,
        window_drift=drift,
        tasktmp=task_tmp,
        branch_held=held_by,
        claim_names=still_names,
        intent=write_intent,
    )
    placed = replace(settings, places=planned.places or NOWHERE)  # for fm's own files
    try:
        done = act.run(placed, planned, flags, seams)
    except FmError as err:  # the re-check found TASK's own record gone or unsafe
        done = Outcome.of_error(task, err, dry_run=False)
    return replace(done, plan_id=planned.plan_id, places=planned.places)


def run_one(
    s: Settings,
    task: str,
    flags: Flags,
    guard: Guard | None = None,
    *,
    journal_required: bool = True,
    converge: bool = True,
) -> Outcome:
    """One task's teardown (or dry run) as an Outcome: never raises FmError.

    `journal_required`: a real run whose intent cannot be journalled refuses (exit 5);
    False only warns (the firstmate drop-in: the script it replaces had no journal).
    `converge`: a task with no record that the journal says was torn down is reported
    `already torn down` (exit 0) rather than `no such task`; False for the drop-in, which
    keeps the script's `no meta` error."""
    if flags.discard_live_owner is not None and flags.discard_live_owner == "":
        return Outcome.of_error(
            task,
            invalid("--discard-live-owner needs the id of the live owner"),
            dry_run=flags.dry_run,
        )
    if task_id_problem(task) is None:
        from fm_teardown.observe import gate

        # A dry run says what the real run would: it refuses a gate agent as well.
        refused = gate.refusal(os.environ, os.getcwd())
        if refused is not None:
            return Outcome.of_error(task, refused, dry_run=flags.dry_run)
    if task_id_problem(task) is not None:
        return _teardown(s, task, flags, guard)
    from fm_teardown.act import lifecycle

    if flags.dry_run:
        # A dry run takes no lock: it says what a real run would meet now.
        busy = lifecycle.probe(s.state_dir, task) if s.state_dir.is_dir() else None
        home = _children_home(s, task, flags) if busy is None else None
        if home is not None:
            busy = lifecycle.probe_descendants(Path(home))
        if busy is not None:
            return Outcome.of_error(task, busy, dry_run=True)
        return _decided(s, task, flags, guard, journal_required=journal_required, converge=converge)
    # firstmate's lifecycle locks, as its scripts take them, for the whole run: another
    # lifecycle action on TASK refuses this one before anything is read or changed.
    try:
        with (
            lifecycle.lifecycle_locks(s.state_dir, task, s.lock_timeout),
            _children_locked(s, task, flags),
        ):
            return _decided(
                s, task, flags, guard, journal_required=journal_required, converge=converge
            )
    except FmError as err:
        return Outcome.of_error(task, err, dry_run=False)


@contextmanager
def _children_locked(s: Settings, task: str, flags: Flags) -> Iterator[None]:
    """A forced secondmate teardown takes its children's records with it: it holds their
    lifecycle locks too (read once TASK's own are held)."""
    home = _children_home(s, task, flags)
    if home is None:
        yield
        return
    from fm_teardown.act import lifecycle

    with lifecycle.descendant_locks(Path(home)):
        yield


def _children_home(s: Settings, task: str, flags: Flags) -> str | None:
    """The home whose children's records a forced secondmate teardown takes with it, or None
    (not forced, not a secondmate, or a record the run itself refuses)."""
    from fm_teardown.model.records import load_record

    if not flags.force:
        return None
    try:
        record = load_record(s.state_dir, task)
    except FmError:
        return None  # the run itself says why
    if record.kind != "secondmate":
        return None
    return record.home or record.worktree


def _decided(
    s: Settings,
    task: str,
    flags: Flags,
    guard: Guard | None,
    *,
    journal_required: bool,
    converge: bool,
) -> Outcome:
    from fm_teardown.report import journal

    if converge and not os.path.lexists(s.state_dir / f"{task}.meta"):
        # Only without a record: a dry run of a task that has one reads the journal only for
        # a teardown of it that ended partway (below).
        done = journal.torn_down_at(s.data_dir, task)
        if done is not None:
            return _already_torn_down(task, done, dry_run=flags.dry_run)
    left = journal.unfinished(s.data_dir, task).get(task)
    changed = _launch_changed(s, task, left) if left is not None else None
    if changed is not None:
        assert left is not None
        return _other_launch(s, task, flags, guard, left, changed)
    if flags.dry_run or flags.no_journal:
        outcome = _teardown(s, task, flags, guard)
        if flags.dry_run and not flags.no_journal and journal_required:
            outcome = _journal_predicted(s, outcome)
    else:
        outcome = _teardown(
            s, task, flags, guard, intent=_intent_writer(s, flags, required=journal_required)
        )
    if left is not None:
        outcome = replace(outcome, warnings=(journal.unfinished_line(left), *outcome.warnings))
    return outcome


def _journal_predicted(s: Settings, outcome: Outcome) -> Outcome:
    """A dry run whose plan would act refuses where its real run's intent line would: the
    journal cannot be written there (a link, a directory, not writable, inside a slot or a
    task's temp dir)."""
    from fm_teardown.report import journal

    d = outcome.decision
    if d is None or not acts(d) or outcome.places is None:
        return outcome
    problem = journal.write_problem(s.data_dir, outcome.places)
    if problem is None:
        return outcome
    blocked = OwnFileBlocked(OwnFile.JOURNAL, str(s.data_dir / journal.JOURNAL), problem)
    refused = Outcome.of_decision(own_file_blocked(d, blocked), dry_run=True)
    return replace(refused, plan_id=outcome.plan_id, places=outcome.places)


def _launch_changed(
    s: Settings, task: str, intent: Mapping[str, object]
) -> tuple[tuple[str, str, str], ...] | None:
    """How TASK's record now differs from the launch an unfinished teardown of it was tearing
    down (`spawn_gen`, `worktree`), or None: the same launch, no record, or an intent that
    does not say (written by an older fm)."""
    launch = intent.get("launch")
    if not isinstance(launch, dict):
        return None
    try:
        record = load_record(s.state_dir, task)
    except FmError:
        return None  # the run itself says why
    now = {"spawn_gen": record.spawn_gen, "worktree": record.worktree}
    changed = tuple(
        (name, str(launch.get(name) or "none"), str(now[name] or "none"))
        for name in ("spawn_gen", "worktree")
        if (launch.get(name) or None) != now[name]
    )
    return changed or None


def _other_launch(
    s: Settings,
    task: str,
    flags: Flags,
    guard: Guard | None,
    intent: Mapping[str, object],
    changed: tuple[tuple[str, str, str], ...],
) -> Outcome:
    """A teardown of TASK ended partway and TASK's record now names another launch: decided
    as a dry run (nothing is done), and a plan that would act refuses (exit 5) so that the
    new launch is reviewed first; the real run's refusal line closes the unfinished one."""
    from fm_teardown.report import journal

    seen = _teardown(s, task, replace(flags, dry_run=True), guard)
    seen = replace(seen, dry_run=flags.dry_run)
    d = seen.decision
    if d is not None and acts(d):
        cause = OtherLaunch(task, str(intent.get("time") or "?"), changed)
        refused = Outcome.of_decision(other_launch(d, cause, dry_run=flags.dry_run), dry_run=False)
        seen = replace(refused, dry_run=flags.dry_run, plan_id=seen.plan_id, places=seen.places)
    return replace(seen, warnings=(journal.unfinished_line(dict(intent)), *seen.warnings))


def _already_torn_down(task: str, done: TornDown, *, dry_run: bool) -> Outcome:
    """A re-run's result for a task the journal says was torn down: done, nothing to do."""
    if done.unfinished:
        reason = (
            f"already torn down at {done.when}: its record is gone; the teardown that started "
            "then journalled no result (it ended after its record step, the last one)"
        )
    else:
        reason = (
            f"already torn down at {done.when}: its record is gone, there is nothing left to do"
        )
    return Outcome(
        task=task,
        dry_run=dry_run,
        verdict=Verdict.ALREADY,
        exit_code=int(ExitCode.OK),
        reasons=(reason,),
    )


def _intent_writer(
    s: Settings, flags: Flags, *, required: bool
) -> Callable[[Decision, Planned], OwnFileBlocked | None]:
    """Journal a real run's intent, and the launch it tears down; why it could not (the run
    then refuses), or None."""
    from fm_teardown.report import journal

    def write(d: Decision, planned: Planned) -> OwnFileBlocked | None:
        record = planned.fleet.records.get(d.task)
        launch = (
            {"spawn_gen": record.spawn_gen, "worktree": record.worktree}
            if record is not None
            else None
        )
        steps = [str(st.step) for st in d.plan]
        line = journal.intent_entry(d.task, planned.plan_id or "", steps, flags, launch)
        if not required:
            journal.append(s.data_dir, line, planned.places)  # warns when it cannot
            return None
        problem = journal.try_append(s.data_dir, line, planned.places)
        if problem is None:
            return None
        return OwnFileBlocked(OwnFile.JOURNAL, str(s.data_dir / journal.JOURNAL), problem)

    return write


def journal_result(s: Settings, outcome: Outcome, task: str, flags: Flags) -> None:
    """Append a real run's result line (`journalled` says which runs have one), never inside a
    task's work: where fm's own files never go is what the run found, or, for a run that
    ended before it looked at the fleet, what the fleet shows now; a fleet that cannot be read
    shows nothing, and then no line is written (a warning says so)."""
    if not journalled(outcome, task) or flags.no_journal:
        return
    from fm_teardown.observe.own_places import work_places_now
    from fm_teardown.report import journal

    places = outcome.places if outcome.places is not None else work_places_now(s)
    journal.append(s.data_dir, journal.result_entry(outcome, flags), places)


def with_expected_plan(flags: Flags, task: str, expected: dict[str, str]) -> Flags:
    """TASK's flags with its approved token. A task with none (a --landed selection the
    tokens do not name) gets "": it refuses, its plan was never approved."""
    return replace(flags, expect_plan=expected.get(task, ""))


def journalled(outcome: Outcome, task: str) -> bool:
    """Every real run for a valid task id is journalled, refusals included; not a request
    fm could not take, and not a re-run of a task already torn down (nothing was done, and
    the journal's line for it stays the teardown's own)."""
    return (
        not outcome.dry_run
        and outcome.verdict not in (Verdict.INVALID, Verdict.ALREADY)
        and task_id_problem(task) is None
    )


def interrupted_before_acting(task: str, flags: Flags) -> Outcome:
    return Outcome(
        task=task,
        dry_run=flags.dry_run,
        verdict=Verdict.FAILED,
        exit_code=int(ExitCode.INTERRUPTED),
        reasons=("interrupted while deciding",),
        framing=Framing(tail=True),
    )
