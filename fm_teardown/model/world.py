"""What the tool observed of the world, as plain immutable values.

`observe` takes the scans once per run; `decide` reads these values and nothing else, which
is what keeps the decision a pure function that the property tests can hammer. Some values
are worked out on first read, each at most once per run (`observe.lazy.LazyMap`: an
endpoint, a slot's pool lease, claim and `.git`; `Proc.argv0`, through the scan's reader),
so that one task's decision pays only for what it reads. They are worked out in `observe`
(`observe.observation.ready` asks for every value deciding a task reads) before `decide`
runs, so that `decide` reads values only; tests that build observations by hand give every
value up front. This module holds the shapes and reads nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from enum import Enum, StrEnum, auto
from functools import cached_property
from typing import Any, TypeVar, overload

from fm_teardown.model.values import value

__all__ = [
    "BranchUse",
    "ByPid",
    "Cmdline",
    "Endpoint",
    "EndpointOwners",
    "EndpointState",
    "Environment",
    "InventoryDoubt",
    "InventoryStatus",
    "Observation",
    "Orphan",
    "Pane",
    "PaneRef",
    "PaneSeen",
    "Placement",
    "PoolEntry",
    "PoolView",
    "Proc",
    "ProcStat",
    "ProcessTable",
    "SlotClaim",
    "SlotFacts",
    "Spared",
    "TaskTmp",
    "Terminal",
    "TmuxInventory",
    "Why",
    "parse_cmdline",
]


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


@value
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


class InventoryDoubt(StrEnum):
    """Why a listing fm got is still no inventory it may read (docs/spec.md §15.3)."""

    FLEET_ELSEWHERE = "fleet-elsewhere"  # another server holds the records' windows
    SERVER_UNLISTED = "server-unlisted"  # a server that may hold them cannot be listed
    VANTAGE = "vantage"  # fm does not see the files the fleet's server sees


@value
class TmuxInventory:
    """One listing of every pane of the server."""

    status: InventoryStatus
    panes: tuple[Pane, ...] = ()
    error: str | None = None
    doubt: InventoryDoubt | None = None  # ERROR because of it

    @cached_property
    def server_pids(self) -> frozenset[int]:
        return frozenset(p.server_pid for p in self.panes if p.server_pid > 0)

    @cached_property
    def by_window(self) -> Mapping[str, tuple[Pane, ...]]:
        """Window id -> its panes, in the listing's order, worked out once per listing."""
        out: dict[str, list[Pane]] = {}
        for pane in self.panes:
            out.setdefault(pane.window_id, []).append(pane)
        return {w: tuple(panes) for w, panes in out.items()}


class ProcStat:
    """What a process's stat line says of it beside its pid, parent and name
    (`/proc/<pid>/stat`; psutil reads the same): when it started, whether it is a zombie
    (ended, not yet reaped), its controlling terminal and that terminal's foreground process
    group. Given to `Proc` as one value. A plain class, as `Proc` is: the scan makes one per
    process, and every run scans (a `@value` compiles its `__init__` at its first instance)."""

    __slots__ = ("start_time", "tpgid", "tty", "zombie")

    def __init__(
        self, start_time: float, zombie: bool = False, tty: str | None = None, tpgid: int = 0
    ) -> None:
        self.start_time = start_time
        self.zombie = zombie
        self.tty = tty
        self.tpgid = tpgid


# A process's command line as `Proc` is given it: argv[0] alone (no arguments); argv[0], the
# arguments and whether they were cut, as `parse_cmdline` reads them; the reader that reads
# them on first use (`/proc/<pid>/cmdline`'s text by pid); or None, nothing to read (it reads
# as no command line).
Cmdline = str | tuple[str, tuple[str, ...] | None, bool] | Callable[[int], str] | None


