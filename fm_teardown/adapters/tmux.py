"""The tmux adapter: one listing of the whole server (and of the user's other servers, asked
in parallel), a pane's quit keys with their `synchronize-panes` check in one command, and
killing a pane by its id.

Everything goes through libtmux's command runner (`libtmux.common.tmux_cmd`, loaded without
the rest of libtmux: `libtmux_runner.py`), with three additions the runner lacks and a
teardown needs:
- a timeout: a hung tmux server must not hang the teardown, so the call runs in a worker
  thread and a tmux child still running at the deadline is killed (its state is `unreadable`);
- `-u`: without it tmux under a C locale prints tabs, control bytes and non-ASCII names as
  `_`, so names would not match the record;
- a narrow `-F` format with a unit-separator between fields.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable
from enum import Enum, auto

from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.model.world import InventoryStatus, Pane, TmuxInventory

__all__ = [
    "OTHER_SERVER_TIMEOUT",
    "PANE_FORMAT",
    "SEP",
    "TmuxResult",
    "Typed",
    "fleet_socket",
    "held_socket",
    "held_sockets",
    "kill_pane",
    "list_panes",
    "list_panes_at",
    "list_panes_many",
    "list_panes_started",
    "listening_sockets",
    "owned",
    "quit_keys",
    "run",
    "same_socket",
    "selecting",
    "socket_dir",
    "socket_variable",
    "tmux_env",
]

SEP = "\x1f"
PANE_FORMAT = SEP.join(
    [
        "#{pane_pid}",
        "#{pane_dead}",
        "#{window_id}",
        "#{pane_id}",
        "#{pid}",
        "#{session_name}",
        "#{window_name}",
    ]
)
# tmux's own words for "there is no server (or no such session) at all".
_ABSENT = (
    "no server running on",
    "can't find session",
    "No such file or directory",
    "Connection refused",
    "server exited unexpectedly",
    # The server went away while answering (it exits once its last window is killed).
    "lost server",
)


@value
class TmuxResult:
    returncode: int
    stdout: list[str]
    stderr: list[str]
    timed_out: bool = False


def _server_args(settings: Settings) -> list[str]:
    args = ["-u"]
    if settings.tmux_socket_path:
        args.append(f"-S{settings.tmux_socket_path}")
    elif settings.tmux_socket_name:
        args.append(f"-L{settings.tmux_socket_name}")
    return args


def run(settings: Settings, *args: str) -> TmuxResult:
    return _run([*_server_args(settings), *args], settings.tmux_timeout)


def _run(argv: list[str], timeout: float) -> TmuxResult:
    return _run_many([argv], timeout)[0]


def _run_many(argvs: list[list[str]], timeout: float) -> list[TmuxResult]:
    """Run each tmux command line at once, each in a worker thread, all within `timeout`:
    a tmux child still running at the deadline is killed (that result `timed_out`)."""
    return _start_many(argvs, timeout)()


def _start_many(argvs: list[list[str]], timeout: float) -> Callable[[], list[TmuxResult]]:
    """`_run_many` started: the tmux commands run while the caller goes on; calling what
    this returns waits for them (within `timeout` from now) and gives their results."""
    from fm_teardown.adapters.libtmux_runner import runner

    tmux_cmd, not_found = runner()
    boxes: list[dict[str, object]] = [{} for _ in argvs]

    def call(argv: list[str], box: dict[str, object]) -> None:
        try:
            box["result"] = tmux_cmd(*argv)
        except not_found:
            box["error"] = "tmux is not installed"
        except Exception as e:  # the runner's own failure: report, never crash
            box["error"] = f"tmux could not be run: {e}"

    workers = [
        threading.Thread(target=call, args=(argv, box), daemon=True)
        for argv, box in zip(argvs, boxes, strict=True)
    ]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + timeout

    def results() -> list[TmuxResult]:
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        hung = [w.is_alive() for w in workers]
        if any(hung):
            _kill_hung_tmux_children()
            for worker in workers:
                worker.join(2.0)
        out: list[TmuxResult] = []
        for late, box in zip(hung, boxes, strict=True):
            if late:
                out.append(TmuxResult(1, [], [f"tmux did not answer within {timeout:g}s"], True))
            elif "error" in box:
                out.append(TmuxResult(127, [], [str(box["error"])]))
            else:
                result = box["result"]
                out.append(
                    TmuxResult(
                        int(getattr(result, "returncode", 1) or 0),
                        list(getattr(result, "stdout", [])),
                        list(getattr(result, "stderr", [])),
                    )
                )
        return out

    return results


def _kill_hung_tmux_children() -> None:
    """Kill the tmux client we started (a script wrapping tmux too) and what it started,
    each through `processes.send` (a pidfd, opened while its pid and start time are the
    ones read here)."""
    import signal

    import psutil

    from fm_teardown.adapters import processes
    from fm_teardown.model.world import Proc, ProcStat

    for child in psutil.Process(os.getpid()).children():
        try:
            argv = child.cmdline()
            if not any("tmux" in os.path.basename(a) for a in argv[:2]):
                continue
            for proc in [*child.children(recursive=True), child]:
                with contextlib.suppress(psutil.Error):
                    target = Proc(
                        proc.pid, 0, proc.name(), None, None, ProcStat(proc.create_time())
                    )
                    processes.send(target, signal.SIGKILL)
        except psutil.Error:
            continue


def _absent(stderr: list[str]) -> bool:
    text = " ".join(stderr)
    return any(marker in text for marker in _ABSENT)


def socket_dir() -> str:
    """Where tmux keeps the sockets of `-L NAME` and the default server."""
    return os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")


def _default_socket() -> str:
    return os.environ.get("TMUX", "").split(",")[0] or os.path.join(socket_dir(), "default")


def fleet_socket(settings: Settings) -> str:
    """The socket of the server fm works with, as a path (the variables, else the default)."""
    if settings.tmux_socket_path:
        return settings.tmux_socket_path
    if settings.tmux_socket_name:
        return os.path.join(socket_dir(), settings.tmux_socket_name)
    return _default_socket()


def socket_variable(settings: Settings) -> str | None:
    """The variable that names the fleet's server, as set (None: the default server)."""
    if settings.tmux_socket_path:
        return f"FM_TMUX_SOCKET={settings.tmux_socket_path}"
    if settings.tmux_socket_name:
        return f"FM_TMUX_SOCKET_NAME={settings.tmux_socket_name}"
    return None


