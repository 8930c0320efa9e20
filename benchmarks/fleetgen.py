"""Synthetic fleets for the benchmarks: real tmux, real git, real processes, in a temp dir.

A fleet is what `fm teardown` reads in production, made small enough to build in seconds:
- task records `state/<id>.meta`, two per slot (stale records on recycled slots are what the
  live-owner rule is about);
- slots laid out as a treehouse pool (`<pool>/<N>/project` + `<pool>/treehouse-state.json`),
  real `git worktree add --detach` worktrees of one project with a bare origin (or plain
  directories with `git_slots=False`);
- one tmux window per record on a PRIVATE tmux server (its own socket; never the user's),
  half of them running an agent stand-in (a copy of /bin/sleep named `claude`, as
  tests/fleet.py does), the rest a bare shell;
- idle processes (`sleep`) that pad the process table as a real machine's would.

Nothing here touches the user's tmux server, HOME or pool. `Fleet.close()` kills what it
started and removes the temp dir; `reap_orphans()` collects the zombies (see DESIGN-NOTES:
pid 1 may never reap them, and zombies would bloat later fleets' process tables).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The pool stand-in: the one place that names its path (it may move).
STANDIN_TREEHOUSE = REPO / "fm_teardown" / "standin" / "treehouse"
SESSION = "fleet"
AGENT = "claude"
# Spawn epochs: older record of a pair first; any fixed base keeps the fleets identical.
EPOCH = 1_764_000_000
# tmux is driven in batches of this many commands per client call (one call per window
# would dominate the build time of a 1000-window fleet).
TMUX_BATCH = 100
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Make this process the reaper of orphans it leaves behind (the tmux server daemonises;
    pane processes outlive it for a moment), so `reap_orphans` can collect them."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> None:
    """Collect every exited child (orphans re-parented to us included), without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed: {r.stderr.strip()[:300]}")
    return r.stdout


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    return run(["git", "-C", str(cwd), *args], env=env)


# --------------------------------------------------------------------------- the layout


@dataclass(frozen=True)
class SlotPlan:
    index: int  # the pool slot number N in <pool>/N/project
    leased: bool
    holder: str  # lease holder (a task id), "" when unleased
    lease_id: str
    dirty: bool = False  # an untracked file of real work: rule 5 refuses (unlanded)
    scaffold: bool = False  # only a harness scaffold file: rule 5 must ignore it


@dataclass(frozen=True)
class TaskPlan:
    id: str
    slot: int
    alive: bool  # its window runs the agent stand-in; else a bare shell (dead endpoint)
    spawn_epoch: int
    lease_id: str | None = None  # recorded treehouse_lease (None: the key is absent)
    lease_holder: str | None = None
    # Its window's shell sits in the slot; else in the fleet home (it moved out, or its slot
    # was recycled under it), so that the other task of the pair can return the slot.
    in_slot: bool = True


@dataclass(frozen=True)
class Layout:
    slots: tuple[SlotPlan, ...]
    tasks: tuple[TaskPlan, ...]
    target: str  # the measured one-task case
    target_owner: str  # the live task that also claims the target's slot


def task_id(i: int) -> str:
    return f"b{i:04d}"


def lease(n: int, generation: int) -> str:
    return f"{generation:08x}{n:024x}"