class Proc:
    """One process as scanned: an immutable value (treat it so; `__slots__` keeps it small).

    A reader given for its `cmdline` means the scan left its command line out: the reader,
    the scan's own, works it out on first use, as psutil does. A fleet's machine runs
    thousands of processes and fm only ever classifies a few hundred (panes' trees, processes
    in slots), so reading every cmdline up front was a third of the scan. `observe` asks for
    every argv[0] that deciding reads before `decide` runs (`observe.observation.ready`); a
    process gone by then reads as "" (classified by name). This module reads nothing itself.

    The one read gives argv[0] and the arguments after it (`args`, read as far as the
    reader's bound): what an interpreter runs (`node .../@google/gemini-cli/dist/index.js`)
    says which agent it is (`process_kind.classify_proc`). `args` is None when the command
    line could not be read (the process is gone, or hidden); `cut` is True when it was read
    only in part (longer than the bound, or rewritten without its separators)."""

    __slots__ = (
        "_args",
        "_argv0",
        "_cut",
        "_read_cmdline",
        "cwd",
        "name",
        "pid",
        "ppid",
        "start_time",
        "tpgid",
        "tty",
        "zombie",
    )
    _argv0: str | None
    _args: tuple[str, ...] | None
    _cut: bool
    _read_cmdline: Callable[[int], str] | None

    def __init__(
        self, pid: int, ppid: int, name: str, cmdline: Cmdline, cwd: str | None, stat: ProcStat
    ) -> None:
        self.pid = pid
        self.ppid = ppid
        self.name = name
        self._given(cmdline)
        self.cwd = cwd
        self.start_time = stat.start_time
        self.zombie = stat.zombie
        # Its controlling terminal (`/dev/pts/3`), None when it has none or it is not known:
        # names the terminal of a shell fm ends in a slot (perhaps an operator's own).
        self.tty = stat.tty
        # The foreground process group of its controlling terminal as the scan read it (0:
        # none, or not known): who got the keys typed into a pane whose process it is.
        self.tpgid = stat.tpgid

    @classmethod
    def scanned(
        cls,
        pid: int,
        ppid: int,
        name: str,
        cmdline: Cmdline,
        cwd: str | None,
        stated: tuple[float, bool, str | None, int],
    ) -> Proc:
        """`Proc(pid, ppid, name, cmdline, cwd, ProcStat(*stated))` (`stated`: start time,
        zombie, terminal, its foreground group), made without the `ProcStat` in between: the
        scan makes one per process of the machine, thousands."""
        proc = cls.__new__(cls)
        proc.pid, proc.ppid, proc.name, proc.cwd = pid, ppid, name, cwd
        proc._given(cmdline)
        proc.start_time, proc.zombie, proc.tty, proc.tpgid = stated
        return proc

    def _given(self, cmdline: Cmdline) -> None:
        # argv[0] given, and the arguments with it (none unless given); or left out, and both
        # read together on first use.
        if cmdline is None or callable(cmdline):
            self._argv0, self._args, self._cut, self._read_cmdline = None, (), False, cmdline
        elif isinstance(cmdline, str):
            self._argv0, self._args, self._cut, self._read_cmdline = cmdline, (), False, None
        else:
            self._argv0, self._args, self._cut = cmdline
            self._read_cmdline = None

    def _load(self) -> str:
        read = self._read_cmdline
        argv0, self._args, self._cut = parse_cmdline(read(self.pid) if read is not None else "")
        self._argv0 = argv0
        return argv0

    @property
    def argv0(self) -> str:
        argv0 = self._argv0
        return self._load() if argv0 is None else argv0

    @property
    def args(self) -> tuple[str, ...] | None:
        """The arguments after argv[0] as read (None: the command line could not be read)."""
        if self._argv0 is None:
            self._load()
        return self._args

    @property
    def cut(self) -> bool:
        """The command line was read only in part: past the reader's bound, or rewritten."""
        if self._argv0 is None:
            self._load()
        return self._cut

    def _key(self) -> tuple[object, ...]:
        return (self.pid, self.ppid, self.name, self.argv0, self.cwd, self.start_time, self.zombie)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Proc) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.pid, self.start_time))

    def __repr__(self) -> str:
        return (
            f"Proc(pid={self.pid}, ppid={self.ppid}, name={self.name!r}, argv0={self._argv0!r}, "
            f"cwd={self.cwd!r}, start_time={self.start_time}, zombie={self.zombie})"
        )


