"""What the decision saw is what the endpoint step touches: right before the quit keys and
again right before the window kill, TASK's window has the panes, pane processes, foreground
processes and tmux server the decision recorded; otherwise nothing is typed, nothing is
killed, and the run decides again. And keys only while `synchronize-panes` is off.

Each test pauses a real run before its endpoint step (`FM_TEST_FAULT`), changes the window on
the fleet's real tmux server, and lets it go on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil

from tests.fleet import SESSION, Fleet, Task, gone, resumed_json, wait_for
from tests.test_graceful_quit import agent_pid, agent_task, endpoint_step, standin


def _pane(fleet: Fleet, target: str) -> str:
    return fleet.tmux.run("display-message", "-p", "-t", target, "#{pane_id}").stdout.strip()


def _new_agent(fleet: Fleet, t: Task, name: str) -> tuple[str, Path]:
    """The command line of a new `claude` stand-in that obeys its quit keys, and its marker."""
    marker = fleet.root / f"{t.id}.{name}.saved"
    agent = standin(fleet, "claude")
    return f"bash --norc --noprofile -c '{agent} obey {marker}; exec bash'", marker


def _track(fleet: Fleet, target: str) -> list[int]:
    pids = fleet.tmux.pane_pids(target)
    for pid in list(pids):
        pids += [c.pid for c in psutil.Process(pid).children(recursive=True)]
    fleet.tracked.update(pids)
    return pids


def _nothing_sent_nothing_killed(fleet: Fleet, t: Task, doc: dict[str, Any], marker: Path) -> None:
    assert not Path(f"{marker}.keys").exists(), "keys reached the new agent"
    assert not marker.exists()
    assert f"{SESSION}:fm-{t.id}" in fleet.tmux.windows()
    assert t.meta.exists()
    assert "decided again" in endpoint_step(doc)
    assert any("window changed between deciding and acting" in w for w in doc["warnings"])
    assert fleet.treehouse_calls() == []


def test_a_pane_respawned_with_a_new_agent_gets_nothing(fleet: Fleet) -> None:
    t, _ = agent_task(fleet, "rc-respawn", 1, "claude", "obey")
    wid = fleet.tmux.run("display-message", "-p", "-t", t.window, "#{window_id}").stdout.strip()
    pane = _pane(fleet, wid)
    proc, pause = fleet.fm_paused("before-endpoint", t.id)
    command, marker = _new_agent(fleet, t, "respawned")
    fleet.tmux.run("respawn-pane", "-k", "-t", pane, "-c", str(t.slot), command)
    wait_for(lambda: Path(f"{marker}.ready").exists(), what="the respawned agent ready")
    new = _track(fleet, pane)
    code, doc = resumed_json(proc, pause)
    assert code != 0, doc
    _nothing_sent_nothing_killed(fleet, t, doc, marker)
    assert f"pane {pane} was respawned since deciding" in endpoint_step(doc)
    assert not any(gone(p) for p in new)
    assert doc["signalled"] == []


def test_a_restarted_server_on_the_same_socket_is_not_the_decided_one(fleet: Fleet) -> None:
    t, _ = agent_task(fleet, "rc-server", 1, "claude", "obey")
    wid = fleet.tmux.run("display-message", "-p", "-t", t.window, "#{window_id}").stdout.strip()
    old_server = fleet.tmux.server_pid()
    proc, pause = fleet.fm_paused("before-endpoint", t.id)
    fleet.tmux.stop()
    wait_for(lambda: gone(old_server), what="the old server gone")
    # The new server numbers from the start again: the same window id, the same name.
    fleet.tmux.start()
    command, marker = _new_agent(fleet, t, "restarted")
    assert fleet.tmux.new_window(SESSION, f"fm-{t.id}", t.slot, command) == wid
    wait_for(lambda: Path(f"{marker}.ready").exists(), what="the new server's agent ready")
    new = _track(fleet, wid)
    code, doc = resumed_json(proc, pause)
    assert code != 0, doc
    _nothing_sent_nothing_killed(fleet, t, doc, marker)
    assert "the tmux server is not the one seen when deciding" in endpoint_step(doc)
    assert not any(gone(p) for p in new)


def test_a_pane_joined_into_the_window_stops_the_run(fleet: Fleet) -> None:
    t, marker = agent_task(fleet, "rc-joined", 1, "claude", "obey")
    wid = fleet.tmux.run("display-message", "-p", "-t", t.window, "#{window_id}").stdout.strip()
    proc, pause = fleet.fm_paused("before-endpoint", t.id)
    # An operator's shell, moved into TASK's window from a window of its own.
    typed = fleet.root / f"{t.id}.typed"
    scratch = fleet.tmux.new_window(SESSION, "scratch", t.slot, f"cat > {typed}")
    joined = _pane(fleet, scratch)
    shell = _track(fleet, scratch)
    fleet.tmux.run("join-pane", "-d", "-s", joined, "-t", wid)
    code, doc = resumed_json(proc, pause)
    assert code != 0, doc
    _nothing_sent_nothing_killed(fleet, t, doc, marker)
    assert f"pane {joined}" in endpoint_step(doc) and "joined the window" in endpoint_step(doc)
    assert typed.read_text() == ""
    assert not any(gone(p) for p in shell)


def test_no_quit_keys_while_synchronize_panes_is_on(fleet: Fleet) -> None:
    # A second pane of TASK's window runs an interactive bash that writes its history as it
    # goes: with synchronize-panes on, keys sent to the agent's pane would run `/exit` there.
    t, marker = agent_task(fleet, "rc-sync", 1, "claude", "obey")
    pid = agent_pid(t, "claude")
    history = fleet.root / f"{t.id}.history"
    bash = f"env HISTFILE={history} PROMPT_COMMAND='history -a' bash --norc --noprofile -i"
    fleet.tmux.run("split-window", "-d", "-t", t.window, "-c", str(t.slot), bash)
    fleet.tmux.run("set-option", "-w", "-t", t.window, "synchronize-panes", "on")
    # bash is up and writes its history: a command typed before the run shows in it.
    fleet.tmux.run("send-keys", "-t", t.window, "-l", "true ready")
    fleet.tmux.run("send-keys", "-t", t.window, "Enter")
    wait_for(lambda: history.exists() and "true ready" in history.read_text(), what="bash")
    keys = Path(f"{marker}.keys")
    # The agent reads `true ready` too, in its own time: once it has, start afresh.
    wait_for(lambda: keys.exists() and "true ready" in keys.read_text(), what="the agent's keys")
    keys.unlink()
    _track(fleet, t.window)
    code, doc = fleet.fm_json("teardown", t.id, env=fleet.env(FM_QUIT_GRACE_SECS="5"))
    assert code == 0, doc
    detail = endpoint_step(doc)
    assert "synchronize-panes is on" in detail and "asked" not in detail, detail
    assert "/exit" not in history.read_text()
    assert not Path(f"{marker}.keys").exists() and not marker.exists()
    wait_for(lambda: gone(pid), what="the agent ended by signals")


def test_the_scan_reads_each_pane_s_foreground_as_the_endpoint_step_does(fleet: Fleet) -> None:
    """The decision takes a pane's foreground from the process scan (`Proc.tpgid`), the
    endpoint step reads it afresh: both must read the same field of the same file."""
    from fm_teardown.adapters import processes

    t, _ = agent_task(fleet, "rc-scan-fg", 1, "claude", "obey")
    table = processes.scan()
    pane_pid = t.pids[0]
    assert table.procs[pane_pid].tpgid > 0
    for pid in t.pids:
        assert table.procs[pid].tpgid == (processes.foreground_group(pid) or 0)
    # The tmux server has no controlling terminal: no foreground (0), never -1.
    assert table.procs[fleet.tmux.server_pid()].tpgid == 0
