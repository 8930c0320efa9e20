"""`fm demo`: replay the incident that `fm` exists for, in a throw-away sandbox.

The incident: four merged tasks were torn down one after another, but their pool slots had
been recycled to live workers, so one worker's endpoint was killed and two live trees were
hard-reset. The demo builds a fleet of the same shape and runs `fm` against it, printing every
command before it runs, checking every exit code and what the world looks like afterwards.

The sandbox is a temp dir holding everything: its own tmux server on a private socket (never
the user's), a bare origin, a project clone, a pool laid out by the packaged treehouse
stand-in itself (`get --lease`, `return`), task records as spawn writes them, and agent
stand-ins (a copy of `sleep` named `claude`). `HOME` points into the sandbox, so neither the
user's config nor their pool is read or written. Everything is removed at the end, on errors
and on Ctrl-C too; `--keep` leaves it running and prints how to explore and remove it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import fm_teardown
from fm_teardown.adapters import runner
from fm_teardown.adapters.interrupts import Interrupted
from fm_teardown.model.errors import ExitCode
from fm_teardown.model.world import EndpointState
from fm_teardown.standin import TREEHOUSE as STANDIN

__all__ = [
    "AGENT",
    "COMMAND_TIMEOUT",
    "SESSION",
    "START_TIMEOUT",
    "DemoError",
    "Play",
    "Sandbox",
    "Task",
    "build",
    "cleanup",
    "demo",
    "tree_hash",
]

SESSION = "fleet"
AGENT = "claude"
# One bound for every command the demo runs: a demo must never hang a terminal.
COMMAND_TIMEOUT = 120.0
# How long an agent stand-in may take to show up in its pane.
START_TIMEOUT = 10.0


class DemoError(Exception):
    """The sandbox could not be built or inspected (one line for the operator)."""


# --------------------------------------------------------------------------- the sandbox


@dataclass
class Sandbox:
    """Where everything lives; every path below `root`."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def fleet(self) -> Path:
        return self.root / "fleet"

    @property
    def state(self) -> Path:
        return self.fleet / "state"

    @property
    def data(self) -> Path:
        return self.fleet / "data"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def pool_root(self) -> Path:
        return self.root / "pool"

    @property
    def origin(self) -> Path:
        return self.root / "origin.git"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def socket(self) -> Path:
        return self.root / "tmux.sock"

    @property
    def treehouse(self) -> Path:
        """A wrapper that runs the stand-in with this Python: its own exec bit never matters
        (a wheel or a copy may lose it)."""
        return self.bin / "treehouse"

    @property
    def agent(self) -> Path:
        return self.bin / AGENT

    def fm_env(self) -> dict[str, str]:
        """The variables that point `fm` at this sandbox (also printed for `--keep`)."""
        return {
            "FM_HOME": str(self.fleet),
            "FM_TMUX_SOCKET": str(self.socket),
            "FM_TREEHOUSE_BIN": str(self.treehouse),
            "TREEHOUSE_ROOT": str(self.pool_root),
        }


@dataclass
class Task:
    id: str
    slot: Path
    lease_id: str
    endpoint: EndpointState  # alive: an agent runs in its window; dead: a shell
    launched: int  # epoch of its launch, for spawn_gen and started_at
    pid: int = 0  # the pane's process (the agent itself for "alive")


def _sandbox_env(sb: Sandbox) -> dict[str, str]:
    """The caller's environment (PATH, TERM, NO_COLOR...) minus everything that would point a
    child at the caller's fleet, tmux, pool, git repository or config. The helper commands
    run with the runner's policy on top of it (`_run`)."""
    dropped_prefixes = ("FM_", "TREEHOUSE_", "GIT_", "TMUX", "_FM_")
    dropped = {"NO_MISTAKES_GATE", "XDG_CONFIG_HOME", "PYTHONPATH", "HOME", "SHELL"}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in dropped and not k.startswith(dropped_prefixes)
    }
    # The children must import the same fm as this process, wherever it was imported from.
    package_parent = str(Path(fm_teardown.__file__).resolve().parent.parent)
    pythonpath = [package_parent, *filter(None, [os.environ.get("PYTHONPATH")])]
    env.update(
        HOME=str(sb.home),
        XDG_CONFIG_HOME=str(sb.home / ".config"),
        PYTHONPATH=os.pathsep.join(pythonpath),
        SHELL="/bin/sh",  # tmux's default-shell for the panes
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="fm demo",
        GIT_AUTHOR_EMAIL="demo@example.invalid",
        GIT_COMMITTER_NAME="fm demo",
        GIT_COMMITTER_EMAIL="demo@example.invalid",
        TREEHOUSE_NO_UPDATE_CHECK="1",
    )
    env.update(sb.fm_env())
    return env


