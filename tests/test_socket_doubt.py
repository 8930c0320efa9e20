"""The tmux inventory fails closed on any socket doubt, on real tmux servers.

fm runs here with a private TMUX_TMPDIR, so its "default" socket and every `-L NAME` socket
are private to the test: the user's own tmux server is never asked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet import Fleet, gone, private_env, tid


def test_a_socket_name_naming_no_socket_refuses_dry_and_real_run_alike(
    fleet: Fleet, tmux_tmpdir: Path
) -> None:
    """spec §14.3: the dry run predicts the real run: both refuse (5) on the inventory, the
    first hint naming the variable and the servers found (the fleet's among them)."""
    slot = fleet.slot(1, holder=tid("orphan"))
    t = fleet.task(tid("orphan"), slot, "alive")
    env = private_env(fleet, tmux_tmpdir, FM_TMUX_SOCKET_NAME="nc-nothere")
    before = fleet.snapshot(slot)
    code, doc = fleet.fm_json("teardown", t.id, "--dry-run", env=env)
    assert (code, doc["verdict"], doc["endpoint"]) == (5, "unsafe", "unreadable"), doc
    assert "FM_TMUX_SOCKET_NAME=nc-nothere" in doc["hints"][0]
    assert f"FM_TMUX_SOCKET={fleet.tmux.socket}" in doc["hints"][0]
    r = fleet.fm("teardown", t.id, env=env)
    assert r.returncode == 5, r.stdout
    assert "nc-nothere" in r.stdout + r.stderr and "TORN DOWN" not in r.stdout
    assert fleet.snapshot(slot) == before
    assert t.window in fleet.tmux.windows() and (fleet.state / f"{t.id}.meta").exists()


def test_a_refusal_on_an_unreadable_inventory_hints_at_the_inventory(
    fleet: Fleet, tmux_tmpdir: Path
) -> None:
    slot = fleet.slot(1, holder=tid("mine"))
    mine = fleet.task(tid("mine"), slot, "dead", extra={"treehouse_lease_holder": tid("mine")})
    fleet.task(tid("busy"), slot, "alive")
    env = private_env(fleet, tmux_tmpdir, FM_TMUX_SOCKET_NAME="nc-nothere")
    code, doc = fleet.fm_json("teardown", mine.id, "--dry-run", env=env)
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    assert "tmux server" in doc["hints"][0] and "FM_TMUX_SOCKET" in doc["hints"][0]
    assert not any("--discard-live-owner" in h for h in doc["hints"]), doc["hints"]


def test_a_named_socket_with_no_server_and_no_fleet_elsewhere_is_gone(
    fleet: Fleet, tmux_tmpdir: Path
) -> None:
    """spec §15.3: a server that is gone is gone. No server on the named socket (tmux left
    its file behind), and no running server of the user holds any record's window (the
    fleet's own server runs, for other work): every endpoint is `missing`, and the teardown
    proceeds."""
    env = private_env(fleet, tmux_tmpdir, FM_TMUX_SOCKET_NAME="fmgone")
    subprocess.run(
        ["tmux", "-L", "fmgone", "-f", "/dev/null", "new-session", "-d", "-s", "x"],
        env=env,
        check=True,
        capture_output=True,
    )
    subprocess.run(["tmux", "-L", "fmgone", "kill-server"], env=env, capture_output=True)
    assert (tmux_tmpdir / f"tmux-{os.getuid()}" / "fmgone").exists()  # tmux leaves it
    slot = fleet.slot(1, holder=tid("done"))
    fleet.record(tid("done"), slot)
    code, doc = fleet.fm_json("teardown", tid("done"), "--dry-run", env=env)
    assert (code, doc["endpoint"], doc["verdict"]) == (0, "missing", "proceed"), doc
    r = fleet.fm("teardown", tid("done"), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (fleet.state / f"{tid('done')}.meta").exists()


def test_no_default_server_with_another_server_running_is_unreadable(
    fleet: Fleet, tmux_tmpdir: Path
) -> None:
    slot = fleet.slot(1, holder=tid("t"))
    t = fleet.task(tid("t"), slot, "alive")
    env = private_env(fleet, tmux_tmpdir)  # neither variable: the (private) default socket
    before = fleet.snapshot(slot)
    code, doc = fleet.fm_json("teardown", t.id, "--dry-run", env=env)
    assert (code, doc["endpoint"]) == (5, "unreadable"), doc
    r = fleet.fm("teardown", t.id, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 5, out
    # The server that holds the fleet's windows is named, and the variable that selects it.
    assert "no tmux server answers on the default socket" in out, out
    assert f"holds fm-{t.id}: point fm at it with FM_TMUX_SOCKET={fleet.tmux.socket}" in out
    assert fleet.snapshot(slot) == before and t.window in fleet.tmux.windows()


def _can_isolate_pids() -> bool:
    try:
        r = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def test_no_default_server_and_no_other_server_is_missing(fleet: Fleet, tmux_tmpdir: Path) -> None:
    if not _can_isolate_pids():
        pytest.skip("needs a private PID namespace (unshare --pid) to hide the test's servers")
    slot = fleet.slot(1, holder=tid("t"))
    fleet.record(tid("t"), slot)
    env = private_env(fleet, tmux_tmpdir)
    # In a PID namespace of its own, fm sees no tmux server of this user at all.
    r = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "fm_teardown",
         "teardown", tid("t"), "--dry-run", "--json"],
        capture_output=True, text=True, cwd=fleet.fm_home, env=env, timeout=60, check=False,
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert (r.returncode, doc["endpoint"], doc["verdict"]) == (0, "missing", "proceed"), doc


def test_the_default_server_ending_with_the_tasks_last_window_is_gone(
    fleet: Fleet, tmux_tmpdir: Path
) -> None:
    env = private_env(fleet, tmux_tmpdir)  # the (private) default socket; the fleet's runs too
    slot = fleet.slot(1, holder=tid("last"))
    fleet.record(tid("last"), slot)
    # The task's window is the default server's only one: killing it ends that server.
    subprocess.run(
        ["tmux", "-f", "/dev/null", "new-session", "-d", "-s", "firstmate", "-n",
         f"fm-{tid('last')}", "-c", str(slot), "bash --norc --noprofile"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    code, doc = fleet.fm_json("teardown", tid("last"), env=env)
    assert (code, doc["verdict"]) == (0, "proceed"), json.dumps(doc, indent=1)
    assert doc["steps"][0]["outcome"] == "done"
    assert not (fleet.state / f"{tid('last')}.meta").exists()


def test_a_server_with_no_session_left_holds_no_window(fleet: Fleet, tmux_tmpdir: Path) -> None:
    """A server that has no session (one exiting after its last window was killed, caught
    between the kill and its exit; or one kept with `exit-empty off`) answers `list-panes -a`
    with "no current target": it holds no pane, so the task's window is gone, never doubt."""
    env = private_env(fleet, tmux_tmpdir)
    slot = fleet.slot(1, holder=tid("empty"))
    fleet.record(tid("empty"), slot)
    tmux = ["tmux", "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-s", "firstmate"], env=env, check=True)
    subprocess.run([*tmux, "set", "-g", "exit-empty", "off"], env=env, check=True)
    subprocess.run([*tmux, "kill-session", "-t", "=firstmate"], env=env, check=True)
    listing = subprocess.run(
        [*tmux, "list-panes", "-a"], env=env, capture_output=True, text=True, check=False
    )
    assert "no current target" in listing.stderr  # the server runs, with no session
    code, doc = fleet.fm_json("teardown", tid("empty"), "--dry-run", env=env)
    assert (code, doc["verdict"], doc["endpoint"]) == (0, "proceed", "missing"), doc
    code, doc = fleet.fm_json("teardown", tid("empty"), env=env)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert not (fleet.state / f"{tid('empty')}.meta").exists()


def test_the_fleet_on_a_renamed_tmux_binary_is_found_by_its_socket(
    fleet: Fleet, tmux_tmpdir: Path
) -> None:
    """No socket variable; the fleet's server runs from a copy of tmux under another name.
    fm sees no process named tmux at all (a PID namespace of its own), yet finds that server
    by its socket: "no server" on the default socket is doubt, and a live task's build is
    not killed."""
    if not _can_isolate_pids():
        pytest.skip("needs a private PID namespace (unshare --pid) to hide the test's servers")
    renamed = fleet.root / "mux"
    shutil.copy(shutil.which("tmux") or "/usr/bin/tmux", renamed)
    env = private_env(fleet, tmux_tmpdir)
    mux = [str(renamed), "-L", "fleet", "-f", "/dev/null"]
    try:
        subprocess.run(
            [*mux, "new-session", "-d", "-s", "firstmate", "-n", "keep", "bash --norc"],
            env=env, check=True, capture_output=True, cwd=fleet.root,
        )  # fmt: skip
        slot = fleet.slot(1, holder=tid("older"))
        fleet.record(tid("older"), slot, extra={"spawn_gen": "s1000.1.a"})
        fleet.record(tid("newer"), slot, extra={"spawn_gen": "s2000.1.a"})
        subprocess.run(
            [*mux, "new-window", "-d", "-t", "firstmate:", "-n", f"fm-{tid('newer')}", "-c",
             str(slot), f"bash --norc -c '{fleet.bin}/claude 100000; exec bash'"],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        build = fleet.spawn(["sleep", "100000"], slot)
        before = fleet.snapshot(slot)
        for args in (["--dry-run"], []):
            r = subprocess.run(
                ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m",
                 "fm_teardown", "teardown", tid("older"), *args, "--json"],
                capture_output=True, text=True, cwd=fleet.fm_home, env=env, timeout=60,
                check=False,
            )  # fmt: skip
            doc = json.loads(r.stdout)
            assert (r.returncode, doc["verdict"]) == (5, "unsafe"), doc
            assert "FM_TMUX_SOCKET" in doc["hints"][0]
            assert str(tmux_tmpdir / f"tmux-{os.getuid()}" / "fleet") in doc["hints"][0]
        assert fleet.snapshot(slot) == before and build.poll() is None
    finally:
        subprocess.run([*mux, "kill-server"], env=env, capture_output=True, check=False)


def test_a_default_server_without_the_fleets_windows_is_doubt(
    fleet: Fleet, tmux_tmpdir: Path
) -> None:
    """No socket variable; the operator's own default server answers, the fleet runs on
    another: every fleet window would read `missing` there. With another server holding the
    records' windows and none of them on the default one, the inventory is unreadable."""
    env = private_env(fleet, tmux_tmpdir)
    default = ["tmux", "-f", "/dev/null"]
    try:
        subprocess.run(
            [*default, "new-session", "-d", "-s", "operator", "bash --norc"],
            env=env, check=True, capture_output=True, cwd=fleet.root,
        )  # fmt: skip
        slot = fleet.slot(1, holder=tid("older"))
        older = fleet.task(tid("older"), slot, "dead", extra={"spawn_gen": "s1000.1.a"})
        newer = fleet.task(tid("newer"), slot, "alive", extra={"spawn_gen": "s2000.1.a"})
        before = fleet.snapshot(slot)
        code, doc = fleet.fm_json("teardown", older.id, "--dry-run", env=env)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        assert "holds none of the records' windows" in doc["hints"][0]
        assert f"FM_TMUX_SOCKET={fleet.tmux.socket}" in doc["hints"][0]
        r = fleet.fm("teardown", older.id, env=env)
        assert r.returncode == 5, r.stdout + r.stderr
        # The audit and --landed alike: never "nothing to do" under doubt.
        for args in (["--dry-run"], ["--landed"], ["--landed", "--dry-run"]):
            r = fleet.fm("teardown", *args, env=env)
            out = r.stdout + r.stderr
            assert r.returncode == 5 and f"FM_TMUX_SOCKET={fleet.tmux.socket}" in out, (args, out)
        assert fleet.snapshot(slot) == before and not any(gone(p) for p in newer.pids)
    finally:
        subprocess.run([*default, "kill-server"], env=env, capture_output=True, check=False)
