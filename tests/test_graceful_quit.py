"""Graceful agent quit: before any signal, TASK's own agent is asked to leave with its
harness's quit keys, in its own pane, and given `FM_QUIT_GRACE_SECS` to go.

The agent stand-ins are small Python scripts named like the harness (`claude`, `codex`):
they ignore SIGTERM and SIGHUP, read their terminal line by line, and on their harness's quit
line save a file and exit; a stubborn one ignores the quit line too; a `hup` one ignores the
quit line but not SIGHUP (the window kill ends it).
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from tests.fleet import SESSION, Fleet, Task, gone, tid, wait_for

STANDIN = """\
#!{python}
import os, signal, sys, time
mode, marker = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode != "hup":
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.alarm(60)  # ignores SIGTERM only for a while: never outlives its test for long
# By the program's name, or (run by an interpreter) its script's: gemini's `dist/index.js`.
quit_line = {{"claude": "/exit", "codex": "/quit", "index.js": "/quit"}}[
    os.path.basename(sys.argv[0])
]
with open(marker + ".ready", "w") as f:
    f.write("ready")
while True:
    try:
        line = sys.stdin.readline()
    except OSError:
        line = ""
    if not line:
        if mode == "obey":
            sys.exit(0)  # the terminal is gone (the test's tmux server ended)
        break
    with open(marker + ".keys", "a") as f:
        f.write(line)
    if line.strip() == quit_line and mode == "obey":
        with open(marker, "w") as f:
            f.write("saved on request")
        sys.exit(0)
while True:  # stubborn (or its terminal is gone): only SIGKILL ends it
    time.sleep(1)
"""


def standin(fleet: Fleet, name: str) -> Path:
    path = fleet.root / "agents" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(STANDIN.format(python=sys.executable))
    path.chmod(0o755)
    return path


def agent_task(fleet: Fleet, name: str, n: int, harness: str, mode: str) -> tuple[Task, Path]:
    """A task whose window's foreground process is the stand-in agent `harness`."""
    t = tid(name)
    slot = fleet.slot(n, holder=t)
    fleet.record(t, slot, extra={"treehouse_lease_holder": t})
    marker = fleet.root / f"{t}.saved"
    agent = standin(fleet, harness)
    wid = fleet.tmux.new_window(
        SESSION, f"fm-{t}", slot, f"bash --norc --noprofile -c '{agent} {mode} {marker}; exec bash'"
    )
    wait_for(lambda: Path(f"{marker}.ready").exists(), what=f"{harness} stand-in ready")
    pids = fleet.tmux.pane_pids(wid)
    pids += [c.pid for c in psutil.Process(pids[0]).children(recursive=True)]
    fleet.tracked.update(pids)
    return Task(t, slot, fleet.state / f"{t}.meta", f"{SESSION}:fm-{t}", pids), marker


def agent_pid(t: Task, harness: str) -> int:
    for pid in t.pids:
        try:
            if psutil.Process(pid).name() == harness:
                return pid
        except psutil.NoSuchProcess:
            continue
    raise AssertionError(f"no {harness} in {t.pids}")


def endpoint_step(doc: dict[str, Any]) -> str:
    return str(next(s["detail"] for s in doc["steps"] if s["step"] == "endpoint"))


def test_an_agent_asked_to_quit_saves_and_leaves_before_any_signal(fleet: Fleet) -> None:
    t, marker = agent_task(fleet, "gq-obey", 1, "claude", "obey")
    pid = agent_pid(t, "claude")
    start = time.monotonic()
    code, doc = fleet.fm_json("teardown", t.id, env=fleet.env(FM_QUIT_GRACE_SECS="20"))
    took = time.monotonic() - start
    assert code == 0, doc
    assert marker.read_text() == "saved on request"
    assert gone(pid)
    detail = endpoint_step(doc)
    assert f"asked claude ({pid}): /exit Enter to quit" in detail
    assert f"left on request: claude ({pid})" in detail and "signalled" not in detail
    assert pid not in [s["pid"] for s in doc["signalled"]]
    assert took < 15  # the wait ended as soon as the agent was gone, not after 20 s


