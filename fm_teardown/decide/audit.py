"""The fleet audit (`fm teardown --dry-run` with no TASK, spec §8). Read-only.

Each row is exactly what `fm teardown <task> --dry-run` would say on the same world: the same
decision, rule 5 included, from one observation of the whole fleet. Rules 1-4 cost no
subprocess per row; rule 5 runs only for the rows that reach it, through the same batched
landed-work check as the one-task dry run (one `git status` per slot, a few git calls per
project). Then the slots claimed by more than one record, and the fleet's loose ends
(`orphans`): windows, leases and agents that no record accounts for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fm_teardown.decide import finished
from fm_teardown.decide.ownership import lease_name, lease_task, live_of
from fm_teardown.decide.rules import decide_all
from fm_teardown.model.errors import Verdict
from fm_teardown.model.messages import decision_reasons
from fm_teardown.model.paths import ancestors
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
from fm_teardown.observe.endpoint import ProcessClass, classify
from fm_teardown.observe.observation import observe, procs_by_slot, ready

if TYPE_CHECKING:
    from fm_teardown.observe.landed import LandedFacts

__all__ = ["Audit", "AuditRow", "Orphan", "audit", "load_fleet_for_audit", "orphans"]


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

    @property
    def exit_code(self) -> int:
        return int(self.verdict.exit_code)


@value
class Orphan:
    kind: str  # window | lease | process | unfinished-teardown
    id: str
    slot: str | None
    detail: str


@value
class Audit:
    state_dir: Path
    rows: tuple[AuditRow, ...]
    shared_slots: tuple[tuple[str, tuple[str, ...]], ...]
    orphans: tuple[Orphan, ...] = ()
    pools: tuple[str, ...] = ()  # the pool dirs whose state files were read


def audit(settings: Settings, opts: finished.Options | None = None) -> Audit:
    opts = opts or finished.Options()
    fleet = load_fleet_for_audit(settings)
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
        from fm_teardown.observe.landed import check_many

        return check_many(
            list(records),
            settings.data_dir,
            fetch=False,
            fetch_timeout=settings.fetch_timeout,
            gh_bin=settings.gh_bin,
        )

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
                d.verdict, d.headline, str(ep.state), ep.detail, record, facts.get(task), opts
            ),
            finished.identity(record, ep.window_ids),
        )
    return Audit(
        settings.state_dir,
        tuple(rows[t] for t in fleet.task_ids),
        _shared_slots(obs),
        orphans(fleet, obs),
        tuple(sorted({e.canonical.rsplit("/", 2)[0] for e in obs.pool_entries})),
    )


def load_fleet_for_audit(settings: Settings) -> Fleet:
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


def orphans(fleet: Fleet, obs: Observation) -> tuple[Orphan, ...]:
    """Windows `fm-<id>` with no record <id>; leases on pool slots no record claims; agent
    processes working in such slots that no endpoint accounts for (spec §8); names in the state dir
    that are no task's record or sidecar. They never change an exit code."""
    out: list[Orphan] = []
    known = set(fleet.records) | set(fleet.invalid)
    seen: set[tuple[str, str]] = set()
    for pane in obs.inventory.panes:
        name = pane.window_name
        if not name.startswith("fm-") or name[3:] in known:
            continue
        key = (pane.session, name)
        if key in seen:
            continue
        seen.add(key)
        tree = [
            p
            for q in obs.inventory.panes
            if (q.session, q.window_name) == key and not q.dead
            for p in obs.processes.tree(q.pane_pid)
        ]
        agents = [p for p in tree if classify(p.name, p.argv0) == ProcessClass.AGENT]
        runs = (
            "runs " + ", ".join(f"{p.name} ({p.pid})" for p in agents[:3])
            if agents
            else "runs no agent"
        )
        out.append(
            Orphan(
                "window",
                name[3:],
                None,
                f"window {pane.session}:{name} ({pane.window_id}) has no record; it {runs}",
            )
        )
    claimed = set(obs.claimants) | {s for slots in obs.invalid_slots.values() for s in slots or ()}
    above = {a for slot in claimed for a in ancestors(slot)}

    def unclaimed(slot: str) -> bool:
        # Claimed when a record names it, a slot inside it, or a slot containing it.
        return slot not in above and not any(a in claimed for a in ancestors(slot))

    free = sorted({e.canonical for e in obs.pool_entries if unclaimed(e.canonical)})
    for entry in sorted(obs.pool_entries, key=lambda e: e.canonical):
        if not entry.leased or entry.canonical not in free:
            continue
        holder = lease_task(entry, "", fleet)
        detail = f"leased (lease id {entry.lease_id or 'none'}, holder '{entry.lease_holder}')"
        detail += " on a slot no record claims"
        if holder is not None:
            detail += f"; it is {holder}'s lease, whose record names {obs.slot_of[holder]}"
        out.append(Orphan("lease", lease_name(entry), entry.canonical, detail))
    in_free = procs_by_slot(set(free), obs.processes)
    loose: dict[int, tuple[str, str]] = {}  # pid -> (its nearest free slot, its name)
    for slot in sorted(free, key=len, reverse=True):
        for proc in in_free.get(slot, ()):
            if proc.pid in loose or proc.pid in obs.endpoint_owner:
                continue
            if classify(proc.name, proc.argv0) == ProcessClass.AGENT:
                loose[proc.pid] = (slot, proc.name or proc.argv0)
    for pid in sorted(loose):
        slot, name = loose[pid]
        out.append(
            Orphan(
                "process",
                f"pid:{pid}",
                slot,
                f"agent {name} ({pid}) works in a slot no record claims and belongs to no "
                "task's endpoint",
            )
        )
    for name, why in fleet.strays:
        detail = f"{why}; it owns no slot and fm leaves it alone"
        out.append(Orphan("file", name, None, detail))
    return tuple(out)
