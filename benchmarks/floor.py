#!/usr/bin/env python3
"""The essential-work floor: the same answer as `fm teardown`, with nothing but the work that
answer cannot do without. Standard library only.

    floor.py [--mandated-imports] [--no-rule5] one TASK  -> {"task", "verdict", "exit_code", ...}
    floor.py [--mandated-imports] [--no-rule5] audit     -> {"audit": true, "tasks": [...]}

The irreducible work, and nothing else:
- read every record of the state dir (any of them may claim TASK's slot);
- ONE `tmux list-panes -a` with a narrow format;
- ONE walk of /proc (stat and cwd of every process; argv[0] only of those it classifies);
- the pool state file of each slot it decides on (each file once), and the slot's `.git`
  back-pointer files (spec §7a);
- rule 5 for the rows that reach it: one `git status` per such slot, a few at a time, plus
  one `git for-each-ref refs/remotes` per project repository (what its slots share).
The rules are docs/spec.md's, in fm's order (spec §5 rules 1-5, §7a, §10's slot claim).

`--mandated-imports` first imports the stack the project is required to use (typer, psutil,
libtmux): the floor that fm, which must use them, can be held to. `--no-rule5` stops where
rule 5 would start (rows that reach it say `proceed`): it isolates rule 5's cost.
"""

from __future__ import annotations

import importlib
import sys

if "--mandated-imports" in sys.argv:
    # Loaded before anything else, as a program built on them would.
    for _name in ("typer", "psutil", "libtmux"):
        importlib.import_module(_name)

# The script's own imports come after the mandated ones, on purpose.
import json
import os
import stat
import subprocess
from bisect import bisect_left
from dataclasses import dataclass, field

SEP = "\x1f"  # tmux under LC_ALL=C prints a tab in a -F format as `_`
# The lists of fm_teardown/model/process_kind.py and model/scaffold.py, restated so this script
# imports nothing of fm; tests/test_benchmark_floor.py keeps them equal.
SHELLS = frozenset({"zsh", "bash", "sh", "dash", "ash", "ksh", "mksh", "tcsh", "csh", "fish"})
AGENT_SUBSTRINGS = ("claude", "codex", "opencode", "gemini", "aider", "grok", "kimi")
AGENT_NAMES = frozenset(
    {
        "cursor-agent",
        "pi",
        "pi-signed",
        "pi-launcher",
        "Pi",
        "muse",
        "goose",
        "amp",
        "qwen",
        "agy",
        "omp",
        "copilot",
    }
)
AGENT_PREFIXES = ("muse-bin-", "cursor-agent")
HARNESS_DIRS = frozenset({*AGENT_SUBSTRINGS, "cursor-agent", "pi", "muse"})
SCAFFOLD = frozenset(
    {
        ".claude/settings.local.json",
        ".fm-grok-turnend",
        ".fm-kimi-turnend",
        ".fm-agy-turnend",
        ".opencode/plugins/fm-turn-end.js",
        ".opencode/plugins/fm-busy-state.js",
    }
)
GIT_WIDTH = 4  # rule 5's git calls run this many at a time
EXIT = {"proceed": 0, "stale": 0, "unlanded": 3, "live-owner": 4, "unsafe": 5, "invalid": 2}
LIVE = frozenset({"alive", "ambiguous", "unreadable"})


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Record:
    id: str
    keys: dict[str, str]
    mtime_ns: int

    def get(self, key: str) -> str:
        return self.keys.get(key, "")


def parse_record(tid: str, text: str, mtime_ns: int) -> Record | str:
    """The record, or why it is invalid (spec §3's identity rules)."""
    keys: dict[str, str] = {}
    counts: dict[str, int] = {}
    for line in text.split("\n"):
        key, sep, value = line.partition("=")
        if sep:
            keys[key] = value
            counts[key] = counts.get(key, 0) + 1
    for key in ("window", "worktree", "project"):
        if counts.get(key) != 1 or not keys[key]:
            return f"{key}= must appear exactly once, non-empty"
    if keys["window"].partition(":")[2] != f"fm-{tid}":
        return "window= does not name this task's window"
    if counts.get("endpoint_task_id", 0) > 1 or keys.get("endpoint_task_id", tid) != tid:
        return "endpoint_task_id= does not name this task"
    if keys.get("tasktmp", f"/tmp/fm-{tid}") != f"/tmp/fm-{tid}":
        return "tasktmp= is not /tmp/fm-<id>"
    if not all(os.path.isabs(keys[k]) for k in ("worktree", "project")):
        return "a path is not absolute"
    return Record(tid, keys, mtime_ns)


