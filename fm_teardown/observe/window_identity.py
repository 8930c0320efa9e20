"""Who TASK's window is: its panes, each pane's process and foreground process, its server.

The decision records them (`seen_of`, into `Endpoint.seen` and `Endpoint.server`), each pane's
foreground as the process scan read it (`Proc.tpgid`: the decision reads no /proc file of its
own per pane); the endpoint step compares them again right before it types quit keys into a
pane and right before it kills the window (`drift`), reading each foreground afresh then.
Window and pane ids are no identity on their own: a restarted tmux server numbers them from
`@1` and `%1` again, and `respawn-pane -k` keeps the pane id for a new process.
So every process is compared by pid and start time, and the server too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from fm_teardown.adapters import processes
from fm_teardown.model.world import Endpoint, Pane, PaneSeen, ProcessTable, TmuxInventory

if TYPE_CHECKING:  # a look's `seen_of` (every run) does not need a real run's results
    from fm_teardown.model.results import Drift

__all__ = ["drift", "seen_of"]

Foreground = Callable[[int], int | None]


def _start(table: ProcessTable, pid: int) -> float:
    proc = table.procs.get(pid)
    return proc.start_time if proc is not None and not proc.zombie else 0.0


def _panes(window_ids: Iterable[str], inventory: TmuxInventory) -> list[Pane]:
    wanted = set(window_ids)
    if len(wanted) == 1:
        # The listing's own index (the decision asks for the panes of every task's windows
        # in one listing: an audit, hundreds), kept on the listing, an immutable value.
        return list(inventory.by_window.get(next(iter(wanted)), ()))
    # In the listing's order, as before: the first pane names the server.
    return [p for p in inventory.panes if p.window_id in wanted]


def _scanned_foreground(table: ProcessTable) -> Foreground:
    def foreground(pid: int) -> int | None:
        proc = table.procs.get(pid)
        return proc.tpgid if proc is not None else None

    return foreground


def seen_of(
    window_ids: Iterable[str],
    inventory: TmuxInventory,
    table: ProcessTable,
    foreground: Foreground | None = None,
) -> tuple[tuple[PaneSeen, ...], tuple[int, float] | None]:
    """The panes of `window_ids` (any session: a moved window is still the same window) and
    their server, with the start time of each process. Each pane's foreground is `foreground`'s
    answer, by default the one `table`'s scan read."""
    panes = _panes(window_ids, inventory)
    if foreground is None:
        foreground = _scanned_foreground(table)
    seen = []
    for p in panes:
        fg = foreground(p.pane_pid) or 0
        seen.append(
            PaneSeen(
                p.pane_id,
                p.window_id,
                p.pane_pid,
                _start(table, p.pane_pid),
                fg,
                _start(table, fg) if fg else 0.0,
            )
        )
    server = None
    if panes and panes[0].server_pid > 0:
        server = (panes[0].server_pid, _start(table, panes[0].server_pid))
    return tuple(seen), server


def drift(
    decided: Endpoint,
    inventory: TmuxInventory,
    table: ProcessTable,
    foreground: Foreground = processes.foreground_group,
) -> tuple[Drift, ...]:
    """How the decided windows now differ from what the decision saw; () when they do not.

    Windows gone since are no difference (nothing is left to type into or kill); a pane gone
    from them neither. A pane's foreground back at the pane's own process (its agent left,
    the shell has the keyboard again) is none either: the endpoint step asks it to quit and
    so expects exactly that."""
    from fm_teardown.model.results import Drift, DriftWhat

    now_seen, server = seen_of(decided.window_ids, inventory, table, foreground)
    if not now_seen:
        return ()
    if decided.server is None or server is None or not _same(decided.server, server):
        before = decided.server[0] if decided.server else 0
        # Another server: nothing of its panes can be compared with the decision's.
        return (Drift(DriftWhat.SERVER, before=before, now=server[0] if server else 0),)
    by_id = {p.pane_id: p for p in decided.seen}
    out: list[Drift] = []
    for now in now_seen:
        was = by_id.get(now.pane_id)
        if was is None or was.window_id != now.window_id:
            out.append(Drift(DriftWhat.PANE_JOINED, now.pane_id, now=now.pid))
            continue
        if now.pid != was.pid or (now.start_time and now.start_time != was.start_time):
            out.append(Drift(DriftWhat.PANE_RESPAWNED, now.pane_id, was.pid, now.pid))
            continue
        if not now.start_time:
            continue  # the pane's process is gone: nothing reads its keyboard any more
        same_fg = (now.foreground, now.foreground_start) == (was.foreground, was.foreground_start)
        if not same_fg and now.foreground != now.pid:
            out.append(Drift(DriftWhat.FOREGROUND, now.pane_id, was.foreground, now.foreground))
    return tuple(out)


def _same(a: tuple[int, float], b: tuple[int, float]) -> bool:
    """The same server: same pid, and the same start time when both are known."""
    return a[0] == b[0] and (not a[1] or not b[1] or abs(a[1] - b[1]) < 0.01)
