"""The tmux adapter: one listing of the whole server, and killing a window by its id.

Everything goes through libtmux's command runner (`libtmux.common.tmux_cmd`), with three
additions the runner lacks and a teardown needs:
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
from enum import Enum, auto

from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.model.world import InventoryStatus, Pane, TmuxInventory

__all__ = [
    "PANE_FORMAT",
    "SEP",
    "TmuxResult",
    "Typed",
    "fleet_socket",
    "held_socket",
    "kill_pane",
    "list_panes",
    "list_panes_at",
    "quit_keys",
    "run",
    "sessions_doubt",
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
    from libtmux import exc
    from libtmux.common import tmux_cmd

    box: dict[str, object] = {}

    def call() -> None:
        try:
            box["result"] = tmux_cmd(*argv)
        except exc.TmuxCommandNotFound:
            box["error"] = "tmux is not installed"
        except Exception as e:  # the runner's own failure: report, never crash
            box["error"] = f"tmux could not be run: {e}"

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        _kill_hung_tmux_children()
        worker.join(2.0)
        return TmuxResult(1, [], [f"tmux did not answer within {timeout:g}s"], True)
    if "error" in box:
        return TmuxResult(127, [], [str(box["error"])])
    result = box["result"]
    return TmuxResult(
        int(getattr(result, "returncode", 1) or 0),
        list(getattr(result, "stdout", [])),
        list(getattr(result, "stderr", [])),
    )


def _kill_hung_tmux_children() -> None:
    """Kill the tmux client we started (a script wrapping tmux too) and what it started,
    each through `processes.send` (a pidfd, opened while its pid and start time are the
    ones read here)."""
    import signal

    import psutil

    from fm_teardown.adapters import processes
    from fm_teardown.model.world import Proc

    for child in psutil.Process(os.getpid()).children():
        try:
            argv = child.cmdline()
            if not any("tmux" in os.path.basename(a) for a in argv[:2]):
                continue
            for proc in [*child.children(recursive=True), child]:
                with contextlib.suppress(psutil.Error):
                    target = Proc(proc.pid, 0, proc.name(), None, None, proc.create_time())
                    processes.send(target, signal.SIGKILL)
        except psutil.Error:
            continue


def _absent(stderr: list[str]) -> bool:
    text = " ".join(stderr)
    return any(marker in text for marker in _ABSENT)


def _socket_dir() -> str:
    """Where tmux keeps the sockets of `-L NAME` and the default server."""
    return os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")


def _default_socket() -> str:
    return os.environ.get("TMUX", "").split(",")[0] or os.path.join(_socket_dir(), "default")


def fleet_socket(settings: Settings) -> str:
    """The socket of the server fm works with, as a path (the variables, else the default)."""
    if settings.tmux_socket_path:
        return settings.tmux_socket_path
    if settings.tmux_socket_name:
        return os.path.join(_socket_dir(), settings.tmux_socket_name)
    return _default_socket()


def _socket_variable(settings: Settings) -> str | None:
    """The variable that names the fleet's server, as set (None: the default server)."""
    if settings.tmux_socket_path:
        return f"FM_TMUX_SOCKET={settings.tmux_socket_path}"
    if settings.tmux_socket_name:
        return f"FM_TMUX_SOCKET_NAME={settings.tmux_socket_name}"
    return None


def _socket_problem(settings: Settings) -> str | None:
    """Why FM_TMUX_SOCKET or FM_TMUX_SOCKET_NAME cannot name a server, or None.

    A socket that does not exist, or is not a socket, is a wrong setting, not "no server":
    reading it as `missing` would make every other task look not live."""
    var = _socket_variable(settings)
    if var is None:
        return None
    path = fleet_socket(settings)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{var} names {path}, which does not exist"
    except OSError as exc:
        return f"{var} names {path}, which cannot be read: {exc.strerror}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{var} names {path}, which is not a socket"
    return None


