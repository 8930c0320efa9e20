"""Who owns TASK's slot (CONTRACT §4, §5 rules 3-4). Pure.

Owners are the other records whose canonical slot equals TASK's, any pool lease on the slot
that is not TASK's, and (only when another record also claims the slot) agent processes in
the slot that belong to no task's endpoint. When none is live, the slot's current owner is
resolved from the lease, then the launch order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from fm_teardown.records import Fleet, Record
from fm_teardown.world import EndpointState, Observation, PoolEntry, Proc


@dataclass(frozen=True)
class Owner:
    id: str
    kind: str  # record | lease | process
    endpoint: EndpointState
    live: bool
    slot: str
    why: str


def lease_is_tasks(entry: PoolEntry, record: Record) -> bool:
    """A lease is TASK's when its id equals the recorded lease id, or, when the record has no
    lease id, when its holder equals the recorded holder or the task id."""
    if record.lease_id:
        return entry.lease_id == record.lease_id
    return entry.lease_holder != "" and entry.lease_holder in (
        record.lease_holder,
        record.task_id,
    )


def other_claimants(task_id: str, fleet: Fleet, obs: Observation) -> list[str]:
    return [t for t in obs.claimants.get(obs.slot_of[task_id], ()) if t != task_id]


def invalid_claimants(task_id: str, fleet: Fleet, obs: Observation) -> list[str]:
    """Invalid records that might claim TASK's slot: their slot cannot be told, or is TASK's."""
    slot = obs.slot_of[task_id]
    return sorted(
        t
        for t, claimed in obs.invalid_slots.items()
        if t != task_id and (claimed is None or slot in claimed)
    )


def owners_of(task_id: str, fleet: Fleet, obs: Observation) -> list[Owner]:
    record = fleet.records[task_id]
    slot = obs.slot_of[task_id]
    owners: dict[str, Owner] = {}
    others = other_claimants(task_id, fleet, obs)
    for other in others:
        ep = obs.endpoints[other]
        why = f"its record names this slot; endpoint {ep.state}: {ep.detail}"
        owners[other] = Owner(other, "record", ep.state, ep.state.live, slot, why)
    facts = obs.slots.get(slot)
    entry = facts.pool.entry if facts else None
    if entry is not None and entry.leased and not lease_is_tasks(entry, record):
        holder = entry.lease_holder
        lease_why = (
            f"holds the pool lease on this slot (lease id {entry.lease_id or 'none'}, "
            f"holder '{holder}'); a lease counts as live"
        )
        if holder and holder != task_id and holder in fleet.records:
            ep = obs.endpoints[holder]
            # The lease names another task: that task is the owner, not a second one.
            owners[holder] = Owner(
                holder,
                "record" if holder in owners else "lease",
                ep.state,
                True,
                slot,
                f"{lease_why}; endpoint {ep.state}",
            )
        else:
            lease_id = f"lease:{holder}" if holder else f"lease:{entry.lease_id}"
            owners[lease_id] = Owner(lease_id, "lease", EndpointState.ALIVE, True, slot, lease_why)
    if entry is not None and not entry.leased and entry.owner_pid > 0:
        proc = obs.processes.procs.get(entry.owner_pid)
        # gopsutil's create time in ms, from whole seconds on Linux: compare within a second.
        if (
            proc is not None
            and not proc.zombie
            and abs(proc.start_time * 1000 - entry.owner_started_at) < 1000
            and proc.pid not in obs.endpoints[task_id].pids
        ):
            _add_process_owner(
                owners,
                proc,
                slot,
                f"{_name(proc)} holds the pool's owner reservation on this "
                "slot (an interactive treehouse get)",
            )
    if others and facts is not None:
        for proc in facts.agents:
            if proc.pid not in obs.attributed:
                _add_process_owner(
                    owners,
                    proc,
                    slot,
                    f"agent process {_name(proc)} runs in this slot and "
                    "belongs to no task's endpoint",
                )
    return list(owners.values())


def _name(proc: Proc) -> str:
    return f"{proc.name or proc.argv0} ({proc.pid})"


def _add_process_owner(owners: dict[str, Owner], proc: Proc, slot: str, why: str) -> None:
    """A live process owner of unknown task, named `pid:<PID>`."""
    pid_id = f"pid:{proc.pid}"
    owners[pid_id] = Owner(pid_id, "process", EndpointState.ALIVE, True, slot, why)


_SPAWN_GEN = re.compile(r"s(\d+)\.")


def _spawn_epoch(record: Record) -> int | None:
    m = _SPAWN_GEN.match(record.spawn_gen or "")
    return int(m.group(1)) if m else None


def _started(record: Record) -> datetime | None:
    if not record.started_at:
        return None
    try:
        value = datetime.fromisoformat(record.started_at)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def newer_launch(a: Record, b: Record) -> tuple[bool | None, str]:
    """Is `a` a more recent launch than `b`? None when it cannot be told.

    Compared by the first of spawn_gen's epoch, started_at, and the record's modification
    time that both records carry and that differ.
    """
    ea, eb = _spawn_epoch(a), _spawn_epoch(b)
    if ea is not None and eb is not None and ea != eb:
        return ea > eb, "spawn_gen"
    sa, sb = _started(a), _started(b)
    if sa is not None and sb is not None and sa != sb:
        return sa > sb, "started_at"
    if a.mtime_ns != b.mtime_ns:
        return a.mtime_ns > b.mtime_ns, "record modification time"
    return None, "no launch order differs"


@dataclass(frozen=True)
class CurrentOwner:
    is_task: bool
    owner: str | None  # the other task that is current, None if TASK or cannot be told
    why: str


def current_owner(task_id: str, fleet: Fleet, obs: Observation, others: list[str]) -> CurrentOwner:
    record = fleet.records[task_id]
    facts = obs.slots.get(obs.slot_of[task_id])
    entry = facts.pool.entry if facts else None
    if entry is not None and entry.leased and lease_is_tasks(entry, record):
        return CurrentOwner(True, None, "the pool lease on the slot is this task's")
    newest = task_id
    for other in others:
        verdict, by = newer_launch(fleet.records[other], fleet.records[newest])
        if verdict is None:
            return CurrentOwner(
                False, None, f"the launch order of {task_id} and {other} cannot be told ({by})"
            )
        if verdict:
            newest = other
    if newest == task_id:
        return CurrentOwner(True, None, f"{task_id} is the most recent launch on the slot")
    return CurrentOwner(False, newest, f"{newest} is a more recent launch on the slot")
