"""Helpers for tests that need a real treehouse pool, served by the stand-in.

Plain functions (no pytest fixtures) so any test module can import them::

    from tests.standin.pool_fixtures import make_project, standin_env, lease_slot

    origin, project = make_project(tmp_path)
    env = standin_env(tmp_path)               # HOME, TREEHOUSE_ROOT isolated under tmp_path
    lease = lease_slot(project, env, "alpha")  # {"path", "lease_id", "lease_holder", "leased_at"}

Everything lives under ``tmp_path``: the bare origin, the project clone, ``HOME`` and the
pool root. The real ``$HOME``, the user's git config and any real pool are never touched.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

# The stand-in ships inside the package (fm_teardown/standin/), for `fm demo` too.
STANDIN_DIR: Path = Path(__file__).resolve().parents[2] / "fm_teardown" / "standin"
STANDIN_BIN: Path = STANDIN_DIR / "treehouse"
DEFAULT_BRANCH = "main"
STATE_FILE = "treehouse-state.json"
LOCK_FILE = "treehouse-state.lock"
GIT_IDENTITY: dict[str, str] = {
    "GIT_AUTHOR_NAME": "Pool Test",
    "GIT_AUTHOR_EMAIL": "pool-test@example.invalid",
    "GIT_COMMITTER_NAME": "Pool Test",
    "GIT_COMMITTER_EMAIL": "pool-test@example.invalid",
}
# Files committed in the origin's first commit; `.gitignore` ignores *.log and ignored/.
SEED_FILES: dict[str, str] = {
    "README.md": "hello from the project\n",
    ".gitignore": "*.log\nignored/\n",
}


def standin_env(tmp_path: Path, **extra: str | None) -> dict[str, str]:
    """An environment that runs the stand-in first on PATH, isolated under ``tmp_path``.

    ``HOME=<tmp>/home``, ``TREEHOUSE_ROOT=<tmp>/pool-root`` (so the pool is
    ``<tmp>/pool-root/.treehouse/<repo>-<hash>``), ``TREEHOUSE_NO_UPDATE_CHECK=1``, no
    system git config, and a fixed git identity. Inherited ``TREEHOUSE_*`` and ``GIT_*``
    variables are dropped. ``extra`` sets more variables (e.g.
    ``TREEHOUSE_STANDIN_FAULT="survivor"``); a value of ``None`` removes one.
    """
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TREEHOUSE_", "GIT_")) and k not in ("PWD", "OLDPWD")
    }
    env.update(GIT_IDENTITY)
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "TREEHOUSE_ROOT": str(tmp_path / "pool-root"),
            "TREEHOUSE_NO_UPDATE_CHECK": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "PATH": os.pathsep.join([str(STANDIN_DIR), os.environ.get("PATH", os.defpath)]),
        }
    )
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def git(args: Sequence[str], cwd: Path | str, env: Mapping[str, str] | None = None) -> str:
    """Run git and return its stripped stdout; raise with git's stderr on failure."""
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} (in {cwd}) failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def make_project(tmp_path: Path, name: str = "project") -> tuple[Path, Path]:
    """Create ``<tmp>/origin.git`` (bare, branch ``main``, one commit) and clone it.

    Returns ``(origin, project)``. The clone has ``refs/remotes/origin/HEAD -> main``,
    ``main`` checked out, and a local git identity, so commits in pool slots work.
    The first commit holds :data:`SEED_FILES`.
    """
    env = standin_env(tmp_path)
    origin = tmp_path / "origin.git"
    seed = tmp_path / f".{name}-seed"
    project = tmp_path / name
    git(
        ["init", "--quiet", "--bare", "--initial-branch", DEFAULT_BRANCH, str(origin)],
        tmp_path,
        env,
    )
    git(["init", "--quiet", "--initial-branch", DEFAULT_BRANCH, str(seed)], tmp_path, env)
    for rel, content in SEED_FILES.items():
        (seed / rel).write_text(content)
    git(["add", "--all"], seed, env)
    git(["commit", "--quiet", "-m", "initial commit"], seed, env)
    git(["push", "--quiet", str(origin), f"{DEFAULT_BRANCH}:{DEFAULT_BRANCH}"], seed, env)
    shutil.rmtree(seed)
    git(["clone", "--quiet", str(origin), str(project)], tmp_path, env)
    for key, value in (
        ("user.name", GIT_IDENTITY["GIT_AUTHOR_NAME"]),
        ("user.email", GIT_IDENTITY["GIT_AUTHOR_EMAIL"]),
        ("advice.detachedHead", "false"),
    ):
        git(["config", "--local", key, value], project, env)
    return origin, project