def read_records(state: str) -> tuple[dict[str, Record], dict[str, str | None]]:
    """Valid records, and invalid ones with the slot they name (None: cannot be told)."""
    records: dict[str, Record] = {}
    invalid: dict[str, str | None] = {}
    with os.scandir(state) as it:
        names = sorted(e.name for e in it if e.name.endswith(".meta"))
    for name in names:
        tid = name[: -len(".meta")]
        path = os.path.join(state, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            invalid[tid] = None
            continue
        try:
            st = os.fstat(fd)
            text = os.read(fd, 65536).decode("utf-8", "replace") if stat.S_ISREG(st.st_mode) else ""
        finally:
            os.close(fd)
        parsed = parse_record(tid, text, st.st_mtime_ns)
        if isinstance(parsed, Record):
            records[tid] = parsed
        else:
            named = [line[9:] for line in text.split("\n") if line.startswith("worktree=")]
            invalid[tid] = named[0] if len(named) == 1 and os.path.isabs(named[0]) else None
    return records, invalid


class Canon:
    """Canonical paths, each directory resolved once (one lstat per distinct component)."""

    def __init__(self) -> None:
        self.cache: dict[str, str] = {"/": "/"}

    def __call__(self, path: str) -> str:
        hit = self.cache.get(path)
        if hit is not None:
            return hit
        stripped = path.rstrip("/") or "/"
        parent, name = stripped.rsplit("/", 1)
        if name in (".", "..") or "//" in stripped:
            result = os.path.realpath(path)
        else:
            candidate = os.path.join(self(parent or "/"), name)
            result = os.path.realpath(candidate) if os.path.islink(candidate) else candidate
        self.cache[path] = result
        return result


def within(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


@dataclass
class Proc:
    pid: int
    ppid: int
    comm: str
    zombie: bool
    cwd: str | None
    start_ticks: int
    argv0: str | None = None  # read on demand


def walk_proc() -> tuple[dict[int, Proc], dict[int, list[int]]]:
    """One pass over /proc: stat and cwd of every process."""
    procs: dict[int, Proc] = {}
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        rpar = raw.rfind(b")")
        fields = raw[rpar + 2 :].split()
        try:
            cwd: str | None = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            cwd = None
        pid = int(entry)
        comm = raw[raw.find(b"(") + 1 : rpar].decode("utf-8", "replace")
        procs[pid] = Proc(pid, int(fields[1]), comm, fields[0] == b"Z", cwd, int(fields[19]))
        children.setdefault(int(fields[1]), []).append(pid)
    return procs, children


def start_ms(p: Proc) -> float:
    """A process's start time in ms since the epoch (as the pool records its owner's)."""
    with open("/proc/stat", "rb") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime"))
    return (p.start_ticks / os.sysconf("SC_CLK_TCK") + btime) * 1000


def argv0(p: Proc) -> str:
    if p.argv0 is None:
        try:
            with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                p.argv0 = f.read().split(b"\0", 1)[0].decode("utf-8", "replace")
        except OSError:
            p.argv0 = ""
    return p.argv0


def _agent_name(name: str) -> bool:
    base = os.path.basename(name).lstrip("-")
    low = base.lower()
    return bool(base) and (
        any(s in low for s in AGENT_SUBSTRINGS)
        or base in AGENT_NAMES
        or base.startswith(AGENT_PREFIXES)
    )


def classify(p: Proc) -> str:
    """`agent`, `shell` or `other` (spec §4), by process name, then argv[0]."""
    if _agent_name(p.comm):
        return "agent"
    a0 = argv0(p)
    name = p.comm
    if len(name) >= 15 and os.path.basename(a0).startswith(name):
        name = os.path.basename(a0)  # the kernel truncates comm to 15 bytes
    if _agent_name(name) or _agent_name(a0):
        return "agent"
    if os.path.basename(name).lstrip("-") in SHELLS:
        return "shell"
    parts = [x.lstrip(".") for x in a0.split("/") if x]
    return "agent" if any(x in HARNESS_DIRS for x in parts[:-1]) else "other"


# --------------------------------------------------------------------------- the world


@dataclass(frozen=True)
class Lease:
    path: str
    leased: bool
    lease_id: str
    holder: str
    destroying: bool
    owner_pid: int
    owner_started_at: int


@dataclass
class World:
    """What was read once, plus per-task facts computed on first use."""

    home: str | None
    fm_home: str
    state: str
    data: str
    treehouse: str | None
    records: dict[str, Record]
    invalid: dict[str, str | None]
    tmux_status: str  # ok | missing | unreadable
    panes: dict[tuple[str, str], list[tuple[int, bool]]]  # (session, window) -> (pid, dead)
    pane_window: dict[int, tuple[str, str]]
    server_pids: set[int]
    procs: dict[int, Proc]
    children: dict[int, list[int]]
    canon: Canon = field(default_factory=Canon)
    _slots: dict[str, str] = field(default_factory=dict)
    _by_slot: dict[str, list[str]] | None = None
    _sorted: list[str] = field(default_factory=list)
    _by_lease: dict[tuple[str, str], list[str]] | None = None
    _in_slot: dict[str, list[Proc]] = field(default_factory=dict)
    _endpoints: dict[str, tuple[str, frozenset[int]]] = field(default_factory=dict)
    _pools: dict[str, dict[str, Lease] | None] = field(default_factory=dict)

    def slot(self, tid: str) -> str:
        if tid not in self._slots:
            self._slots[tid] = self.canon(self.records[tid].get("worktree"))
        return self._slots[tid]

    def claimants(self, slot: str) -> list[str]:
        """Records whose slot is this one, or nested inside it, or contains it (an index of
        the slots, sorted: ancestors by walking up, descendants by a bisected range)."""
        if self._by_slot is None:
            self._by_slot = {}
            for tid in self.records:
                self._by_slot.setdefault(self.slot(tid), []).append(tid)
            self._sorted = sorted(self._by_slot)
        out = list(self._by_slot.get(slot, ()))
        up = slot
        while up != "/":
            up = os.path.dirname(up)
            out += self._by_slot.get(up, ())
        i = bisect_left(self._sorted, slot + "/")
        while i < len(self._sorted) and self._sorted[i].startswith(slot + "/"):
            out += self._by_slot[self._sorted[i]]
            i += 1
        return out

    def lease_records(self, lease_id: str, holder: str) -> list[str]:
        """Records naming this lease id, or (with no lease id of their own) this holder."""
        if self._by_lease is None:
            self._by_lease = {}
            for tid, r in self.records.items():
                key = ("id", r.get("treehouse_lease")) if r.get("treehouse_lease") else None
                key = key or ("holder", r.get("treehouse_lease_holder"))
                self._by_lease.setdefault(key, []).append(tid)
        hits = self._by_lease.get(("id", lease_id), []) if lease_id else []
        return hits + (self._by_lease.get(("holder", holder), []) if holder else [])

    def endpoint(self, tid: str) -> tuple[str, frozenset[int]]:
        """The endpoint state of a task, and the pids of its panes' process trees."""
        if tid not in self._endpoints:
            self._endpoints[tid] = self._endpoint(self.records[tid])
        return self._endpoints[tid]

    def _endpoint(self, r: Record) -> tuple[str, frozenset[int]]:
        if r.get("backend") not in ("", "tmux"):
            return "unreadable", frozenset()
        if self.tmux_status != "ok":
            return self.tmux_status, frozenset()
        panes = self.panes.get((r.get("window").partition(":")[0], f"fm-{r.id}"), [])
        if not panes:
            return "missing", frozenset()
        pids: set[int] = set()
        kinds: set[str] = set()
        for pane_pid, dead in panes:
            if dead:
                continue
            if pane_pid not in self.procs:
                return "unreadable", frozenset(pids)
            todo = [pane_pid]
            while todo:
                p = self.procs[todo.pop()]
                pids.add(p.pid)
                todo += [c for c in self.children.get(p.pid, ()) if c in self.procs]
                if not p.zombie:
                    kinds.add(classify(p))
        if "agent" in kinds:
            return "alive", frozenset(pids)
        return ("dead" if kinds <= {"shell"} else "ambiguous"), frozenset(pids)

    def endpoint_owner(self, p: Proc) -> str | None:
        """The task whose endpoint (a pane's process tree) `p` is in: walk up to a pane."""
        seen = 0
        pid = p.pid
        while pid > 1 and seen < 64:
            if pid in self.pane_window:
                session, window = self.pane_window[pid]
                tid = window[3:] if window.startswith("fm-") else ""
                r = self.records.get(tid)
                if r is not None and r.get("window").partition(":")[0] == session:
                    return tid
                return None
            parent = self.procs.get(pid)
            pid = parent.ppid if parent else 0
            seen += 1
        return None

    def in_slot(self, slot: str) -> list[Proc]:
        """Processes whose cwd lies inside the slot (one pass over the table per slot asked
        for; the audit asks once for all of them through `index_slots`)."""
        if slot not in self._in_slot:
            self._in_slot[slot] = [
                p for p in self.procs.values() if p.cwd and not p.zombie and within(p.cwd, slot)
            ]
        return self._in_slot[slot]

    def index_slots(self) -> None:
        """Every slot's processes in one pass: each cwd matched against its ancestors."""
        slots = {self.slot(t) for t in self.records}
        for s in slots:
            self._in_slot.setdefault(s, [])
        for p in self.procs.values():
            if not p.cwd or p.zombie or not p.cwd.startswith("/"):
                continue
            path = p.cwd
            while True:
                if path in slots:
                    self._in_slot[path].append(p)
                if path == "/":
                    break
                path = os.path.dirname(path)

    def lease(self, tid: str) -> tuple[Lease | None, str | None]:
        """The pool entry of TASK's slot (each state file read once), or why it cannot be."""
        slot = self.slot(tid)
        recorded = self.records[tid].get("worktree")
        for path in dict.fromkeys(
            os.path.join(os.path.dirname(os.path.dirname(p)), "treehouse-state.json")
            for p in (slot, recorded)
        ):
            if path not in self._pools:
                self._pools[path] = self._read_pool(path)
            entries = self._pools[path]
            if entries is not None and slot in entries:
                return entries[slot], None
        return None, "not managed by the pool"

    def _read_pool(self, path: str) -> dict[str, Lease] | None:
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read())
        except (OSError, ValueError):
            return None
        out: dict[str, Lease] = {}
        for e in doc.get("worktrees") or []:
            out[self.canon(e["path"])] = Lease(
                e["path"],
                bool(e.get("leased")),
                str(e.get("lease_id") or ""),
                str(e.get("lease_holder") or ""),
                bool(e.get("destroying")),
                int(e.get("owner_pid") or 0),
                int(e.get("owner_started_at") or 0),
            )
        return out


def list_panes() -> tuple[str, list[tuple[int, bool, str, str, int]]]:
    """ONE tmux call for the whole server: (status, [(pane pid, dead, session, window,
    server pid)])."""
    sock = os.environ.get("FM_TMUX_SOCKET")
    name = os.environ.get("FM_TMUX_SOCKET_NAME")
    server = [f"-S{sock}"] if sock else [f"-L{name}"] if name else []
    if sock and not (os.path.exists(sock) and stat.S_ISSOCK(os.stat(sock).st_mode)):
        return "unreadable", []
    fmt = SEP.join(["#{pane_pid}", "#{pane_dead}", "#{session_name}", "#{window_name}", "#{pid}"])
    r = subprocess.run(
        ["tmux", "-u", *server, "list-panes", "-a", "-F", fmt],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if r.returncode != 0:
        absent = ("no server running", "can't find session", "No such file", "Connection refused")
        return ("missing" if any(a in r.stderr for a in absent) else "unreadable"), []
    rows = []
    for line in r.stdout.splitlines():
        pid, dead, session, window, server_pid = line.split(SEP)
        rows.append((int(pid), dead == "1", session, window, int(server_pid)))
    return "ok", rows


def load_world() -> World:
    env = os.environ
    fm_home = os.path.abspath(env.get("FM_HOME") or env.get("FM_ROOT_OVERRIDE") or os.getcwd())
    state = os.path.abspath(env.get("FM_STATE_OVERRIDE") or os.path.join(fm_home, "state"))
    data = os.path.abspath(env.get("FM_DATA_OVERRIDE") or os.path.join(fm_home, "data"))
    records, invalid = read_records(state)
    status, rows = list_panes()
    procs, children = walk_proc()
    panes: dict[tuple[str, str], list[tuple[int, bool]]] = {}
    pane_window: dict[int, tuple[str, str]] = {}
    for pid, dead, session, window, _ in rows:
        panes.setdefault((session, window), []).append((pid, dead))
        pane_window[pid] = (session, window)
    treehouse = env.get("FM_TREEHOUSE_BIN") or None
    if treehouse is None:
        from shutil import which  # only when it is not given: shutil is a costly import

        treehouse = which("treehouse")
    home = env.get("HOME")
    canon = Canon()
    return World(
        home=canon(home) if home and os.path.isabs(home) else None,
        fm_home=canon(fm_home),
        state=state,
        data=data,
        treehouse=treehouse,
        records=records,
        invalid=invalid,
        tmux_status=status,
        panes=panes,
        pane_window=pane_window,
        server_pids={r[4] for r in rows},
        procs=procs,
        children=children,
        canon=canon,
    )


# --------------------------------------------------------------------------- deciding


@dataclass
class Answer:
    task: str
    verdict: str
    owners: dict[str, bool] = field(default_factory=dict)  # id -> live
    rule5: bool = False  # rules 1-4 let it go on: rule 5 decides

    def doc(self) -> dict[str, object]:
        return {
            "task": self.task,
            "verdict": self.verdict,
            "exit_code": EXIT[self.verdict],
            "owners": [{"id": k, "live": v} for k, v in sorted(self.owners.items())],
            "rule5": self.rule5,
        }


def lease_is_tasks(e: Lease, r: Record) -> bool:
    if r.get("treehouse_lease"):
        return e.lease_id == r.get("treehouse_lease")
    return e.holder != "" and e.holder in (r.get("treehouse_lease_holder"), r.id)


def lease_task(w: World, e: Lease, tid: str) -> str | None:
    """The other task whose record holds the lease (spec §7a), or None."""
    if not e.leased:
        return None
    if e.holder and e.holder != tid and e.holder in w.records:
        return e.holder
    hits = [t for t in w.lease_records(e.lease_id, e.holder) if t != tid]
    return hits[0] if len(hits) == 1 else None


def owners(w: World, tid: str, others: list[str], entry: Lease | None) -> dict[str, bool]:
    """Every owner of TASK's slot but TASK (spec §4, §7a): id -> live."""
    r = w.records[tid]
    out = {o: w.endpoint(o)[0] in LIVE for o in others}
    if entry is not None and entry.leased and not lease_is_tasks(entry, r):
        holder = lease_task(w, entry, tid)
        if holder is not None:
            out[holder] = w.endpoint(holder)[0] in LIVE
        else:
            out[f"lease:{entry.holder or entry.lease_id}"] = True
    procs = w.in_slot(w.slot(tid))
    if entry is not None and not entry.leased and entry.owner_pid > 0:
        p = w.procs.get(entry.owner_pid)
        if (
            p is not None
            and not p.zombie
            and abs(start_ms(p) - entry.owner_started_at) < 1000
            and w.endpoint_owner(p) != tid
        ):
            out[f"pid:{p.pid}"] = True  # an interactive `treehouse get` holds the slot
    for p in procs:
        owner = w.endpoint_owner(p)
        if owner is not None and owner != tid and w.endpoint(owner)[0] in LIVE:
            out[owner] = True  # another task's live endpoint works in the slot
        elif owner is None and others and classify(p) == "agent":
            out[f"pid:{p.pid}"] = True  # an agent that belongs to no task's endpoint
    return out


def newer(a: Record, b: Record) -> bool | None:
    """Is `a` a more recent launch than `b` (spawn_gen's epoch, started_at, mtime)?"""
    ea = a.get("spawn_gen")[1:].split(".")[0]
    eb = b.get("spawn_gen")[1:].split(".")[0]
    if ea.isdigit() and eb.isdigit() and int(ea) != int(eb):
        return int(ea) > int(eb)
    sa, sb = a.get("started_at"), b.get("started_at")
    if sa and sb and sa != sb:
        return sa > sb
    return None if a.mtime_ns == b.mtime_ns else a.mtime_ns > b.mtime_ns


def is_current(w: World, tid: str, others: list[str], entry: Lease | None) -> bool:
    """Rule 4: is TASK the slot's current owner? (lease, then launch order)."""
    r = w.records[tid]
    if entry is not None and entry.leased and lease_is_tasks(entry, r):
        return True
    if entry is not None and lease_task(w, entry, tid) is not None:
        return False
    newest = r
    for o in others:
        n = newer(w.records[o], newest)
        if n is None:
            return False
        if n:
            newest = w.records[o]
    return newest is r


def tasktmp_problem(path: str) -> bool:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return not stat.S_ISDIR(st.st_mode) or st.st_uid not in (os.geteuid(), 0)


def git_dir_problem(w: World, slot: str, project: str) -> bool:
    """spec §7a: the slot's `.git` must name `<common>/worktrees/<n>`, which names it back."""
    try:
        with open(os.path.join(slot, ".git")) as f:
            target = f.readline().strip().removeprefix("gitdir:").strip()
        with open(os.path.join(target, "gitdir")) as f:
            back = f.readline().strip()
    except OSError:
        return True
    common = w.canon(os.path.join(project, ".git"))
    return os.path.dirname(w.canon(target)) != os.path.join(common, "worktrees") or w.canon(
        back
    ) != os.path.join(slot, ".git")


def decide(w: World, tid: str) -> Answer:
    """Rules 1-4 and the checks before rule 5, in fm's order (spec §5, §7a)."""
    r = w.records[tid]
    slot = w.slot(tid)
    for claimed in w.invalid.values():  # another record that might be a live owner
        if claimed is None or within(w.canon(claimed), slot) or within(slot, w.canon(claimed)):
            return Answer(tid, "unsafe")
    if r.get("tasktmp") and tasktmp_problem(r.get("tasktmp")):
        return Answer(tid, "unsafe")
    for root in (w.canon(r.get("project")), "/", w.home, w.fm_home):
        if root is not None and within(root, slot):
            return Answer(tid, "unsafe")
    others = [o for o in w.claimants(slot) if o != tid]
    entry, _ = w.lease(tid)
    found = owners(w, tid, others, entry)
    if any(found.values()):
        return Answer(tid, "live-owner", found)
    holder = lease_task(w, entry, tid) if entry is not None else None
    if holder is not None and holder not in others:
        others.append(holder)
    if others and not is_current(w, tid, others, entry):
        return Answer(tid, "stale", found)
    kind = r.get("kind") or "ship"
    if not os.path.isdir(slot):
        # Nothing of the tree is left to lose; scouts and secondmates are still checked.
        return Answer(tid, "proceed", found, rule5=kind != "ship")
    if w.treehouse is None or entry is None or entry.destroying:
        return Answer(tid, "unsafe", found)
    if git_dir_problem(w, slot, r.get("project")):
        return Answer(tid, "unsafe", found)
    recorded = r.get("treehouse_lease") or r.get("treehouse_lease_holder")
    if entry.leased or not recorded:
        # The pool's return ends every process in the slot: a tmux server there would take
        # every window of the fleet with it (spec §7a). (Another task's dead endpoint does not
        # block, as in fm: a live one was a live owner above.)
        for p in w.in_slot(slot):
            if p.pid in w.server_pids or p.comm.startswith("tmux"):
                return Answer(tid, "unsafe", found)
    return Answer(tid, "proceed", found, rule5=True)


# --------------------------------------------------------------------------- rule 5


def git_env() -> dict[str, str]:
    return {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}


def run_bounded(argvs: list[list[str]]) -> list[tuple[int, bytes]]:
    """Run the commands GIT_WIDTH at a time; (exit code, stdout) in the order given."""
    env = git_env()
    results: list[tuple[int, bytes]] = [(1, b"")] * len(argvs)
    running: list[tuple[int, subprocess.Popen[bytes]]] = []
    todo = list(enumerate(argvs))
    todo.reverse()
    while todo or running:
        while todo and len(running) < GIT_WIDTH:
            i, argv = todo.pop()
            running.append(
                (
                    i,
                    subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        env=env,
                    ),
                )
            )
        i, proc = running.pop(0)
        out, _ = proc.communicate()
        results[i] = (proc.returncode, out)
    return results


def status_facts(out: bytes) -> tuple[str, bool]:
    """(HEAD's oid, dirty outside the scaffold files) from `status --porcelain=v2 -z`."""
    oid, dirty = "", False
    entries = out.split(b"\0")
    i = 0
    while i < len(entries):
        e = entries[i].decode("utf-8", "replace")
        i += 1
        if e.startswith("# branch.oid "):
            oid = e[len("# branch.oid ") :]
        elif e.startswith("?"):
            dirty = dirty or e[2:] not in SCAFFOLD
        elif e[:1] in ("1", "2", "u"):
            path = e.split(" ", {"1": 8, "2": 9, "u": 10}[e[0]])[-1]
            if e[0] == "2":
                i += 1  # the rename's source path follows
            dirty = dirty or path not in SCAFFOLD
    return oid, dirty


def rule5(w: World, answers: list[Answer]) -> None:
    """Rule 5 for the rows that reach it: landed, or unlanded (what would be lost)."""
    ships = []
    for a in answers:
        r = w.records[a.task]
        kind = r.get("kind") or "ship"
        if kind == "scout":
            a.verdict = (
                "proceed"
                if os.path.isfile(os.path.join(w.data, a.task, "report.md"))
                else "unlanded"
            )
        elif kind == "secondmate":
            home = r.get("home") or r.get("worktree")
            try:
                busy = any(n.endswith(".meta") for n in os.listdir(os.path.join(home, "state")))
            except OSError:
                busy = False
            a.verdict = "unlanded" if busy else "proceed"
        else:
            ships.append(a)
    if not ships:
        return
    projects = sorted({w.records[a.task].get("project") for a in ships})
    status = ["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all"]
    calls = [["git", "-C", w.slot(a.task), *status] for a in ships]
    calls += [
        ["git", "-C", p, "for-each-ref", "--format=%(objectname)", "refs/remotes"] for p in projects
    ]
    results = run_bounded(calls)
    tips = {p: set(results[len(ships) + k][1].decode().split()) for k, p in enumerate(projects)}
    unsure = []
    for a, (code, out) in zip(ships, results, strict=False):
        oid, dirty = status_facts(out)
        if code != 0 or dirty or not oid:
            a.verdict = "unlanded"
        elif oid not in tips[w.records[a.task].get("project")]:
            unsure.append(a)
    # HEAD is not a remote-tracking tip: is it at least on a remote-tracking branch? (The
    # squash-merge checks that would follow are not in the floor: it says unlanded.)
    counts = run_bounded(
        [
            ["git", "-C", w.slot(a.task), "rev-list", "--count", "HEAD", "--not", "--remotes"]
            for a in unsure
        ]
    )
    for a, (code, out) in zip(unsure, counts, strict=False):
        if code != 0 or out.strip() != b"0":
            a.verdict = "unlanded"


# --------------------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    with_rule5 = "--no-rule5" not in argv
    w = load_world()
    if args[:1] == ["audit"]:
        w.index_slots()
        rows = [decide(w, t) for t in sorted(w.records)]
        if with_rule5:
            rule5(w, [a for a in rows if a.rule5])
        rows += [Answer(t, "unsafe") for t in w.invalid]
        tasks = [a.doc() for a in sorted(rows, key=lambda a: a.task)]
        print(json.dumps({"audit": True, "exit_code": 0, "tasks": tasks}))
        return 0
    task = args[1]
    if task not in w.records:
        print(json.dumps(Answer(task, "unsafe" if task in w.invalid else "invalid").doc()))
        return EXIT["unsafe" if task in w.invalid else "invalid"]
    answer = decide(w, task)
    if answer.rule5 and with_rule5:
        rule5(w, [answer])
    print(json.dumps(answer.doc()))
    return EXIT[answer.verdict]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
