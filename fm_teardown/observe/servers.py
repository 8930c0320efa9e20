"""The user's tmux servers, whatever their binary is called, and whether fm reads the right one.

A tmux server is told by what it does, never by its name alone: it holds a listening unix
socket (`/proc/net/unix` keeps the path it was bound to even after the file is removed), and
the processes of its panes are its children, each with `TMUX=<socket>,<server pid>,…` in its
environment; tmux names its own process `<binary>: server`. A server started with `tmux -D`
from a terminal has that terminal; its panes have terminals of their own.

A server is listed through the socket it holds, and only if the server answering there is that
process (by its pid); one whose socket file is gone (a /tmp cleaner) cannot be listed by anyone:
its panes are unknown, never "no pane" (`Server.why`).

Which server is the fleet's (docs/spec.md §15.3):
- the records' `fm-<id>` windows say where the fleet is: when the server fm reads holds none
  of them while another server of the user holds one, fm reads the wrong server (whatever the
  socket variables say) and the inventory is unreadable, naming that server and the variable
  that selects it (`fleet_doubt`);
- a server that is gone is gone: no server on fm's socket and none of the user's servers
  holding a record's window means every endpoint is `missing`; the user's other servers, for
  other work, change nothing;
- a server that cannot be listed may hold the fleet's windows when its socket was fm's own
  (the fleet's socket file removed under it) or when processes of its panes work in the
  fleet's slots: then that cannot be told either;
- vantage: fm and the fleet's server must see the same files (`vantage_problem`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from fm_teardown.adapters import tmux
from fm_teardown.adapters.processes import mount_namespace
from fm_teardown.model.paths import is_within
from fm_teardown.model.process_kind import is_tmux
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.model.world import (
    InventoryDoubt,
    InventoryStatus,
    Proc,
    ProcessTable,
    TmuxInventory,
)

__all__ = ["Server", "Servers", "named_server", "vantage_problem"]


def named_server(name: str) -> bool:
    """Does a process name (comm) say tmux server? `tmux`, and the `<binary>: server` tmux
    names its server process with, whatever the binary (`process_kind.is_tmux`)."""
    return is_tmux(name, "")


@value
class Server:
    """A tmux server of the user other than the one fm reads: its process, the socket it
    holds (as bound), and its panes, or why they cannot be listed."""

    pid: int
    socket: str
    listing: TmuxInventory | None = None
    why: str | None = None  # None when listed

    def __str__(self) -> str:
        return f"{self.socket} (pid {self.pid})"


class Servers:
    """The tmux servers of the user as seen from one process scan, each worked out once."""

    def __init__(self, settings: Settings, inventory: TmuxInventory, table: ProcessTable) -> None:
        self._settings = settings
        self._inventory = inventory
        self._table = table
        self._fleet_pids = inventory.server_pids
        self._listening: dict[str, str] | None = None
        self._read_listening = False
        self._servers: dict[int, Server | None] = {}

    # -- one process ----------------------------------------------------------------------------

    def _sockets(self) -> dict[str, str] | None:
        if not self._read_listening:
            self._listening = tmux.listening_sockets()
            self._read_listening = True
        return self._listening

    def serves(self, parent: Proc, child: Proc) -> bool:
        """Is `parent` (not the fleet's server) a tmux server, `child` perhaps a pane's
        process? By its name, by the `TMUX` variable tmux gave `child`, or, where `child`
        has a terminal that `parent` does not share, by a socket that answers as tmux does
        with `parent`'s pid."""
        if parent.pid in self._fleet_pids or parent.pid <= 1:
            return False
        if named_server(parent.name):
            return True
        if not child.tty or child.tty == parent.tty:
            return False
        env = tmux.tmux_env(child.pid)
        if env is not None and env[1] == parent.pid:
            return True
        return self.server(parent.pid) is not None

    def server(self, pid: int) -> Server | None:
        """The server process `pid` is, listed, once per scan; None when `pid` holds no
        listening socket (no server at all) or, holding one, neither answers as tmux nor says
        it is one."""
        if pid not in self._servers:
            self._servers[pid] = self._servers_of([pid]).get(pid)
        return self._servers[pid]

    def _servers_of(self, pids: list[int]) -> dict[int, Server]:
        """The servers among `pids`, their sockets asked all at once."""
        listening = self._sockets() or {}
        held = {pid: tmux.held_sockets(pid, listening) for pid in pids}
        sockets = sorted({s for found in held.values() for s in found if os.path.exists(s)})
        listings = tmux.list_panes_many(self._settings, sockets) if sockets else {}
        out: dict[int, Server] = {}
        for pid in pids:
            found = held[pid]
            if not found:
                continue
            server = _listed(pid, found, listings)
            if server.why is not None and not self._says_tmux(pid):
                continue  # another program's socket: no tmux server
            out[pid] = server
        for pid, server in out.items():
            self._servers[pid] = server
        return out

    def _says_tmux(self, pid: int) -> bool:
        proc = self._table.procs.get(pid)
        if proc is not None and named_server(proc.name):
            return True
        for child in self._table.children.get(pid, ()):
            env = tmux.tmux_env(child)
            if env is not None and env[1] == pid:
                return True
        return False

    # -- every server of the user ---------------------------------------------------------------

    def others(self) -> list[Server] | None:
        """Every tmux server of this user but the one fm reads, listed where it can be; None
        when that cannot be told (`/proc/net/unix` unreadable)."""
        listening = self._sockets()
        if listening is None:
            return None
        procs = self._table.procs
        candidates: set[int] = set()
        for proc in procs.values():
            if proc.zombie or proc.pid <= 1 or proc.pid in self._fleet_pids:
                continue
            if named_server(proc.name):
                candidates.add(proc.pid)
                continue
            parent = procs.get(proc.ppid)
            if (
                parent is not None
                and parent.pid > 1
                and parent.pid not in self._fleet_pids
                and proc.tty
                and proc.tty != parent.tty
                and parent.pid not in candidates
            ):
                env = tmux.tmux_env(proc.pid)
                if env is not None and env[1] == parent.pid:
                    candidates.add(parent.pid)
        mine = sorted(pid for pid in candidates if pid not in self._servers and tmux.owned(pid))
        self._servers_of(mine)
        found = [s for pid in sorted(candidates) if (s := self._servers.get(pid)) is not None]
        # A socket in the user's tmux socket directory that no process seen holds (the scan
        # cannot see every process): asked by its path.
        held = {s.socket for s in found}
        fleet = tmux.fleet_socket(self._settings)
        sockdir = tmux.socket_dir()
        loose = sorted(
            path
            for path in set(listening.values())
            if os.path.dirname(path) == sockdir
            and path not in held
            and not tmux.same_socket(path, fleet)
        )
        for path, listing in (tmux.list_panes_many(self._settings, loose) if loose else {}).items():
            pids = listing.server_pids - self._fleet_pids
            if listing.status == InventoryStatus.OK and pids:
                found.append(Server(min(pids), path, listing))
        return found

    def fleet_doubt(
        self, windows: set[str], slots: Iterable[str]
    ) -> tuple[InventoryDoubt, str] | None:
        """Why the server fm reads may not be the fleet's (docs/spec.md §15.3), or None.

        `windows`: the records' `fm-<id>` window names; `slots`: their slots. Once the server
        fm reads held some of those windows in this run, their going later is the run's own
        doing (a teardown killed them), not a sign of the wrong server."""
        inventory = self._inventory
        if not windows or inventory.status == InventoryStatus.ERROR:
            return None
        socket = tmux.fleet_socket(self._settings)
        if any(p.window_name in windows for p in inventory.panes):
            self._settings.run.held_sockets.add(socket)
            return None
        if socket in self._settings.run.held_sockets:
            return None
        servers = self.others()
        reading = _reading(self._settings, inventory, socket)
        if servers is None:
            return InventoryDoubt.SERVER_UNLISTED, (
                f"{reading}, and whether another tmux server of this user holds them cannot "
                "be told (/proc/net/unix cannot be read)"
            )
        holders = [
            (s, sorted({p.window_name for p in s.listing.panes if p.window_name in windows}))
            for s in servers
            if s.why is None and s.listing is not None
        ]
        holders = [(s, names) for s, names in holders if names]
        if holders:
            server, names = holders[0]
            more = "" if len(names) <= 3 else f" and {len(names) - 3} more"
            others = _named(s for s, _ in holders[1:])
            also = f" (and {len(holders) - 1} other server(s): {others})" if others else ""
            return InventoryDoubt.FLEET_ELSEWHERE, (
                f"{reading}, but the tmux server on {server} holds {', '.join(names[:3])}"
                f"{more}{also}: point fm at it with {tmux.selecting(server.socket)}"
            )
        unsure = [(s, why) for s in servers if s.why and (why := self._may_hold(s, socket, slots))]
        if unsure:
            server, why = unsure[0]
            return InventoryDoubt.SERVER_UNLISTED, (
                f"{reading}, and the tmux server pid {server.pid} ({why}) cannot be listed: "
                f"{server.why}"
            )
        return None

    def _may_hold(self, server: Server, socket: str, slots: Iterable[str]) -> str | None:
        """Why a server fm cannot list may hold the fleet's windows, or None."""
        if os.path.normpath(server.socket) == os.path.normpath(socket):
            return f"bound to {server.socket}, the socket fm reads"
        rooted = [s for s in slots if s.startswith("/")]
        for proc in self._table.tree(server.pid):
            if proc.cwd and not proc.zombie and any(is_within(proc.cwd, s) for s in rooted):
                return (
                    f"bound to {server.socket}; {proc.name} ({proc.pid}) of its panes works "
                    f"in {proc.cwd}"
                )
        return None


def _listed(pid: int, sockets: list[str], listings: dict[str, TmuxInventory]) -> Server:
    """Server `pid` through the first of its sockets where that very server answers."""
    why = ""
    for socket in sockets:
        if not os.path.exists(socket):
            why = (
                f"its socket file {socket} was removed while it runs (kill -USR1 {pid} makes "
                "tmux create it again)"
            )
            continue
        listing = listings[socket]
        if listing.status == InventoryStatus.OK:
            answering = listing.server_pids
            if not answering or answering == {pid}:
                return Server(pid, socket, listing)
            why = f"another tmux server (pid {min(answering)}) answers on its socket {socket}"
            continue
        why = f"tmux on {socket}: {listing.error or 'no answer'}"
    return Server(pid, sockets[0], None, why or "it holds no socket fm can reach")


def _named(servers: Iterable[Server]) -> str:
    return ", ".join(str(s) for s in servers)


def _reading(settings: Settings, inventory: TmuxInventory, socket: str) -> str:
    var = tmux.socket_variable(settings)
    where = f"{socket} ({var})" if var else f"the default socket {socket}"
    if inventory.status == InventoryStatus.NO_SERVER:
        return f"no tmux server answers on {where}, which fm reads"
    return f"the tmux server fm reads on {where} holds none of the records' windows"


# -- vantage ----------------------------------------------------------------------------------


def vantage_problem(
    inventory: TmuxInventory,
    table: ProcessTable,
    namespace: Callable[[int | str], str | None] = mount_namespace,
) -> str | None:
    """Why fm does not see the files the fleet's tmux server sees, or None: their mount
    namespaces differ (fm in a container and the fleet on the host, or the reverse), or the
    server is no process fm can see as its panes' parent (another PID namespace)."""
    if inventory.status != InventoryStatus.OK or not inventory.server_pids:
        return None
    server = min(inventory.server_pids)
    live = [p for p in inventory.panes if not p.dead]
    seen = table.procs.get(server)
    if seen is None or (
        live and not any((p := table.procs.get(x.pane_pid)) and p.ppid == server for x in live)
    ):
        return (
            f"the fleet's tmux server calls itself pid {server}, but fm sees no such process "
            "serving its panes: fm and that server run in different PID namespaces; run fm "
            "where the fleet's tmux server runs"
        )
    mine, theirs = namespace("self"), namespace(server)
    if mine is None or theirs is None:
        return (
            f"whether fm sees the files the fleet's tmux server (pid {server}) sees cannot be "
            "told: its mount namespace cannot be read"
        )
    if mine != theirs:
        return (
            f"fm's mount namespace ({mine}) is not the fleet's tmux server's ({theirs}, pid "
            f"{server}): every path fm reads could be another one than the fleet's; run fm "
            "where the fleet's tmux server runs"
        )
    return None
