"""Who owns TASK's slot (spec §4, §5 rules 3-4, §7a). Pure.

Owners are the other records that claim the slot (the same canonical slot, or one nested
inside it or containing it), any pool lease on the slot that is not TASK's (a lease held by
another task is that task's claim), another task whose live endpoint has a process working in
the slot, an agent in the slot or TASK's temp dir that runs in a pane of no task's endpoint
(any session, any tmux server of the user: spec §14.1), a person's terminal there that no
task holds (a shell, an editor, a REPL in someone's pane, an ssh login: spec §15.4), and
(only when another record also claims the slot) an agent in the slot in no pane. When none is
live, the slot's current owner is resolved from the lease, then the launch order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar, overload

from fm_teardown.decide.census import placement, terminals
from fm_teardown.model.leases import holders_of, lease_name, lease_task
from fm_teardown.model.plan import Owner, OwnerKind
from fm_teardown.model.process_kind import ProcessClass, classify_proc, is_tmux, named
from fm_teardown.model.records import Fleet, Record
from fm_teardown.model.values import value
from fm_teardown.model.world import (
    EndpointState,
    Observation,
    PaneRef,
    PoolEntry,
    Proc,
    SlotClaim,
    SlotFacts,
)

__all__ = [
    "Claimants",
    "CurrentOwner",
    "Excluding",
    "Owners",
    "SlotGroup",
    "claimed_by_other",
    "current_owner",
    "invalid_claimants",
    "lease_is_tasks",
    "live_of",
    "newer_launch",
    "other_claimants",
    "owners_of",
]

T = TypeVar("T")


def lease_is_tasks(entry: PoolEntry, record: Record) -> bool:
    """A lease is TASK's when its id equals the recorded lease id, or, when the record has no
    lease id, when its holder equals the recorded holder, the task id, or `fm-<id>` (the
    holder firstmate's spawn leases the slot as, writing no lease key into the record)."""
    if record.lease_id:
        return entry.lease_id == record.lease_id
    return entry.lease_holder != "" and entry.lease_holder in (
        record.lease_holder,
        *holders_of(record.task_id),
    )


class Excluding(Sequence[T]):
    """`items` without the one at `skip`, then `extra`, without copying `items`: each record
    of a slot shared by k records sees the other k-1 through one of these."""

    def __init__(
        self,
        items: tuple[T, ...],
        skip: int | None,
        extra: tuple[T, ...] = (),
        replaced: Mapping[int, T] | None = None,
    ) -> None:
        self._items, self._skip, self._extra = items, skip, extra
        self._replaced = replaced or {}
        self._n = len(items) - (0 if skip is None else 1)

    def __len__(self) -> int:
        return self._n + len(self._extra)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...
    def __getitem__(self, i: int | slice) -> T | tuple[T, ...]:
        if isinstance(i, slice):
            return tuple(self)[i]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        if i >= self._n:
            return self._extra[i - self._n]
        j = i + (1 if self._skip is not None and i >= self._skip else 0)
        return self._replaced.get(j, self._items[j])

    def __iter__(self) -> Iterator[T]:
        for j, item in enumerate(self._items):
            if j != self._skip:
                yield self._replaced.get(j, item)
        yield from self._extra

    def plus(self, item: T) -> Excluding[T]:
        return Excluding(self._items, self._skip, (*self._extra, item), self._replaced)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Excluding | tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class Claimants(Excluding[str]):
    """The other records claiming a slot; membership by the slot group's index."""

    def __init__(self, group: SlotGroup, task_id: str, extra: tuple[str, ...] = ()) -> None:
        super().__init__(group.members, group.index.get(task_id), extra)
        self._group, self._task = group, task_id

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str) and key != self._task and key in self._group.index:
            return True
        return key in self._extra

    def plus(self, item: str) -> Claimants:
        return Claimants(self._group, self._task, (*self._extra, item))

    @property
    def extra(self) -> tuple[str, ...]:
        return self._extra


