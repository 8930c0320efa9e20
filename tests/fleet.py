"""Real fleets for tests: a private tmux server, git repos laid out as a treehouse pool, task
records, and agent stand-ins (a copy of `sleep` named `claude`).

Nothing here touches the user's own tmux server, HOME or pool.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from fm_teardown.commands.demo import tree_hash as tree_hash

REPO = Path(__file__).resolve().parent.parent
SESSION = "firstmate"

# This test run's id. The conftest exports it as FM_TEST_RUN, the fleets and their tmux
# servers carry it in the environments they build, so every process a test starts inherits it
# (even one that left its parent's tree); the session-end check counts a process as this run's
# by it (or by a path of this run in its cwd, HOME or argv), never by its name, so two runs at
# once only ever see their own.
TEST_RUN_VAR = "FM_TEST_RUN"
TEST_RUN = uuid.uuid4().hex
# Every private tmux socket of this run lives in a /tmp directory named with this prefix.
TMUX_PREFIX = f"/tmp/fmtmux-{TEST_RUN[:8]}-"


def gh_answering(bin_dir: Path, state: str, head: str) -> str:
    """A stand-in `gh` in `bin_dir` that answers `pr view ... -q` as gh's filter does,
    `STATE<TAB>HEAD`, and fails any other call."""
    gh = bin_dir / f"gh-{state.lower()}"
    gh.write_text(
        '#!/bin/sh\ncase "$*" in\n'
        f"  *'-q '*) printf '%s\\t%s\\n' {state} {head} ;;\n"
        "  *) echo 'unexpected call' >&2; exit 1 ;;\nesac\n"
    )
    gh.chmod(0o755)
    return str(gh)


def git(cwd: Path | str, *args: str, check: bool = True) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    r = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, env=env, check=False
    )
    if check and r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {r.stderr}")
    return r.stdout.strip()


def wait_for(cond: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll until `cond` holds (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def gone(pid: int) -> bool:
    """A process is gone when it no longer exists or is a zombie (pid 1 may never reap it)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@dataclass(frozen=True)
class Straggler:
    """A process of this run still running: what the session-end check reports."""

    proc: psutil.Process
    name: str
    cmdline: str
    cwd: str
    mark: str  # what made it this run's: the run's id, or a path of the run where

    def __str__(self) -> str:
        return f"pid {self.proc.pid} {self.name}: {self.cmdline}  (cwd {self.cwd}; {self.mark})"


def _prefixes(roots: Iterable[Path | str]) -> list[str]:
    """`root/` for a directory (as given and resolved: /proc shows resolved paths); a string
    ending in `-` is a name prefix (this run's tmux socket directories)."""
    out: list[str] = []
    for root in roots:
        text = str(root)
        if text.endswith("-"):
            out.append(text)
            continue
        for form in {text.rstrip("/"), os.path.realpath(text)}:
            out.append(form + "/")
    return out


def stragglers(roots: Iterable[Path | str], run: str | None = None) -> list[Straggler]:
    """The running processes that belong under `roots` (their cwd or HOME is in one, or an
    argument names one) or that carry `run` as their FM_TEST_RUN; never this process, its
    ancestors, or a zombie. A process that cannot be read (another user's) is not ours."""
    prefixes = _prefixes(roots)
    me = psutil.Process()
    skip = {me.pid, *(p.pid for p in me.parents())}

    def under(path: str | None) -> bool:
        return bool(path) and any((f"{path}/").startswith(pre) for pre in prefixes)

    out: list[Straggler] = []
    attrs = ["pid", "name", "cmdline", "cwd", "environ", "status"]
    for proc in psutil.process_iter(attrs, ad_value=None):
        info = proc.info
        if info["pid"] in skip or info["status"] in (psutil.STATUS_ZOMBIE, None):
            continue
        env: dict[str, str] = info["environ"] or {}
        argv: list[str] = info["cmdline"] or []
        cwd: str = info["cwd"] or ""
        if run is not None and env.get(TEST_RUN_VAR) == run:
            mark = f"{TEST_RUN_VAR}={run}"
        elif under(cwd):
            mark = "cwd inside the run's directories"
        elif under(env.get("HOME")):
            mark = f"HOME={env['HOME']}"
        elif any(pre in f"{arg}/" for arg in argv for pre in prefixes):
            mark = "argv names the run's directories"
        else:
            continue
        out.append(Straggler(proc, str(info["name"]), " ".join(argv), cwd or "?", mark))
    return out