def selecting(socket: str) -> str:
    """The variable setting that points fm at the server on `socket`."""
    if os.path.dirname(socket) == socket_dir():
        return f"FM_TMUX_SOCKET_NAME={os.path.basename(socket)} (or FM_TMUX_SOCKET={socket})"
    return f"FM_TMUX_SOCKET={socket}"


def _socket_problem(settings: Settings) -> str | None:
    """Why FM_TMUX_SOCKET or FM_TMUX_SOCKET_NAME cannot name a server, or None.

    A path that is there but is not a socket (or cannot be read) is a wrong setting, not "no
    server". A socket path that does not exist is no server there: whether that means the
    fleet's server is gone or elsewhere is the observation's to tell (`observe/servers.py`),
    from the other servers of the user and the records' windows."""
    var = socket_variable(settings)
    if var is None:
        return None
    path = fleet_socket(settings)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{var} names {path}, which cannot be read: {exc.strerror}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{var} names {path}, which is not a socket"
    return None


# -- the user's other tmux servers: their sockets, and asking them ------------------------------
#
# Never by process name alone: a server binary may be renamed (a copy of tmux under another
# name serves all the same). A server holds a listening unix socket; /proc/net/unix names the
# path it was bound to even after that file was removed (and then nothing can connect to it).
# Which processes are servers is the observation's to tell (`observe/servers.py`).

_LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags: a listening socket


def listening_sockets() -> dict[str, str] | None:
    """Socket inode -> path of every listening unix socket bound to a path (None: unreadable)."""
    out: dict[str, str] = {}
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) < 8 or not fields[7].startswith("/"):
                    continue
                try:
                    flags = int(fields[3], 16)
                except ValueError:
                    continue
                if flags & _LISTENING:
                    out[fields[6]] = fields[7]
    except OSError:
        return None
    return out


def held_sockets(pid: int, listening: dict[str, str]) -> list[str]:
    """The paths of the listening unix sockets that process `pid` holds, as they were bound
    (the file may be gone since): how a server is told from the processes it serves."""
    if not listening:
        return []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    out: list[str] = []
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in listening:
            out.append(listening[link[8:-1]])
    return out


def held_socket(pid: int, listening: dict[str, str] | None = None) -> str | None:
    """The first listening unix socket `pid` holds, if any."""
    listening = listening_sockets() if listening is None else listening
    held = held_sockets(pid, listening or {})
    return held[0] if held else None


def same_socket(a: str, b: str) -> bool:
    """The same socket file: by device and inode when both are there, else by path."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return os.path.normpath(a) == os.path.normpath(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def tmux_env(pid: int) -> tuple[str, int] | None:
    """The `TMUX` variable tmux gives the processes of its panes, from `/proc/<pid>/environ`:
    (the server's socket, the server's pid); None when absent or unreadable."""
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = b""
        while len(raw) < _ENVIRON_MAX:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            raw += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    for entry in raw.split(b"\0"):
        if entry.startswith(b"TMUX="):
            parts = entry[5:].decode("utf-8", "replace").rsplit(",", 2)
            if len(parts) == 3 and parts[1].isdigit():
                return parts[0], int(parts[1])
            return None
    return None


_ENVIRON_MAX = 1 << 20


def owned(pid: int) -> bool:
    """Is process `pid` this user's?"""
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def list_panes_at(settings: Settings, socket: str) -> TmuxInventory:
    """Every pane of the server on `socket` (another server of the user): so that a process
    in one of its panes can be named. No server there: NO_SERVER; any other failure: ERROR."""
    return list_panes_many(settings, [socket])[socket]


# Another server of the user is asked for at most this long (it is no fleet's server fm was
# pointed at: a hung one is "cannot be listed", and only counts where it may hold the fleet).
OTHER_SERVER_TIMEOUT = 3.0


