"""observe.settled_scans: a listing caught while a window is being killed is taken again."""

from __future__ import annotations

import pytest

from fm_teardown import observe, processes, tmux
from fm_teardown.settings import load
from fm_teardown.world import InventoryStatus, Pane, Proc, ProcessTable, TmuxInventory


def pane(name: str, pid: int) -> Pane:
    return Pane("firstmate", name, f"@{pid}", f"%{pid}", pid, False, 1)


def table(*pids: int) -> ProcessTable:
    return ProcessTable({p: Proc(p, 1, "bash", "bash", "/", 1.0) for p in pids})


def scans(
    monkeypatch: pytest.MonkeyPatch, listings: list[tuple[TmuxInventory, ProcessTable]]
) -> list[int]:
    """Feed the listings in turn (the last one for ever); count the calls."""
    calls = [0]

    def list_panes(_: object) -> TmuxInventory:
        calls[0] += 1
        return listings[min(calls[0], len(listings)) - 1][0]

    def scan() -> ProcessTable:
        return listings[min(calls[0], len(listings)) - 1][1]

    monkeypatch.setattr(tmux, "list_panes", list_panes)
    monkeypatch.setattr(processes, "scan", scan)
    monkeypatch.setattr(observe, "SETTLE_POLL_SECS", 0.0)
    return calls


OK = InventoryStatus.OK
BOTH = TmuxInventory(OK, (pane("fm-a", 10), pane("fm-b", 20)))
ONLY_A = TmuxInventory(OK, (pane("fm-a", 10),))


def test_a_window_mid_kill_is_listed_again_until_it_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # fm-b's pane is still listed, its process already reaped; the next listing has no fm-b.
    calls = scans(monkeypatch, [(BOTH, table(10)), (BOTH, table(10)), (ONLY_A, table(10))])
    inventory, _ = observe.settled_scans(load(None, {}))
    assert inventory == ONLY_A
    assert calls[0] == 3


def test_a_settled_listing_is_taken_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = scans(monkeypatch, [(BOTH, table(10, 20))])
    assert observe.settled_scans(load(None, {})) == (BOTH, table(10, 20))
    assert calls[0] == 1


def test_panes_whose_processes_are_never_seen_are_no_transient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every pane's process is missing (a server in another pid namespace): no retry.
    calls = scans(monkeypatch, [(BOTH, table(99))])
    observe.settled_scans(load(None, {}))
    assert calls[0] == 1


def test_a_pane_that_stays_mid_kill_stands_after_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(observe, "SETTLE_SECS", 0.05)
    calls = scans(monkeypatch, [(BOTH, table(10))])
    inventory, t = observe.settled_scans(load(None, {}))
    assert (inventory, t) == (BOTH, table(10))  # unreadable, fail closed, as before
    assert calls[0] > 1