def reap(procs: Iterable[psutil.Process], timeout: float = 10.0) -> list[psutil.Process]:
    """SIGKILL each process (psutil checks it is still the one it was, so a recycled pid is
    never hit) and poll until all are gone; the ones still there after `timeout`."""
    procs = list(procs)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in procs if _running(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants, as they are now (empty when it is gone)."""
    try:
        return _tree_of(psutil.Process(pid))
    except psutil.Error:
        return []


def _tree_of(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


class Tmux:
    """A private tmux server on its own socket."""

    def __init__(self, home: Path, binary: str = "tmux") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=TMUX_PREFIX.rsplit("/", 1)[1], dir="/tmp"))
        self.socket = str(self.dir / "s")
        # tmux itself, or a copy of it by another name (its server then runs as
        # `<name>: server`): what a renamed tmux looks like to fm.
        self.binary = "tmux"
        if binary != "tmux":
            found = shutil.which("tmux")
            assert found is not None
            self.binary = str(self.dir / binary)
            shutil.copy(found, self.binary)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "SHELL": "/bin/bash",
            "TERM": "xterm",
            "LANG": "C.UTF-8",
            TEST_RUN_VAR: TEST_RUN,
        }
        # Every server this object started (pid and start time): ended by `stop` even when it
        # no longer answers on the socket.
        self.servers: list[psutil.Process] = []

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [self.binary, "-u", "-S", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {r.stderr}")
        return r

    def start(self, session: str = SESSION, cwd: Path | None = None) -> None:
        """Start the server; `cwd`: where it starts (a server keeps that cwd for good)."""
        subprocess.run(
            [self.binary, "-u", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-s",
             session, "-n", "keep", "bash --norc --noprofile"],
            capture_output=True, env=self.env, cwd=cwd, check=True,
        )  # fmt: skip
        self.servers += _tree(self.server_pid())[:1]

    def server_pid(self) -> int:
        return int(self.run("display-message", "-p", "#{pid}").stdout.strip())

    def has_session(self, session: str) -> bool:
        return self.run("has-session", "-t", f"={session}", check=False).returncode == 0

    def new_window(self, session: str, name: str, cwd: Path, command: str) -> str:
        if not self.has_session(session):
            self.run("new-session", "-d", "-s", session, "-n", "keep", "bash --norc --noprofile")
        out = self.run(
            "new-window",
            "-d",
            "-P",
            "-F",
            "#{window_id}",
            "-t",
            f"={session}:",
            "-n",
            name,
            "-c",
            str(cwd),
            command,
        ).stdout.strip()
        # Keep the name we gave: tmux would rename the window after its running command.
        self.run("set-option", "-w", "-t", out, "automatic-rename", "off")
        self.run("set-option", "-w", "-t", out, "allow-rename", "off")
        return out

    def windows(self) -> list[str]:
        r = self.run("list-windows", "-a", "-F", "#{session_name}:#{window_name}", check=False)
        return sorted(r.stdout.split("\n")[:-1]) if r.returncode == 0 else []

    def pane_pids(self, target: str) -> list[int]:
        r = self.run("list-panes", "-t", target, "-F", "#{pane_pid}")
        return [int(x) for x in r.stdout.split()]

    def stop(self) -> None:
        """End the server and every process that ran in it; tmux leaves its socket file
        behind. `kill-server` only hangs up on the panes: a process that ignores SIGHUP (an
        agent stand-in, a shell that traps it) would outlive it, and a server that does not
        answer would stay: both are killed, found through the server's process tree."""
        servers = list(self.servers)
        answering = self.run("display-message", "-p", "#{pid}", check=False)
        if answering.returncode == 0 and answering.stdout.strip().isdigit():
            servers += _tree(int(answering.stdout.strip()))[:1]
        procs: dict[int, psutil.Process] = {}
        for server in servers:
            if _running(server):  # still the server it was: its pid was not recycled
                for proc in _tree_of(server):
                    procs.setdefault(proc.pid, proc)
        self.run("kill-server", check=False)
        reap(procs.values())
        self.servers.clear()

    def kill(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Task:
    id: str
    slot: Path
    meta: Path
    window: str
    pids: list[int] = field(default_factory=list)


def python_in(
    cwd: Path, env: dict[str, str] | None, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """This interpreter with `args`, from `cwd` with exactly `env` (None: this process's):
    no input, its output captured, its exit code not checked."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


class Fleet:
    """A fleet home (state/, data/), a project with a bare origin, a pool of slots."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.fm_home = root / "fleet"
        self.state = self.fm_home / "state"
        self.data = self.fm_home / "data"
        self.state.mkdir(parents=True)
        self.data.mkdir()
        self.bin = root / "bin"
        self.bin.mkdir()
        shutil.copy("/bin/sleep", self.bin / "claude")
        self.tmux = Tmux(self.home)
        self.tmux.start()
        try:
            self._build()
        except BaseException:
            self.tmux.kill()  # no fixture will: the fleet was never handed out
            raise

    def _build(self) -> None:
        root = self.root
        self.origin = root / "origin.git"
        self.project = root / "project"
        git(root, "init", "-q", "--bare", "-b", "main", str(self.origin))
        git(root, "clone", "-q", str(self.origin), str(self.project))
        for k, v in (("user.name", "Test"), ("user.email", "t@example.invalid")):
            git(self.project, "config", k, v)
        (self.project / "README").write_text("hello\n")
        (self.project / ".gitignore").write_text("*.cache\n")
        git(self.project, "add", "-A")
        git(self.project, "commit", "-q", "-m", "init")
        git(self.project, "push", "-q", "origin", "main")
        git(self.project, "remote", "set-head", "origin", "main")
        h = hashlib.sha256(str(self.origin).encode()).hexdigest()[:6]
        self.pool = root / "pool" / ".treehouse" / f"project-{h}"
        self.pool.mkdir(parents=True)
        self.entries: list[dict[str, Any]] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        # Every process a test started (pane trees and spawned workers): "nothing changed"
        # compares which of these are still alive.
        self.tracked: set[int] = set()
        self.treehouse = REPO / "fm_teardown" / "standin" / "treehouse"
        self.other_servers: list[Tmux] = []
        # The global /tmp/fm-<id> of the tasks this fleet records: never one that existed
        # before (it may be a real task's on this machine), always cleaned up.
        self.tasktmps: set[Path] = set()

    # -- the pool -------------------------------------------------------------------------
    def slot(
        self,
        n: int,
        *,
        leased: bool = True,
        holder: str = "",
        lease_id: str | None = None,
        managed: bool = True,
    ) -> Path:
        path = self.pool / str(n) / "project"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            git(self.project, "worktree", "add", "-q", "--detach", str(path), "main")
        if managed:
            self.entries = [e for e in self.entries if e["path"] != str(path)]
            entry: dict[str, Any] = {
                "name": str(n),
                "path": str(path),
                "created_at": "2026-12-01T00:00:00Z",
            }
            if leased:
                entry.update(
                    leased=True,
                    lease_id=lease_id if lease_id is not None else f"{n:032x}",
                    lease_holder=holder,
                    leased_at="2026-12-01T00:00:00Z",
                )
            self.entries.append(entry)
            self.write_pool()
        return path

    def write_pool(self) -> None:
        doc = {"worktrees": sorted(self.entries, key=lambda e: int(str(e["name"]))) or None}
        (self.pool / "treehouse-state.json").write_text(json.dumps(doc, indent=2))

    # -- tasks ----------------------------------------------------------------------------
    def record(
        self,
        task_id: str,
        slot: Path | str,
        *,
        session: str = SESSION,
        extra: dict[str, str] | None = None,
        lines: list[str] | None = None,
    ) -> Path:
        run_unique(task_id)
        meta = self.state / f"{task_id}.meta"
        if lines is None:
            self.claim_tasktmp(task_id)
        body = (
            lines
            if lines is not None
            else [
                f"window={session}:fm-{task_id}",
                f"endpoint_task_id={task_id}",
                f"worktree={slot}",
                f"project={self.project}",
                "harness=claude",
                "kind=ship",
                f"tasktmp=/tmp/fm-{task_id}",
            ]
            + [f"{k}={v}" for k, v in (extra or {}).items()]
        )
        meta.write_text("\n".join(body) + "\n")
        return meta

    def claim_tasktmp(self, task_id: str) -> Path:
        """`/tmp/fm-<id>` for this fleet's task: refuse to run over one that exists (a real
        task's temp dir that a teardown would remove), and remove it when the fleet closes."""
        run_unique(task_id)
        path = Path(f"/tmp/fm-{task_id}")
        if path not in self.tasktmps:
            if os.path.lexists(path):
                raise AssertionError(
                    f"{path} exists: refusing to run over it (remove it if it is a leftover)"
                )
            self.tasktmps.add(path)
        return path

    def make_tasktmp(self, task_id: str) -> Path:
        path = self.claim_tasktmp(task_id)
        path.mkdir(exist_ok=True)
        return path

    def endpoint(self, task_id: str, cwd: Path, state: str, session: str = SESSION) -> list[int]:
        """Open the task's window: `alive` runs an agent, `dead` a bare shell, `ambiguous` a
        non-agent program; `missing` opens nothing. Returns the pane's process pids."""
        run_unique(task_id)
        if state == "missing":
            return []
        command = {
            "alive": f"bash --norc --noprofile -c '{self.bin}/claude 100000; exec bash'",
            "dead": "bash --norc --noprofile",
            "ambiguous": "bash --norc --noprofile -c 'sleep 100000; exec bash'",
        }[state]
        wid = self.tmux.new_window(session, f"fm-{task_id}", cwd, command)
        pids = self.tmux.pane_pids(wid)
        if state in ("alive", "ambiguous"):
            want = "claude" if state == "alive" else "sleep"
            wait_for(
                lambda: any(c.name() == want for c in psutil.Process(pids[0]).children()),
                what=f"{want} in {task_id}'s pane",
            )
            pids += [c.pid for c in psutil.Process(pids[0]).children(recursive=True)]
        return pids

    def task(self, task_id: str, slot: Path, state: str = "alive", **kw: object) -> Task:
        session = str(kw.pop("session", SESSION))
        meta = self.record(task_id, slot, session=session, **kw)  # type: ignore[arg-type]
        pids = self.endpoint(task_id, slot, state, session=session)
        self.tracked.update(pids)
        return Task(task_id, slot, meta, f"{session}:fm-{task_id}", pids)

    def spawn(
        self, argv: list[str], cwd: Path, *, new_session: bool = False
    ) -> subprocess.Popen[bytes]:
        """`argv` running in `cwd`, reaped at the end; with `new_session`, in a session (and
        process group) of its own, on no terminal."""
        p = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=new_session,
        )
        self.procs.append(p)
        self.tracked.add(p.pid)
        return p

    def agent_in(self, cwd: Path) -> subprocess.Popen[bytes]:
        return self.spawn([str(self.bin / "claude"), "100000"], cwd)

    # -- running fm -------------------------------------------------------------------------
    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PATH": f"{self.treehouse.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.home),
            "FM_HOME": str(self.fm_home),
            "FM_TMUX_SOCKET": self.tmux.socket,
            "FM_TREEHOUSE_BIN": str(self.treehouse),
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
            # fm runs as on a fresh machine: no git identity, no system or global git config.
            "GIT_CONFIG_NOSYSTEM": "1",
            "TREEHOUSE_ROOT": str(self.root / "pool"),
            "TREEHOUSE_STANDIN_LOG": str(self.root / "treehouse-calls.jsonl"),
            # The agent stand-ins (copies of sleep) never answer their quit keys: a short
            # grace keeps every teardown of a live endpoint from waiting the default 5 s.
            "FM_QUIT_GRACE_SECS": "0.3",
            # ... and an agent with descendants (its exit hooks) keeps it waiting up to this.
            "FM_QUIT_HOOK_GRACE_SECS": "2",
            TEST_RUN_VAR: TEST_RUN,
        }
        env.update(extra)
        return env

    def fm(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return self.python("-m", "fm_teardown", *args, env=env, timeout=timeout)

    def python(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """This interpreter with `args`, run as an operator runs fm: in FM_HOME, with the
        fleet's environment, no input, its output captured."""
        return python_in(self.fm_home, env or self.env(), *args, timeout=timeout)

    def fm_json(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        r = self.fm(*args, "--json", env=env)
        try:
            doc = json.loads(r.stdout)
        except ValueError as exc:
            raise AssertionError(f"not one JSON object: {r.stdout!r} / {r.stderr!r}") from exc
        return r.returncode, doc

    def journal(self, *, intents: bool = False) -> list[dict[str, Any]]:
        """The journal's lines: the result lines only, or with `intents` the intent lines a
        real run writes before acting too."""
        path = self.data / "teardown-log.jsonl"
        if not path.exists():
            return []
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        return lines if intents else [e for e in lines if e.get("phase") != "intent"]

    def fm_paused(self, boundary: str, *args: str) -> tuple[subprocess.Popen[str], Path]:
        """Start `fm teardown ... --json` paused at a step boundary (FM_TEST_FAULT): returns
        the process and the pause file; remove the file (`resumed`) to let the run go on."""
        return self.run_paused(boundary, ["fm_teardown", "teardown", *args, "--json"])

    def run_paused(self, boundary: str, argv: list[str]) -> tuple[subprocess.Popen[str], Path]:
        """`python -m ARGV` (fm, or the drop-in `fm_teardown.commands.firstmate`) paused at a
        step boundary, as `fm_paused`."""
        pause = self.root / f"pause-{boundary}"
        pause.touch()
        proc = subprocess.Popen(
            [sys.executable, "-m", *argv],
            cwd=self.fm_home,
            env=self.env(FM_TEST_FAULT=f"pause:{boundary}:{pause}"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        reached = Path(f"{pause}.reached")
        wait_for(lambda: reached.exists() or proc.poll() is not None, 60, f"pause at {boundary}")
        if not reached.exists():  # it ended before the boundary: say how
            out, err = proc.communicate()
            raise AssertionError(
                f"ended (exit {proc.returncode}) before {boundary}: {out!r} {err!r}"
            )
        return proc, pause

    def treehouse_calls(self) -> list[dict[str, Any]]:
        log = self.root / "treehouse-calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line]

    # -- "nothing changed" ----------------------------------------------------------------
    def snapshot(self, *slots: Path) -> dict[str, Any]:
        return {
            "slots": {str(s): tree_hash(s) for s in slots},
            "state": state_hash(self.state),
            "pool": (self.pool / "treehouse-state.json").read_bytes()
            if (self.pool / "treehouse-state.json").exists()
            else None,
            "windows": self.tmux.windows(),
            "live": sorted(pid for pid in self.tracked if not gone(pid)),
        }

    def tmux_server_in(self, cwd: Path, binary: str = "tmux") -> Tmux:
        """Another tmux server, started by someone cd'd into `cwd` (it keeps that cwd);
        `binary`: the name of the tmux it runs (a copy by another name)."""
        server = Tmux(self.home, binary)
        server.start("elsewhere", cwd=cwd)
        self.other_servers.append(server)
        self.tracked.add(server.server_pid())
        return server

    def close(self) -> None:
        """Reap everything the test started, whatever state it left things in: every step
        runs even when one before it fails (the first failure is raised at the end)."""
        failures: list[BaseException] = []

        def attempt(step: Callable[[], object]) -> None:
            try:
                step()
            except BaseException as exc:  # raised below, after the rest have run
                failures.append(exc)

        for p in self.procs:
            attempt(p.kill)
            attempt(p.wait)
        for server in self.other_servers:
            attempt(server.kill)
        attempt(self.tmux.kill)
        # What the test started outside those trees (a worker re-parented when its spawner
        # died, an agent that outlived its window, an fm the test ran in the background):
        # found by this fleet's paths in its cwd, HOME or argv, and killed.
        dirs = [self.root, self.tmux.dir, *(s.dir for s in self.other_servers)]
        attempt(lambda: reap(s.proc for s in stragglers(dirs)))
        for path in self.tasktmps:
            if path.is_symlink() or path.is_file():
                attempt(path.unlink)
            elif path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
        if failures:
            raise failures[0]


# firstmate's lifecycle locks (`.control-<id>.lock`, `.meta-<id>.lock`, `.task-set.lock`, each
# with its `<lock>.owner.XXXXXX` dir): a run that refuses may still have taken over, and so
# removed, a lock whose holder died (a crashed run's), as every firstmate script does. Locks
# are not state: "nothing changed" compares the records and everything else in the dir.
_LIFECYCLE_LOCK = re.compile(r"\.(?:control-.+|meta-.+|task-set)\.lock(?:\.owner\..*|\.steal.*)?")


def state_hash(state: Path) -> str:
    """`tree_hash` of the state dir without firstmate's lifecycle locks (the same walk: a
    FIFO or a link is hashed by its mode and name, never opened or followed)."""
    if not state.exists():
        return "absent"
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(state):
        top = dirpath == str(state)
        dirnames[:] = sorted(d for d in dirnames if not (top and _LIFECYCLE_LOCK.fullmatch(d)))
        for name in sorted(
            filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        ):
            if top and _LIFECYCLE_LOCK.fullmatch(name):
                continue
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(os.path.relpath(p, state).encode() + b"\0" + str(st.st_mode).encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def run_unique(task_id: str) -> None:
    """Refuse a valid task id that is not unique to this run (see `tid`): two test runs on
    one machine would meet at its `/tmp/fm-<id>`."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", task_id) and f"-{RUN_TAG}" not in task_id:
        raise AssertionError(f"task id {task_id!r} is not unique to this test run: use tid()")


def files_of(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file below root (git metadata aside): its bytes and whether it is executable."""
    out: dict[str, tuple[bytes, bool]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            if name == ".git":
                continue
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            out[rel] = (path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR))
    return out


def fleet_fixture(tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(tmp_path)
    try:
        yield f
    finally:
        f.close()


# Task ids unique to this test run: /tmp/fm-<id> is fixed by the record format, so two runs
# on one machine must never share an id.
RUN_TAG = f"{os.getpid():x}"


def tid(name: str) -> str:
    """`name` made unique to this run (`t1` -> `t1-3f2a`)."""
    return f"{name}-{RUN_TAG}"


# -- the slot census (spec §14.1): agents and terminals that are no task's endpoint ---------


def other_tmux(fleet: Fleet) -> Tmux:
    """Another tmux server of the user (started outside every slot), reaped with the fleet."""
    server = Tmux(fleet.home)
    server.start("elsewhere", cwd=fleet.root)
    fleet.other_servers.append(server)
    return server


def pane_agent(fleet: Fleet, server: Tmux, session: str, name: str, cwd: Path) -> tuple[str, int]:
    """An agent stand-in in a new window `session:name` of `server` (an operator's pane, no
    task's endpoint), working in `cwd`: the window id and the agent's pid."""
    command = f"bash --norc --noprofile -c '{fleet.bin}/claude 100000; exec bash'"
    wid = server.new_window(session, name, cwd, command)
    [root] = server.pane_pids(wid)

    def agent() -> int | None:
        kids = [c for c in psutil.Process(root).children() if c.name() == "claude"]
        return kids[0].pid if kids else None

    wait_for(lambda: agent() is not None, what=f"claude in {session}:{name}")
    pid = agent()
    assert pid is not None
    fleet.tracked.update({root, pid})
    return wid, pid


def pane_shell(fleet: Fleet, server: Tmux, session: str, name: str, cwd: Path) -> tuple[str, int]:
    """An interactive shell in a new window `session:name` of `server`, cd'd into `cwd`."""
    wid = server.new_window(session, name, cwd, "bash --norc --noprofile -i")
    [root] = server.pane_pids(wid)
    fleet.tracked.add(root)
    return wid, root


def agent_alone(fleet: Fleet, cwd: Path) -> subprocess.Popen[bytes]:
    """An agent stand-in in no pane and on no terminal (orphaned: its own session)."""
    return fleet.spawn([str(fleet.bin / "claude"), "100000"], cwd, new_session=True)


def private_env(fleet: Fleet, tmpdir: Path, **extra: str) -> dict[str, str]:
    """The fleet's environment with a private TMUX_TMPDIR and no socket variable of fm's
    (fm then finds its server as an operator's shell would: `-L NAME` or the default)."""
    env = fleet.env(TMUX_TMPDIR=str(tmpdir), **extra)
    env.pop("FM_TMUX_SOCKET")
    env.pop("TMUX", None)
    return env


def resumed(proc: subprocess.Popen[str], pause: Path) -> tuple[int, str, str]:
    """Let a paused run (`Fleet.run_paused`) go on to its end: exit code, stdout, stderr."""
    pause.unlink()
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def resumed_json(proc: subprocess.Popen[str], pause: Path) -> tuple[int, dict[str, Any]]:
    """`resumed`, its stdout read as the one JSON object `--json` prints."""
    code, out, err = resumed(proc, pause)
    try:
        return code, json.loads(out)
    except ValueError as exc:
        raise AssertionError(f"not one JSON object: {out!r} / {err!r}") from exc