def list_panes_many(settings: Settings, sockets: list[str]) -> dict[str, TmuxInventory]:
    """Every pane of each server on `sockets`, asked all at once (one tmux client each)."""
    timeout = min(settings.tmux_timeout, OTHER_SERVER_TIMEOUT)
    argvs = [["-u", f"-S{socket}", "list-panes", "-a", "-F", PANE_FORMAT] for socket in sockets]
    results = _run_many(argvs, timeout)
    return {
        socket: _parsed(result, absent_ok=True)
        for socket, result in zip(sockets, results, strict=True)
    }


def _parsed(result: TmuxResult, *, absent_ok: bool) -> TmuxInventory:
    if result.timed_out:
        return TmuxInventory(InventoryStatus.ERROR, error=" ".join(result.stderr))
    if result.returncode != 0:
        if [line.strip() for line in result.stderr if line.strip()] == ["no current target"]:
            # A server without a session (one exiting after its last window was killed, or
            # one kept with `exit-empty off`) answers `list-panes -a` so: it holds no pane.
            return TmuxInventory(InventoryStatus.OK)
        if absent_ok and _absent(result.stderr):
            return TmuxInventory(InventoryStatus.NO_SERVER, error=" ".join(result.stderr))
        return TmuxInventory(
            InventoryStatus.ERROR, error=" ".join(result.stderr) or "tmux list-panes failed"
        )
    panes = []
    for line in result.stdout:
        if line == "":
            continue
        fields = line.split(SEP, 6)
        if len(fields) != 7 or not fields[0].isdigit() or not fields[4].isdigit():
            return TmuxInventory(
                InventoryStatus.ERROR, error=f"unparseable tmux pane line: {line[:80]!r}"
            )
        pid, dead, window_id, pane_id, server, session, window_name = fields
        panes.append(
            Pane(session, window_name, window_id, pane_id, int(pid), dead == "1", int(server))
        )
    return TmuxInventory(InventoryStatus.OK, tuple(panes))


def list_panes(settings: Settings) -> TmuxInventory:
    """Every pane of the fleet's server in one call (no subprocess per task). No server on
    its socket (the file there or not) is NO_SERVER: the observation tells whether the
    fleet's server is gone or elsewhere (`observe/servers.py`)."""
    return list_panes_started(settings)()


def list_panes_started(settings: Settings) -> Callable[[], TmuxInventory]:
    """`list_panes`, started: tmux lists while the caller goes on (the process scan); calling
    what this returns waits for the listing. The tmux client it starts is fm's child, which the
    scan taken meanwhile leaves out (`processes.scan`)."""
    problem = _socket_problem(settings)
    if problem:
        return lambda: TmuxInventory(InventoryStatus.ERROR, error=problem)
    argv = [*_server_args(settings), "list-panes", "-a", "-F", PANE_FORMAT]
    finish = _start_many([argv], settings.tmux_timeout)
    return lambda: _parsed(finish()[0], absent_ok=True)


def kill_pane(settings: Settings, pane_id: str) -> TmuxResult:
    """Kill one pane by its id (`%N`): only the panes decided on are ever killed, so a pane
    joined into the window after the last check survives (the window with it)."""
    return run(settings, "kill-pane", "-t", pane_id)


class Typed(Enum):
    """What became of a pane's quit keys."""

    SENT = auto()
    SYNCHRONIZED = auto()  # `synchronize-panes` on (or tmux could not say): nothing typed
    FAILED = auto()  # tmux refused (the pane is gone) or did not answer


_SENT_MARK = "fm:keys-sent"
_SYNC_MARK = "fm:synchronized"


def quit_keys(settings: Settings, pane_id: str, keys: tuple[tuple[str, bool], ...]) -> Typed:
    """Type `keys` into one pane by its id (`%N`) only if its window's `synchronize-panes` is
    off, in ONE tmux command that tmux evaluates itself (`if-shell -F` expands the format, no
    shell runs): nothing gets between the check and the keys, and nothing between the keys.
    Key names (`Enter`, `C-c`) are sent as keys; a literal text is sent as its characters,
    which tmux does for any argument that is not a key name (the quit texts all start with
    `/`, never a key name: `tests/test_graceful_quit.py` checks the table)."""
    typed = " ".join(_quoted(text) for text, _ in keys)
    result = run(
        settings,
        "if-shell",
        "-F",
        "-t",
        pane_id,
        "#{synchronize-panes}",
        f"display-message -p {_SYNC_MARK}",
        f"send-keys -t {_quoted(pane_id)} {typed} ; display-message -p {_SENT_MARK}",
    )
    said = "".join(result.stdout)
    if result.returncode != 0 or result.timed_out:
        return Typed.FAILED
    if _SENT_MARK in said:
        return Typed.SENT
    return Typed.SYNCHRONIZED


def _quoted(arg: str) -> str:
    """One argument in tmux's command syntax: single-quoted (nothing expands inside)."""
    if "'" in arg or "\n" in arg:
        raise ValueError(f"not a quit key fm sends: {arg!r}")
    return f"'{arg}'"
