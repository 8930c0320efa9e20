"""What the tool observed of the world, as plain immutable values.

`observe` fills these in once per run; `decide` reads them and nothing else, which is what
keeps the decision a pure function that the property tests can hammer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any


class EndpointState(StrEnum):
    ALIVE = "alive"
    DEAD = "dead"
    MISSING = "missing"
    AMBIGUOUS = "ambiguous"
    UNREADABLE = "unreadable"

    @property
    def live(self) -> bool:
        """Only `dead` and `missing` are not live: everything else fails closed."""
        return self not in (EndpointState.DEAD, EndpointState.MISSING)


@dataclass(frozen=True)
class Pane:
    session: str
    window_name: str
    window_id: str
    pane_id: str
    pane_pid: int
    dead: bool
    # The pid of the tmux server that owns the pane (`#{pid}`): never signalled.
    server_pid: int = 0


class InventoryStatus(StrEnum):
    OK = "ok"
    NO_SERVER = "no-server"  # authoritatively nothing there: every endpoint is missing
    ERROR = "error"  # the listing failed otherwise: every endpoint is unreadable


@dataclass(frozen=True)
class TmuxInventory:
    """One listing of every pane of the server."""

    status: InventoryStatus
    panes: tuple[Pane, ...] = ()
    error: str | None = None

    @cached_property
    def server_pids(self) -> frozenset[int]:
        return frozenset(p.server_pid for p in self.panes if p.server_pid > 0)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    name: str
    argv0: str
    cwd: str | None
    start_time: float
    zombie: bool = False


@dataclass(frozen=True)
class ProcessTable:
    procs: Mapping[int, Proc]
    error: str | None = None
    children: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def tree(self, root: int) -> list[Proc]:
        """`root` and all its descendants that were seen."""
        out: list[Proc] = []
        stack = [root]
        seen: set[int] = set()
        while stack:
            pid = stack.pop()
            if pid in seen or pid not in self.procs:
                continue
            seen.add(pid)
            out.append(self.procs[pid])
            stack.extend(self.children.get(pid, ()))
        return out


@dataclass(frozen=True)
class Endpoint:
    """A task's endpoint as observed: its state, the windows found and their process trees."""

    state: EndpointState
    detail: str
    window_ids: tuple[str, ...] = ()
    pids: frozenset[int] = frozenset()


@dataclass(frozen=True)
class PoolEntry:
    name: str
    path: str  # exactly as the pool's state file stores it
    canonical: str
    leased: bool
    lease_id: str
    lease_holder: str
    destroying: bool = False
    # An interactive `treehouse get` reserves the slot for its own process (pid + start time
    # in milliseconds); the reservation holds while that exact process lives.
    owner_pid: int = 0
    owner_started_at: int = 0


@dataclass(frozen=True)
class PoolView:
    """The pool's facts about one slot, read from `<pool>/treehouse-state.json`.

    `error` set: the state file exists but cannot be read or parsed (leases unknown).
    `entry` None without error: the pool does not manage this slot.
    """

    state_file: str | None
    entry: PoolEntry | None
    error: str | None = None


@dataclass(frozen=True)
class Environment:
    """Facts about the machine that the rules need: the roots never to reset."""

    home: str | None
    fm_home: str
    treehouse_bin: str | None
    # The tool itself and its ancestors: never signalled, and a window holding one of them is
    # never killed (the teardown would kill itself halfway).
    protected: frozenset[int] = frozenset()
    # Why the pool executable cannot be run (it does not exist, is not executable), else None.
    treehouse_problem: str | None = None
    # Why the state dir cannot take the slot lock and lose the record, else None: a real run
    # would find out only after it killed the endpoint.
    state_dir_problem: str | None = None


@dataclass(frozen=True)
class SlotFacts:
    canonical: str
    exists: bool
    pool: PoolView
    agents: tuple[Proc, ...] = ()  # agent processes whose cwd is inside the slot
    procs: tuple[Proc, ...] = ()  # every process whose cwd is inside the slot
    # Why the slot's `.git` is not its own linked worktree of the project (None: it is). Git
    # run in such a slot, and the pool's reset, would act on another tree (CONTRACT §7a).
    git_problem: str | None = None
    claim: SlotClaim | None = None  # the slot claim, when there is one


