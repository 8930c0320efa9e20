"""The pipeline: settings -> records -> observe -> decide (-> act) -> report.

The only module that strings the stages together; the CLI calls it and renders the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from fm_teardown.decide import Decision, Flags, LandedLike, decide
from fm_teardown.observe import observe
from fm_teardown.records import Fleet, Record, check_task_id, load_fleet, load_record
from fm_teardown.settings import Settings
from fm_teardown.world import Observation


@dataclass(frozen=True)
class Planned:
    decision: Decision
    fleet: Fleet
    observation: Observation


def load(settings: Settings, task: str) -> Fleet:
    check_task_id(task)
    record = load_record(settings.state_dir, task)
    fleet = load_fleet(settings.state_dir)
    if task not in fleet.records:
        # Listed a moment after TASK's own read; keep the record we validated.
        fleet = Fleet(
            {**fleet.records, task: record}, {k: v for k, v in fleet.invalid.items() if k != task}
        )
    return fleet


def plan(settings: Settings, task: str, flags: Flags) -> Planned:
    fleet = load(settings, task)
    obs = observe(settings, fleet)
    return Planned(decide_with_landed(settings, task, fleet, obs, flags), fleet, obs)


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
) -> Decision:
    """Decide; if rule 5 is reached, gather TASK's landed facts and decide again.

    A real run fetches the default branch first (`fetch` None means: unless it is a dry run).
    """
    decision = decide(task, fleet, obs, flags)
    if decision.landed_pending:
        facts = landed_facts(
            settings, fleet.records[task], fetch=(not flags.dry_run) if fetch is None else fetch
        )
        decision = decide(task, fleet, obs, flags, landed=facts)
    return decision
