"""Observe the world once: one tmux listing, one process scan, each pool state file once.

No subprocess per record: a fleet of a thousand records costs one tmux call and one walk of
the process table, plus one small file read per record and per pool.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace

from fm_teardown.adapters import processes, tmux
from fm_teardown.adapters.pool import PoolReader
from fm_teardown.model.leases import holder_tasks
from fm_teardown.model.paths import Canonicalizer, canonical, tmp_root_of
from fm_teardown.model.process_kind import ProcessClass, classify_proc
from fm_teardown.model.records import (
    Backend,
    Fleet,
    RecordKind,
    RecordProblem,
    parse_record,
    read_meta,
)
from fm_teardown.model.settings import Settings
from fm_teardown.model.world import (
    Endpoint,
    EndpointOwners,
    EndpointState,
    Environment,
    InventoryDoubt,
    InventoryStatus,
    Observation,
    Pane,
    PaneRef,
    Placement,
    PoolEntry,
    Proc,
    ProcessTable,
    SlotClaim,
    SlotFacts,
    TaskTmp,
    TmuxInventory,
)
from fm_teardown.observe.claim import read_claim
from fm_teardown.observe.cwd_identity import Directories
from fm_teardown.observe.endpoint import endpoint_of, moved_windows, panes_by_window
from fm_teardown.observe.gitdir import (
    common_dir,
    locked_worktrees,
    nested_locks,
    read_small,
    slot_git_problem,
    worktree_lock,
)
from fm_teardown.observe.lazy import LazyMap
from fm_teardown.observe.servers import Servers, vantage_problem
from fm_teardown.observe.tasktmp import task_tmp
from fm_teardown.observe.window_identity import seen_of

__all__ = [
    "SETTLE_POLL_SECS",
    "SETTLE_SECS",
    "SlotProcs",
    "assemble",
    "environment",
    "foreign_endpoint",
    "observe",
    "procs_by_slot",
    "ready",
    "settled_scans",
]


def environment(settings: Settings, table: ProcessTable | None = None) -> Environment:
    return Environment(
        home=canonical(settings.home) if settings.home and os.path.isabs(settings.home) else None,
        fm_home=canonical(str(settings.fm_home)),
        treehouse_bin=settings.treehouse_bin,
        protected=_self_and_ancestors(table) if table is not None else frozenset(),
        treehouse_problem=_executable_problem(settings.treehouse_bin),
        state_dir_problem=_writable_problem(str(settings.state_dir)),
        no_mistakes_bin=settings.no_mistakes_bin,
    )


def _executable_problem(path: str | None) -> str | None:
    """Why the pool executable cannot be run; checked while deciding, so that a run never
    ends the endpoint and the processes only to fail at the return (issue 10)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        return (
            f"the pool executable {path} (FM_TREEHOUSE_BIN or PATH) cannot be used: {exc.strerror}"
        )
    if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
        return f"the pool executable {path} (FM_TREEHOUSE_BIN or PATH) is not an executable file"
    return None


def _writable_problem(state_dir: str) -> str | None:
    if os.path.isdir(state_dir) and not os.access(state_dir, os.W_OK | os.X_OK):
        return (
            f"the state dir {state_dir} is not writable: the slot lock cannot be taken and the "
            "record cannot be removed"
        )
    return None


def _self_and_ancestors(table: ProcessTable) -> frozenset[int]:
    pids: set[int] = set()
    pid = os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        proc = table.procs.get(pid)
        if proc is None:
            break
        pid = proc.ppid
    return frozenset(pids)


