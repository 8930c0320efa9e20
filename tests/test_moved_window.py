"""TASK's own window moved to another session of the fleet's tmux server (`tmux move-window`),
its panes still running in TASK's slot, torn down for real (spec §14.1).

The decision takes the moved window for TASK's endpoint (`tests/test_census.py` checks the dry
run); the real run must act on it by the window ids the decision saw, whatever its session now:
its agent asked to quit with its harness's keys before any signal, then the window killed. The
operator's other window in that session is not TASK's and stays; a window of TASK's name that
appears in the record's session after the decision (a relaunch's) is still never killed.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from tests.fleet import SESSION, Fleet, gone
from tests.test_graceful_quit import agent_pid, agent_task, endpoint_step

AWAY = "away"


def _move_away(fleet: Fleet, window: str) -> tuple[str, str, list[int]]:
    """Move `window` to a new session `away` holding an operator's window; returns the moved
    window's id, the operator window's id and its pane pids."""
    fleet.tmux.run("new-session", "-d", "-s", AWAY, "-n", "keep", "bash --norc --noprofile")
    keep = fleet.tmux.run("display-message", "-p", "-t", f"={AWAY}:keep", "#{window_id}")
    keep_id = keep.stdout.strip()
    keep_pids = fleet.tmux.pane_pids(keep_id)
    fleet.tracked.update(keep_pids)
    fleet.tmux.run("move-window", "-s", window, "-t", f"={AWAY}:")
    name = window.split(":", 1)[1]
    wid = fleet.tmux.run("display-message", "-p", "-t", f"={AWAY}:{name}", "#{window_id}")
    return wid.stdout.strip(), keep_id, keep_pids


def _window_ids(fleet: Fleet) -> dict[str, str]:
    out = fleet.tmux.run("list-windows", "-a", "-F", "#{window_id} #{session_name}:#{window_name}")
    return dict(line.split(" ", 1) for line in out.stdout.splitlines())


def test_a_moved_window_is_torn_down_by_its_ids_its_agent_asked_to_quit_first(
    fleet: Fleet,
) -> None:
    t, marker = agent_task(fleet, "mvq", 1, "claude", "obey")
    pid = agent_pid(t, "claude")
    wid, keep_id, keep_pids = _move_away(fleet, t.window)
    assert _window_ids(fleet)[wid] == f"{AWAY}:fm-{t.id}"

    code, doc = fleet.fm_json("teardown", t.id, env=fleet.env(FM_QUIT_GRACE_SECS="20"))

    assert code == 0, doc
    # Its agent got its quit keys and left on request, before any signal.
    assert Path(f"{marker}.keys").read_text() == "/exit\n"
    assert marker.read_text() == "saved on request"
    assert gone(pid)
    detail = endpoint_step(doc)
    assert f"killed window {wid}" in detail, detail
    assert f"asked claude ({pid}): /exit Enter to quit" in detail
    assert f"left on request: claude ({pid})" in detail and "signalled" not in detail
    # Nobody the run signalled is the agent or the operator's window; the journal says the same.
    signalled = [s["pid"] for s in doc["signalled"]]
    assert pid not in signalled and not set(keep_pids) & set(signalled)
    [line] = [e for e in fleet.journal() if e.get("task") == t.id]
    assert line["signalled"] == doc["signalled"]
    # The moved window is gone; the operator's window in that session is as it was.
    windows = _window_ids(fleet)
    assert wid not in windows
    assert windows[keep_id] == f"{AWAY}:keep"
    assert fleet.tmux.pane_pids(keep_id) == keep_pids
    assert all(psutil.pid_exists(p) and not gone(p) for p in keep_pids)
    assert not t.meta.exists()


def test_a_window_of_the_tasks_name_new_in_its_session_is_never_killed_when_it_moved(
    fleet: Fleet,
) -> None:
    """The moved window is decided on; while the run waits before the endpoint step, a
    relaunch opens a new `fm-<TASK>` window in the record's session: the run stops before
    typing or killing anything, and neither window, nor the record, is touched."""
    t, marker = agent_task(fleet, "mvn", 1, "claude", "obey")
    pid = agent_pid(t, "claude")
    wid, keep_id, keep_pids = _move_away(fleet, t.window)
    proc, pause = fleet.fm_paused("before-endpoint", t.id)
    try:
        relaunch = fleet.tmux.new_window(
            SESSION, f"fm-{t.id}", fleet.root, "bash --norc --noprofile"
        )
        relaunch_pids = fleet.tmux.pane_pids(relaunch)
        fleet.tracked.update(relaunch_pids)
    finally:
        pause.unlink()
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)

    assert (proc.returncode, doc["verdict"]) == (1, "failed"), (doc, err)
    assert f"window {relaunch} named {SESSION}:fm-{t.id} appeared since deciding" in (
        endpoint_step(doc)
    )
    assert doc["signalled"] == []
    windows = _window_ids(fleet)
    assert windows[relaunch] == f"{SESSION}:fm-{t.id}"
    assert windows[wid] == f"{AWAY}:fm-{t.id}"
    assert windows[keep_id] == f"{AWAY}:keep"
    assert not any(gone(p) for p in [*relaunch_pids, *keep_pids, pid])
    assert not Path(f"{marker}.keys").exists()  # no keys typed
    assert t.meta.exists()


def test_a_window_of_the_tasks_name_new_beside_the_moved_one_is_never_killed(
    fleet: Fleet,
) -> None:
    """A new `fm-<TASK>` window in the session the window was moved to, after the decision:
    only the window id decided on is killed; the newcomer, not seen when deciding, stays."""
    t, marker = agent_task(fleet, "mvb", 1, "claude", "obey")
    pid = agent_pid(t, "claude")
    wid, keep_id, keep_pids = _move_away(fleet, t.window)
    proc, pause = fleet.fm_paused("before-endpoint", t.id)
    try:
        newcomer = fleet.tmux.new_window(AWAY, f"fm-{t.id}", fleet.root, "bash --norc --noprofile")
        newcomer_pids = fleet.tmux.pane_pids(newcomer)
        fleet.tracked.update(newcomer_pids)
    finally:
        pause.unlink()
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)

    assert proc.returncode == 0, (doc, err)
    assert Path(f"{marker}.keys").read_text() == "/exit\n" and gone(pid)
    assert f"killed window {wid}" in endpoint_step(doc)
    windows = _window_ids(fleet)
    assert wid not in windows
    assert windows[newcomer] == f"{AWAY}:fm-{t.id}"
    assert windows[keep_id] == f"{AWAY}:keep"
    assert not any(gone(p) for p in [*newcomer_pids, *keep_pids])
    signalled = {s["pid"] for s in doc["signalled"]}
    assert not signalled & {*newcomer_pids, *keep_pids}
