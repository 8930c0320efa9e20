"""The pipeline: settings -> records -> observe -> decide (-> act) -> an Outcome.

The only module that strings the stages together. `act` gets what it needs from the other
stages through the `Seams` built here (plain callables), so it imports neither `observe` nor
this module; `commands` journals and renders what `teardown` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from fm_teardown.adapters import safefile
from fm_teardown.decide import fingerprint
from fm_teardown.decide import rules as decide
from fm_teardown.model.errors import FmError, Verdict, plan_changed_exit
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.paths import canonical, is_within
from fm_teardown.model.plan import Decision, Flags, LandedLike, Planned
from fm_teardown.model.records import Fleet, Record, check_task_id, load_fleet, load_record
from fm_teardown.model.settings import Settings
from fm_teardown.model.world import Observation, Proc, ProcessTable, TmuxInventory
from fm_teardown.observe.observation import assemble, observe

__all__ = [
    "Guard",
    "NotSelected",
    "decide_with_landed",
    "load",
    "plan",
    "teardown",
]


def load(settings: Settings, task: str) -> Fleet:
    check_task_id(task)
    record = load_record(settings.state_dir, task)
    fleet = load_fleet(settings.state_dir)
    if task not in fleet.records:
        # Listed a moment after TASK's own read; keep the record we validated.
        fleet = Fleet(
            {**fleet.records, task: record},
            {k: v for k, v in fleet.invalid.items() if k != task},
            fleet.strays,
            fleet.children,
        )
    return fleet


def plan(
    settings: Settings,
    task: str,
    flags: Flags,
    *,
    remembered: Mapping[str, tuple[Proc, ...]] | None = None,
    fetch: bool | None = None,
) -> Planned:
    fleet = load(settings, task)
    obs = observe(settings, fleet, remembered, deciding=(task,))
    # fm's own files (journal, cost table, locks) are never written inside these slots. A
    # slot holding FM_HOME itself is fm's own home (a secondmate's fleet lives in its home;
    # a record naming FM_HOME or `/` is refused as a protected root anyway).
    home = canonical(str(settings.fm_home.absolute()))
    safefile.forbid(s for s in obs.slot_of.values() if not is_within(home, s))
    facts: list[LandedLike] = []
    decision = decide_with_landed(settings, task, fleet, obs, flags, fetch=fetch, facts=facts)
    landed = facts[0] if facts else None
    words = fingerprint.words(decision, obs, landed)
    token = fingerprint.token(fingerprint.digests(decision, obs, landed))
    return Planned(decision, fleet, obs, landed, words, token)


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


def decide_with_landed(
    settings: Settings,
    task: str,
    fleet: Fleet,
    obs: Observation,
    flags: Flags,
    *,
    fetch: bool | None = None,
    facts: list[LandedLike] | None = None,
) -> Decision:
    """Decide; if rule 5 is reached, TASK's landed facts are gathered and it decides again.

    A real run fetches the default branch first (`fetch` None means: unless it is a dry run).
    The facts gathered are appended to `facts` when given.
    """
    fetching = (not flags.dry_run) if fetch is None else fetch

    def gather(records: Sequence[Record]) -> dict[str, LandedLike]:
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
    if not expected or words is None:  # a --landed selection no token names
        changes: list[str] = []
        say = f"no --expect-plan token names {d.task}: its plan (now {now}) was never approved"
    else:
        names = fingerprint.changed(expected, now)
        before = fingerprint.recover(expected, d, planned.observation, planned.landed)
        changes = fingerprint.describe(names, words, before)
        label = dict(fingerprint.FIELDS)
        what = ", ".join(label[n] for n in names) if names else "a field the token cannot name"
        # The headline is what a person reads first: every field that changed, by name.
        say = f"the plan changed since it was approved: {what}"
        changes.append(f"approved plan {expected}; the plan now {now}")
    if d.refused:
        # Not an invitation to approve the new token: the new plan would refuse anyway. A
        # refusal's runbook bears its verdict's name (live-owner, unsafe, unlanded).
        why = d.headline or (d.reasons[0] if d.reasons else str(d.verdict))
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

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


Guard = Callable[[Planned], str | None]


def teardown(
    settings: Settings,
    task: str,
    flags: Flags,
    guard: Guard | None = None,
    intent: Callable[[Decision, str], str | None] | None = None,
) -> Outcome:
    """`fm teardown TASK [--dry-run]`: decide, and for a real run act; never raises FmError.

    `guard` (a batch's re-selection) sees the plan before anything is done and may stop the
    task there: NotSelected. `intent(decision, plan_id)` journals the run's intent right
    before its first destructive step and returns why it could not (the run then refuses),
    or None."""
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
            return refused
    if flags.dry_run:
        return replace(Outcome.of_decision(planned.decision, dry_run=True), plan_id=planned.plan_id)
    from fm_teardown.act import steps as act
    from fm_teardown.act.run_state import Seams
    from fm_teardown.observe.branch_use import held_by
    from fm_teardown.observe.claim import still_names
    from fm_teardown.observe.tasktmp import task_tmp
    from fm_teardown.observe.window_identity import drift

    def replan(remembered: tuple[Proc, ...]) -> Planned:
        # Under the slot lock: TASK's endpoint is gone; no fetch (the first decision fetched).
        return plan(settings, task, flags, remembered={task: remembered}, fetch=False)

    def observe_now(fleet: Fleet, inventory: TmuxInventory, table: ProcessTable) -> Observation:
        return assemble(settings, fleet, inventory, table)

    def landed_now(record: Record) -> LandedLike:
        return _landed_facts(settings, record, fetch=False)

    def write_intent(d: Decision) -> str | None:
        return intent(d, planned.plan_id or "") if intent is not None else None

    seams = Seams(
        replan=replan,
        observe=observe_now,
        landed=landed_now,
        window_drift=drift,
        tasktmp=task_tmp,
        branch_held=held_by,
        claim_names=still_names,
        intent=write_intent,
    )
    try:
        done = act.run(settings, planned, flags, seams)
    except FmError as err:  # the re-check found TASK's own record gone or unsafe
        done = Outcome.of_error(task, err, dry_run=False)
    return replace(done, plan_id=planned.plan_id)