class SlotGroup:
    """What every record of one slot shares, worked out once per slot: the records claiming
    it (sorted), the owner each of them is for any other, which are live, and the launch
    order when it is a total one. Each task's owners are this minus itself, so deciding for
    all k records of a slot costs k, not k squared."""

    def __init__(self, slot: str, obs: Observation) -> None:
        same = obs.claimants.get(slot, ())
        nested = obs.nested.get(slot, ())
        self.members: tuple[str, ...] = tuple(sorted({*same, *nested})) if nested else same
        self.index = {t: i for i, t in enumerate(self.members)}
        owners = []
        for other in self.members:
            ep = obs.endpoints[other]
            where = (
                "names this slot"
                if obs.slot_of[other] == slot
                else f"names a slot nested with it ({obs.slot_of[other]})"
            )
            why = f"its record {where}; endpoint {ep.state}: {ep.detail}"
            owners.append(Owner(other, OwnerKind.RECORD, ep.state, ep.state.live, slot, why))
        self.owners: tuple[Owner, ...] = tuple(owners)
        self.live: tuple[int, ...] = tuple(i for i, o in enumerate(owners) if o.live)
        self._epochs: list[int | None] | None = None

    def newest_by_epoch(self, fleet: Fleet, exclude: str) -> str | None:
        """The member (other than `exclude`) with the latest spawn epoch, when every member
        has one and no two are equal (then launch order is that order); else None."""
        if self._epochs is None:
            self._epochs = [_spawn_epoch(fleet.records[t]) for t in self.members]
            known = [e for e in self._epochs if e is not None]
            self._total = len(known) == len(self._epochs) and len(set(known)) == len(known)
            order = sorted(range(len(known)), key=lambda j: known[j], reverse=True)
            self._top = order[:2] if self._total else []
        if not self._total:
            return None
        for j in self._top:
            if self.members[j] != exclude:
                return self.members[j]
        return None

    def epoch_taken(self, epoch: int) -> bool:
        return self._epochs is not None and epoch in set(self._epochs)


def _slot_group(slot: str, obs: Observation) -> SlotGroup:
    key = ("slot-group", slot)
    group = obs.memo.get(key)
    if group is None:
        group = obs.memo[key] = SlotGroup(slot, obs)
    assert isinstance(group, SlotGroup)
    return group


def other_claimants(task_id: str, fleet: Fleet, obs: Observation) -> Claimants:
    """Other records claiming TASK's slot: the same canonical slot, or a nested one."""
    return Claimants(_slot_group(obs.slot_of[task_id], obs), task_id)


class Owners(Excluding[Owner]):
    """The owners of TASK's slot, with the live ones worked out alongside (a slot shared by
    thousands of records must not be scanned once per record)."""

    live_owners: tuple[Owner, ...] = ()


def live_of(owners: Sequence[Owner]) -> list[Owner]:
    """The live owners, in order."""
    if isinstance(owners, Owners):
        return list(owners.live_owners)
    return [o for o in owners if o.live]


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


def owners_of(task_id: str, fleet: Fleet, obs: Observation) -> Owners:
    """The owners of TASK's slot, found in this order (each may add to an owner found before
    it: one owner per task, its reasons joined)."""
    slot = obs.slot_of[task_id]
    group = _slot_group(slot, obs)
    others = Claimants(group, task_id)
    # The records' owners are shared by the slot's group; `owners` holds only what differs
    # for TASK (a lease, a claim, a process adding to a record's owner, or a new owner).
    owners = _Overlay(group, task_id, slot)
    facts = obs.slots.get(slot)
    entry = facts.pool.entry if facts else None
    # 1. the pool lease, when it is not TASK's;
    if entry is not None and entry.leased and not lease_is_tasks(entry, fleet.records[task_id]):
        _by_lease(owners, entry, others, fleet, obs)
    # 2. the slot claim, when it names another task;
    claim = facts.claim if facts is not None else None
    if claim is not None and claim.task is not None and claim.task != task_id:
        _by_claim(owners, claim, fleet, obs)
    # 3. the pool's owner reservation of an unleased slot (an interactive `treehouse get`);
    if entry is not None and not entry.leased and entry.owner_pid > 0:
        _by_reservation(owners, entry, obs)
    # 4. another task's live endpoint working in the slot;
    if facts is not None:
        _by_endpoint(owners, facts, obs)
    # 5. agents of no task's endpoint, in the slot or TASK's temp dir;
    by_pane = _by_agent(owners, facts, bool(others), obs)
    # 6. a person's terminal no task holds.
    _by_terminal(owners, facts, by_pane, obs)
    return owners.result()


def _by_lease(
    owners: _Overlay, entry: PoolEntry, others: Claimants, fleet: Fleet, obs: Observation
) -> None:
    """The pool lease on the slot, not TASK's: its holder's task, or the lease itself."""
    slot = owners.slot
    lease_why = (
        f"holds the pool lease on this slot (lease id {entry.lease_id or 'none'}, "
        f"holder '{entry.lease_holder}')"
    )
    holder = lease_task(entry, owners.task, fleet)
    if holder is not None:
        # The lease is another task's claim; its liveness is that task's endpoint (spec §7a).
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


def _by_claim(owners: _Overlay, claim: SlotClaim, fleet: Fleet, obs: Observation) -> None:
    """The slot claim names another task: the slot was reassigned to it (spec §10). It owns
    the slot live when its record (here, or in the claim's home) has a live endpoint."""
    slot = owners.slot
    assert claim.task is not None
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