def _run(sb: Sandbox, argv: Sequence[str], cwd: Path, *, check: bool = True) -> str:
    """Run a helper command quietly through the runner; its output. A failure is a
    DemoError."""
    r = runner.run(argv, timeout=COMMAND_TIMEOUT, cwd=str(cwd), base=sb.env)
    if r.rc is None:
        raise DemoError(f"{shlex.join(argv)}: {r.err}")
    out = r.out.decode("utf-8", "replace")
    if check and not r.ok:
        detail = (r.err.strip() or out.strip()).splitlines()
        raise DemoError(f"{shlex.join(argv)} failed: {detail[-1] if detail else r.rc}")
    return out


def _git(sb: Sandbox, cwd: Path, *args: str) -> str:
    # Through the git door as every git command of fm (the runner sends a git argv there).
    return _run(sb, ["git", *args], cwd).strip()


def _tmux_argv(sb: Sandbox, *args: str) -> list[str]:
    # -f /dev/null: none of the user's tmux config; -S: a server of our own; -u: the runner's C
    # locale would have tmux rewrite the tab of a format and any name that is not ASCII.
    return ["tmux", "-u", "-S", str(sb.socket), "-f", "/dev/null", *args]


def _tmux(sb: Sandbox, *args: str) -> str:
    return _run(sb, _tmux_argv(sb, *args), sb.root)


def _standin(sb: Sandbox, *args: str) -> str:
    """The pool stand-in, run from the project as spawn runs treehouse."""
    return _run(sb, [str(sb.treehouse), *args], sb.project)


def _make_dirs_and_tools(sb: Sandbox) -> None:
    for d in (sb.home, sb.state, sb.data, sb.bin, sb.pool_root):
        d.mkdir(parents=True)
    sleep = shutil.which("sleep")
    if sleep is None:
        raise DemoError("no `sleep` on PATH to copy as the agent stand-in")
    # The agent stand-in: fm tells agents by process name, and this one only sleeps.
    shutil.copy(sleep, sb.agent)
    sb.agent.chmod(0o755)
    sb.treehouse.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(STANDIN))} "$@"\n'
    )
    sb.treehouse.chmod(0o755)


def _make_repos(sb: Sandbox) -> None:
    """A bare origin on `main` and a project clone with one commit pushed."""
    _git(sb, sb.root, "init", "-q", "--bare", str(sb.origin))
    _git(sb, sb.origin, "symbolic-ref", "HEAD", "refs/heads/main")
    _git(sb, sb.root, "init", "-q", str(sb.project))
    _git(sb, sb.project, "symbolic-ref", "HEAD", "refs/heads/main")
    _git(sb, sb.project, "remote", "add", "origin", str(sb.origin))
    (sb.project / "README.md").write_text("# project\n\nA project worked on by a fleet.\n")
    _git(sb, sb.project, "add", "README.md")
    _git(sb, sb.project, "commit", "-q", "-m", "init")
    _git(sb, sb.project, "push", "-q", "-u", "origin", "main")
    _git(sb, sb.project, "remote", "set-head", "origin", "main")


def _lease(sb: Sandbox, holder: str) -> tuple[Path, str]:
    """`treehouse get --lease`, as spawn does: the slot path and the lease id."""
    out = _standin(sb, "get", "--lease", "--lease-holder", holder, "--json", "--no-fetch")
    doc = json.loads(out)
    return Path(doc["path"]), str(doc["lease_id"])


def _release(sb: Sandbox, slot: Path) -> None:
    """What an earlier teardown of the slot's task did: the pool has the slot back, but the
    task's record was left behind (the stale record of the incident)."""
    _standin(sb, "return", "--force", str(slot))


