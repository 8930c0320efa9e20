"""The pipeline: settings -> records -> observe -> decide (-> act) -> an Outcome.

The only module that strings the stages together. `act` gets what it needs from the other
stages through the `Seams` built here (plain callables), so it imports neither `observe` nor
this module; `commands` journals and renders what `teardown` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fm_teardown.decide import decide
from fm_teardown.errors import FmError
from fm_teardown.observe import assemble, observe
from fm_teardown.outcome import Outcome
from fm_teardown.plan import Decision, Flags, LandedLike, Planned
from fm_teardown.records import Fleet, Record, check_task_id, load_fleet, load_record
from fm_teardown.settings import Settings
from fm_teardown.world import Observation, Proc, ProcessTable, TmuxInventory


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
    obs = observe(settings, fleet, remembered)
    facts: list[LandedLike] = []
    decision = decide_with_landed(settings, task, fleet, obs, flags, fetch=fetch, facts=facts)
    return Planned(decision, fleet, obs, facts[0] if facts else None)


def landed_facts(settings: Settings, record: Record, *, fetch: bool) -> LandedLike:
    """Rule 5's facts for TASK's own slot (gathered only once rules 1-4 let TASK go on)."""
    from fm_teardown.landed import check_landed

    return check_landed(
        record,
        settings.data_dir,
        fetch=fetch,
        fetch_timeout=settings.fetch_timeout,
        gh_bin=settings.gh_bin,
    )


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
    """Decide; if rule 5 is reached, gather TASK's landed facts and decide again.

    A real run fetches the default branch first (`fetch` None means: unless it is a dry run).
    The facts gathered are appended to `facts` when given.
    """
    decision = decide(task, fleet, obs, flags)
    if decision.landed_pending:
        found = landed_facts(
            settings, fleet.records[task], fetch=(not flags.dry_run) if fetch is None else fetch
        )
        if facts is not None:
            facts.append(found)
        decision = decide(task, fleet, obs, flags, landed=found)
    return decision


class NotSelected(Exception):
    """A batch's task that, at its turn, is no longer what was selected (relaunched, no
    longer finished, its slot already returned by this batch): nothing was done to it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


Guard = Callable[[Planned], str | None]


def teardown(settings: Settings, task: str, flags: Flags, guard: Guard | None = None) -> Outcome:
    """`fm teardown TASK [--dry-run]`: decide, and for a real run act; never raises FmError.

    `guard` (a batch's re-selection) sees the plan before anything is done and may stop the
    task there: NotSelected."""
    try:
        planned = plan(settings, task, flags)
    except FmError as err:
        return Outcome.of_error(task, err, dry_run=flags.dry_run)
    if guard is not None:
        why = guard(planned)
        if why is not None:
            raise NotSelected(why)
    if flags.dry_run:
        return Outcome.of_decision(planned.decision, dry_run=True)
    from fm_teardown import act

    def replan(remembered: tuple[Proc, ...]) -> Planned:
        # Under the slot lock: TASK's endpoint is gone; no fetch (the first decision fetched).
        return plan(settings, task, flags, remembered={task: remembered}, fetch=False)

    def observe_now(fleet: Fleet, inventory: TmuxInventory, table: ProcessTable) -> Observation:
        return assemble(settings, fleet, inventory, table)

    def landed_now(record: Record) -> LandedLike:
        return landed_facts(settings, record, fetch=False)

    seams = act.Seams(replan=replan, observe=observe_now, landed=landed_now)
    try:
        return act.run(settings, planned, flags, seams)
    except FmError as err:  # the re-check found TASK's own record gone or unsafe
        return Outcome.of_error(task, err, dry_run=False)