def observe(
    settings: Settings,
    fleet: Fleet,
    remembered: Mapping[str, tuple[Proc, ...]] | None = None,
    *,
    deciding: Iterable[str] = (),
    canon: Canonicalizer | None = None,
) -> Observation:
    """One pass over the world, with what deciding each task of `deciding` reads worked out
    (`ready`). `canon`: the run's canonicaliser, when loading the fleet already used one.

    Deciding a few tasks reads the processes of a few slots and endpoints: the process scan
    reads every process's directory and the rest of a process only when asked
    (`processes.scan`'s lazy form). Without `deciding` (the audit, a batch's selection) every
    endpoint is asked for, and every process is read at once."""
    deciding = tuple(deciding)
    lazy = bool(deciding)
    inventory, table = settled_scans(settings, lazy=lazy)
    if vantage_problem(inventory, table) is not None:
        # Taken again once: a server that exited between the listing and the scan (its last
        # window just killed) is gone, not seen from elsewhere.
        inventory, table = settled_scans(settings, lazy=lazy)
    windows = {r.window_name for r in fleet.records.values() if r.backend == Backend.TMUX}
    servers = Servers(settings, inventory, table)
    slots = {r.worktree for r in fleet.records.values()}
    doubt = servers.fleet_doubt(windows, slots)
    vantage = vantage_problem(inventory, table) if doubt is None else None
    if vantage is not None:
        doubt = InventoryDoubt.VANTAGE, vantage
    if doubt is not None:
        inventory = TmuxInventory(InventoryStatus.ERROR, error=doubt[1], doubt=doubt[0])
    return ready(assemble(settings, fleet, inventory, table, remembered, canon), fleet, deciding)


def ready(obs: Observation, fleet: Fleet, deciding: Iterable[str]) -> Observation:
    """Work out now everything deciding each task of `deciding` reads, so that `decide` reads
    values only (no stat, no file, no /proc): TASK's slot facts, tasktmp and endpoint; the
    endpoints of every task that may own the slot (the records claiming it or a slot nested
    with it, the records the pool's lease or the slot claim names, the tasks whose endpoints
    have processes working there) and of a secondmate's child tasks; argv[0] of every
    process decide may classify or name. One task's dry run still pays for its own slot and
    its possible owners only; the tasks sharing a slot share its work (the audit stays
    linear)."""
    procs = obs.processes.procs
    by_id, by_holder = fleet.by_lease
    owners: set[str] = set()
    slots_done: set[str] = set()
    for task in deciding:
        owners.add(task)
        tmp = obs.tasktmp.get(task)
        for proc in tmp.procs if tmp is not None else ():
            proc.argv0  # noqa: B018 - classified (tmux?) and named
            obs.placements.get(proc.pid)  # the slot census places it
        if fleet.records[task].kind == RecordKind.SECONDMATE:
            owners.update(k for k in fleet.children if k.startswith(f"{task}/"))
        slot = obs.slot_of[task]
        if slot in slots_done:
            continue
        slots_done.add(slot)
        facts = obs.slots[slot]
        owners.update(obs.claimants.get(slot, ()))
        owners.update(obs.nested.get(slot, ()))
        entry = facts.pool.entry
        if entry is not None:
            if entry.lease_id:
                owners.update(by_id.get(entry.lease_id, ()))
            if entry.lease_holder:
                owners.update(by_holder.get(entry.lease_holder, ()))
                owners.update(holder_tasks(entry.lease_holder))
            reserved = procs.get(entry.owner_pid)
            if reserved is not None:
                reserved.argv0  # noqa: B018 - named as the owner of the reservation
        if facts.claim is not None and facts.claim.task is not None:
            owners.add(facts.claim.task)
        for proc in facts.procs:
            proc.argv0  # noqa: B018 - classified (tmux?) and named
            obs.placements.get(proc.pid)  # the slot census places it
            owner = obs.endpoint_owner.get(proc.pid)
            if owner is not None:
                owners.add(owner)
    for owner in sorted(owners):
        if owner in obs.endpoints:
            obs.endpoints[owner]  # worked out now: decide reads it
    return obs


# How long a listing that shows a window mid-kill is taken again (see `settled_scans`).
SETTLE_SECS = 0.5
SETTLE_POLL_SECS = 0.02


def settled_scans(settings: Settings, *, lazy: bool = False) -> tuple[TmuxInventory, ProcessTable]:
    """The tmux listing and the process scan, taken again while they catch a window mid-kill.

    tmux lists a pane until it has reaped the pane's process and closed the window; caught in
    between (another task's teardown killing its window), the pane's process is missing from
    the scan and that task's endpoint would read `unreadable`, live, failing closed on a task
    that is going away. So while some (not all: a tmux server whose pids this scan cannot see
    is no transient) live panes' processes are missing, both are taken again, for at most
    half a second; past that, the listing stands and the endpoint stays unreadable."""
    deadline = time.monotonic() + SETTLE_SECS
    while True:
        # tmux lists while /proc is read: its answer waits on the server, the scan on the
        # kernel. A pane listed whose process the scan missed reads as mid-kill (taken again);
        # a process scanned whose pane was not yet listed is in no pane, which fails closed,
        # as when a window is made between the two one after the other.
        listing = tmux.list_panes_started(settings)
        table = processes.scan(without_children=True, lazy=lazy)
        inventory = listing()
        if not _mid_kill(inventory, table) or time.monotonic() >= deadline:
            return inventory, table
        time.sleep(SETTLE_POLL_SECS)