def _make_pool(sb: Sandbox) -> dict[str, Task]:
    """Lease slots with the stand-in and recycle two of them, as the real pool would."""
    now = int(time.time())
    alpha_slot, alpha_lease = _lease(sb, "alpha")
    charlie_slot, charlie_lease = _lease(sb, "charlie")
    _release(sb, alpha_slot)
    bravo_slot, bravo_lease = _lease(sb, "bravo")
    _release(sb, charlie_slot)
    delta_slot, delta_lease = _lease(sb, "delta")
    echo_slot, echo_lease = _lease(sb, "echo")
    if (bravo_slot, delta_slot) != (alpha_slot, charlie_slot):
        raise DemoError("the pool stand-in did not recycle the returned slots")
    tasks = [
        Task("alpha", alpha_slot, alpha_lease, EndpointState.DEAD, now - 7200),
        Task("bravo", bravo_slot, bravo_lease, EndpointState.ALIVE, now - 600),
        Task("charlie", charlie_slot, charlie_lease, EndpointState.DEAD, now - 5400),
        Task("delta", delta_slot, delta_lease, EndpointState.DEAD, now - 1800),
        Task("echo", echo_slot, echo_lease, EndpointState.ALIVE, now - 3600),
    ]
    return {t.id: t for t in tasks}


def _make_work(sb: Sandbox, tasks: dict[str, Task]) -> None:
    """What each tree holds: bravo and delta have work there; echo's work has landed."""
    bravo, delta, echo = tasks["bravo"].slot, tasks["delta"].slot, tasks["echo"].slot
    with (bravo / "README.md").open("a") as fh:
        fh.write("\nbravo: half-way through a change.\n")
    (bravo / "bravo-wip.md").write_text("bravo's work in progress: not committed yet\n")
    (delta / "delta-notes.md").write_text("delta's notes, never committed\n")
    (echo / "echo.md").write_text("echo's feature\n")
    _git(sb, echo, "add", "echo.md")
    _git(sb, echo, "commit", "-q", "-m", "echo: add echo.md")
    _git(sb, echo, "push", "-q", "origin", "HEAD:main")  # merged: it is on origin/main


def _write_records(sb: Sandbox, tasks: dict[str, Task]) -> None:
    """`state/<id>.meta` as spawn writes it (spec §3). alpha's and charlie's records still
    name the slots they had before the pool recycled them."""
    for t in tasks.values():
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t.launched))
        lines = [
            f"window={SESSION}:fm-{t.id}",
            f"endpoint_task_id={t.id}",
            f"worktree={t.slot}",
            f"project={sb.project}",
            "kind=ship",
            "harness=claude",
            f"treehouse_lease={t.lease_id}",
            f"treehouse_lease_holder={t.id}",
            f"spawn_gen=s{t.launched}.{os.getpid()}.demo",
            f"started_at={started}",
        ]
        (sb.state / f"{t.id}.meta").write_text("\n".join(lines) + "\n")


def _start_tmux(sb: Sandbox, tasks: dict[str, Task]) -> None:
    """The sandbox's tmux server and one window `fm-<id>` per task."""
    _tmux(sb, "new-session", "-d", "-s", SESSION, "-n", "keep", "-c", str(sb.root), "exec sh")
    # Keep the names given: tmux would rename a window after its running command.
    _tmux(sb, "set-option", "-g", "-w", "automatic-rename", "off")
    _tmux(sb, "set-option", "-g", "-w", "allow-rename", "off")
    for t in tasks.values():
        agent = f"exec {shlex.quote(str(sb.agent))} 100000"
        command = agent if t.endpoint == EndpointState.ALIVE else "exec sh"
        _tmux(
            sb,
            "new-window",
            "-d",
            "-t",
            f"={SESSION}:",
            "-n",
            f"fm-{t.id}",
            "-c",
            str(t.slot),
            command,
        )
    _wait_for_agents(sb, tasks)