def parse_cmdline(text: str) -> tuple[str, tuple[str, ...] | None, bool]:
    """argv[0], the arguments after it (None when there is no command line: it could not be
    read) and whether it was read only in part, from `/proc/<pid>/cmdline`'s text: arguments
    each ended by a NUL. A text not ended by one was cut at the reader's bound, or rewritten
    by its process (a title set over it)."""
    if not text:
        return "", None, False
    whole = text.endswith("\0")
    parts = (text[:-1] if whole else text).split("\0")
    return parts[0], tuple(parts[1:]), not whole


@value
class ProcessTable:
    procs: Mapping[int, Proc]
    error: str | None = None
    children: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    # The pids (with a directory) whose mount namespace the scan read as another than fm's,
    # read with their directories; None when the scan did not read them (the census does).
    other_namespace: frozenset[int] | None = None

    def working(self) -> list[tuple[int, str]]:
        """(pid, directory) of every live process whose directory could be read, without
        reading the rest of a process a lazy scan has not read yet (`lazy_procs`). Made once
        per table: the census passes over it for each of the first slots it asks about."""
        return self._working

    @cached_property
    def _working(self) -> list[tuple[int, str]]:
        # A lazy scan's table (`lazy_procs.LazyProcs`) lists them without reading the rest;
        # told by what it can do: that module builds on this one (`ByPid`), and a whole scan
        # (the audit's) does not import it.
        lazy = getattr(self.procs, "working", None)
        if lazy is not None:
            listed: list[tuple[int, str]] = lazy()
            return listed
        return [(p.pid, p.cwd) for p in self.procs.values() if p.cwd and not p.zombie]

    def listed(self, pid: int) -> bool:
        """Was `pid` seen by the scan (a lazy scan: listed, whether or not read since)?"""
        lazy = getattr(self.procs, "listed", None)
        return bool(lazy(pid)) if lazy is not None else pid in self.procs

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


@value
class PaneSeen:
    """One pane of a task's window as the decision saw it: what the endpoint step checks again
    right before it types into the pane or kills its window. Ids alone are no identity (a
    restarted tmux server numbers its windows and panes from `@1`/`%1` again), so each process
    is kept with its start time (0.0: not known)."""

    pane_id: str
    window_id: str
    pid: int  # the pane's own process
    start_time: float
    # The leader of the pane terminal's foreground process group (0: not known).
    foreground: int = 0
    foreground_start: float = 0.0


@value
class PaneRef:
    """The tmux pane a process runs in (its process tree's root is the pane's), on any of the
    user's tmux servers: named `session:window (%N)` and the server's socket."""

    session: str
    window_name: str
    pane_id: str
    server: str  # the server's socket path; "the fleet's server" for the one fm works with

    def __str__(self) -> str:
        return f"tmux pane {self.session}:{self.window_name} ({self.pane_id}) on {self.server}"


@value
class Placement:
    """Where a process working in a slot (or a task's temp dir) runs, as observed: the slot
    census (docs/spec.md §14.1) classes it from this. A process in some task's endpoint has
    `endpoint` set and nothing else is looked up."""

    agent: bool  # an agent by its name or argv[0]
    endpoint: str | None = None  # the task whose endpoint's process trees hold it
    pane: PaneRef | None = None  # the pane of no task's endpoint it runs in, if any
    tty: str | None = None  # its controlling terminal, if any
    # Why where it runs cannot be told (a tmux server holds it whose panes cannot be listed).
    doubt: str | None = None


