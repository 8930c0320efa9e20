"""The fleet audit (`fm teardown --dry-run` with no TASK, spec §8). Read-only.

Each row is exactly what `fm teardown <task> --dry-run` would say on the same world: the same
decision, rule 5 included, from one observation of the whole fleet. Rules 1-4 cost no
subprocess per row; rule 5 runs only for the rows that reach it, through the same batched
landed-work check as the one-task dry run (one `git status` per slot, a few git calls per
project). Then the slots claimed by more than one record, and the fleet's loose ends
(`observe.loose_ends`): windows, leases, agents and files that no record accounts for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fm_teardown.decide import census, fingerprint, finished
from fm_teardown.decide.ownership import live_of
from fm_teardown.decide.rules import decide_all
from fm_teardown.model.errors import Verdict
from fm_teardown.model.messages import decision_reasons
from fm_teardown.model.plan import Flags
from fm_teardown.model.records import (
    Fleet,
    Record,
    own_record_problem,
    refused_record,
    shown,
    task_id_problem,
)
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.model.world import Observation
from fm_teardown.observe.loose_ends import Orphan, orphans
from fm_teardown.observe.observation import observe, ready

if TYPE_CHECKING:
    from fm_teardown.model.landing import LandedFacts

__all__ = ["Audit", "AuditRow", "audit"]


@value
class AuditRow:
    task: str
    slot: str | None
    endpoint: str | None
    verdict: Verdict
    reasons: tuple[str, ...]
    headline: str  # the one reason that matters
    owners: tuple[str, ...] = ()  # the live owners, for a live-owner row
    # Finished (what `--landed` selects), and why; the same function decides both.
    finished: finished.Finished = finished.Finished(False, "")
    # The launch the row describes: a batch skips a task relaunched since its selection.
    identity: tuple[object, ...] | None = None
    # The plan token the one-task dry run prints (`--expect-plan TASK=TOKEN` approves it);
    # None for a row refused before deciding.
    plan_id: str | None = None

    @property
    def exit_code(self) -> int:
        return int(self.verdict.exit_code)


@value
class Audit:
    state_dir: Path
    rows: tuple[AuditRow, ...]
    shared_slots: tuple[tuple[str, tuple[str, ...]], ...]
    orphans: tuple[Orphan, ...] = ()
    pools: tuple[str, ...] = ()  # the pool dirs whose state files were read


def audit(settings: Settings, opts: finished.Options | None = None) -> Audit:
    opts = opts or finished.Options()
    fleet = _load_fleet_for_audit(settings)
    obs = observe(settings, fleet)
    flags = Flags(dry_run=True)
    rows: dict[str, AuditRow] = {}
    usable: list[str] = []
    for task in fleet.task_ids:
        bad = _unusable(task, fleet)
        if bad is not None:
            why = f"refused ({bad.verdict}): {bad.headline}"
            rows[task] = replace(bad, finished=finished.Finished(False, why))
        else:
            usable.append(task)
    ready(obs, fleet, usable)

    def gather(records: Sequence[Record]) -> Mapping[str, LandedFacts]:
        from fm_teardown.decide.landed import judge
        from fm_teardown.observe.home import with_homes
        from fm_teardown.observe.landed import gather_many

        found = gather_many(
            list(records),
            settings.data_dir,
            fetch=False,
            fetch_timeout=settings.fetch_timeout,
            gh_bin=settings.gh_bin,
        )
        return with_homes(records, {task: judge(facts) for task, facts in found.items()})

    decisions, facts = decide_all(usable, fleet, obs, flags, gather)
    for task, d in decisions.items():
        ep = obs.endpoints[task]
        record = fleet.records[task]
        rows[task] = AuditRow(
            task,
            d.slot,
            str(ep.state),
            d.verdict,
            decision_reasons(d),
            d.headline,
            tuple(o.id for o in live_of(d.owners)) if d.verdict == Verdict.LIVE_OWNER else (),
            finished.classify(
                d.verdict,
                d.headline,
                str(ep.state),
                ep.detail,
                record,
                facts.get(task),
                opts,
                working=census.still_working(task, obs),
                doubt=census.doubts(task, obs),
            ),
            finished.identity(record, ep.window_ids),
            fingerprint.token(fingerprint.digests(d, obs, facts.get(task))),
        )
    return Audit(
        settings.state_dir,
        tuple(rows[t] for t in fleet.task_ids),
        _shared_slots(obs),
        orphans(fleet, obs),
        tuple(sorted({e.canonical.rsplit("/", 2)[0] for e in obs.pool_entries})),
    )


def _load_fleet_for_audit(settings: Settings) -> Fleet:
    from fm_teardown.model.records import load_fleet

    return load_fleet(settings.state_dir)


def _unusable(task: str, fleet: Fleet) -> AuditRow | None:
    """A record `fm teardown <task>` refuses before deciding: the row says what it would."""
    bad = fleet.invalid.get(task)
    if bad is not None:
        id_problem = task_id_problem(task)
        if id_problem:
            why = f"invalid task id '{shown(task)}': {id_problem}"
            return AuditRow(task, _first(bad.claimed), None, Verdict.INVALID, (why,), why)
        line = refused_record(bad.meta_path, bad.problem)
        headline = f"record {bad.meta_path} {bad.problem}"
        return AuditRow(task, _first(bad.claimed), None, Verdict.UNSAFE, (line,), headline)
    record = fleet.records[task]
    problem = own_record_problem(record)
    if problem is None:
        return None
    line = refused_record(record.meta_path, problem)
    return AuditRow(task, record.worktree, None, Verdict.UNSAFE, (line,), f"its record {problem}")


def _first(claimed: tuple[str, ...] | None) -> str | None:
    return claimed[0] if claimed else None


def _shared_slots(obs: Observation) -> tuple[tuple[str, tuple[str, ...]], ...]:
    claims: dict[str, list[str]] = {slot: list(t) for slot, t in obs.claimants.items()}
    for task, slots in obs.invalid_slots.items():
        for slot in slots or ():
            claims.setdefault(slot, []).append(task)
    return tuple(
        (slot, tuple(sorted(tasks))) for slot, tasks in sorted(claims.items()) if len(tasks) > 1
    )
