"""Endpoint liveness from one inventory and one process table (spec §4): the classifier
and each of the five states, with synthetic panes and processes."""

from __future__ import annotations

import pytest

from fm_teardown.model.process_kind import classify
from fm_teardown.model.records import Record
from fm_teardown.model.results import DriftWhat
from fm_teardown.model.world import (
    Endpoint,
    EndpointState,
    InventoryStatus,
    Pane,
    Proc,
    ProcessTable,
    ProcStat,
    TmuxInventory,
)
from fm_teardown.observe.endpoint import endpoint_of
from fm_teardown.observe.window_identity import drift, seen_of


@pytest.mark.parametrize(
    ("name", "argv0", "kind"),
    [
        ("claude", "claude", "agent"),
        ("node", "/home/op/.claude/local/claude", "agent"),
        ("node", "/home/op/.claude/local/node", "agent"),  # harness directory
        ("codex-linux-x64", "codex", "agent"),
        ("opencode", "", "agent"),
        ("gemini", "gemini", "agent"),
        ("aider", "/usr/bin/python3", "agent"),
        ("cursor-agent", "cursor-agent", "agent"),
        ("pi", "pi", "agent"),
        ("muse-bin-x86", "muse-bin-x86", "agent"),
        ("bash", "-bash", "shell"),
        ("zsh", "/bin/zsh", "shell"),
        ("fish", "fish", "shell"),
        ("sleep", "sleep", "other"),
        ("python3", "python3", "other"),
        ("pip", "pip", "other"),  # not `pi`
        ("vim", "/home/op/claude-notes/vim", "other"),  # a path that merely mentions a harness
    ],
)
def test_classify(name: str, argv0: str, kind: str) -> None:
    assert classify(name, argv0) == kind


REC = Record("t1", "/s/t1.meta", 0, "fm:fm-t1", "fm", "/p/1/x", "/p/x")


def proc(pid: int, ppid: int, name: str, zombie: bool = False) -> Proc:
    return Proc(pid, ppid, name, name, "/p/1/x", ProcStat(1.0, zombie))


def table(*procs: Proc) -> ProcessTable:
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    return ProcessTable({p.pid: p for p in procs}, None, {k: tuple(v) for k, v in children.items()})


def pane(pid: int, window: str = "fm-t1", session: str = "fm", dead: bool = False) -> Pane:
    return Pane(session, window, "@1", f"%{pid}", pid, dead)


def state(inv: TmuxInventory, procs: ProcessTable) -> EndpointState:
    return endpoint_of(REC, inv, procs).state


def test_the_five_states() -> None:
    shell_then_agent = table(proc(10, 1, "bash"), proc(11, 10, "claude"))
    ok = TmuxInventory(InventoryStatus.OK, (pane(10),))
    assert state(ok, shell_then_agent) == EndpointState.ALIVE
    assert state(ok, table(proc(10, 1, "bash"))) == EndpointState.DEAD
    assert state(ok, table(proc(10, 1, "bash"), proc(11, 10, "sleep"))) == EndpointState.AMBIGUOUS
    assert (
        state(TmuxInventory(InventoryStatus.NO_SERVER), shell_then_agent) == EndpointState.MISSING
    )
    assert state(TmuxInventory(InventoryStatus.OK, (pane(10, "fm-t10"),)), shell_then_agent) == (
        EndpointState.MISSING
    )
    assert state(
        TmuxInventory(InventoryStatus.OK, (pane(10, session="other"),)), shell_then_agent
    ) == (EndpointState.MISSING)
    assert state(TmuxInventory(InventoryStatus.ERROR, error="lost server"), shell_then_agent) == (
        EndpointState.UNREADABLE
    )
    assert state(ok, ProcessTable({}, "no /proc")) == EndpointState.UNREADABLE
    assert state(ok, table(proc(99, 1, "bash"))) == EndpointState.UNREADABLE  # pane pid unseen


def test_zombies_and_dead_panes_do_not_count() -> None:
    procs = table(proc(10, 1, "bash"), proc(11, 10, "claude", zombie=True))
    assert state(TmuxInventory(InventoryStatus.OK, (pane(10),)), procs) == EndpointState.DEAD
    inv = TmuxInventory(InventoryStatus.OK, (pane(10), pane(20, dead=True)))
    assert state(inv, table(proc(10, 1, "bash"))) == EndpointState.DEAD


def test_an_agent_deep_in_any_pane_of_the_window_makes_it_alive() -> None:
    procs = table(
        proc(10, 1, "bash"),
        proc(20, 1, "bash"),
        proc(21, 20, "make"),
        proc(22, 21, "sh"),
        proc(23, 22, "codex"),
    )
    inv = TmuxInventory(InventoryStatus.OK, (pane(10), pane(20)))
    ep = endpoint_of(REC, inv, procs)
    assert ep.state == EndpointState.ALIVE and {10, 20, 21, 22, 23} <= ep.pids


def test_another_backend_is_unreadable() -> None:
    from dataclasses import replace

    rec = replace(REC, backend="herdr")
    assert (
        endpoint_of(
            rec, TmuxInventory(InventoryStatus.OK, (pane(10),)), table(proc(10, 1, "bash"))
        ).state
        == EndpointState.UNREADABLE
    )


