"""The one door for subprocesses: every git, gh and treehouse call of the package goes here.

Every git command goes through `git` (or `git_many`, `rev`; a `run` of a git argv is sent
there too; `private_git.py`'s commands through `git`), which runs it under the git door's
policy (`git_door.py`): no program a repository names runs (spec §15.1).

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
import fcntl
import os
import re
import selectors
import signal
import subprocess
import time
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
    its standard input (closed otherwise). A git command goes through the git door."""
    if _is_git(argv):
        repo, args = _git_args(argv, cwd)
        return git(repo, *args, timeout=timeout, env=env, stdin=stdin, base=base)
    return _run(argv, cwd, environment(env, base), timeout, stdin)


def _run(
    argv: Sequence[str],
    cwd: str | None,
    env: Mapping[str, str],
    timeout: float,
    stdin: str | bytes | None = None,
) -> Result:
    started = _start(argv, cwd, env, piped_stdin=stdin is not None)
    if isinstance(started, Result):
        return started
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return _finish(started, timeout, data)


def _is_git(argv: Sequence[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) == "git"


def _git_args(argv: Sequence[str], cwd: str | None) -> tuple[str, list[str]]:
    """The directory a git argv runs in (`cwd`, then its leading `-C` options) and the rest."""
    repo, args = cwd or os.getcwd(), list(argv[1:])
    while len(args) >= 2 and args[0] == "-C":
        repo, args = os.path.join(repo, args[1]), args[2:]
    return repo, args


def run_many(argvs: Sequence[Sequence[str]], *, timeout: float, width: int) -> list[Result]:
    """`run` for each command (stdin closed, this process's environment under the policy),
    at most `width` running at once, from this one thread: their results in the order given.

    Each command has `run`'s timeout from its own start, after which its process group is
    killed, and a new one starts as soon as any running one is done. Their pipes (and, where
    the system has them, pidfds telling their exits) are watched together: no thread and no
    polling, since a thread per command costs more CPU than the commands' own start when they
    are many and quick (one `git status` per slot of a fleet). A git command goes through the
    git door."""
    env = environment()
    calls: list[tuple[Sequence[str], Mapping[str, str]] | Result] = []
    for argv in argvs:
        if _is_git(argv):
            repo, args = _git_args(argv, None)
            calls.append(_door(repo, args, None, None, policy=env))
        else:
            calls.append((argv, env))
    return _many(calls, timeout, width)


def _many(
    calls: Sequence[tuple[Sequence[str], Mapping[str, str]] | Result],
    timeout: float,
    width: int,
    stdins: Sequence[bytes | None] = (),
) -> list[Result]:
    """`run_many` of each (argv, environment), a Result standing for one not to run; `stdins`:
    what each is given on its standard input (none: closed). An input the pipe cannot hold
    whole is given as `run` gives it, that command alone, before the others go on."""
    found: dict[str, str] = {}
    results: list[Result | None] = [c if isinstance(c, Result) else None for c in calls]
    todo = [(i, c) for i, c in enumerate(calls) if not isinstance(c, Result)]
    todo.reverse()
    running: dict[int, _Running] = {}
    closing = _inherited_fds() if hasattr(os, "posix_spawn") else None
    # poll(2) where there is one, as `subprocess` itself uses: no system call per fd added.
    with getattr(selectors, "PollSelector", selectors.DefaultSelector)() as sel:
        while todo or running:
            while todo and len(running) < max(1, width):
                i, (argv, env) = todo.pop()
                if argv and argv[0] not in found:
                    found[argv[0]] = _on_path(argv[0], env)
                exe = found.get(argv[0])
                data = stdins[i] if i < len(stdins) else None
                started: subprocess.Popen[bytes] | _Spawned | Result | None = None
                if data is not None:
                    piped = _stdin_pipe(data) if closing is not None else None
                    if piped is None or exe is None or "/" not in exe:
                        if piped is not None:
                            os.close(piped[0])
                            os.close(piped[1])
                        results[i] = _run(argv, None, env, timeout, data)
                        continue
                    started = _spawn(argv, exe, env, closing or [], stdin=(piped, data))
                    if started is None:  # no posix_spawn as Popen runs it here
                        closing = None
                        results[i] = _run(argv, None, env, timeout, data)
                        continue
                elif closing is not None and exe is not None and "/" in exe:
                    started = _spawn(argv, exe, env, closing)
                    if started is None:
                        closing = None  # no posix_spawn as Popen runs it here: Popen, then
                if started is None:
                    started = _start(argv, None, env, piped_stdin=False, executable=exe)
                if isinstance(started, Result):
                    results[i] = started
                else:
                    running[i] = _Running(started, timeout, sel)
            if not running:
                continue
            now = time.monotonic()
            wait = min(r.deadline for r in running.values()) - now
            if any(r.reaping for r in running.values()):
                wait = min(wait, _REAP_POLL)  # an exit no pidfd will tell: look again soon
            for key, _ in sel.select(max(0.0, wait)):
                key.data.event(key.fd)
            now = time.monotonic()
            for i in list(running):
                done = running[i].result()
                if done is None and running[i].deadline <= now:
                    done = running[i].kill()
                if done is not None:
                    results[i] = done
                    del running[i]
    return [r for r in results if r is not None]


# How often an exited command's pipes-closed state is checked for its exit, where the system
# has no pidfd to tell it.
_REAP_POLL = 0.001


class _Running:
    """One command of `run_many`: its output so far, read as it comes, and its exit."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes] | _Spawned,
        timeout: float,
        sel: selectors.BaseSelector,
    ) -> None:
        self._proc, self._timeout, self._sel = proc, timeout, sel
        self.deadline = time.monotonic() + timeout
        assert proc.stdout is not None and proc.stderr is not None
        self._streams = {s.fileno(): s for s in (proc.stdout, proc.stderr)}
        self._out: dict[int, list[bytes]] = {fd: [] for fd in self._streams}
        for fd in self._streams:
            sel.register(fd, selectors.EVENT_READ, self)
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pass  # no pidfd: its exit is polled for once its pipes are closed
        else:
            sel.register(self._pidfd, selectors.EVENT_READ, self)

    @property
    def reaping(self) -> bool:
        """Its pipes are closed and no pidfd will say when it exits."""
        return not self._streams and self._pidfd is None and self._proc.returncode is None

    def event(self, fd: int) -> None:
        if fd == self._pidfd:
            self._forget_pidfd()  # it exited: `result` reaps it
            return
        chunk = os.read(fd, 65536)
        if chunk:
            self._out[fd].append(chunk)
        else:
            self._sel.unregister(fd)
            self._streams.pop(fd).close()

    def result(self) -> Result | None:
        """Its Result once both pipes are closed and it has exited, else None."""
        if self._streams or self._pidfd is not None or self._proc.poll() is None:
            return None
        out, err = (b"".join(chunks) for chunks in self._out.values())
        return Result(self._proc.returncode, out, err.decode("utf-8", "replace"))

    def kill(self) -> Result:
        """Past its deadline: its whole process group killed, as `run` does."""
        with contextlib.suppress(OSError):  # the group may be gone already
            os.killpg(self._proc.pid, signal.SIGKILL)
        for fd, stream in self._streams.items():
            self._sel.unregister(fd)
            stream.close()
        self._streams.clear()
        self._forget_pidfd()
        try:
            self._proc.wait(timeout=_REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            # Not dead even so (an uninterruptible wait): left unreaped rather than waited on.
            self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=_REAP_TIMEOUT)
        return Result(None, b"", f"timed out after {self._timeout:g}s", True)

    def _forget_pidfd(self) -> None:
        if self._pidfd is not None:
            self._sel.unregister(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None


# What Popen's `restore_signals` sets back to the default in the child: Python ignores them.
_DEFAULT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)


def _inherited_fds() -> list[int] | None:
    """This process's inheritable descriptors above stderr, which Popen's `close_fds` would
    close in the child (Python makes its own descriptors non-inheritable); None when they
    cannot be listed."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    out = []
    for name in names:
        fd = int(name)
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            if fd > 2 and os.get_inheritable(fd):
                out.append(fd)
    return out


def _stdin_pipe(data: bytes) -> tuple[int, int] | None:
    """A pipe (read end, write end) that holds `data` whole, so that writing it never waits
    on the command; None when this one cannot (its size is not told, or is smaller)."""
    asking = getattr(fcntl, "F_GETPIPE_SZ", None)  # Linux's: elsewhere the size is not told
    if asking is None:
        return None
    read_end, write_end = os.pipe()
    try:
        size = fcntl.fcntl(write_end, asking)
    except OSError:
        size = 0
    if len(data) > size:
        os.close(read_end)
        os.close(write_end)
        return None
    return read_end, write_end


def _spawn(
    argv: Sequence[str],
    exe: str,
    env: Mapping[str, str],
    closing: Sequence[int],
    stdin: tuple[tuple[int, int], bytes] | None = None,
) -> _Spawned | Result | None:
    """The command started as Popen would start it for `run` (stdin from /dev/null, stdout
    and stderr piped, a session of its own, the signals Python ignores set back to their
    default, no descriptor but those three), through posix_spawn: a third of Popen's CPU per
    command. `stdin`: a pipe that holds the bytes given (`_stdin_pipe`) and those bytes,
    written to it whole and closed once it started. None when this system's posix_spawn
    cannot (no session of its own); the pipe is closed then too."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    given: tuple[int, int, str, int, int] | tuple[int, int, int] = (
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)
        if stdin is None
        else (os.POSIX_SPAWN_DUP2, stdin[0][0], 0)
    )
    actions = [
        given,
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
        *((os.POSIX_SPAWN_CLOSE, fd) for fd in closing),
    ]
    try:
        pid = os.posix_spawn(
            exe, list(argv), env, file_actions=actions, setsid=True, setsigdef=_DEFAULT_SIGNALS
        )
    except (NotImplementedError, OSError) as exc:
        os.close(out_r)
        os.close(err_r)
        if stdin is not None:
            os.close(stdin[0][1])
        if isinstance(exc, NotImplementedError):
            return None
        return Result(None, b"", f"cannot run {argv[0]}: {exc.strerror or exc}")
    finally:
        os.close(out_w)
        os.close(err_w)
        if stdin is not None:
            os.close(stdin[0][0])
    if stdin is not None:
        with contextlib.suppress(BrokenPipeError):  # it ended without reading: its exit says
            os.write(stdin[0][1], stdin[1])  # whole: the pipe holds it (`_stdin_pipe`)
        os.close(stdin[0][1])
    return _Spawned(pid, out_r, err_r)


class _Pipe:
    """The read end of a child's pipe, as `_Running` uses a Popen's."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _Spawned:
    """What `_Running` uses of a Popen, for a command `_spawn` started."""

    def __init__(self, pid: int, out: int, err: int) -> None:
        self.pid = pid
        self.stdout, self.stderr = _Pipe(out), _Pipe(err)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 0  # reaped elsewhere: as Popen says then
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(_REAP_POLL)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


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
    stdin: str | bytes | None = None,
    base: Mapping[str, str] | None = None,
    scan_from: str | None = None,
) -> Result:
    """`git -C repo args...` through the git door (`git_door.py`): `env` adds to the
    environment (never to what the door sets), `base` replaces the one the policy starts from,
    `stdin` is written to its standard input; `scan_from`: where git finds its repository,
    when not `repo` (a private git dir, `private_git.py`). A command the door will not run (a
    config it cannot read, a remote helper) is not started: its Result says why (rc None)."""
    door = _door(repo, args, env, base, scan_from)
    if isinstance(door, Result):
        return door
    return _run(door[0], None, door[1], timeout, stdin)