# -- the user's other tmux servers, found by their sockets ------------------------------------
#
# Never by process name: a server binary may be renamed (a copy of tmux under another name
# serves all the same). A server is a listening unix socket: any in the user's tmux socket
# directory, and, anywhere else, one held by a process that serves terminals (the parent of a
# process with a controlling terminal, itself without one) and that answers as tmux does.

_LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags: a listening socket


def _listening_sockets() -> dict[str, str] | None:
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


def held_socket(pid: int, listening: dict[str, str] | None = None) -> str | None:
    """The path of a listening unix socket that process `pid` holds, if any: how a server is
    told from the processes it serves, whatever its name."""
    listening = _listening_sockets() if listening is None else listening
    if not listening:
        return None
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in listening:
            return listening[link[8:-1]]
    return None


def _same_socket(a: str, b: str) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _terminal_servers() -> list[tuple[int, int]]:
    """(pid, parent's pid) of this user's processes with a controlling terminal whose parent
    has none: the parent serves terminals (a tmux server, an ssh daemon, a terminal)."""
    uid = os.getuid()
    info: dict[int, tuple[int, int]] = {}  # pid -> (ppid, tty_nr)
    try:
        entries = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []
    for n in entries:
        try:
            if os.stat(f"/proc/{n}").st_uid != uid:
                continue
            with open(f"/proc/{n}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        try:
            info[int(n)] = (int(fields[1]), int(fields[4]))
        except (IndexError, ValueError):
            continue
    out = []
    for pid, (ppid, tty) in info.items():
        parent = info.get(ppid)
        if tty > 0 and ppid > 1 and parent is not None and parent[1] <= 0:
            out.append((pid, ppid))
    return out


@value
class _Server:
    """Another tmux server of the user: its socket, and its pid when it answered."""

    socket: str
    pid: int | None = None

    def __str__(self) -> str:
        return f"{self.socket} (pid {self.pid})" if self.pid else self.socket


def _user_servers(settings: Settings) -> list[_Server] | None:
    """The user's tmux servers other than the fleet's, found by their sockets; None when
    that cannot be told (/proc unreadable)."""
    listening = _listening_sockets()
    if listening is None:
        return None
    fleet = fleet_socket(settings)
    found: dict[str, _Server] = {}
    sockdir = _socket_dir()
    for path in sorted(set(listening.values())):
        if os.path.dirname(path) == sockdir and not _same_socket(path, fleet):
            found[path] = _Server(path, _answering_pid(settings, path))
    checked: set[int] = set()
    for _, server_pid in _terminal_servers():
        if server_pid in checked:
            continue
        checked.add(server_pid)
        held = held_socket(server_pid, listening)
        if held is None or held in found or _same_socket(held, fleet):
            continue
        pid = _answering_pid(settings, held)
        if pid is not None:  # it answers as tmux does
            found[held] = _Server(held, pid)
    return [found[p] for p in sorted(found)]


def _answering_pid(settings: Settings, socket: str) -> int | None:
    r = _run(["-u", f"-S{socket}", "display-message", "-p", "#{pid}"], settings.tmux_timeout)
    text = r.stdout[0].strip() if r.returncode == 0 and r.stdout else ""
    return int(text) if text.isdigit() else None


def _servers_named(servers: list[_Server]) -> str:
    shown = ", ".join(str(s) for s in servers[:5])
    return shown + (f" and {len(servers) - 5} more" if len(servers) > 5 else "")


def list_panes_at(settings: Settings, socket: str) -> TmuxInventory:
    """Every pane of the server on `socket` (another server of the user): so that a process
    in one of its panes can be named. No server there: NO_SERVER; any other failure: ERROR."""
    result = _run(
        ["-u", f"-S{socket}", "list-panes", "-a", "-F", PANE_FORMAT], settings.tmux_timeout
    )
    return _parsed(result, absent_ok=True)


# The fleet's server answered earlier in this run: "no server" there later (its last window
# was just killed) means that server is gone, not that fm looks at the wrong one.
_answered: set[str] = set()


def _no_server_doubt(settings: Settings, servers: list[_Server] | None, said: str) -> str:
    """No server answers on the fleet's socket. With a socket variable set, that is doubt:
    the variable names no running server. With none, the default server is authoritatively
    gone only when no other tmux server of this user runs."""
    var = _socket_variable(settings)
    path = fleet_socket(settings)
    if servers is None:
        found = "whether another tmux server runs cannot be told (/proc unreadable)"
    elif servers:
        found = f"other tmux servers of this user are running: {_servers_named(servers)}"
    else:
        found = "no other tmux server of this user was found"
    said = f" (tmux: {said})" if said else ""
    if var is not None:
        return f"{var}: no tmux server answers on {path}{said}; {found}"
    return (
        f"no tmux server answers on the default socket {path}{said}, but {found}; set "
        "FM_TMUX_SOCKET (the socket path) or FM_TMUX_SOCKET_NAME (as for tmux -L) to the fleet's "
        "server"
    )


def sessions_doubt(settings: Settings, inventory: TmuxInventory, sessions: set[str]) -> str | None:
    """With no socket variable set, a default server that has none of the sessions the records
    name while another tmux server of the user runs: fm may be looking at the wrong server
    (the operator's own, say), where every fleet window would read `missing`. Once the
    records' sessions were seen there in this run, their going later is the fleet's own doing
    (a teardown killed their last window)."""
    if _socket_variable(settings) is not None or not sessions:
        return None
    if inventory.status != InventoryStatus.OK:
        return None
    socket = fleet_socket(settings)
    if any(p.session in sessions for p in inventory.panes):
        _sessions_seen.add(socket)
        return None
    if socket in _sessions_seen:
        return None
    servers = _user_servers(settings)
    if servers is not None and not servers:
        return None
    found = (
        f"other tmux servers of this user are running: {_servers_named(servers)}"
        if servers
        else "whether another tmux server runs cannot be told (/proc unreadable)"
    )
    return (
        f"the default tmux server ({socket}) has none of the sessions the records name "
        f"({', '.join(sorted(sessions)[:5])}), and {found}; set FM_TMUX_SOCKET (the socket "
        "path) or FM_TMUX_SOCKET_NAME (as for tmux -L) to the fleet's server"
    )


_sessions_seen: set[str] = set()


def _parsed(result: TmuxResult, *, absent_ok: bool) -> TmuxInventory:
    if result.timed_out:
        return TmuxInventory(InventoryStatus.ERROR, error=" ".join(result.stderr))
    if result.returncode != 0:
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
    """Every pane of the fleet's server in one call (no subprocess per task)."""
    problem = _socket_problem(settings)
    if problem:
        servers = _user_servers(settings)
        found = (
            f"tmux servers of this user found: {_servers_named(servers)}"
            if servers
            else "no tmux server of this user was found"
            if servers is not None
            else "whether a tmux server runs cannot be told (/proc unreadable)"
        )
        return TmuxInventory(InventoryStatus.ERROR, error=f"{problem}; {found}")
    result = run(settings, "list-panes", "-a", "-F", PANE_FORMAT)
    inventory = _parsed(result, absent_ok=True)
    socket = fleet_socket(settings)
    if inventory.status == InventoryStatus.NO_SERVER:
        if socket in _answered:
            return inventory  # it answered earlier in this run: it is gone now
        servers = _user_servers(settings)
        if _socket_variable(settings) is not None or servers != []:
            doubt = _no_server_doubt(settings, servers, inventory.error or "")
            return TmuxInventory(InventoryStatus.ERROR, error=doubt)
        return inventory
    if inventory.status == InventoryStatus.OK:
        _answered.add(socket)
    return inventory


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
