"""The one door for subprocesses: every git, gh and treehouse call of the package goes here.

Each command runs with stdin closed, in a session of its own (no controlling terminal, so ssh
or a credential helper that would ask for a passphrase fails instead of waiting for a human
who is not there, and a Ctrl-C at the terminal does not reach it), with a timeout after which
its whole process group is killed, and under one environment policy:

- variables that would point git at another repository or index than `-C` are dropped;
- no prompts (git, GCM, gh), no pager, the C locale (messages are matched by text);
- `GIT_OPTIONAL_LOCKS=0`: inspecting a slot never takes its `index.lock` (a dry run must not
  write, and a lock held by us could block the very pool return we are preparing).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence

from fm_teardown.model.records import shown
from fm_teardown.model.values import value

__all__ = [
    "HEX_OID",
    "LOCAL_GIT_TIMEOUT",
    "Result",
    "environment",
    "git",
    "git_many",
    "rev",
    "run",
    "run_many",
]

# Local git commands (status, log, merge-tree, add) on a big slot can take a while, but
# never forever: a hung filesystem must not hang the teardown.
LOCAL_GIT_TIMEOUT = 120.0
# After a timeout the process group is killed; this bounds the wait for its pipes to close.
_REAP_TIMEOUT = 5.0

# Variables that would point git at another repository or index than the `-C` directory.
_REPO_ENV = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
        "GIT_QUARANTINE_PATH",
    }
)


@value
class Result:
    rc: int | None  # None: it could not be started, or it timed out and was killed
    out: bytes
    err: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def text(self) -> str:
        return self.out.decode("utf-8", "replace").strip()

    def why(self) -> str:
        """The first line of stderr, bounded: enough to name the failure in one line."""
        for line in self.err.splitlines():
            if line.strip():
                return shown(line.strip(), 160)
        return "no message" if self.rc is not None else "did not run"


def environment(
    extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The policy applied to `base` (this process's environment unless given), plus `extra`."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _REPO_ENV}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GCM_INTERACTIVE="never",
        GH_PROMPT_DISABLED="1",
        GIT_OPTIONAL_LOCKS="0",
        GIT_PAGER="cat",
        PAGER="cat",
        LC_ALL="C",
        LANGUAGE="C",
    )
    if extra:
        env.update(extra)
    return env


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | bytes | None = None,
    base: Mapping[str, str] | None = None,
) -> Result:
    """Run one command (see the module doc); `env` adds to the policy's environment, `base`
    replaces the environment the policy starts from (this process's), `stdin` is written to
    its standard input (closed otherwise)."""
    started = _start(argv, cwd, environment(env, base), piped_stdin=stdin is not None)
    if isinstance(started, Result):
        return started
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return _finish(started, timeout, data)


def run_many(argvs: Sequence[Sequence[str]], *, timeout: float, width: int) -> list[Result]:
    """`run` for each command (stdin closed, this process's environment under the policy),
    at most `width` running at once, from this one thread: their results in the order given.

    Each command is started as soon as one before it is done, and waited for in turn, with
    the same timeout as `run`, counted from when its turn to be waited for comes (never
    sooner than from its start): a slow command delays the results after it, never kills
    them. No thread: a thread per command costs more CPU than the commands' own start when
    they are many and quick (one `git status` per slot of a fleet)."""
    env = environment()
    found: dict[str, str] = {}
    results: list[Result | None] = [None] * len(argvs)
    running: list[tuple[int, subprocess.Popen[bytes]]] = []
    todo = list(enumerate(argvs))
    todo.reverse()
    while todo or running:
        while todo and len(running) < max(1, width):
            i, argv = todo.pop()
            if argv and argv[0] not in found:
                found[argv[0]] = _on_path(argv[0], env)
            started = _start(argv, None, env, piped_stdin=False, executable=found.get(argv[0]))
            if isinstance(started, Result):
                results[i] = started
            else:
                running.append((i, started))
        if running:
            i, proc = running.pop(0)
            results[i] = _finish(proc, timeout, None)
    return [r for r in results if r is not None]


def _on_path(name: str, env: Mapping[str, str]) -> str:
    """The file `name` runs on the environment's PATH, looked up once for many runs (each
    run would otherwise try every PATH directory in turn), or `name` itself when it has a
    slash or is not found there (the run then says so, as it would have)."""
    if "/" in name:
        return name
    for folder in os.get_exec_path(env):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return name


def _start(
    argv: Sequence[str],
    cwd: str | None,
    env: Mapping[str, str],
    *,
    piped_stdin: bool,
    executable: str | None = None,
) -> subprocess.Popen[bytes] | Result:
    """The command started under the policy, or the Result saying why it could not be.
    `executable`: the file to run, when it was looked up already (argv[0] stays as given)."""
    try:
        return subprocess.Popen(
            list(argv),
            executable=executable,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if piped_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return Result(None, b"", f"cannot run {argv[0]}: {exc.strerror or exc}")


def _finish(proc: subprocess.Popen[bytes], timeout: float, stdin: bytes | None) -> Result:
    """A started command's output and exit code; its whole process group killed after
    `timeout` seconds."""
    try:
        out, err = proc.communicate(input=stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):  # the group may be gone already
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.communicate(timeout=_REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            # A descendant escaped the group and holds our pipes; do not wait on it.
            proc.kill()
            proc.wait()
        return Result(None, b"", f"timed out after {timeout:g}s", True)
    return Result(proc.returncode, out, err.decode("utf-8", "replace"))


def git(
    repo: str,
    *args: str,
    timeout: float = LOCAL_GIT_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> Result:
    return run(["git", "-C", repo, *args], timeout=timeout, env=env)


def git_many(
    calls: Sequence[tuple[str, Sequence[str]]], *, width: int, timeout: float = LOCAL_GIT_TIMEOUT
) -> list[Result]:
    """`git -C repo args...` for each (repo, args), `width` at a time (`run_many`)."""
    return run_many(
        [["git", "-C", repo, *args] for repo, args in calls], timeout=timeout, width=width
    )


# A full object name, SHA-1 or SHA-256.
HEX_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def rev(repo: str, spec: str) -> str | None:
    """The commit `spec` names in `repo`, or None when it does not name one."""
    r = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{spec}^{{commit}}")
    return r.text if r.ok and HEX_OID.fullmatch(r.text) else None
