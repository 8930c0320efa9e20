"""Whose a pool lease is: a record's (its holder or lease id names that record) or a lease
owner of its own, `lease:<holder>`. Pure functions of the pool's entry and the fleet: the
decision's owners, the acting re-check at the pool and the audit's loose ends read them."""

from __future__ import annotations

from fm_teardown.model.records import Fleet
from fm_teardown.model.world import PoolEntry

__all__ = ["lease_name", "lease_task"]


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