@value
class Endpoint:
    """A task's endpoint as observed: its state, the windows found and their process trees."""

    state: EndpointState
    detail: str
    window_ids: tuple[str, ...] = ()
    pids: frozenset[int] = frozenset()
    # The panes of `window_ids` and their tmux server (pid, start time), as seen when deciding.
    seen: tuple[PaneSeen, ...] = ()
    server: tuple[int, float] | None = None


@value
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


@value
class PoolView:
    """The pool's facts about one slot, read from `<pool>/treehouse-state.json`.

    `error` set: the state file exists but cannot be read or parsed (leases unknown).
    `entry` None without error: the pool does not manage this slot.
    """

    state_file: str | None
    entry: PoolEntry | None
    error: str | None = None


@value
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
    # The operator's `no-mistakes` on PATH (absolute), None without one: a ship task's plan
    # then starts with its parked-run step (spec §15.5b).
    no_mistakes_bin: str | None = None


@value
class SlotFacts:
    canonical: str
    exists: bool
    pool: PoolView
    agents: tuple[Proc, ...] = ()  # agent processes whose cwd is inside the slot
    procs: tuple[Proc, ...] = ()  # every process whose cwd is inside the slot
    # Why the slot's `.git` is not its own linked worktree of the project (None: it is). Git
    # run in such a slot, and the pool's reset, would act on another tree (spec §7a).
    git_problem: str | None = None
    claim: SlotClaim | None = None  # the slot claim, when there is one
    # Another tool's `git worktree lock` on the slot: its reason ("" without one), None when
    # the slot is not locked.
    lock: str | None = None
    # Worktrees of the project nested inside the slot that another tool locked: (path,
    # reason). Each claims the slot as a lock on the slot does.
    nested_locks: tuple[tuple[str, str], ...] = ()


@value
class SlotClaim:
    """`<slot root>/.fm-slot-owner`, written by firstmate's spawn (spec §10): the task the
    pool slot was handed to, and that task's fleet home."""

    path: str
    task: str | None  # None with `problem` set: it exists but cannot be read or parsed
    home: str | None
    problem: str | None = None
    # When it names a task of ANOTHER home: that task's endpoint state, from its record
    # `<home>/state/<task>.meta` (None: no such record there).
    foreign_endpoint: EndpointState | None = None


@value
class TaskTmp:
    """TASK's `/tmp/fm-<id>` as found on disk, judged without following a link (spec §7a)."""

    path: str
    exists: bool
    # Why it may not be used (a symlink, not a directory, someone else's), else None.
    problem: str | None = None
    procs: tuple[Proc, ...] = ()  # every process whose cwd is inside it


class Spared(StrEnum):
    TMUX_SERVER = "tmux server"
    TMUX = "tmux"
    OTHER_ENDPOINT = "another task's endpoint"
    OWN_PANE = "fm's own pane"
    FM = "fm itself or its ancestor"


@value
class Why:
    kind: Spared
    task: str | None = None  # the task whose endpoint it is (OTHER_ENDPOINT)

    def __str__(self) -> str:
        return f"{self.task}'s endpoint" if self.task else str(self.kind)


_D = TypeVar("_D")
_V = TypeVar("_V")


class ByPid(Mapping[int, _V]):
    """A mapping by pid whose values are looked up one pid at a time (`_look`: None when the
    pid has none), and whose `get` asks only that: not Mapping's, which raises and catches a
    KeyError for every pid without one (an audit asks of thousands of processes, most of
    them in no endpoint). Subclasses give `_look`, `__iter__` and `__len__`."""

    def _look(self, pid: int) -> _V | None:
        raise NotImplementedError

    def __getitem__(self, pid: int) -> _V:
        found = self._look(pid) if isinstance(pid, int) else None
        if found is None:
            raise KeyError(pid)
        return found

    def __contains__(self, pid: object) -> bool:
        return isinstance(pid, int) and self._look(pid) is not None

    @overload
    def get(self, pid: int, /) -> _V | None: ...
    @overload
    def get(self, pid: int, default: _V | _D, /) -> _V | _D: ...
    def get(self, pid: int, default: object = None, /) -> object:
        found = self._look(pid) if isinstance(pid, int) else None
        return default if found is None else found


