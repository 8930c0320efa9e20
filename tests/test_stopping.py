"""Stopping properly: an interrupt never hastens a signal, an agent's exit hooks get their
time, the quit keys and their `synchronize-panes` check are one tmux command, and only the
decided panes are killed, by pane id.

The agent stand-in here is a small Python script named `claude` that notes every SIGHUP,
SIGTERM and SIGINT it gets in a file (and otherwise ignores them), reads its terminal line by
line, and on `/exit` leaves in its own way: `slow` takes a few seconds to save first; `hook`
runs an exit hook (a child `sh` that sleeps, then writes a file) and waits for it; `detach`
starts its hook and exits without waiting for it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil

from fm_teardown.adapters import interrupts, processes
from tests.fleet import SESSION, Fleet, Task, gone, resumed_json, tid, wait_for

AGENT = """\
#!{python}
import os, signal, subprocess, sys, time
mode, marker, hook_secs = sys.argv[1], sys.argv[2], float(sys.argv[3])


def note(signum, frame):
    with open(marker + ".signals", "a") as f:
        f.write(f"{{signum}}\\n")


for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
    signal.signal(s, note)
signal.alarm(120)  # never outlives its test for long
hook = ["sh", "-c", f"sleep {{hook_secs}}; echo complete > {{marker}}.hook"]
with open(marker + ".ready", "w") as f:
    f.write("ready")
while True:
    try:
        line = sys.stdin.readline()
    except OSError:
        line = ""
    if not line:
        time.sleep(1)
        continue
    with open(marker + ".keys", "a") as f:
        f.write(line)
    if line.strip() != "/exit":
        continue
    if mode == "slow":
        time.sleep(hook_secs)
    elif mode == "hook":
        subprocess.run(hook)
    elif mode == "detach":
        subprocess.Popen(hook, start_new_session=True)
        time.sleep(0.3)
    elif mode == "late-exec":  # the hook runs under its parent's name for half a second
        if os.fork() == 0:
            os.setsid()
            time.sleep(0.5)
            os.execvp(hook[0], hook)
        time.sleep(0.3)
    with open(marker, "w") as f:
        f.write("saved on request")
    sys.exit(0)
"""


def agent_task(fleet: Fleet, name: str, mode: str, hook_secs: float) -> tuple[Task, Path, int]:
    """A task whose window's foreground process is the stand-in: the task, its marker and
    the agent's pid."""
    t = tid(name)
    slot = fleet.slot(1, holder=t)
    fleet.record(t, slot, extra={"treehouse_lease_holder": t})
    marker = fleet.root / f"{t}.saved"
    agent = fleet.root / "agents" / "claude"
    agent.parent.mkdir(exist_ok=True)
    agent.write_text(AGENT.format(python=sys.executable))
    agent.chmod(0o755)
    command = f"bash --norc --noprofile -c '{agent} {mode} {marker} {hook_secs}; exec bash'"
    wid = fleet.tmux.new_window(SESSION, f"fm-{t}", slot, command)
    wait_for(lambda: Path(f"{marker}.ready").exists(), what="the stand-in ready")
    pids = fleet.tmux.pane_pids(wid)
    pids += [c.pid for c in psutil.Process(pids[0]).children(recursive=True)]
    fleet.tracked.update(pids)
    [pid] = [p for p in pids if psutil.Process(p).name() == "claude"]
    return Task(t, slot, fleet.state / f"{t}.meta", f"{SESSION}:fm-{t}", pids), marker, pid


def signals_got(marker: Path) -> list[str]:
    path = Path(f"{marker}.signals")
    return path.read_text().split() if path.exists() else []


def endpoint_detail(doc: dict[str, Any]) -> str:
    return str(next(s["detail"] for s in doc["steps"] if s["step"] == "endpoint"))


def test_ctrl_c_during_the_quit_grace_signals_nothing(fleet: Fleet) -> None:
    """Ctrl-C while fm waits for the agent it asked to quit: fm stops before any signal (the
    pane kill's hangup included), exits 130, and the agent quits by itself."""
    t, marker, pid = agent_task(fleet, "st-int", "slow", 3)
    env = fleet.env(FM_QUIT_GRACE_SECS="30", FM_QUIT_HOOK_GRACE_SECS="30")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", "teardown", t.id, "--json"],
        cwd=fleet.fm_home,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: Path(f"{marker}.keys").exists(), what="the quit keys")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    doc = json.loads(out)
    assert proc.returncode == 130, (doc, err)
    # fm is done, and the agent got nothing but its keys: it is still saving.
    assert signals_got(marker) == [] and not gone(pid)
    detail = endpoint_detail(doc)
    assert f"asked claude ({pid}): /exit Enter to quit" in detail, detail
    assert "left to quit by itself" in detail and "interrupted before the kill" in detail
    assert "so signalled" not in detail and doc["signalled"] == []
    assert t.window in fleet.tmux.windows() and t.meta.exists()
    wait_for(lambda: gone(pid), what="the agent quitting by itself")
    assert marker.read_text() == "saved on request" and signals_got(marker) == []
    [line] = fleet.journal()
    assert line["exit_code"] == 130 and line["signalled"] == []