def _wait_for_agents(sb: Sandbox, tasks: dict[str, Task]) -> None:
    """Each window's pane pid; an `alive` one only once its agent has replaced the shell."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        panes = _tmux(sb, "list-panes", "-a", "-F", "#{window_name}\t#{pane_pid}")
        pids = dict(line.split("\t") for line in panes.splitlines() if "\t" in line)
        ready = True
        for t in tasks.values():
            t.pid = int(pids.get(f"fm-{t.id}", "0"))
            if t.endpoint == EndpointState.ALIVE and _process_name(t.pid) != AGENT:
                ready = False
        if ready:
            return
        if time.monotonic() > deadline:
            raise DemoError(f"the agent stand-ins did not start within {START_TIMEOUT:g} s")
        time.sleep(0.05)


def build(sb: Sandbox) -> dict[str, Task]:
    """The whole fleet, ready for the play."""
    _make_dirs_and_tools(sb)
    _make_repos(sb)
    tasks = _make_pool(sb)
    _make_work(sb, tasks)
    _write_records(sb, tasks)
    _start_tmux(sb, tasks)
    return tasks


# --------------------------------------------------------------------------- looking at it


def _process_name(pid: int) -> str | None:
    """The process's name, None when it is gone (a zombie counts as gone)."""
    import psutil

    try:
        p = psutil.Process(pid)
        return None if p.status() == psutil.STATUS_ZOMBIE else p.name()
    except psutil.Error:
        return None


