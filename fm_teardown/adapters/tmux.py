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

from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.model.world import InventoryStatus, Pane, TmuxInventory

__all__ = [
    "PANE_FORMAT",
    "SEP",
    "TmuxResult",
    "foreground_group",
    "kill_window",
    "list_panes",
    "other_servers",
    "run",
    "send_keys",
    "synchronized",
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
    from libtmux import exc
    from libtmux.common import tmux_cmd

    argv = [*_server_args(settings), *args]
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
    worker.join(settings.tmux_timeout)
    if worker.is_alive():
        _kill_hung_tmux_children()
        worker.join(2.0)
        return TmuxResult(1, [], [f"tmux did not answer within {settings.tmux_timeout:g}s"], True)
    if "error" in box:
        return TmuxResult(127, [], [str(box["error"])])
    result = box["result"]
    return TmuxResult(
        int(getattr(result, "returncode", 1) or 0),
        list(getattr(result, "stdout", [])),
        list(getattr(result, "stderr", [])),
    )


def _kill_hung_tmux_children() -> None:
    """Kill the tmux client we started (a script wrapping tmux too) and what it started."""
    import psutil

    for child in psutil.Process(os.getpid()).children():
        try:
            argv = child.cmdline()
            if not any("tmux" in os.path.basename(a) for a in argv[:2]):
                continue
            for proc in [*child.children(recursive=True), child]:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        except psutil.Error:
            continue


def _absent(stderr: list[str]) -> bool:
    text = " ".join(stderr)
    return any(marker in text for marker in _ABSENT)


def _socket_dir() -> str:
    """Where tmux keeps the sockets of `-L NAME` and the default server."""
    return os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")


def _socket_problem(settings: Settings) -> str | None:
    """Why FM_TMUX_SOCKET or FM_TMUX_SOCKET_NAME cannot name a server, or None.

    A socket that does not exist, or is not a socket, is a wrong setting, not "no server":
    reading it as `missing` would make every other task look not live. A socket that exists
    but where no server answers is a server that is gone (`missing`).
    """
    path = settings.tmux_socket_path
    var = "FM_TMUX_SOCKET"
    if not path and settings.tmux_socket_name:
        path = os.path.join(_socket_dir(), settings.tmux_socket_name)
        var = f"FM_TMUX_SOCKET_NAME={settings.tmux_socket_name}"
    if not path:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{var} names {path}, which does not exist"
    except OSError as exc:
        return f"{var} names {path}, which cannot be read: {exc.strerror}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{var} names {path}, which is not a socket"
    return None


def other_servers() -> list[tuple[int, str | None]] | None:
    """The tmux processes of this user that are running (pid, a socket path they listen on,
    if it can be read), or None when the process table cannot be read."""
    uid = os.getuid()
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return None
    found: list[int] = []
    for pid in pids:
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/comm", "rb") as f:
                comm = f.read().strip()
        except OSError:
            continue  # gone meanwhile
        if comm.startswith(b"tmux"):
            found.append(pid)
    if not found:
        return []
    paths: dict[str, str] = {}  # socket inode -> path
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) >= 8 and fields[7].startswith("/"):
                    paths[fields[6]] = fields[7]
    except OSError:
        pass
    out: list[tuple[int, str | None]] = []
    for pid in found:
        sock: str | None = None
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in paths:
                    sock = paths[link[8:-1]]
                    break
        except OSError:
            pass
        out.append((pid, sock))
    return out


# The default socket answered earlier in this run: it is the server fm works with, so "no
# server" there later (its last window was just killed) means that server is gone.
_default_answered = threading.Event()


def _default_doubt() -> str | None:
    """No server answers on the default socket: authoritative only when no tmux server of
    this user runs at all; otherwise fm may simply be looking at the wrong server."""
    servers = other_servers()
    default = os.environ.get("TMUX", "").split(",")[0] or os.path.join(_socket_dir(), "default")
    if servers is None:
        return (
            f"no tmux server answers on the default socket {default}, and whether another "
            "tmux server runs cannot be told (/proc unreadable): set FM_TMUX_SOCKET or "
            "FM_TMUX_SOCKET_NAME to the fleet's server"
        )
    if not servers:
        return None
    named = ", ".join(f"{sock or 'socket unknown'} (pid {pid})" for pid, sock in servers[:5])
    more = f" and {len(servers) - 5} more" if len(servers) > 5 else ""
    return (
        f"no tmux server answers on the default socket {default}, but other tmux servers of "
        f"this user are running: {named}{more}; set FM_TMUX_SOCKET (the socket path) or "
        "FM_TMUX_SOCKET_NAME (as for tmux -L) to the fleet's server"
    )


def list_panes(settings: Settings) -> TmuxInventory:
    """Every pane of the server in one call (no subprocess per task)."""
    problem = _socket_problem(settings)
    if problem:
        return TmuxInventory(InventoryStatus.ERROR, error=problem)
    result = run(settings, "list-panes", "-a", "-F", PANE_FORMAT)
    if result.timed_out:
        return TmuxInventory(InventoryStatus.ERROR, error=" ".join(result.stderr))
    if result.returncode != 0:
        if _absent(result.stderr):
            default = not settings.tmux_socket_path and not settings.tmux_socket_name
            if default and not _default_answered.is_set():
                doubt = _default_doubt()
                if doubt is not None:
                    return TmuxInventory(InventoryStatus.ERROR, error=doubt)
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
    if not settings.tmux_socket_path and not settings.tmux_socket_name:
        _default_answered.set()
    return TmuxInventory(InventoryStatus.OK, tuple(panes))


def kill_window(settings: Settings, window_id: str) -> TmuxResult:
    """Kill one window by its id (`@N`): exact, and immune to names containing `.` or `:`."""
    return run(settings, "kill-window", "-t", window_id)


def send_keys(settings: Settings, pane_id: str, keys: tuple[tuple[str, bool], ...]) -> bool:
    """Type `keys` into one pane by its id (`%N`) in ONE `send-keys` call, so that nothing
    gets between them. Key names (`Enter`, `C-c`) are sent as keys; a literal text is sent as
    its characters, which tmux does for any argument that is not a key name (the quit texts
    all start with `/`, never a key name: `tests/test_graceful_quit.py` checks the table).
    True when tmux took them."""
    return run(settings, "send-keys", "-t", pane_id, *(text for text, _ in keys)).returncode == 0


# -- the endpoint step's checks, right before it types into a pane or kills a window ------------


def foreground_group(pane_pid: int) -> int | None:
    """The foreground process group of the terminal of a pane's process (`tpgid` in
    `/proc/<pid>/stat`): who gets the keys typed into the pane. None when it cannot be read."""
    try:
        with open(f"/proc/{pane_pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        tpgid = int(fields[5])
    except (IndexError, ValueError):
        return None
    return tpgid if tpgid > 0 else None


def synchronized(settings: Settings, pane_id: str) -> bool | None:
    """Whether the window of pane `pane_id` has `synchronize-panes` on (tmux then types keys
    sent to one pane into every pane of the window); None when tmux cannot say."""
    result = run(settings, "display-message", "-p", "-t", pane_id, "#{synchronize-panes}")
    if result.returncode != 0 or result.timed_out:
        return None
    value = "".join(result.stdout).strip()
    if value not in ("0", "1", ""):
        return None
    return value == "1"