def _mid_kill(inventory: TmuxInventory, table: ProcessTable) -> bool:
    if inventory.status != InventoryStatus.OK or table.error:
        return False
    live = [p for p in inventory.panes if not p.dead]
    missing = sum(1 for p in live if not table.listed(p.pane_pid))
    return 0 < missing < len(live)


def assemble(
    settings: Settings,
    fleet: Fleet,
    inventory: TmuxInventory,
    table: ProcessTable,
    remembered: Mapping[str, tuple[Proc, ...]] | None = None,
    canon: Canonicalizer | None = None,
) -> Observation:
    """Everything but the two scans: split out so tests can feed scans of their own.

    `remembered`: processes of a task's endpoint from a snapshot taken before its window was
    killed (the re-check under the lock). Those still running with the same start time are
    still that task's, not unattributed owners of its slot."""
    # Records share projects and pool directories: resolve each directory once (in one run,
    # once for loading the fleet and observing it).
    canon = canon or Canonicalizer()

    slot_of = {tid: canon(r.worktree) for tid, r in fleet.records.items()}
    project_of = {tid: canon(r.project) for tid, r in fleet.records.items()}
    invalid_slots = {
        tid: (tuple(canon(p) for p in bad.claimed) if bad.claimed is not None else None)
        for tid, bad in fleet.invalid.items()
    }
    windows = _Windows(settings, fleet, inventory, table, slot_of, remembered)
    in_slot = SlotProcs(table, slot_of.values())

    def tmp_of(tid: str) -> TaskTmp:
        tmp = task_tmp(fleet.records[tid].tasktmp or "")  # keys: records with a tasktmp
        if not tmp.exists or tmp.problem:
            return tmp
        return replace(tmp, procs=in_slot.get(tmp_root_of(tmp)))

    tasktmp = LazyMap((tid for tid, r in fleet.records.items() if r.tasktmp), tmp_of)
    looks = _SlotLooks(fleet, slot_of, project_of, windows, canon, in_slot)
    slots = LazyMap(looks.first, looks.facts)

    def pool_entries() -> tuple[PoolEntry, ...]:
        for slot in slots:
            slots[slot]  # every slot's pool view read, each state file once
        return looks.reader.entries()

    owners = EndpointOwners(windows.roots(), windows.exact, table)
    placer = _Placer(settings, inventory, table, owners)
    return Observation(
        inventory=inventory,
        processes=table,
        env=environment(settings, table),
        slot_of=slot_of,
        endpoints=LazyMap(fleet.records, windows.endpoint),
        slots=slots,
        invalid_slots=invalid_slots,
        project_of=project_of,
        tasktmp=tasktmp,
        endpoint_owners=owners,
        read_pool_entries=pool_entries,
        placements=LazyMap(table.procs, placer.place),
    )