class EndpointOwners(ByPid[str]):
    """pid -> the task whose endpoint holds it: in the process tree of a live pane of the
    task's window (`roots`: pane pid -> task), or one of the task's own endpoint processes
    remembered from before its window was killed (`exact`). Looked up per pid by walking the
    pid's ancestors, so a one-task run never walks every window's tree."""

    def __init__(self, roots: Mapping[int, str], exact: Mapping[int, str], table: ProcessTable):
        self._roots = roots
        self._exact = exact
        self._procs = table.procs
        self._memo: dict[int, str | None] = {}

    def _look(self, pid: int) -> str | None:
        if pid in self._memo:
            return self._memo[pid]
        found = self._exact.get(pid)
        at: int | None = pid
        seen: set[int] = set()
        while found is None and at is not None and at not in seen and at in self._procs:
            seen.add(at)
            found = self._roots.get(at)
            at = self._procs[at].ppid
        self._memo[pid] = found
        return found

    def __iter__(self) -> Iterator[int]:
        return (pid for pid in [*self._procs, *self._exact] if self._look(pid) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _no_entries() -> tuple[PoolEntry, ...]:
    return ()


@value
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
    # pid -> the task whose endpoint holds it (`EndpointOwners`); None: from `endpoints`.
    endpoint_owners: Mapping[int, str] | None = None
    # Reads every pool state file of the recorded slots (each once) and returns its entries.
    read_pool_entries: Callable[[], tuple[PoolEntry, ...]] = _no_entries
    # pid -> where that process runs, for the processes working in slots and temp dirs (the
    # slot census); a process not in it is placed from the process table alone.
    placements: Mapping[int, Placement] = field(default_factory=dict)

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
        contains it: resetting one resets part of the other (spec §7a). Each slot's
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
    def memo(self) -> dict[Any, Any]:
        """Per-observation memo of what deciding works out once per slot (ownership.py's slot
        groups): every record sharing a slot reuses it, so the audit stays linear."""
        return {}

    @cached_property
    def spared(self) -> Mapping[int, Why]:
        """pid -> why fm never signals it: fm, its ancestors and its pane, computed once per
        observation. tmux and other endpoints `sparing.NeverSignalled` asks per process."""
        out: dict[int, Why] = {}
        protected = self.env.protected
        for pane in self.inventory.panes:
            if pane.pane_pid in protected:
                for proc in self.processes.tree(pane.pane_pid):
                    out[proc.pid] = Why(Spared.OWN_PANE)
        for pid in protected:
            out[pid] = Why(Spared.FM)
        return out

    @cached_property
    def endpoint_owner(self) -> Mapping[int, str]:
        """pid -> the task whose endpoint process trees hold it."""
        if self.endpoint_owners is not None:
            return self.endpoint_owners
        return {pid: tid for tid, ep in self.endpoints.items() for pid in ep.pids}

    @cached_property
    def pool_entries(self) -> tuple[PoolEntry, ...]:
        """Every entry of the pool state files of the recorded slots: the audit's loose ends
        are the leases and agents on slots no record claims."""
        return self.read_pool_entries()


@value
class Orphan:
    """A loose end of the fleet the audit lists (spec §8): what no record accounts for."""

    kind: str  # window | lease | process | file | branch | unfinished-teardown
    id: str
    slot: str | None
    detail: str


@value
class Terminal:
    """Where a shell that no task's endpoint holds runs: someone's terminal cd'd into the
    slot, perhaps the operator's own. Either may be unknown."""

    tty: str | None = None  # its controlling terminal, `/dev/pts/3`
    pane: str | None = None  # the fleet's tmux pane it is, `ops:2 (%5)`


class BranchUse(Enum):
    """What another worktree is doing with the branch."""

    REBASING = auto()
    BISECTING = auto()
    ON = auto()
    UPDATE_REFS = auto()  # a `rebase --update-refs` will move it when it finishes