def tree_hash(root: Path) -> str:
    """A hash of every file's path, mode and content below `root` (links not followed: a
    link, to a file or to a directory, counts by its target's name). The tests use it too."""
    h = hashlib.sha256()
    if not root.exists():
        return "absent"
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(
            filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        ):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(os.path.relpath(p, root).encode() + b"\0" + str(st.st_mode).encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def _pool_entries(sb: Sandbox) -> list[dict[str, object]]:
    files = list(sb.pool_root.glob(".treehouse/*/treehouse-state.json"))
    if len(files) != 1:
        raise DemoError(f"expected one pool state file under {sb.pool_root}, found {len(files)}")
    doc = json.loads(files[0].read_text())
    return list(doc.get("worktrees") or [])


def _lease_holder(sb: Sandbox, slot: Path) -> str | None:
    """Who holds the pool's lease on `slot` (None: not leased)."""
    for entry in _pool_entries(sb):
        if entry.get("path") == str(slot) and entry.get("leased"):
            return str(entry.get("lease_holder", ""))
    return None


def _windows(sb: Sandbox) -> list[str]:
    return _tmux(sb, "list-windows", "-a", "-F", "#{window_name}").split()


def _last_verdict(sb: Sandbox) -> str | None:
    """The verdict of the last real run, from fm's journal (spec §7)."""
    try:
        lines = (sb.data / "teardown-log.jsonl").read_text().splitlines()
        return str(json.loads(lines[-1])["verdict"])
    except (OSError, IndexError, KeyError, ValueError):
        return None


# --------------------------------------------------------------------------- the play


class Play:
    """Prints and runs the commands, and keeps the list of what did not behave."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb
        self.failures: list[str] = []
        self.tty = sys.stdout.isatty() and "NO_COLOR" not in os.environ

    def _bold(self, text: str) -> str:
        return f"\033[1m{text}\033[0m" if self.tty else text

    def say(self, *lines: str) -> None:
        print("", *(f"# {line}" for line in lines), sep="\n", flush=True)

    def show(self, argv: Sequence[str]) -> None:
        print(self._bold(f"$ {shlex.join(argv)}"), flush=True)

    def fm(self, *args: str, expect: int) -> None:
        """Run `fm` on the sandbox, its output straight to this terminal (rich colours it)."""
        self.show(["fm", *args])
        try:
            rc = subprocess.run(
                [sys.executable, "-m", "fm_teardown", *args],
                cwd=self.sb.fleet,
                env=self.sb.env,
                stdin=subprocess.DEVNULL,
                # The refusals are what the demo shows: into the transcript (stdout), so that
                # `fm demo > demo.txt` or `| less` keeps them, in order.
                stderr=subprocess.STDOUT,
                timeout=COMMAND_TIMEOUT,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = None
        self.check(rc == expect, f"exit {rc}, as expected", f"fm exited {rc}, expected {expect}")

    def command(self, argv: Sequence[str], cwd: Path) -> str:
        """Print a helper command, run it, print its output; returns the output."""
        self.show(argv)
        out = _run(self.sb, argv, cwd)
        print(out, end="", flush=True)
        return out

    def git_status(self, slot: Path) -> str:
        return self.command(["git", "-C", str(slot), "status", "--short"], self.sb.root)

    def check(self, ok: bool, good: str, bad: str) -> None:
        if ok:
            print(f"  ok: {good}", flush=True)
        else:
            self.failures.append(bad)
            print(self._bold(f"  UNEXPECTED: {bad}"), flush=True)

    def verdict(self, want: str) -> None:
        got = _last_verdict(self.sb)
        self.check(got == want, f"verdict {want}", f"fm's journal says verdict {got}, not {want}")

    def agent_alive(self, t: Task) -> None:
        alive = _process_name(t.pid) == AGENT
        self.check(
            alive,
            f"{t.id}'s agent (pid {t.pid}) still runs",
            f"{t.id}'s agent (pid {t.pid}) is gone",
        )

    def tree_kept(self, t: Task, before: str) -> None:
        same = tree_hash(t.slot) == before
        self.check(
            same, f"{t.id}'s tree unchanged (sha256 {before[:12]})", f"{t.id}'s tree changed"
        )

    def lease(self, t: Task, holder: str | None) -> None:
        got = _lease_holder(self.sb, t.slot)
        shown = f"leased to {holder}" if holder else "free"
        self.check(
            got == holder,
            f"pool: slot {t.slot.parent.name} {shown}",
            f"pool: slot {t.slot.parent.name} lease holder {got!r}, expected {holder!r}",
        )

    def pool_state(self) -> None:
        print("  pool state (treehouse-state.json):", flush=True)
        for entry in _pool_entries(self.sb):
            who = f"leased to {entry.get('lease_holder')}" if entry.get("leased") else "free"
            print(f"    slot {entry.get('name')}: {who}", flush=True)


def _introduce(sb: Sandbox, tasks: dict[str, Task]) -> None:
    t = tasks
    print(
        f"fm demo: a throw-away fleet in {sb.root}",
        f"(its own tmux server on {sb.socket}; your tmux, HOME and pool are not touched)",
        "",
        "The incident: four merged tasks were torn down one after another. Their pool slots",
        "had been recycled to live workers, so one worker's endpoint was killed and two live",
        "trees were hard-reset. This fleet has the same shape:",
        f"  alpha    merged; its slot {t['alpha'].slot.parent.name} was recycled to bravo",
        f"  bravo    LIVE: its agent (pid {t['bravo'].pid}) works in that slot, work uncommitted",
        f"  charlie  merged; its slot {t['charlie'].slot.parent.name} was re-leased to delta",
        "  delta    finished (only a shell in its window); its notes are in that slot",
        f"  echo     merged and landed on origin/main; slot {t['echo'].slot.parent.name}",
        sep="\n",
        flush=True,
    )


def _play(sb: Sandbox, tasks: dict[str, Task]) -> list[str]:
    """The incident, replayed; returns what did not behave as expected."""
    p = Play(sb)
    bravo_tree = tree_hash(tasks["bravo"].slot)
    _introduce(sb, tasks)
    p.say("1. The audit: what a teardown of each task would do. It changes nothing.")
    p.fm("teardown", "--dry-run", expect=ExitCode.OK)
    _refusals(p, tasks["bravo"], bravo_tree)
    _stale_slot(p, tasks["charlie"], tasks["delta"])
    _clean_teardown(p, tasks["echo"])
    _untouched(p, tasks["bravo"], bravo_tree)
    return p.failures


def _refusals(p: Play, bravo: Task, bravo_tree: str) -> None:
    """alpha's record names a slot that is bravo's now: the incident's case."""
    p.say(
        "2. alpha is merged, but the slot its record names is bravo's now: the old script",
        "   reset it under bravo's feet. fm refuses (exit 4) and names the live owner.",
    )
    p.fm("teardown", "alpha", expect=ExitCode.LIVE_OWNER)
    p.verdict("live-owner")
    p.agent_alive(bravo)
    p.tree_kept(bravo, bravo_tree)
    p.say("3. --force discards only alpha's OWN unlanded work: it does not lift a live owner.")
    p.fm("teardown", "alpha", "--force", expect=ExitCode.LIVE_OWNER)
    p.verdict("live-owner")
    p.agent_alive(bravo)
    p.tree_kept(bravo, bravo_tree)


def _stale_slot(p: Play, charlie: Task, delta: Task) -> None:
    """charlie's slot went to delta, which is not live: only charlie's own things go."""
    state = p.sb.state
    p.say(
        "4. charlie's slot was re-leased to delta, which is not live: the slot is stale for",
        "   charlie. fm ends charlie's window and record, and leaves the tree alone.",
    )
    delta_tree = tree_hash(delta.slot)
    before = p.git_status(delta.slot)
    p.fm("teardown", "charlie", expect=ExitCode.OK)
    p.verdict("stale")
    after = p.git_status(delta.slot)
    p.check(
        before == after and tree_hash(delta.slot) == delta_tree,
        f"the tree is untouched (sha256 {delta_tree[:12]}): delta's notes are still there",
        "the tree changed",
    )
    p.check(
        not (state / f"{charlie.id}.meta").exists() and (state / f"{delta.id}.meta").exists(),
        "charlie's record cleared, delta's kept",
        "the records are not as expected",
    )
    p.check(
        f"fm-{charlie.id}" not in _windows(p.sb),
        "charlie's window is gone",
        "charlie's window is still there",
    )
    p.lease(delta, "delta")


def _clean_teardown(p: Play, echo: Task) -> None:
    """echo's work has landed and the slot is echo's alone: everything goes."""
    p.say(
        "5. echo's work is on origin/main: a clean teardown. Its window and agent end, the",
        "   slot goes back to the pool, the record goes.",
    )
    p.fm("teardown", "echo", expect=ExitCode.OK)
    p.verdict("proceed")
    p.pool_state()
    p.lease(echo, None)
    p.check(
        _process_name(echo.pid) is None
        and f"fm-{echo.id}" not in _windows(p.sb)
        and not (p.sb.state / f"{echo.id}.meta").exists(),
        "echo's agent, window and record are gone",
        "echo was not fully torn down",
    )


def _untouched(p: Play, bravo: Task, bravo_tree: str) -> None:
    """The point of it all: the live worker still runs, in the tree it left."""
    p.say("6. And bravo, the live worker, was never touched.")
    windows = _tmux_argv(p.sb, "list-windows", "-a", "-F", "#{session_name}:#{window_name}")
    p.command(windows, p.sb.root)
    p.git_status(bravo.slot)
    p.agent_alive(bravo)
    p.tree_kept(bravo, bravo_tree)
    p.lease(bravo, "bravo")
    p.check(
        (p.sb.state / "alpha.meta").exists(),
        "alpha's record is kept, for the operator to decide",
        "alpha's record is gone",
    )


# --------------------------------------------------------------------------- cleaning up


def _sandbox_processes(root: Path) -> list[int]:
    """Processes started from, or working in, the sandbox (agents, shells, the tmux server)."""
    import psutil

    prefix = f"{root}{os.sep}"
    mine: list[int] = []
    for proc in psutil.process_iter(["exe", "cwd"]):
        info = proc.info
        paths = [str(info.get("exe") or ""), str(info.get("cwd") or "")]
        if proc.pid != os.getpid() and any(x.startswith(prefix) or x == str(root) for x in paths):
            mine.append(proc.pid)
    return mine


def _end_processes(root: Path) -> None:
    """SIGTERM, a short wait, SIGKILL: whatever of ours outlived the tmux server."""
    import psutil

    procs: list[psutil.Process] = []
    for pid in _sandbox_processes(root):
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=2)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=2)