def test_an_exit_hook_gets_its_time(fleet: Fleet) -> None:
    """The agent runs an 8 s exit hook after its quit keys, longer than the default 5 s
    grace: fm waits for it (the hook's file is complete) and signals nothing."""
    t, marker, pid = agent_task(fleet, "st-hook", "hook", 8)
    env = fleet.env(FM_QUIT_GRACE_SECS="5", FM_QUIT_HOOK_GRACE_SECS="30")
    code, doc = fleet.fm_json("teardown", t.id, env=env)
    assert code == 0, doc
    assert Path(f"{marker}.hook").read_text() == "complete\n"
    assert marker.read_text() == "saved on request" and signals_got(marker) == []
    detail = endpoint_detail(doc)
    # (The hook is named as fm first saw it: `sh`, or its parent's name between fork and exec.)
    assert "for its descendants (exit hooks); finished: " in detail, detail
    assert f"left on request: claude ({pid})" in detail and "signalled" not in detail
    assert pid not in [s["pid"] for s in doc["signalled"]]


def test_a_hook_its_agent_left_behind_is_waited_for(fleet: Fleet) -> None:
    """The agent starts its hook in a session of its own and exits without waiting: fm
    still waits for the hook before it kills anything."""
    t, marker, _pid = agent_task(fleet, "st-detach", "detach", 3)
    env = fleet.env(FM_QUIT_GRACE_SECS="0.3", FM_QUIT_HOOK_GRACE_SECS="30")
    code, doc = fleet.fm_json("teardown", t.id, env=env)
    assert code == 0, doc
    assert Path(f"{marker}.hook").read_text() == "complete\n"
    # The hook is named as fm first saw it: `sh`, or still its parent's name when fm saw it
    # between its fork and its exec.
    assert "exit hooks); finished: " in endpoint_detail(doc)


def test_the_hook_grace_bounds_the_wait(fleet: Fleet) -> None:
    """A hook still running when FM_QUIT_HOOK_GRACE_SECS is over is said to be, and the
    run goes on."""
    t, marker, _pid = agent_task(fleet, "st-long", "detach", 60)
    env = fleet.env(FM_QUIT_GRACE_SECS="0.3", FM_QUIT_HOOK_GRACE_SECS="1")
    code, doc = fleet.fm_json("teardown", t.id, env=env)
    assert code == 0, doc
    assert "still running when the wait ended: sh (" in endpoint_detail(doc)
    assert not Path(f"{marker}.hook").exists()  # the fleet reaps the hook (its argv)


def test_a_hook_is_named_as_it_runs_when_the_wait_ends(fleet: Fleet) -> None:
    """A hook fm first saw between its fork and its exec (under its agent's name) is named
    by what it runs when the wait ends, and not also said to have finished."""
    t, _marker, _pid = agent_task(fleet, "st-late", "late-exec", 60)
    env = fleet.env(FM_QUIT_GRACE_SECS="0.3", FM_QUIT_HOOK_GRACE_SECS="1.5")
    code, doc = fleet.fm_json("teardown", t.id, env=env)
    assert code == 0, doc
    detail = endpoint_detail(doc)
    stayed = detail.split("still running when the wait ended: ", 1)[1].split(";", 1)[0]
    assert stayed.startswith("sh (") and "claude" not in stayed, detail
    assert "finished: " not in detail, detail


def _tmux_logging(fleet: Fleet) -> tuple[dict[str, str], Path]:
    """A tmux on PATH that logs each call's arguments (one line each) before running it."""
    shim = fleet.root / "logshim"
    shim.mkdir()
    log = fleet.root / "tmux-calls.log"
    real = shutil.which("tmux")
    (shim / "tmux").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (shim / "tmux").chmod(0o755)
    return fleet.env(PATH=f"{shim}:{os.environ['PATH']}", FM_QUIT_GRACE_SECS="10"), log