def _by_reservation(owners: _Overlay, entry: PoolEntry, obs: Observation) -> None:
    """The process that holds the pool's owner reservation on an unleased slot, while it
    runs and is not TASK's endpoint's."""
    proc = obs.processes.procs.get(entry.owner_pid)
    # gopsutil's create time in ms, from whole seconds on Linux: compare within a second.
    if (
        proc is not None
        and not proc.zombie
        and abs(proc.start_time * 1000 - entry.owner_started_at) < 1000
        and obs.endpoint_owner.get(proc.pid) != owners.task
    ):
        _add_process_owner(
            owners,
            proc,
            f"{_name(proc)} holds the pool's owner reservation on this "
            "slot (an interactive treehouse get)",
        )


def _by_endpoint(owners: _Overlay, facts: SlotFacts, obs: Observation) -> None:
    """Another task's live endpoint working in the slot owns it: ending its process would
    end that task's work (spec §7a). A dead endpoint's shell there is no owner."""
    for proc in facts.procs:
        tid = obs.endpoint_owner.get(proc.pid)
        if tid is None or tid == owners.task:
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
            owners.slot,
            why,
        )


def _by_agent(
    owners: _Overlay, facts: SlotFacts | None, shared: bool, obs: Observation
) -> dict[PaneRef, str]:
    """Agents of no task's endpoint (the slot census, spec §14.1). One in a pane (an
    operator's session, another window, another tmux server) is someone's live work: a live
    owner. One in no pane is TASK's leftover when TASK is the slot's only claimant, else an
    owner (`shared`: another record claims the slot). Returns the owner each pane's agent
    made."""
    task_id = owners.task
    tmp = obs.tasktmp.get(task_id)
    agents = [*(facts.agents if facts is not None else ()), *_agents(tmp.procs if tmp else ())]
    by_pane: dict[PaneRef, str] = {}  # the owner each pane's agent made
    for proc in dict.fromkeys(agents):
        if proc.pid in obs.endpoint_owner or proc.pid in obs.env.protected:
            continue
        place = placement(obs, proc)
        pane = place.pane
        named = pane.window_name[3:] if pane is not None and pane.window_name[:3] == "fm-" else ""
        if pane is not None and named and named != task_id:
            # A window named as a task's endpoint (`fm-<id>`, on any tmux server of the user)
            # whose record fm did not read (another fleet home's, one written since): that
            # task is working here, named as the owner by its id.
            by_pane.setdefault(pane, named)
            if named in owners and owners[named].live:
                continue  # an owner already (the slot claim names it, say)
            why = (
                f"its window runs agent process {_name(proc)} in this slot ({pane}); no "
                "record of it here says more"
            )
            owners[named] = Owner(
                named, OwnerKind.RECORD, EndpointState.ALIVE, True, owners.slot, why
            )
        elif pane is not None:
            # Someone's pane (a window named as TASK's own but not TASK's endpoint included:
            # on another server, say): refused, never signalled as a stranger.
            by_pane.setdefault(pane, f"pid:{proc.pid}")
            _add_process_owner(
                owners,
                proc,
                f"agent process {_name(proc)} runs in {pane}, which is no task's endpoint",
            )
        elif shared and proc in (facts.agents if facts is not None else ()):
            _add_process_owner(
                owners,
                proc,
                f"agent process {_name(proc)} runs in this slot and belongs to no task's endpoint",
            )
    return by_pane


def _by_terminal(
    owners: _Overlay, facts: SlotFacts | None, by_pane: Mapping[PaneRef, str], obs: Observation
) -> None:
    """A person's terminal no task holds (the census's kind 5: a shell, an editor, a REPL in
    someone's pane, an ssh login) is someone's live work, as an agent in a pane is (spec
    §15.4): one owner per pane, or per terminal in no pane. In a pane whose agent is an owner
    already (`by_pane`), it is that owner's too."""
    # A slot that holds a tmux server or client (an operator ran `tmux` there: its first
    # pane's shell is there too) is refused (5) whenever it would be returned and left alone
    # otherwise (spec §7a): nothing lifts that, so it is what the refusal says, and no person
    # there is offered for discarding.
    people = () if _holds_tmux(facts, obs) else terminals(owners.task, obs)
    for person in people:
        held = by_pane.get(person.pane) if person.pane is not None else None
        if held is not None and held in owners:
            prev = owners[held]
            owners[held] = Owner(
                prev.id,
                prev.kind,
                prev.endpoint,
                prev.live,
                prev.slot,
                f"{prev.why}; its pane's terminal works in this slot too: {person.names}",
            )
            continue
        where = f"in {person.pane}" if person.pane is not None else "in no tmux pane"
        tty = f", on terminal {person.tty}" if person.tty else ""
        pid_id = f"pid:{person.pid}"
        owners[pid_id] = Owner(
            pid_id,
            OwnerKind.TERMINAL,
            EndpointState.ALIVE,
            True,
            owners.slot,
            f"a terminal no task holds (someone's shell, editor or REPL): {person.names} "
            f"{where}{tty}",
        )