def run_standin(
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | str,
    *,
    input: str | None = None,
    timeout: float = 30.0,
) -> subprocess.CompletedProcess[str]:
    """Run the stand-in (never on a terminal: stdin is /dev/null unless ``input`` is given)."""
    return subprocess.run(
        [str(STANDIN_BIN), *args],
        cwd=cwd,
        env=dict(env),
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def lease_slot(project: Path, env: Mapping[str, str], holder: str = "holder") -> dict[str, str]:
    """``treehouse get --lease --json --no-fetch --lease-holder holder`` from the project.

    Returns the parsed JSON: ``{"path", "lease_id", "lease_holder", "leased_at"}``.
    """
    proc = run_standin(
        ["get", "--lease", "--json", "--no-fetch", "--lease-holder", holder], env, project
    )
    if proc.returncode != 0:
        raise RuntimeError(f"get --lease failed ({proc.returncode}): {proc.stderr.strip()}")
    lease: dict[str, str] = json.loads(proc.stdout)
    return lease


def pool_status(project: Path, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """``treehouse status --json`` from the project (note: it rewrites the state file)."""
    proc = run_standin(["status", "--json"], env, project)
    if proc.returncode != 0:
        raise RuntimeError(f"status failed ({proc.returncode}): {proc.stderr.strip()}")
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def status_of(project: Path, env: Mapping[str, str], slot: Path | str) -> dict[str, Any]:
    """The ``status --json`` row whose path equals ``slot`` exactly."""
    for row in pool_status(project, env):
        if row["path"] == str(slot):
            return row
    raise KeyError(f"{slot} is not in the pool")


def pool_dir_for(project: Path, env: Mapping[str, str]) -> Path:
    """The pool dir treehouse derives: ``<root>/.treehouse/<basename>-<sha256(origin)[:6]>``."""
    root = env.get("TREEHOUSE_ROOT", "")
    pool_root = Path(root) / ".treehouse" if root else Path(env["HOME"]) / ".treehouse"
    try:
        hash_input = git(["remote", "get-url", "origin"], project, env)
    except RuntimeError:
        hash_input = str(project)
    digest = hashlib.sha256(hash_input.encode()).hexdigest()[:6]
    return pool_root / f"{project.name}-{digest}"


def state_file_of(slot: Path | str) -> Path:
    """The state file beside a slot: ``<pool>/<N>/<repo>`` -> ``<pool>/treehouse-state.json``."""
    return Path(slot).parent.parent / STATE_FILE


def read_state(slot: Path | str) -> dict[str, Any]:
    """The parsed state file of the pool that holds ``slot``."""
    state: dict[str, Any] = json.loads(state_file_of(slot).read_text())
    return state


def state_entry(slot: Path | str) -> dict[str, Any]:
    """The raw state-file entry whose path equals ``slot`` exactly."""
    for entry in read_state(slot)["worktrees"] or []:
        if entry["path"] == str(slot):
            return dict(entry)
    raise KeyError(f"{slot} is not in its pool's state file")


def slot_gitdir(slot: Path | str) -> Path:
    """The slot's own gitdir (``<project>/.git/worktrees/<id>``), where index.lock lives."""
    return Path(git(["rev-parse", "--absolute-git-dir"], slot))


def head_is_detached(slot: Path | str) -> bool:
    proc = subprocess.run(
        ["git", "symbolic-ref", "--quiet", "HEAD"],
        cwd=slot,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    return proc.returncode == 1


@contextmanager
def hold_state_lock(pool_dir: Path | str) -> Iterator[None]:
    """Hold the pool's ``flock`` (as treehouse does) for the duration of the block."""
    Path(pool_dir).mkdir(parents=True, exist_ok=True)
    fd = os.open(Path(pool_dir) / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def state_lock_held(pool_dir: Path | str) -> bool:
    """True while someone (treehouse) holds the pool's ``flock``."""
    fd = os.open(Path(pool_dir) / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def wait_until(
    predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02
) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def spawn_in(
    cwd: Path | str,
    argv: Sequence[str],
    *,
    ready_line: str | None = None,
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with its cwd in ``cwd`` and reap it from a background thread.

    The reaper means a process that treehouse kills does not linger as a zombie (which
    treehouse would count as alive for its whole grace period). With ``ready_line``,
    wait until the child prints that line on stdout (e.g. after installing a signal
    handler). Stop it at the end of a test with :func:`stop`.
    """
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if ready_line is not None else subprocess.DEVNULL,
        start_new_session=True,
    )
    threading.Thread(target=proc.wait, name=f"reap-{proc.pid}", daemon=True).start()
    if ready_line is not None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        buf = b""
        while ready_line.encode() not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stop(proc)
                raise TimeoutError(f"{argv[0]} did not print {ready_line!r} within {timeout}s")
            readable, _, _ = select.select([fd], [], [], remaining)
            if readable:
                chunk = os.read(fd, 4096)
                if not chunk:
                    stop(proc)
                    raise RuntimeError(f"{argv[0]} exited before printing {ready_line!r}")
                buf += chunk
    return proc


def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """Kill ``proc`` if it still runs (its whole process group: :func:`spawn_in` gives it
    its own, and a child it started must not outlive it), wait for it, close its pipe; return
    its returncode."""
    if proc.returncode is None:
        # While the leader runs its group id cannot name another group.
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with suppress(ProcessLookupError):
            proc.kill()
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
    if proc.stdout is not None:
        proc.stdout.close()
    return proc.returncode


SIGTERM_IGNORER: list[str] = [
    "python3",
    "-c",
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(1000)\n",
]
"""argv of a process that ignores SIGTERM; start it with ``spawn_in(..., ready_line="ready")``."""