def git_many(
    calls: Sequence[tuple[str, Sequence[str]]],
    *,
    width: int,
    timeout: float = LOCAL_GIT_TIMEOUT,
    stdins: Sequence[str | None] = (),
) -> list[Result]:
    """`git -C repo args...` for each (repo, args), `width` at a time (`run_many`), each
    through the git door; `stdins`: what each is given on its standard input (none: closed)."""
    from fm_teardown.adapters import git_door

    policy = environment()  # once for all: copying the environment costs more than the rest
    # The user's and the system's config files, read once for the batch: each command's
    # look reads only its repository's own (a fleet's slots share all the rest).
    outside = git_door.outside_keys(policy)
    doors = [_door(repo, args, None, None, policy=policy, outside=outside) for repo, args in calls]
    return _many(doors, timeout, width, [None if x is None else x.encode() for x in stdins])


def _door(
    repo: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    base: Mapping[str, str] | None,
    scan_from: str | None = None,
    policy: Mapping[str, str] | None = None,
    outside: frozenset[tuple[str, str, str]] | None = None,
) -> tuple[list[str], dict[str, str]] | Result:
    """The argv and environment the door gives `git -C repo args...`, or the Result of a
    command it will not run. `env` is added after the door's own settings, which it may not
    change (only the repository and index variables a private git dir sets); `policy`: the
    runner's environment for `base`, when made already; `outside`: the user's and the
    system's driver keys, when read already for a batch."""
    from fm_teardown.adapters import git_door

    if policy is None:
        policy = environment(None, base)
    at = git_door.subcommand(args)
    user: Sequence[tuple[str, str]] = ()
    if at is not None and git_door.needs_network(args[at:]):
        user = _user_network_config(repo, policy)
    call = git_door.call(
        repo,
        args,
        policy,
        user=user,
        scan_from=scan_from,
        hooks_run=lambda: _runs_configured_hooks(policy),
        outside=outside,
    )
    if call.refused is not None:
        return Result(None, b"", call.refused)
    out = call.env
    out.update((k, v) for k, v in (env or {}).items() if not git_door.owned(k))
    return call.argv, out