def cleanup(sb: Sandbox) -> None:
    """Kill the sandbox's tmux server (its panes' processes get SIGHUP), then anything left,
    then remove the directory."""
    if sb.socket.exists():
        with contextlib.suppress(DemoError):
            _run(sb, _tmux_argv(sb, "kill-server"), sb.root, check=False)
    deadline = time.monotonic() + 3
    while _sandbox_processes(sb.root) and time.monotonic() < deadline:
        time.sleep(0.05)
    _end_processes(sb.root)
    shutil.rmtree(sb.root, ignore_errors=True)


def _fm_command() -> str:
    """How to run this very fm from any shell: `fm` need not be on PATH (a venv that is not
    activated), so the entry point's absolute path, or this interpreter with `-m`."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "fm" and os.path.isfile(argv0):
        return shlex.quote(os.path.abspath(argv0))
    return f"{shlex.quote(sys.executable)} -m fm_teardown"


def _explore(sb: Sandbox) -> None:
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sb.fm_env().items())
    sock, root = shlex.quote(str(sb.socket)), shlex.quote(str(sb.root))
    print(
        "",
        "The sandbox is left running (--keep). To explore it:",
        f"  export {exports}",
        f"  {_fm_command()} teardown --dry-run",
        f"  tmux -S {sock} attach",
        "When you are done:",
        f"  tmux -S {sock} kill-server; rm -rf {root}",
        sep="\n",
        flush=True,
    )


# --------------------------------------------------------------------------- the command


def _missing_tools() -> list[str]:
    return [tool for tool in ("tmux", "git") if shutil.which(tool) is None]


@contextlib.contextmanager
def _handling(signals: Sequence[signal.Signals], handler: Any) -> Iterator[None]:
    """Set `handler` for `signals` for the block (only the main thread can: elsewhere the
    default handlers stay)."""
    saved: dict[signal.Signals, Any] = {}
    for sig in signals:
        with contextlib.suppress(ValueError):
            saved[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM or SIGHUP while the demo runs: clean up as for Ctrl-C.
    raise Interrupted(signal.Signals(signum).name)


# SIGTERM and SIGHUP (a closed terminal) clean up like Ctrl-C does.
_TERMINATION = (signal.SIGTERM, signal.SIGHUP)
# While cleaning up, a second Ctrl-C must not leave a tmux server and its agents behind.
_ALL = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _make_root() -> Path:
    """The sandbox dir. Its name is not `fm-…`: `/tmp/fm-<id>` is a task's temp dir in a real
    fleet. A unix socket path is limited to about 100 bytes, so a long TMPDIR gives way to /tmp."""
    root = Path(tempfile.mkdtemp(prefix="fm_demo.")).resolve()
    if len(str(root / "tmux.sock")) > 100:
        root.rmdir()
        root = Path(tempfile.mkdtemp(prefix="fm_demo.", dir="/tmp")).resolve()
    return root


def demo(*, keep: bool) -> int:
    """Build the sandbox, play the incident, clean up (unless `keep`); the exit code."""
    missing = _missing_tools()
    if missing:
        sys.stderr.write(f"fm demo: needs {' and '.join(missing)} on PATH (not found)\n")
        return ExitCode.UNSAFE
    sb = Sandbox(_make_root())
    sb.env = _sandbox_env(sb)
    played, failures = False, []
    try:
        with _handling(_TERMINATION, _interrupt):
            tasks = build(sb)
            failures = _play(sb, tasks)
            played = True
    except (KeyboardInterrupt, Interrupted):
        sys.stderr.write("\nfm demo: interrupted; cleaning up\n")
        return ExitCode.INTERRUPTED
    except (DemoError, OSError, ValueError) as exc:  # ValueError: bad JSON from the stand-in
        sys.stderr.write(f"fm demo: {exc}\n")
        return ExitCode.FAILED
    finally:
        if not (keep and played):
            with _handling(_ALL, signal.SIG_IGN):
                cleanup(sb)
    code = _conclude(failures)
    if keep:
        _explore(sb)
    return code


def _conclude(failures: list[str]) -> int:
    if failures:
        print("", "fm demo: the world did NOT behave as expected:", sep="\n")
        print("\n".join(f"  - {f}" for f in failures), flush=True)
        return ExitCode.FAILED
    print(
        "",
        "fm demo: every step behaved as expected; nobody's live work was touched.",
        sep="\n",
        flush=True,
    )
    return ExitCode.OK
