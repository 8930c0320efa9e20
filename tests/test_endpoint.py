"""Endpoint liveness from one inventory and one process table (spec §4): the classifier
and each of the five states, with synthetic panes and processes."""

from __future__ import annotations

import pytest

from fm_teardown.model.records import Record
from fm_teardown.model.world import (
    EndpointState,
    InventoryStatus,
    Pane,
    Proc,
    ProcessTable,
    TmuxInventory,
)
from fm_teardown.observe.endpoint import classify, endpoint_of


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
    return Proc(pid, ppid, name, name, "/p/1/x", 1.0, zombie)


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