# Whether the git on each PATH reads configured hooks (`hook.<name>.command`, git 2.54 and
# later), asked once per PATH and only when a repository configures one.
_hooks_run_by: dict[str, bool] = {}


def _runs_configured_hooks(policy: Mapping[str, str]) -> bool:
    """Whether the git on the policy's PATH is 2.54 or later, or does not say its version
    (then it is taken to run them). `git --version` reads no repository and no config file,
    so it runs here, outside the door, from `/`."""
    path = policy.get("PATH") or os.defpath
    known = _hooks_run_by.get(path)
    if known is None:
        r = _run(["git", "--version"], "/", {"PATH": path, "LC_ALL": "C"}, LOCAL_GIT_TIMEOUT)
        try:
            major, minor = (int(x) for x in r.text.split()[2].split(".")[:2])
            known = r.rc != 0 or (major, minor) >= (2, 54)
        except (ValueError, IndexError):
            known = True
        if len(_hooks_run_by) >= 64:
            _hooks_run_by.clear()
        _hooks_run_by[path] = known
    return known


# The user's global credential helpers and ssh command, per repository (its conditional
# includes may depend on it) and per user config (the variables that select it and its files'
# stat), read once for the commands that need the network: a later run in the same process
# whose user config differs reads it afresh; bounded, as a long-lived process would grow it.
_user_net: dict[tuple[object, ...], list[tuple[str, str]]] = {}
_USER_NET_KEPT = 256