class _Windows:
    """The tasks' windows in the listing (indexed by session and window name), those moved
    to another session, and TASK's own endpoint processes remembered from before its window
    was killed: each task's endpoint is worked out from them on first read."""

    def __init__(
        self,
        settings: Settings,
        fleet: Fleet,
        inventory: TmuxInventory,
        table: ProcessTable,
        slot_of: Mapping[str, str],
        remembered: Mapping[str, tuple[Proc, ...]] | None,
    ) -> None:
        self._settings, self._fleet = settings, fleet
        self.inventory, self.table = inventory, table
        self.index = panes_by_window(inventory)
        self.moved = _moved(fleet, slot_of, inventory, table)
        self.exact = _still_running(fleet, table, remembered)

    def endpoint(self, tid: str) -> Endpoint:
        inventory, table, record = self.inventory, self.table, self._fleet.records[tid]
        ep = endpoint_of(record, inventory, table, self.index, self.moved.get(tid, ()))
        if ep.window_ids:
            # What the endpoint step checks again before it types or kills (window_identity).
            seen, server = seen_of(ep.window_ids, inventory, table)
            # Made, not `replace`d: an audit makes one per record, and replace costs 9 times.
            ep = Endpoint(ep.state, ep.detail, ep.window_ids, ep.pids, seen, server)
        still = frozenset(pid for pid, t in self.exact.items() if t == tid)
        return replace(ep, pids=ep.pids | still) if still else ep

    def roots(self) -> dict[int, str]:
        """The task each live pane of a task's window belongs to, by the pane's process."""
        roots: dict[int, str] = {}
        if not self.table.error and self.inventory.status == InventoryStatus.OK:
            for tid, r in self._fleet.records.items():
                if r.backend == Backend.TMUX:
                    for pane in [
                        *self.index.get((r.session, r.window_name), ()),
                        *self.moved.get(tid, ()),
                    ]:
                        if not pane.dead:
                            roots[pane.pane_pid] = tid
        return roots

    def foreign_endpoint(self, claim: SlotClaim) -> EndpointState | None:
        return foreign_endpoint(self._settings, claim, self.inventory, self.table, self.index)


def _moved(
    fleet: Fleet, slot_of: Mapping[str, str], inventory: TmuxInventory, table: ProcessTable
) -> dict[str, list[Pane]]:
    """TASK's own window moved to another session (rare: only names met in two sessions)."""
    by_name: dict[str, list[Pane]] = {}
    for pane in inventory.panes:
        by_name.setdefault(pane.window_name, []).append(pane)
    moved: dict[str, list[Pane]] = {}
    if not table.error and inventory.status == InventoryStatus.OK:
        for tid, r in fleet.records.items():
            same = by_name.get(r.window_name, ())
            if r.backend == Backend.TMUX and any(p.session != r.session for p in same):
                found = moved_windows(r, slot_of[tid], by_name, table)
                if found:
                    moved[tid] = found
    return moved


def _still_running(
    fleet: Fleet, table: ProcessTable, remembered: Mapping[str, tuple[Proc, ...]] | None
) -> dict[int, str]:
    """TASK's own endpoint processes from before its window was killed, still running."""
    exact: dict[int, str] = {}
    for tid, procs_seen in (remembered or {}).items():
        if tid not in fleet.records:
            continue
        for p in procs_seen:
            now = table.procs.get(p.pid)
            if now is not None and now.start_time == p.start_time and not now.zombie:
                exact[p.pid] = tid
    return exact


class _SlotLooks:
    """Each slot's facts (its pool lease, claim, `.git`, locks, processes), read on first
    use: by the first record naming the slot, each project's common dir and each
    repository's locked worktrees once for every slot of it."""

    def __init__(
        self,
        fleet: Fleet,
        slot_of: Mapping[str, str],
        project_of: Mapping[str, str],
        windows: _Windows,
        canon: Canonicalizer,
        in_slot: SlotProcs,
    ) -> None:
        self._fleet, self._project_of, self._windows = fleet, project_of, windows
        self._canon, self._in_slot = canon, in_slot
        self.reader = PoolReader(canon)
        self._commons: dict[str, str | None] = {}
        # common dir -> its locked worktrees
        self._locked: dict[str, tuple[tuple[str, str], ...]] = {}
        self.first: dict[str, str] = {}  # canonical slot -> the first record naming it
        for tid in fleet.records:
            self.first.setdefault(slot_of[tid], tid)

    def _locks_of(self, common: str | None) -> tuple[tuple[str, str], ...]:
        # Read once per repository for every slot of it (an audit asks for each).
        if common is None:
            return ()
        if common not in self._locked:
            self._locked[common] = locked_worktrees(common, self._canon)
        return self._locked[common]

    def facts(self, slot: str) -> SlotFacts:
        fleet, reader, canon, commons = self._fleet, self.reader, self._canon, self._commons
        record = fleet.records[self.first[slot]]
        procs = self._in_slot.get(slot)
        exists = os.path.isdir(slot)
        looped = not exists and _link_loop(slot)
        project = self._project_of[self.first[slot]]
        if looped:
            # Limits fail closed: a path whose links cannot be followed to the end is not a
            # slot that is gone; what lies behind it cannot be told.
            return SlotFacts(
                canonical=slot,
                exists=True,
                pool=reader.view(record.worktree, slot),
                procs=procs,
                git_problem=f"its path {slot} cannot be resolved (a link loop, or too many links)",
            )
        if exists and project not in commons:
            commons[project] = common_dir(project)
        claim = read_claim(slot) if exists else None
        # The slot's `.git`, read once for both of its checks ("": unreadable, or no file).
        dotgit = (read_small(os.path.join(slot, ".git")) or "") if exists else None
        if claim is not None and claim.task is not None and claim.task not in fleet.records:
            claim = replace(claim, foreign_endpoint=self._windows.foreign_endpoint(claim))
        return SlotFacts(
            canonical=slot,
            exists=exists,
            claim=claim,
            pool=reader.view(record.worktree, slot),
            agents=tuple(p for p in procs if classify_proc(p) == ProcessClass.AGENT),
            procs=procs,
            git_problem=slot_git_problem(slot, record.project, commons[project], canon, dotgit)
            if dotgit is not None
            else None,
            lock=worktree_lock(slot, canon, dotgit) if dotgit is not None else None,
            nested_locks=nested_locks(slot, self._locks_of(commons[project]))
            if exists and commons[project] is not None
            else (),
        )


