"""observe.settled_scans: a listing caught while a window is being killed is taken again."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fm_teardown.adapters import processes, tmux
from fm_teardown.model.settings import load
from fm_teardown.model.world import (
    EndpointOwners,
    InventoryStatus,
    Pane,
    Proc,
    ProcessTable,
    ProcStat,
    TmuxInventory,
)
from fm_teardown.observe import observation as observe
from fm_teardown.observe.lazy import LazyMap


def pane(name: str, pid: int) -> Pane:
    return Pane("firstmate", name, f"@{pid}", f"%{pid}", pid, False, 1)


def table(*pids: int) -> ProcessTable:
    return ProcessTable({p: Proc(p, 1, "bash", "bash", "/", ProcStat(1.0)) for p in pids})


def scans(
    monkeypatch: pytest.MonkeyPatch, listings: list[tuple[TmuxInventory, ProcessTable]]
) -> list[int]:
    """Feed the listings in turn (the last one for ever); count the calls."""
    calls = [0]

    def list_panes(_: object) -> Callable[[], TmuxInventory]:
        calls[0] += 1  # started: the scan that follows is taken with this listing
        listed = listings[min(calls[0], len(listings)) - 1][0]
        return lambda: listed

    def scan(*, without_children: bool = False, lazy: bool = False) -> ProcessTable:
        return listings[min(calls[0], len(listings)) - 1][1]

    monkeypatch.setattr(tmux, "list_panes_started", list_panes)
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


# --------------------------------------------------------------------------- SlotProcs

_DIRS = ["/", "/p", "/p/1", "/p/1/a", "/p/10", "/p/2", "/q", "/q/1", "/p/1/a/b"]


@given(
    cwds=st.lists(
        st.tuples(st.sampled_from([*_DIRS, "", "relative", "/p/1-x"]), st.booleans()), max_size=25
    ),
    slots=st.lists(st.sampled_from(_DIRS), min_size=1, max_size=9),
    asked=st.lists(st.sampled_from([*_DIRS, "/elsewhere"]), max_size=12),
)
def test_slot_procs_on_demand_are_what_one_pass_finds(
    cwds: list[tuple[str, bool]], slots: list[str], asked: list[str]
) -> None:
    # One task asks for a slot or two (a prefix pass each), the audit for all (one pass):
    # whichever way a slot's processes are found, they are the same, in the same order.
    table = ProcessTable(
        {
            pid: Proc(pid, 1, "bash", "bash", cwd or None, ProcStat(1.0, zombie))
            for pid, (cwd, zombie) in enumerate(cwds, start=100)
        }
    )
    lazy = observe.SlotProcs(table, slots)
    for slot in asked + slots:
        expected = observe.procs_by_slot({slot}, table).get(slot, [])
        assert [p.pid for p in lazy.get(slot)] == [p.pid for p in expected]


@given(
    cwds=st.lists(
        st.tuples(st.sampled_from([*_DIRS, "", "relative", "/p/1-x", "/p/1/a/b/c"]), st.booleans()),
        max_size=25,
    ),
    slots=st.sets(st.sampled_from([*_DIRS, "relative"]), max_size=9),
)
def test_one_pass_finds_every_process_inside_each_slot(
    cwds: list[tuple[str, bool]], slots: set[str]
) -> None:
    # What the pass over all slots finds is, slot by slot, the plain definition: a live
    # process whose cwd is the slot or lies below it, in the table's order.
    table = ProcessTable(
        {
            pid: Proc(pid, 1, "bash", "bash", cwd or None, ProcStat(1.0, zombie))
            for pid, (cwd, zombie) in enumerate(cwds, start=100)
        }
    )
    found = observe.procs_by_slot(slots, table)

    def inside(cwd: str | None, slot: str) -> bool:
        if not cwd or not cwd.startswith("/") or not slot.startswith("/"):
            return False
        return cwd == slot or cwd.startswith(slot.rstrip("/") + "/")

    for slot in slots:
        want = [p.pid for p in table.procs.values() if not p.zombie and inside(p.cwd, slot)]
        assert [p.pid for p in found.get(slot, [])] == want
    assert set(found) <= slots


def test_lazy_get_works_a_value_out_once_and_says_the_default_for_other_keys() -> None:
    made: list[str] = []

    def upper(key: str) -> str:
        made.append(key)
        return key.upper()

    lazy = LazyMap(["a", "b"], upper)
    assert lazy.get("a") == "A" and lazy.get("a", "x") == "A" and lazy["a"] == "A"
    assert lazy.get("c") is None and lazy.get("c", "x") == "x"
    assert made == ["a"]


def test_endpoint_owners_get_walks_up_to_a_pane_and_says_the_default_elsewhere() -> None:
    table = ProcessTable(
        {
            10: Proc(10, 1, "bash", "bash", None, ProcStat(1.0)),  # a pane's root
            11: Proc(11, 10, "claude", "claude", None, ProcStat(1.0)),
            20: Proc(20, 1, "sleep", "sleep", None, ProcStat(1.0)),  # in no pane
        }
    )
    owners = EndpointOwners({10: "t1"}, {}, table)
    assert owners.get(11) == "t1" and owners[11] == "t1"
    assert owners.get(20) is None and owners.get(20, "none") == "none" and 20 not in owners
