"""Endpoint liveness (spec §4): alive, dead, missing, ambiguous or unreadable.

Pure: it reads one tmux inventory and one process table. A task's endpoint is its window
`<session>:fm-<id>`; every process in the process tree of each of its panes is classified by
process name and argv[0] (`model/process_kind.py`). Any agent makes it `alive`; only shells
make it `dead`; anything else is `ambiguous`. Only `dead` and `missing` count as not live.
A wrapper with a live child (`treehouse enter`, which firstmate's spawn runs in the pane to
open the task's shell in its slot) is seen through: it counts as nothing, what runs under it
decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fm_teardown.model.paths import is_within
from fm_teardown.model.process_kind import ProcessClass, base_name, classify_proc, is_wrapper
from fm_teardown.model.records import Backend, Record
from fm_teardown.model.world import (
    Endpoint,
    EndpointState,
    InventoryStatus,
    Pane,
    Proc,
    ProcessTable,
    TmuxInventory,
)

__all__ = ["endpoint_of", "moved_windows", "panes_by_window"]


def panes_by_window(inventory: TmuxInventory) -> dict[tuple[str, str], list[Pane]]:
    """Index the inventory by (session, window name), so a fleet costs one pass over it."""
    index: dict[tuple[str, str], list[Pane]] = {}
    for pane in inventory.panes:
        index.setdefault((pane.session, pane.window_name), []).append(pane)
    return index


def moved_windows(
    record: Record,
    slot: str,
    by_name: Mapping[str, Sequence[Pane]],
    processes: ProcessTable,
) -> list[Pane]:
    """The panes of TASK's own window moved to another session of the fleet's server: a
    window named as TASK's (`fm-<TASK>`, which no other record can name) in another session,
    one of whose panes runs a process in TASK's slot. It is TASK's endpoint, never a
    stranger's pane (`tmux move-window` keeps the agent running)."""
    out: list[Pane] = []
    windows: dict[str, list[Pane]] = {}
    for pane in by_name.get(record.window_name, ()):
        if pane.session != record.session:
            windows.setdefault(pane.window_id, []).append(pane)
    for panes in windows.values():
        if any(
            proc.cwd and is_within(proc.cwd, slot)
            for pane in panes
            if not pane.dead
            for proc in processes.tree(pane.pane_pid)
        ):
            out.extend(panes)
    return out


def endpoint_of(
    record: Record,
    inventory: TmuxInventory,
    processes: ProcessTable,
    index: Mapping[tuple[str, str], Sequence[Pane]] | None = None,
    moved: Sequence[Pane] = (),
) -> Endpoint:
    if record.backend != Backend.TMUX:
        return Endpoint(
            EndpointState.UNREADABLE, f"backend '{record.backend}' cannot be read by fm"
        )
    if inventory.status == InventoryStatus.NO_SERVER:
        return Endpoint(EndpointState.MISSING, "no tmux server is running")
    if inventory.status != InventoryStatus.OK:
        return Endpoint(
            EndpointState.UNREADABLE, f"tmux inventory unreadable: {inventory.error or 'unknown'}"
        )
    if index is None:
        index = panes_by_window(inventory)
    panes = [*index.get((record.session, record.window_name), ()), *moved]
    if not panes:
        return Endpoint(EndpointState.MISSING, f"no window {record.window} in tmux")
    window_ids = tuple(dict.fromkeys(p.window_id for p in panes))
    if processes.error:
        return Endpoint(EndpointState.UNREADABLE, processes.error, window_ids, frozenset())
    pids: set[int] = set()
    kinds: set[ProcessClass] = set()
    agents: list[str] = []
    for pane in panes:
        if pane.dead:
            continue
        tree = processes.tree(pane.pane_pid)
        if not tree:
            return Endpoint(
                EndpointState.UNREADABLE,
                f"pane {pane.pane_id} process {pane.pane_pid} is not in the process table",
                window_ids,
                frozenset(pids),
            )
        for proc in tree:
            pids.add(proc.pid)
            if proc.zombie:
                continue
            if _seen_through(proc, processes):
                continue  # `treehouse enter`: what runs under it says what the pane runs
            kind = classify_proc(proc)
            kinds.add(kind)
            if kind == ProcessClass.AGENT:
                agents.append(f"{proc.name or base_name(proc.argv0)} ({proc.pid})")
    where = f"window {record.window}" + (
        f" ({len(window_ids)} windows)" if len(window_ids) > 1 else ""
    )
    if agents:
        return Endpoint(
            EndpointState.ALIVE,
            f"{where} runs {', '.join(agents[:3])}",
            window_ids,
            frozenset(pids),
        )
    if kinds <= {ProcessClass.SHELL}:
        return Endpoint(
            EndpointState.DEAD, f"{where} runs only shells", window_ids, frozenset(pids)
        )
    return Endpoint(
        EndpointState.AMBIGUOUS,
        f"{where} runs processes that are neither agents nor shells",
        window_ids,
        frozenset(pids),
    )


def _seen_through(proc: Proc, processes: ProcessTable) -> bool:
    """A wrapper (`treehouse enter`) holding at least one live process: not counted itself."""
    if not is_wrapper(proc.name, proc.argv0):
        return False
    return any(
        (child := processes.procs.get(pid)) is not None and not child.zombie
        for pid in processes.children.get(proc.pid, ())
    )
