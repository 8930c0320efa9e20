"""Whose a pool lease is: a record's (its holder or lease id names that record) or a lease
owner of its own, `lease:<holder>`. Pure functions of the pool's entry and the fleet: the
decision's owners, the acting re-check at the pool and the audit's loose ends read them.

A holder names a task in one of two spellings: the task id itself (a lease taken as
`--lease-holder <id>`), or `fm-<id>`, the holder firstmate's spawn leases its slot as
(`treehouse get --lease --lease-holder fm-<id>`, with no lease key in the record). Either is
that task's own lease, released by its own return."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from fm_teardown.model.records import Fleet, Record
from fm_teardown.model.step_actions import PoolReturn
from fm_teardown.model.world import PoolEntry

__all__ = [
    "SPAWN_HOLDER_PREFIX",
    "ResetRef",
    "holder_tasks",
    "holders_of",
    "lease_name",
    "lease_task",
    "reset_target",
    "unconditional_only",
]

# firstmate's spawn leases a task's slot as `fm-<id>` (and stores nothing in the record).
SPAWN_HOLDER_PREFIX = "fm-"


def holders_of(task_id: str) -> tuple[str, str]:
    """The lease holders that name TASK: its id, and `fm-<id>` (firstmate's spawn)."""
    return (task_id, f"{SPAWN_HOLDER_PREFIX}{task_id}")


def holder_tasks(holder: str) -> tuple[str, ...]:
    """The task ids a lease holder may name: the holder itself and, for `fm-<id>`, `<id>`."""
    if holder.startswith(SPAWN_HOLDER_PREFIX) and len(holder) > len(SPAWN_HOLDER_PREFIX):
        return (holder, holder[len(SPAWN_HOLDER_PREFIX) :])
    return (holder,) if holder else ()


def lease_task(entry: PoolEntry, task_id: str, fleet: Fleet) -> str | None:
    """The other task whose record the lease belongs to (its holder, or its lease id, is that
    record's), or None: then the lease is an owner of its own, `lease:<holder>`."""
    if not entry.leased:
        return None
    holder = entry.lease_holder
    for named in holder_tasks(holder):
        # The holder spelled as the task id first, then as firstmate's spawn spells it.
        if named != task_id and named in fleet.records:
            return named
    by_id, by_holder = fleet.by_lease
    found = set(by_id.get(entry.lease_id, ())) if entry.lease_id else set()
    if holder:
        found.update(by_holder.get(holder, ()))
    matches = sorted(found - {task_id})
    # Two records claiming one lease cannot both be its owner: leave it a lease owner.
    return matches[0] if len(matches) == 1 else None


def lease_name(entry: PoolEntry) -> str:
    return f"lease:{entry.lease_holder}" if entry.lease_holder else f"lease:{entry.lease_id}"


def unconditional_only(
    record: Record, pr: PoolReturn, entry_of: Callable[[], PoolEntry | None]
) -> bool:
    """A record without lease facts on a slot the pool shows unleased: a return could only
    be unconditional, and would clear a lease granted meanwhile. Such a slot, when clean and
    merged, is left to the pool (the plan says so; the real run decides it afresh). The
    pool's entry is asked for only when the record has no lease facts (the real run reads
    the pool's state file again for it)."""
    if record.lease_id or record.lease_holder or pr.lease_id or pr.lease_holder is not None:
        return False
    entry = entry_of()
    return entry is not None and not entry.leased and not entry.destroying


class ResetRef(Enum):
    LOCAL = "local"  # refs/heads/<default>
    ORIGIN = "origin"  # refs/remotes/origin/<default>


def reset_target(
    local: bool, origin: bool, local_in_origin: bool, origin_in_local: bool
) -> ResetRef | None:
    """The pool's reset target (its §6): of the local and origin's default branch, whichever
    is ahead of the other; origin when they diverged or when only it exists; None when
    neither exists. A slot whose HEAD is merged into it is one the pool reuses as it is, also
    when the other ref is stale."""
    if local and origin:
        if local_in_origin:
            return ResetRef.ORIGIN
        return ResetRef.LOCAL if origin_in_local else ResetRef.ORIGIN
    if origin:
        return ResetRef.ORIGIN
    return ResetRef.LOCAL if local else None