@dataclass(frozen=True)
class SlotClaim:
    """`<slot root>/.fm-slot-owner`, written by firstmate's spawn (CONTRACT §10): the task the
    pool slot was handed to, and that task's fleet home."""

    path: str
    task: str | None  # None with `problem` set: it exists but cannot be read or parsed
    home: str | None
    problem: str | None = None
    # When it names a task of ANOTHER home: that task's endpoint state, from its record
    # `<home>/state/<task>.meta` (None: no such record there).
    foreign_endpoint: EndpointState | None = None


@dataclass(frozen=True)
class TaskTmp:
    """TASK's `/tmp/fm-<id>` as found on disk, judged without following a link (§7a)."""

    path: str
    exists: bool
    # Why it may not be used (a symlink, not a directory, someone else's), else None.
    problem: str | None = None
    procs: tuple[Proc, ...] = ()  # every process whose cwd is inside it


@dataclass(frozen=True)
class Observation:
    """Everything observed in one pass; indexes are by task id and by canonical slot."""

    inventory: TmuxInventory
    processes: ProcessTable
    env: Environment
    slot_of: Mapping[str, str]  # task id -> canonical slot
    endpoints: Mapping[str, Endpoint]  # task id -> endpoint
    slots: Mapping[str, SlotFacts]  # canonical slot -> facts
    invalid_slots: Mapping[str, tuple[str, ...] | None]  # invalid record id -> canonical slots
    project_of: Mapping[str, str]  # task id -> canonical project
    tasktmp: Mapping[str, TaskTmp] = field(default_factory=dict)  # task id -> its tasktmp
    # Every entry of the pool state files read (the pools of the recorded slots): the audit's
    # loose ends are the leases and agents on slots no record claims.
    pool_entries: tuple[PoolEntry, ...] = ()

    # Derived indexes, computed once per observation, so that deciding for every task of a
    # fleet stays linear.
    @cached_property
    def claimants(self) -> Mapping[str, tuple[str, ...]]:
        """Canonical slot -> the task ids whose records claim it, sorted."""
        out: dict[str, list[str]] = {}
        for tid in sorted(self.slot_of):
            out.setdefault(self.slot_of[tid], []).append(tid)
        return {slot: tuple(tids) for slot, tids in out.items()}

    @cached_property
    def nested(self) -> Mapping[str, tuple[str, ...]]:
        """Canonical slot -> the task ids whose slot lies strictly inside it or strictly
        contains it: resetting one resets part of the other (CONTRACT §7a). Each slot's
        ancestors are looked up, so this costs slots x path depth."""
        out: dict[str, set[str]] = {}
        claimed = self.claimants
        for slot in claimed:
            parent = slot
            while parent != "/":
                parent = parent.rsplit("/", 1)[0] or "/"
                if parent in claimed:
                    out.setdefault(parent, set()).update(claimed[slot])
                    out.setdefault(slot, set()).update(claimed[parent])
        return {slot: tuple(sorted(tids)) for slot, tids in out.items()}

    @cached_property
    def tmux_pids(self) -> frozenset[int]:
        """Every tmux server (the listing's `#{pid}`) and every process named tmux."""
        from fm_teardown.endpoint import is_tmux

        named = {p.pid for p in self.processes.procs.values() if is_tmux(p.name, p.argv0)}
        return frozenset(named | self.inventory.server_pids)

    @cached_property
    def spared(self) -> dict[int, Any]:
        """pid -> why fm never signals it (`sparing.Why`), for every task at once."""
        from fm_teardown.sparing import spared_base

        return spared_base(self)

    @cached_property
    def endpoint_owner(self) -> Mapping[int, str]:
        """pid -> the task whose endpoint process trees hold it."""
        return {pid: tid for tid, ep in self.endpoints.items() for pid in ep.pids}