def test_the_quit_keys_and_their_check_are_one_tmux_command(fleet: Fleet) -> None:
    t, marker, _pid = agent_task(fleet, "st-one", "slow", 0)
    env, log = _tmux_logging(fleet)
    code, doc = fleet.fm_json("teardown", t.id, env=env)
    assert code == 0, doc
    assert marker.read_text() == "saved on request"
    calls = log.read_text().splitlines()
    typing = [c for c in calls if "send-keys" in c]
    assert len(typing) == 1, calls
    assert "if-shell -F" in typing[0] and "#{synchronize-panes}" in typing[0], typing
    assert not [c for c in calls if "synchronize-panes" in c and c not in typing], calls
    # The kill is of the decided pane, by its id; never of a whole window.
    assert not [c for c in calls if "kill-window" in c], calls
    assert [c for c in calls if "kill-pane -t %" in c], calls


def test_a_pane_joined_after_the_last_check_is_not_killed(fleet: Fleet) -> None:
    """Between the endpoint step's last check and its kill, an operator joins a pane of
    theirs into TASK's window: the kill is of the decided panes only."""
    slot = fleet.slot(1, holder=tid("st-join"))
    t = fleet.task(tid("st-join"), slot, "dead", extra={"treehouse_lease_holder": tid("st-join")})
    wid = fleet.tmux.run("display-message", "-p", "-t", t.window, "#{window_id}").stdout.strip()
    proc, pause = fleet.fm_paused("before-kill", t.id)
    typed = fleet.root / f"{t.id}.typed"
    scratch = fleet.tmux.new_window(SESSION, "scratch", fleet.root, f"cat > {typed}")
    joined = fleet.tmux.run("display-message", "-p", "-t", scratch, "#{pane_id}").stdout.strip()
    [cat] = fleet.tmux.pane_pids(scratch)
    fleet.tracked.add(cat)
    fleet.tmux.run("join-pane", "-d", "-s", joined, "-t", wid)
    code, doc = resumed_json(proc, pause)
    assert code != 0, doc
    assert not gone(cat), "the joined pane was killed"
    panes = fleet.tmux.run("list-panes", "-t", wid, "-F", "#{pane_id}").stdout.split()
    assert panes == [joined]
    assert all(gone(p) for p in t.pids), "the decided pane was not killed"
    assert f"pane {joined}" in endpoint_detail(doc) and "joined the window" in endpoint_detail(doc)
    assert t.meta.exists() and fleet.treehouse_calls() == []


def test_no_signal_after_an_interrupt_in_terminate(fleet: Fleet) -> None:
    """`processes.terminate` once an interrupt came: no SIGTERM to the next target, no
    SIGKILL after the grace."""
    kids = [fleet.spawn(["sleep", "100000"], fleet.root) for _ in range(2)]
    table = processes.scan()
    targets = [table.procs[k.pid] for k in kids]
    log: dict[int, processes.Signalled] = {}
    interrupts._flag.set()
    try:
        left = processes.terminate(targets, 5.0, 5.0, log)
    finally:
        interrupts._flag.clear()
    assert sorted(p.pid for p in left) == sorted(k.pid for k in kids)
    assert all(k.poll() is None for k in kids) and not any(e.signals for e in log.values())


def test_an_interrupt_during_the_grace_stops_before_the_sigkill(fleet: Fleet) -> None:
    kid = fleet.spawn(
        [sys.executable, "-c", "import signal,time; signal.signal(15, signal.SIG_IGN); "
         "open('ready', 'w').close(); time.sleep(100000)"],
        fleet.root,
    )  # fmt: skip
    wait_for(lambda: (fleet.root / "ready").exists(), what="the SIGTERM-proof child")
    target = processes.scan().procs[kid.pid]
    log: dict[int, processes.Signalled] = {}
    timer = threading.Timer(0.3, interrupts._flag.set)
    timer.start()
    try:
        left = processes.terminate([target], 30.0, 30.0, log)
    finally:
        timer.cancel()
        interrupts._flag.clear()
    assert [p.pid for p in left] == [kid.pid] and kid.poll() is None
    assert log[kid.pid].signals == ["SIGTERM"]


def test_an_interrupt_during_the_look_before_the_return_stops_the_run_before_it(
    fleet: Fleet,
) -> None:
    """Ctrl-C that comes while fm looks at the world right before `treehouse return` (which
    ends what runs in the slot and resets it) stops the run before the return: exit 130,
    the record kept, no return made, the slot's worker alive."""
    t = tid("st-ret")
    slot = fleet.slot(1, holder=t)
    task = fleet.task(t, slot, "dead")
    proc, pause = fleet.fm_paused("before-return", t)
    worker = fleet.spawn(["sleep", "100000"], slot)  # came after the processes step
    proc.send_signal(signal.SIGINT)
    code, doc = resumed_json(proc, pause)
    assert (code, doc["exit_code"]) == (130, 130), doc
    assert [c for c in fleet.treehouse_calls() if c["argv"][:1] == ["return"]] == []
    assert task.meta.exists() and not gone(worker.pid)
