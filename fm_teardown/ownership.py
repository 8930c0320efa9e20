"""Who owns TASK's slot (CONTRACT §4, §5 rules 3-4, §7a). Pure.

Owners are the other records that claim the slot (the same canonical slot, or one nested
inside it or containing it), any pool lease on the slot that is not TASK's (a lease held by
another task is that task's claim), another task whose live endpoint has a process working in
the slot, and (only when another record also claims the slot) agent processes in the slot that
belong to no task's endpoint. When none is live, the slot's current owner is resolved from the
lease, then the launch order.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum

from fm_teardown.records import Fleet, Record
from fm_teardown.values import value
from fm_teardown.world import EndpointState, Observation, PoolEntry, Proc, SlotClaim


class OwnerKind(StrEnum):
    RECORD = "record"  # another task record claims the slot
    LEASE = "lease"  # a pool lease on the slot
    PROCESS = "process"  # an agent process of unknown task, `pid:<PID>`


@value
class Owner:
    id: str
    kind: OwnerKind
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


def lease_task(entry: PoolEntry, task_id: str, fleet: Fleet) -> str | None:
    """The other task whose record the lease belongs to (its holder, or its lease id, is that
    record's), or None: then the lease is an owner of its own, `lease:<holder>`."""
    if not entry.leased:
        return None
    holder = entry.lease_holder
    if holder and holder != task_id and holder in fleet.records:
        return holder
    by_id, by_holder = fleet.by_lease
    found = set(by_id.get(entry.lease_id, ())) if entry.lease_id else set()
    if holder:
        found.update(by_holder.get(holder, ()))
    matches = sorted(found - {task_id})
    # Two records claiming one lease cannot both be its owner: leave it a lease owner.
    return matches[0] if len(matches) == 1 else None


def lease_name(entry: PoolEntry) -> str:
    return f"lease:{entry.lease_holder}" if entry.lease_holder else f"lease:{entry.lease_id}"


def other_claimants(task_id: str, fleet: Fleet, obs: Observation) -> list[str]:
    """Other records claiming TASK's slot: the same canonical slot, or a nested one."""
    slot = obs.slot_of[task_id]
    same = obs.claimants.get(slot, ())
    nested = obs.nested.get(slot, ())
    return sorted({t for t in (*same, *nested) if t != task_id})


def invalid_claimants(task_id: str, fleet: Fleet, obs: Observation) -> list[str]:
    """Invalid records that might claim TASK's slot: their slot cannot be told, or is TASK's."""
    slot = obs.slot_of[task_id]
    return sorted(
        t
        for t, claimed in obs.invalid_slots.items()
        if t != task_id and (claimed is None or slot in claimed)
    )


def _pool_entry(task_id: str, obs: Observation) -> PoolEntry | None:
    facts = obs.slots.get(obs.slot_of[task_id])
    return facts.pool.entry if facts else None


def owners_of(task_id: str, fleet: Fleet, obs: Observation) -> list[Owner]:
    record = fleet.records[task_id]
    slot = obs.slot_of[task_id]
    owners: dict[str, Owner] = {}
    others = other_claimants(task_id, fleet, obs)
    for other in others:
        ep = obs.endpoints[other]
        where = (
            "names this slot"
            if obs.slot_of[other] == slot
            else f"names a slot nested with it ({obs.slot_of[other]})"
        )
        why = f"its record {where}; endpoint {ep.state}: {ep.detail}"
        owners[other] = Owner(other, OwnerKind.RECORD, ep.state, ep.state.live, slot, why)
    facts = obs.slots.get(slot)
    entry = facts.pool.entry if facts else None
    if entry is not None and entry.leased and not lease_is_tasks(entry, record):
        lease_why = (
            f"holds the pool lease on this slot (lease id {entry.lease_id or 'none'}, "
            f"holder '{entry.lease_holder}')"
        )
        holder = lease_task(entry, task_id, fleet)
        if holder is not None:
            # The lease is another task's claim; its liveness is that task's endpoint (§7a).
            ep = obs.endpoints[holder]
            why = f"{lease_why}: its lease; endpoint {ep.state}: {ep.detail}"
            if holder in owners:
                # Already an owner by its record: say the lease once, not the endpoint twice.
                why = f"{owners[holder].why}; and it {lease_why}"
            owners[holder] = Owner(
                holder,
                OwnerKind.RECORD if holder in others else OwnerKind.LEASE,
                ep.state,
                ep.state.live,
                slot,
                why,
            )
        else:
            name = lease_name(entry)
            owners[name] = Owner(
                name,
                OwnerKind.LEASE,
                EndpointState.ALIVE,
                True,
                slot,
                f"{lease_why}; no record holds it, and a lease counts as live",
            )
    claim = facts.claim if facts is not None else None
    if claim is not None and claim.task is not None and claim.task != task_id:
        # The slot claim names another task: the slot was reassigned to it (§10). It owns the
        # slot live when its record (here, or in the claim's home) has a live endpoint.
        other, where = claim.task, f"the slot claim {claim.path} names it (home {claim.home})"
        if other in fleet.records:
            ep = obs.endpoints[other]
            state, detail = ep.state, f"endpoint {ep.state}: {ep.detail}"
        elif claim.foreign_endpoint is not None:
            state = claim.foreign_endpoint
            detail = f"its record in {claim.home} has endpoint {state}"
        else:
            state, detail = EndpointState.MISSING, f"no record of it here or in {claim.home}"
        why = f"{where}; {detail}"
        if other in owners:
            prev = owners[other]
            owners[other] = Owner(
                other, prev.kind, prev.endpoint, prev.live, slot, f"{prev.why}; and {why}"
            )
        else:
            owners[other] = Owner(other, OwnerKind.RECORD, state, state.live, slot, why)
    if entry is not None and not entry.leased and entry.owner_pid > 0:
        proc = obs.processes.procs.get(entry.owner_pid)
        # gopsutil's create time in ms, from whole seconds on Linux: compare within a second.
        if (
            proc is not None
            and not proc.zombie
            and abs(proc.start_time * 1000 - entry.owner_started_at) < 1000
            and obs.endpoint_owner.get(proc.pid) != task_id
        ):
            _add_process_owner(
                owners,
                proc,
                slot,
                f"{_name(proc)} holds the pool's owner reservation on this "
                "slot (an interactive treehouse get)",
            )
    if facts is not None:
        # Another task's live endpoint working in the slot owns it: ending its process would
        # end that task's work (§7a). A dead endpoint's shell there is no owner.
        for proc in facts.procs:
            tid = obs.endpoint_owner.get(proc.pid)
            if tid is None or tid == task_id:
                continue
            ep = obs.endpoints[tid]
            if not ep.state.live:
                continue
            why = f"its endpoint ({ep.state}) has {_name(proc)} working in this slot"
            if tid in owners:
                if owners[tid].live:
                    continue
                why = f"{owners[tid].why}; and {why}"
            owners[tid] = Owner(
                tid,
                owners[tid].kind if tid in owners else OwnerKind.RECORD,
                ep.state,
                True,
                slot,
                why,
            )
    if others and facts is not None:
        for proc in facts.agents:
            if proc.pid not in obs.endpoint_owner:
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
    owners[pid_id] = Owner(pid_id, OwnerKind.PROCESS, EndpointState.ALIVE, True, slot, why)


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


@value
class CurrentOwner:
    is_task: bool
    owner: str | None  # the other task that is current, None if TASK or cannot be told
    why: str


def claimed_by_other(task_id: str, obs: Observation) -> SlotClaim | None:
    """The slot claim, when it names a task other than TASK."""
    facts = obs.slots.get(obs.slot_of[task_id])
    claim = facts.claim if facts is not None else None
    if claim is not None and claim.task is not None and claim.task != task_id:
        return claim
    return None


def current_owner(task_id: str, fleet: Fleet, obs: Observation, others: list[str]) -> CurrentOwner:
    """Whose slot is it now, when none of its owners is live? The slot claim and the pool
    lease, whichever names another task, say the slot was handed on (§7a, §10); else TASK's
    own lease or claim makes it TASK's; else the most recent launch. When the evidence
    disagrees, the slot is not TASK's: stale is the direction that touches no tree."""
    record = fleet.records[task_id]
    claim = claimed_by_other(task_id, obs)
    if claim is not None:
        return CurrentOwner(
            False,
            claim.task,
            f"the slot was reassigned to {claim.task} (home {claim.home}): its claim "
            f"{claim.path} names it",
        )
    entry = _pool_entry(task_id, obs)
    holder = lease_task(entry, task_id, fleet) if entry is not None else None
    if holder is not None and not (entry is not None and lease_is_tasks(entry, record)):
        # The pool says the slot is that task's, whatever the launch order (§7a).
        return CurrentOwner(False, holder, f"the pool lease on the slot is {holder}'s")
    if entry is not None and entry.leased and lease_is_tasks(entry, record):
        return CurrentOwner(True, None, "the pool lease on the slot is this task's")
    facts = obs.slots.get(obs.slot_of[task_id])
    if facts is not None and facts.claim is not None and facts.claim.task == task_id:
        return CurrentOwner(True, None, f"the slot claim {facts.claim.path} names this task")
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