class _Placer:
    """Where a process working in a slot runs (the slot census, docs/spec.md §14.1): in some
    task's endpoint; else in a pane of any tmux server of the user (found through the process's
    ancestors: a pane's process is a child of its server, whatever the server binary is
    called and whatever terminal it has: `observe/servers.py`); else nowhere but its terminal,
    if it has one. A process under a tmux server whose panes cannot be listed (its socket
    file removed, say) is in a pane nobody can name: doubt, never "in no pane". Another
    server is listed only when a process in a slot runs under it, once per run."""

    def __init__(
        self,
        settings: Settings,
        inventory: TmuxInventory,
        table: ProcessTable,
        owners: EndpointOwners,
    ) -> None:
        self._table = table
        self._owners = owners
        self._fleet_roots = {p.pane_pid: p for p in inventory.panes if not p.dead}
        self._fleet_servers = inventory.server_pids
        self._fleet_socket = tmux.fleet_socket(settings)
        self._servers = Servers(settings, inventory, table)

    def place(self, pid: int) -> Placement:
        proc = self._table.procs[pid]
        agent = classify_proc(proc) == ProcessClass.AGENT
        owner = self._owners.get(pid)
        if owner is not None:
            return Placement(agent, owner, tty=proc.tty)
        pane, doubt = self._pane_of(proc)
        return Placement(agent, None, pane, proc.tty, doubt)

    def _pane_of(self, proc: Proc) -> tuple[PaneRef | None, str | None]:
        procs = self._table.procs
        at: Proc | None = proc
        seen: set[int] = set()
        while at is not None and at.pid > 1 and at.pid not in seen:
            seen.add(at.pid)
            fleet_pane = self._fleet_roots.get(at.pid)
            if fleet_pane is not None:
                return _ref(fleet_pane, self._fleet_socket), None
            parent = procs.get(at.ppid)
            if parent is not None and self._servers.serves(parent, at):
                server = self._servers.server(parent.pid)
                if server is None or server.listing is None:
                    socket = f" ({server.socket})" if server is not None else ""
                    why = server.why if server is not None else "it holds no socket to ask"
                    return None, (
                        f"{proc.name or proc.argv0} ({proc.pid}) runs under the tmux server "
                        f"pid {parent.pid}{socket}, whose panes cannot be listed: {why}"
                    )
                pane = next((p for p in server.listing.panes if p.pane_pid == at.pid), None)
                if pane is not None:
                    return _ref(pane, server.socket), None
            at = parent
        return None, None


def _ref(pane: Pane, server: str) -> PaneRef:
    return PaneRef(pane.session, pane.window_name, pane.pane_id, server)