def test_each_harness_gets_its_own_keys(fleet: Fleet) -> None:
    t, marker = agent_task(fleet, "gq-codex", 1, "codex", "obey")
    pid = agent_pid(t, "codex")
    code, doc = fleet.fm_json("teardown", t.id, env=fleet.env(FM_QUIT_GRACE_SECS="20"))
    assert code == 0 and marker.read_text() == "saved on request"
    assert Path(f"{marker}.keys").read_text() == "/quit\n"
    assert f"left on request: codex ({pid})" in endpoint_step(doc)


def test_an_agent_that_ignores_its_quit_keys_is_signalled_after_the_grace(fleet: Fleet) -> None:
    t, marker = agent_task(fleet, "gq-stubborn", 1, "claude", "stubborn")
    pid = agent_pid(t, "claude")
    env = fleet.env(FM_QUIT_GRACE_SECS="1", FM_TERM_GRACE_SECS="0.5")
    code, doc = fleet.fm_json("teardown", t.id, env=env)
    assert code == 0, doc
    assert not marker.exists() and Path(f"{marker}.keys").read_text() == "/exit\n"
    wait_for(lambda: gone(pid), what="the stubborn agent killed")
    detail = endpoint_step(doc)
    assert f"still running after 1s, so signalled: claude ({pid})" in detail
    assert "left on request" not in detail
    [sig] = [s for s in doc["signalled"] if s["pid"] == pid]
    # The window kill's hangup first (it ignores it), then the processes step's signals.
    assert sig["signals"] == ["SIGHUP (window killed)", "SIGTERM", "SIGKILL"]
    lines = [json.loads(x) for x in (fleet.data / "teardown-log.jsonl").read_text().splitlines()]
    assert "signalled: claude" in next(
        s["detail"] for s in lines[-1]["steps"] if s["step"] == "endpoint"
    )


def test_no_keys_to_a_pane_whose_foreground_is_not_the_agent(fleet: Fleet) -> None:
    # The agent runs in the background of its pane; `cat` has the keyboard and would take
    # any key typed: it must get none.
    t = tid("gq-busy")
    slot = fleet.slot(1, holder=t)
    fleet.record(t, slot, extra={"treehouse_lease_holder": t})
    marker = fleet.root / f"{t}.saved"
    typed = fleet.root / f"{t}.typed"
    agent = standin(fleet, "claude")
    wid = fleet.tmux.new_window(
        SESSION,
        f"fm-{t}",
        slot,
        f"bash --norc --noprofile -c '{agent} stubborn {marker} & exec cat > {typed}'",
    )
    wait_for(lambda: Path(f"{marker}.ready").exists(), what="stand-in ready")
    pids = fleet.tmux.pane_pids(wid)
    fleet.tracked.update(pids)
    code, doc = fleet.fm_json("teardown", t, env=fleet.env(FM_TERM_GRACE_SECS="0.5"))
    assert code == 0, doc
    assert typed.read_text() == "" and not marker.exists()
    assert "asked" not in endpoint_step(doc)


def test_no_keys_to_another_tasks_window(fleet: Fleet) -> None:
    mine, mine_marker = agent_task(fleet, "gq-mine", 1, "claude", "obey")
    other, other_marker = agent_task(fleet, "gq-other", 2, "claude", "obey")
    other_pid, mine_pid = agent_pid(other, "claude"), agent_pid(mine, "claude")
    code, doc = fleet.fm_json("teardown", mine.id, env=fleet.env(FM_QUIT_GRACE_SECS="20"))
    assert code == 0 and mine_marker.exists()
    assert f"left on request: claude ({mine_pid})" in endpoint_step(doc)
    assert not other_marker.exists() and not Path(f"{other_marker}.keys").exists()
    assert not gone(other_pid) and other.window in fleet.tmux.windows()