def _user_network_config(repo: str, policy: Mapping[str, str]) -> list[tuple[str, str]]:
    """(key, value) of the user's global `credential.*helper` and `core.sshCommand`, in order,
    as `git config --global` reads them (their includes followed): never the repository's."""
    from fm_teardown.adapters import git_door

    key = (os.path.abspath(repo), *_user_config_signature(policy))
    if key not in _user_net:
        if len(_user_net) >= _USER_NET_KEPT:
            _user_net.clear()
        door = _door(
            repo,
            ["config", "--global", "--includes", "-z", "--get-regexp",
             r"^(credential\.(.*\.)?helper|core\.sshcommand)$"],
            None,
            policy,
        )  # fmt: skip
        r = door if isinstance(door, Result) else _run(door[0], None, door[1], LOCAL_GIT_TIMEOUT)
        _user_net[key] = git_door.config_pairs(r.out) if r.rc == 0 else []
    return _user_net[key]


def _user_config_signature(policy: Mapping[str, str]) -> tuple[object, ...]:
    """What `git config --global` reads from: the variables that select the user's config
    files, and each file's stat (None: absent or unreadable)."""
    home = policy.get("HOME") or ""
    xdg = policy.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    files = [policy.get("GIT_CONFIG_GLOBAL") or os.path.join(home, ".gitconfig")]
    if xdg:
        files.append(os.path.join(xdg, "git", "config"))
    sig: list[object] = [home, xdg, policy.get("GIT_CONFIG_GLOBAL")]
    for path in files:
        try:
            st = os.stat(path)
            sig.append((path, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            sig.append((path, None))
    return tuple(sig)


# A full object name, SHA-1 or SHA-256.
HEX_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def rev(repo: str, spec: str) -> str | None:
    """The commit `spec` names in `repo`, or None when it does not name one."""
    r = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{spec}^{{commit}}")
    return r.text if r.ok and HEX_OID.fullmatch(r.text) else None