def foreign_endpoint(
    settings: Settings,
    claim: SlotClaim,
    inventory: TmuxInventory,
    table: ProcessTable,
    index: dict[tuple[str, str], list[Pane]],
) -> EndpointState | None:
    """The endpoint state of a claim's task that has no record here: its record in the
    claim's home (`<home>/state/<task>.meta`), if any. A record there that cannot be read is
    `unreadable` (live: fail closed)."""
    if claim.home is None or claim.task is None:
        return None
    state_dir = os.path.join(claim.home, "state")
    if canonical(state_dir) == canonical(str(settings.state_dir)):
        return None  # our own state dir: no record of that task here
    meta = os.path.join(state_dir, f"{claim.task}.meta")
    try:
        text, mtime = read_meta(meta)
        record = parse_record(claim.task, meta, text, mtime)
    except FileNotFoundError:
        return None
    except (RecordProblem, OSError):
        return EndpointState.UNREADABLE
    return endpoint_of(record, inventory, table, index).state


class SlotProcs:
    """The processes working inside a slot (their cwd in it), worked out per slot on demand.

    Deciding one task asks for one or two slots: each is one pass over the processes with a
    prefix test. The audit asks for every slot: past a few, one `procs_by_slot` pass for all
    the fleet's slots is cheaper than a pass per slot, and the rest are read from it. Where a
    process's path cannot tell (another mount namespace, a bind mount of a slot), its
    directory does, by device and inode (`cwd_identity`, one pass for all the slots)."""

    FEW = 4

    def __init__(self, table: ProcessTable, slots: Iterable[str]) -> None:
        self._table = table
        self._slots = set(slots)
        self._done: dict[str, tuple[Proc, ...]] = {}
        self._all: dict[str, list[Proc]] | None = None
        self._dirs = Directories(table)

    def get(self, slot: str) -> tuple[Proc, ...]:
        found = self._done.get(slot)
        if found is not None:
            return found
        if self._all is None and len(self._done) >= self.FEW:
            self._all = procs_by_slot(self._slots, self._table)
        if self._all is not None and slot in self._slots:
            found = tuple(self._all.get(slot, ()))
        else:
            under = slot.rstrip("/") + "/"
            procs = self._table.procs
            found = tuple(
                p
                for pid, cwd in self._table.working()
                if (cwd == slot or cwd.startswith(under))
                and (p := procs.get(pid)) is not None
                and _in(p, slot, under)
            )
        found = self._by_directory(slot, found)
        self._done[slot] = found
        return found

    def _by_directory(self, slot: str, by_path: tuple[Proc, ...]) -> tuple[Proc, ...]:
        """`by_path` without the processes of another mount namespace (their paths name
        their own directories), with those whose directory is in the slot."""
        dirs = self._dirs
        inside = dirs.inside(slot)
        if not inside and not dirs.foreign:
            return by_path
        kept = [p for p in by_path if p.pid not in dirs.foreign]
        seen = {p.pid for p in kept}
        return (*kept, *(p for p in inside if p.pid not in seen))


def _in(proc: Proc, slot: str, under: str) -> bool:
    """Does `proc`, as read (a lazy scan reads it after listing its directory), work in
    `slot` (`under`: the slot with a trailing slash)?"""
    cwd = proc.cwd
    if not cwd or proc.zombie:
        return False
    return cwd == slot or cwd.startswith(under)


def _link_loop(path: str) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def procs_by_slot(slots: set[str], table: ProcessTable) -> dict[str, list[Proc]]:
    """Processes whose cwd lies inside each slot. A cwd is matched against its own ancestors
    (processes x path depth, not processes x slots), down to the deepest directory every slot
    lies in, and only when it lies in that directory: most processes of a machine work
    nowhere near a slot."""
    out: dict[str, list[Proc]] = {}
    rooted = [s for s in slots if s.startswith("/")]
    if not rooted:
        return out  # a cwd is always absolute
    floor = os.path.commonpath(rooted)
    under = floor if floor == "/" else floor + "/"
    procs = table.procs
    for pid, cwd in table.working():
        if not (cwd == floor or cwd.startswith(under)):
            continue
        proc = procs.get(pid)
        if proc is None or not _in(proc, floor, under):
            continue
        path = proc.cwd or ""
        while True:
            if path in slots:
                out.setdefault(path, []).append(proc)
            if len(path) <= len(floor):
                break  # no slot lies above the floor
            cut = path.rfind("/")
            path = path[:cut] if cut > 0 else "/"
    return out