# -- what the endpoint step checks again before it types or kills (window_identity) ------------


def _seen(inv: TmuxInventory, procs: ProcessTable, fg: dict[int, int]) -> Endpoint:
    seen, server = seen_of(("@1",), inv, procs, fg.get)
    return Endpoint(EndpointState.ALIVE, "", ("@1",), frozenset(), seen, server)


def _inv(*panes: Pane) -> TmuxInventory:
    return TmuxInventory(InventoryStatus.OK, panes)


def _p(pid: int, ppid: int, name: str, start: float = 1.0) -> Proc:
    return Proc(pid, ppid, name, name, "/p/1/x", ProcStat(start))


SERVER = _p(5, 1, "tmux: server", 0.5)


def _pane(pane_id: str, pid: int, server: int = 5) -> Pane:
    return Pane("fm", "fm-t1", "@1", pane_id, pid, False, server)


def test_an_agent_leaving_is_no_change_but_a_new_one_at_the_keyboard_is() -> None:
    procs = table(SERVER, _p(10, 5, "bash"), _p(11, 10, "claude"))
    decided = _seen(_inv(_pane("%1", 10)), procs, {10: 11})
    assert drift(decided, _inv(_pane("%1", 10)), procs, {10: 11}.get) == ()
    left = table(SERVER, _p(10, 5, "bash"))
    assert drift(decided, _inv(_pane("%1", 10)), left, {10: 10}.get) == ()
    again = table(SERVER, _p(10, 5, "bash"), _p(12, 10, "claude", 2.0))
    [d] = drift(decided, _inv(_pane("%1", 10)), again, {10: 12}.get)
    assert (d.what, d.subject, d.before, d.now) == (DriftWhat.FOREGROUND, "%1", 11, 12)


def test_a_respawn_a_joined_pane_and_another_server_are_changes() -> None:
    procs = table(SERVER, _p(10, 5, "claude"))
    decided = _seen(_inv(_pane("%1", 10)), procs, {10: 10})
    respawned = table(SERVER, _p(13, 5, "claude", 3.0))
    [d] = drift(decided, _inv(_pane("%1", 13)), respawned, {13: 13}.get)
    assert (d.what, d.before, d.now) == (DriftWhat.PANE_RESPAWNED, 10, 13)
    # The same pid again, but another process (its start time): respawned too.
    reused = table(SERVER, _p(10, 5, "claude", 4.0))
    [d] = drift(decided, _inv(_pane("%1", 10)), reused, {10: 10}.get)
    assert d.what == DriftWhat.PANE_RESPAWNED
    joined = table(SERVER, _p(10, 5, "claude"), _p(14, 5, "bash"))
    [d] = drift(decided, _inv(_pane("%1", 10), _pane("%2", 14)), joined, {10: 10, 14: 14}.get)
    assert (d.what, d.subject, d.now) == (DriftWhat.PANE_JOINED, "%2", 14)
    # A restarted server numbers from the start again: same ids, another server.
    restarted = table(_p(6, 1, "tmux: server", 9.0), _p(10, 6, "claude"))
    [d] = drift(decided, _inv(_pane("%1", 10, server=6)), restarted, {10: 10}.get)
    assert (d.what, d.before, d.now) == (DriftWhat.SERVER, 5, 6)
    same_pid = table(_p(5, 1, "tmux: server", 9.0), _p(10, 5, "claude"))
    [d] = drift(decided, _inv(_pane("%1", 10)), same_pid, {10: 10}.get)
    assert d.what == DriftWhat.SERVER


def test_a_window_gone_or_a_pane_gone_is_no_change() -> None:
    procs = table(SERVER, _p(10, 5, "claude"), _p(11, 5, "bash"))
    decided = _seen(_inv(_pane("%1", 10), _pane("%2", 11)), procs, {10: 10, 11: 11})
    assert drift(decided, _inv(), procs, dict[int, int]().get) == ()
    assert drift(decided, _inv(_pane("%2", 11)), procs, {11: 11}.get) == ()
    # A dead pane (its process gone, the pane kept): nothing reads its keyboard.
    exited = table(SERVER, _p(11, 5, "bash"))
    assert drift(decided, _inv(_pane("%1", 10), _pane("%2", 11)), exited, {11: 11}.get) == ()


def test_the_decision_takes_each_pane_s_foreground_from_the_scan() -> None:
    # No /proc file read per pane: the scan's `tpgid` (pids here that no /proc on this
    # machine would answer alike: a read of /proc would not give 11 for 10).
    bash = Proc(10, 5, "bash", "bash", "/p/1/x", ProcStat(1.0, tpgid=11))
    procs = table(SERVER, bash, _p(11, 10, "claude", 2.0))
    seen, server = seen_of(("@1",), _inv(_pane("%1", 10)), procs)
    assert [(s.pid, s.foreground, s.foreground_start) for s in seen] == [(10, 11, 2.0)]
    assert server == (5, 0.5)
    # Not known to the scan: no foreground (0), as an unreadable /proc file gave.
    unknown = table(SERVER, _p(10, 5, "bash"))
    seen, _ = seen_of(("@1",), _inv(_pane("%1", 10)), unknown)
    assert [s.foreground for s in seen] == [0]