def mixed_layout(records: int) -> Layout:
    """N records over N/2 slots, pairs (older, newer) on each slot, four pair kinds in turn:

    0 recycled, new task working: older dead (its shell moved out), newer alive and leased;
      the older is refused (live-owner: the measured case), the newer reaches rule 5
    1 double-booked, both working: older alive and leased, newer alive: both live-owner
    2 recycled, both finished: both dead (the older's shell moved out), newer leased; the
      older is stale (the lease is the newer's), the newer reaches rule 5
    3 legacy (no lease keys), slot unleased: older dead with its shell still in the slot,
      newer alive: the older is refused (live-owner); the newer is the latest launch
    Half the records run an agent. Every other kind-0 slot holds uncommitted work (rule 5
    refuses: unlanded) and every other kind-2 slot only a scaffold file (rule 5 ignores it).
    The measured one-task case is the older record of the last kind-0 pair.
    """
    if records < 8 or records % 2:
        raise ValueError("a mixed fleet needs an even number of records, at least 8")
    slots: list[SlotPlan] = []
    tasks: list[TaskPlan] = []
    for k in range(records // 2):
        kind = k % 4
        old, new = task_id(2 * k), task_id(2 * k + 1)
        n = k + 1
        old_alive, new_alive = {0: (False, True), 1: (True, True), 2: (False, False)}.get(
            kind, (False, True)
        )
        holder = {0: new, 1: old, 2: new}.get(kind, "")
        current = lease(n, 2)
        slots.append(
            SlotPlan(
                n,
                leased=bool(holder),
                holder=holder,
                lease_id=current if holder else "",
                dirty=kind == 0 and k % 8 == 0,
                scaffold=kind == 2 and k % 8 == 2,
            )
        )
        for tid, alive, epoch in (
            (old, old_alive, EPOCH + 2 * k),
            (new, new_alive, EPOCH + 2 * k + 1),
        ):
            if kind == 3:
                tasks.append(TaskPlan(tid, n, alive, epoch))
                continue
            # The lease holder recorded the current lease; the other one an older lease of
            # the same slot (it was its lease before the slot was recycled).
            lid = current if tid == holder else lease(n, 1)
            moved = kind in (0, 2) and tid == old
            tasks.append(TaskPlan(tid, n, alive, epoch, lid, tid, in_slot=not moved))
    last0 = max(k for k in range(records // 2) if k % 4 == 0)
    return Layout(tuple(slots), tuple(tasks), task_id(2 * last0), task_id(2 * last0 + 1))


def act_layout() -> Layout:
    """A small fleet for timing a real teardown: the target, finished (a bare shell in its
    window), alone on its own clean slot leased to it; three neighbours on their own slots."""
    slots = tuple(SlotPlan(n, True, task_id(n - 1), lease(n, 2)) for n in range(1, 5))
    tasks = tuple(
        TaskPlan(task_id(n - 1), n, n % 2 == 0, EPOCH + n, lease(n, 2), task_id(n - 1))
        for n in range(1, 5)
    )
    return Layout(slots, tasks, task_id(0), "")


# --------------------------------------------------------------------------- the fleet


@dataclass
class Fleet:
    layout: Layout
    idle: int = 200
    git_slots: bool = True
    root: Path = field(init=False)
    idle_procs: list[subprocess.Popen[bytes]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        # Short path: tmux socket paths are limited to about 100 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="fmb", dir="/tmp"))

    # -- paths ------------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def fm_home(self) -> Path:
        return self.root / "fleet"

    @property
    def state(self) -> Path:
        return self.fm_home / "state"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def origin(self) -> Path:
        return self.root / "origin.git"

    @property
    def pool(self) -> Path:
        # The stand-in's pool naming: <root>/.treehouse/<repo>-<sha256(origin url)[:6]>.
        h = hashlib.sha256(str(self.origin).encode()).hexdigest()[:6]
        return self.root / "pool" / ".treehouse" / f"project-{h}"

    @property
    def socket(self) -> Path:
        return self.root / "tmux.sock"

    @property
    def agent_bin(self) -> Path:
        return self.root / "bin" / AGENT

    def slot_path(self, n: int) -> Path:
        return self.pool / str(n) / "project"

    # -- building ---------------------------------------------------------------------------
    def build(self) -> Fleet:
        for d in (self.home, self.state, self.fm_home / "data", self.agent_bin.parent):
            d.mkdir(parents=True, exist_ok=True)
        shutil.copy("/bin/sleep", self.agent_bin)
        self._project()
        self._slots()
        self._records()
        self._windows()
        self._idle()
        self.wait_ready()
        return self

    def _project(self) -> None:
        git(self.root, "init", "-q", "--bare", "-b", "main", str(self.origin))
        git(self.root, "clone", "-q", str(self.origin), str(self.project))
        git(self.project, "config", "user.name", "Bench")
        git(self.project, "config", "user.email", "bench@example.invalid")
        (self.project / "README").write_text("benchmark project\n")
        git(self.project, "add", "-A")
        git(self.project, "commit", "-q", "-m", "init")
        git(self.project, "push", "-q", "origin", "main")
        git(self.project, "remote", "set-head", "origin", "main")

    def _slots(self) -> None:
        self.pool.mkdir(parents=True)
        entries = []
        for s in self.layout.slots:
            path = self.slot_path(s.index)
            path.parent.mkdir(parents=True)
            if self.git_slots:
                git(self.project, "worktree", "add", "-q", "--detach", str(path), "main")
            else:
                path.mkdir()
            if s.dirty:
                (path / "notes.txt").write_text("work not committed\n")
            if s.scaffold:
                (path / ".claude").mkdir()
                (path / ".claude" / "settings.local.json").write_text("{}\n")
            entry: dict[str, object] = {
                "name": str(s.index),
                "path": str(path),
                "created_at": "2026-12-01T00:00:00Z",
            }
            if s.leased:
                entry.update(
                    leased=True,
                    lease_id=s.lease_id,
                    lease_holder=s.holder,
                    leased_at="2026-12-01T00:00:00Z",
                )
            entries.append(entry)
        (self.pool / "treehouse-state.json").write_text(
            json.dumps({"worktrees": entries}, indent=2)
        )

    def _records(self) -> None:
        for t in self.layout.tasks:
            lines = [
                f"window={SESSION}:fm-{t.id}",
                f"endpoint_task_id={t.id}",
                f"worktree={self.slot_path(t.slot)}",
                f"project={self.project}",
                "harness=claude",
                "kind=ship",
                f"tasktmp=/tmp/fm-{t.id}",
                f"spawn_gen=s{t.spawn_epoch}.{1000 + t.slot}.ab12",
            ]
            if t.lease_id is not None:
                lines.append(f"treehouse_lease={t.lease_id}")
            if t.lease_holder is not None:
                lines.append(f"treehouse_lease_holder={t.lease_holder}")
            (self.state / f"{t.id}.meta").write_text("\n".join(lines) + "\n")

    def tmux_env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "SHELL": "/bin/sh",
            "TERM": "xterm",
            "LANG": "C.UTF-8",
        }

    def tmux(self, *args: str) -> str:
        return run(
            ["tmux", "-u", "-S", str(self.socket), "-f", "/dev/null", *args], env=self.tmux_env()
        )

    def _windows(self) -> None:
        self.tmux(
            *("new-session", "-d", "-s", SESSION, "-n", "keep", "sh"),
            *(";", "set-option", "-g", "-w", "automatic-rename", "off"),
            *(";", "set-option", "-g", "-w", "allow-rename", "off"),
            *(";", "set-option", "-g", "history-limit", "100"),
        )
        cmds: list[list[str]] = []
        for t in self.layout.tasks:
            # An agent launched by a shell, as a harness wrapper does; a finished task's
            # window is left with only its shell.
            command = f"sh -c '{self.agent_bin} 100000; exec sh'" if t.alive else "sh"
            cwd = str(self.slot_path(t.slot) if t.in_slot else self.fm_home)
            cmds.append(
                ["new-window", "-d", "-t", f"={SESSION}:", "-n", f"fm-{t.id}", "-c", cwd, command]
            )
        for i in range(0, len(cmds), TMUX_BATCH):
            argv: list[str] = []
            for c in cmds[i : i + TMUX_BATCH]:
                argv += [*([";"] if argv else []), *c]
            self.tmux(*argv)

    def _idle(self) -> None:
        idle_dir = self.root / "idle"
        idle_dir.mkdir()
        for _ in range(self.idle):
            self.idle_procs.append(
                subprocess.Popen(
                    ["sleep", "100000"],
                    cwd=idle_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    def agents_running(self) -> int:
        """How many agent stand-ins run (by exe path: ours only, not another fleet's)."""
        n = 0
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/exe") == str(self.agent_bin):
                        n += 1
        return n

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Poll until every agent stand-in runs (tmux starts panes asynchronously)."""
        want = sum(t.alive for t in self.layout.tasks)
        deadline = time.monotonic() + timeout
        while self.agents_running() < want:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.agents_running()} of {want} agents started")
            time.sleep(0.05)

    # -- running ----------------------------------------------------------------------------
    def env(self, fm_bin_dir: str) -> dict[str, str]:
        """The environment fm (and the floor and the baseline) run in: this fleet only."""
        return {
            "PATH": f"{fm_bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.home),
            "FM_HOME": str(self.fm_home),
            "FM_TMUX_SOCKET": str(self.socket),
            "FM_TREEHOUSE_BIN": str(STANDIN_TREEHOUSE),
            "TREEHOUSE_ROOT": str(self.root / "pool"),
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def slot_of(self, tid: str) -> Path:
        return self.slot_path(next(t.slot for t in self.layout.tasks if t.id == tid))

    def lease_of(self, tid: str) -> str:
        return next(t.lease_id or "" for t in self.layout.tasks if t.id == tid)

    def end_window(self, tid: str, timeout: float = 10.0) -> None:
        """Kill a task's window and poll until nothing runs in its slot any more (what fm's
        endpoint step leaves for the pool return to find)."""
        self.tmux("kill-window", "-t", f"={SESSION}:=fm-{tid}")
        slot = str(self.slot_of(tid)) + "/"
        deadline = time.monotonic() + timeout
        while any((cwd + "/").startswith(slot) for cwd in self._cwds()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes still run in {slot} after its window was killed")
            reap_orphans()
            time.sleep(0.02)

    @staticmethod
    def _cwds() -> list[str]:
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    out.append(os.readlink(f"/proc/{entry}/cwd"))
        return out

    # -- cleaning up ------------------------------------------------------------------------
    def close(self) -> None:
        for p in self.idle_procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        with contextlib.suppress(RuntimeError, OSError):
            self.tmux("kill-server")
        self._kill_leftovers()
        reap_orphans()
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill_leftovers(self) -> None:
        """SIGKILL whatever still runs with its cwd or executable in this fleet's tree
        (a pane process that outlived the server), then poll until it is gone."""
        prefix = str(self.root) + "/"
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            left = []
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) == os.getpid():
                    continue
                with contextlib.suppress(OSError):
                    where = os.readlink(f"/proc/{entry}/cwd") + "/"
                    exe = os.readlink(f"/proc/{entry}/exe")
                    if where.startswith(prefix) or exe.startswith(prefix):
                        left.append(int(entry))
            if not left:
                return
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            reap_orphans()
            time.sleep(0.05)


@contextmanager
def built(layout: Layout, idle: int) -> Iterator[Fleet]:
    """A fleet for the duration of a `with` block: cleaned up even when building fails or the
    run is interrupted half-way."""
    fleet = Fleet(layout, idle=idle)
    try:
        yield fleet.build()
    finally:
        fleet.close()