class _Overlay:
    """TASK's owners: the slot group's record owners (minus TASK) with TASK's own changes on
    top, as a dict would hold them (same order: records first, then owners added)."""

    def __init__(self, group: SlotGroup, task_id: str, slot: str) -> None:
        self._group = group
        self._task = task_id
        self._changed: dict[str, Owner] = {}
        self.task, self.slot = task_id, slot  # whose owners, of which slot

    def __contains__(self, key: str) -> bool:
        return key in self._changed or (key != self._task and key in self._group.index)

    def __getitem__(self, key: str) -> Owner:
        if key in self._changed:
            return self._changed[key]
        if key == self._task or key not in self._group.index:
            raise KeyError(key)
        return self._group.owners[self._group.index[key]]

    def __setitem__(self, key: str, owner: Owner) -> None:
        self._changed[key] = owner

    def result(self) -> Owners:
        group, task, changed = self._group, self._task, self._changed
        mine = group.index.get(task)
        n = len(group.members) - (0 if mine is None else 1)

        def at(j: int) -> int:  # a group member's position in TASK's list (TASK left out)
            return j - 1 if mine is not None and j > mine else j

        replaced: dict[int, Owner] = {}
        added: list[Owner] = []
        live: list[tuple[int, Owner]] = []
        for key, owner in changed.items():
            j = group.index.get(key)
            if j is None or key == task:
                added.append(owner)
                if owner.live:
                    live.append((n + len(added) - 1, owner))
            else:
                replaced[j] = owner
                if owner.live:
                    live.append((at(j), owner))
        live += [
            (at(j), group.owners[j])
            for j in group.live
            if j != mine and group.members[j] not in changed
        ]
        out = Owners(group.owners, mine, tuple(added), replaced)
        out.live_owners = tuple(o for _, o in sorted(live, key=lambda p: p[0]))
        return out


def _holds_tmux(facts: SlotFacts | None, obs: Observation) -> bool:
    servers = obs.inventory.server_pids
    return facts is not None and any(
        p.pid in servers or is_tmux(p.name, p.argv0) for p in facts.procs if not p.zombie
    )


def _agents(procs: tuple[Proc, ...]) -> list[Proc]:
    return [p for p in procs if classify_proc(p) == ProcessClass.AGENT]


def _name(proc: Proc) -> str:
    return named(proc)


def _add_process_owner(owners: _Overlay, proc: Proc, why: str) -> None:
    """A live process owner of unknown task, named `pid:<PID>`."""
    pid_id = f"pid:{proc.pid}"
    owners[pid_id] = Owner(pid_id, OwnerKind.PROCESS, EndpointState.ALIVE, True, owners.slot, why)


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


def current_owner(
    task_id: str, fleet: Fleet, obs: Observation, others: Sequence[str]
) -> CurrentOwner:
    """Whose slot is it now, when none of its owners is live? The slot claim and the pool
    lease, whichever names another task, say the slot was handed on (spec §7a, §10); else TASK's
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
        # The pool says the slot is that task's, whatever the launch order (spec §7a).
        return CurrentOwner(False, holder, f"the pool lease on the slot is {holder}'s")
    if entry is not None and entry.leased and lease_is_tasks(entry, record):
        return CurrentOwner(True, None, "the pool lease on the slot is this task's")
    facts = obs.slots.get(obs.slot_of[task_id])
    if facts is not None and facts.claim is not None and facts.claim.task == task_id:
        return CurrentOwner(True, None, f"the slot claim {facts.claim.path} names this task")
    fast = _newest_by_epoch(task_id, fleet, obs, others)
    newest = task_id if fast is None else fast
    for other in others if fast is None else ():
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


def _newest_by_epoch(
    task_id: str, fleet: Fleet, obs: Observation, others: Sequence[str]
) -> str | None:
    """The most recent launch among TASK and `others` without comparing every pair, when
    their spawn epochs are all known and distinct (then the pairwise comparison is that
    order); None when that cannot be told this way (the caller compares pair by pair)."""
    group = _slot_group(obs.slot_of[task_id], obs)
    top = group.newest_by_epoch(fleet, task_id)
    if top is None or task_id not in group.index:
        return None
    if not isinstance(others, Claimants):
        return None  # maybe not every one of the slot's other records: compare pair by pair
    extras = others.extra
    candidates = [task_id, top]
    seen: set[int] = set()
    for other in extras:
        epoch = _spawn_epoch(fleet.records[other])
        if epoch is None or epoch in seen or group.epoch_taken(epoch):
            return None
        seen.add(epoch)
        candidates.append(other)
    return max(candidates, key=lambda t: _spawn_epoch(fleet.records[t]) or 0)