def test_the_journal_lists_an_agent_the_window_kill_ended(fleet: Fleet) -> None:
    # It ignores its quit keys, and the window kill's hangup ends it in the endpoint step:
    # the run signalled it, so the journal's `signalled` says so (it used to be []).
    t, marker = agent_task(fleet, "gq-hup", 1, "claude", "hup")
    pid = agent_pid(t, "claude")
    code, doc = fleet.fm_json("teardown", t.id, env=fleet.env(FM_QUIT_GRACE_SECS="0.5"))
    assert code == 0, doc
    assert not marker.exists() and Path(f"{marker}.keys").read_text() == "/exit\n"
    wait_for(lambda: gone(pid), what="the agent ended by the window kill")
    assert f"so signalled: claude ({pid})" in endpoint_step(doc)
    [line] = fleet.journal()
    [sig] = [s for s in line["signalled"] if s["pid"] == pid]
    assert sig["signals"] == ["SIGHUP (window killed)"] and sig["name"] == "claude"
    assert [s for s in doc["signalled"] if s["pid"] == pid] == [sig]


def test_the_grace_said_is_the_time_actually_waited(fleet: Fleet) -> None:
    # Interrupted 0.5 s into a 30 s grace: the step says how long fm really waited.
    t, marker = agent_task(fleet, "gq-short", 1, "claude", "stubborn")
    pid = agent_pid(t, "claude")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", "teardown", t.id, "--json"],
        cwd=fleet.fm_home,
        env=fleet.env(FM_QUIT_GRACE_SECS="30", FM_TERM_GRACE_SECS="0.5"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: Path(f"{marker}.keys").exists(), what="the quit keys")
        time.sleep(0.5)  # part of the grace goes by: what the message must report
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    doc = json.loads(out)
    assert proc.returncode == 130, (doc, err)
    detail = endpoint_step(doc)
    said = re.search(
        r"still running after ([0-9.]+)s, left to quit by itself: claude \((\d+)\)", detail
    )
    assert said is not None and int(said.group(2)) == pid, detail
    assert 0.4 <= float(said.group(1)) < 10, detail
    # An interrupt never hastens a signal: nothing was killed, the stubborn agent stays.
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).kill()
    wait_for(lambda: gone(pid), what="the stubborn agent reaped")


def test_quit_texts_are_never_tmux_key_names() -> None:
    # They go in one send-keys call beside key names: tmux types any argument that is not
    # a key name as characters, and no key name starts with `/`.
    from fm_teardown.act.graceful import QUIT_KEYS

    for _harness, keys in QUIT_KEYS:
        for text, literal in keys:
            assert not literal or text.startswith("/"), text


def test_an_agent_run_by_an_interpreter_gets_its_harnesss_keys(fleet: Fleet) -> None:
    """`node …/node_modules/@google/gemini-cli/dist/index.js` in TASK's own pane is Gemini
    CLI: asked to quit with gemini's keys (`/quit Enter`) before any signal, it saves and
    leaves (before, a process named `node` had the keyboard and got no keys)."""
    t = tid("gq-node")
    slot = fleet.slot(1, holder=t)
    fleet.record(t, slot, extra={"treehouse_lease_holder": t})
    marker = fleet.root / f"{t}.saved"
    script = fleet.root / "lib" / "node_modules" / "@google" / "gemini-cli" / "dist" / "index.js"
    script.parent.mkdir(parents=True)
    script.write_text(STANDIN.format(python=sys.executable))
    node = fleet.bin / "node"
    node.symlink_to(Path(sys.executable).resolve())
    command = f"bash --norc --noprofile -c '{node} {script} obey {marker}; exec bash'"
    wid = fleet.tmux.new_window(SESSION, f"fm-{t}", slot, command)
    wait_for(lambda: Path(f"{marker}.ready").exists(), what="the node-run stand-in ready")
    pids = fleet.tmux.pane_pids(wid)
    pids += [c.pid for c in psutil.Process(pids[0]).children(recursive=True)]
    fleet.tracked.update(pids)
    [pid] = [p for p in pids if psutil.Process(p).name() == "node"]
    code, doc = fleet.fm_json("teardown", t, env=fleet.env(FM_QUIT_GRACE_SECS="20"))
    assert code == 0, doc
    assert marker.read_text() == "saved on request"
    assert Path(f"{marker}.keys").read_text() == "/quit\n"
    assert pid not in [s["pid"] for s in doc["signalled"]]
