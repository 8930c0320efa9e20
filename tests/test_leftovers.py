"""The suite leaves no process behind: the session-end check fails a run that does, and the
fleet fixture reaps what a failing test left running.

Each test runs pytest on a small test file in a subprocess, with this suite's conftest as a
plugin, and looks at what that run said, how it exited, and what is still running after it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.fleet import REPO, TEST_RUN_VAR, Fleet, gone, reap, tid, wait_for

BANNER = "processes left behind"


def inner_argv(tmp_path: Path, body: str) -> list[str]:
    """pytest on `body` (a test module) with this suite's conftest and its own base temp dir."""
    test = tmp_path / "test_inner.py"
    test.write_text(textwrap.dedent(body))
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
            f"--basetemp={tmp_path / 'base'}", f"--rootdir={tmp_path}", str(test)]  # fmt: skip


# A short grace for stragglers: the runs below leave theirs on purpose.
INNER_ENV = {**os.environ, "FM_TEST_STRAGGLER_GRACE": "0.5"}


def inner_run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        inner_argv(tmp_path, body), cwd=REPO, env=INNER_ENV, capture_output=True, text=True,
        timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def pids_in(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.fixture
def reaped() -> Iterator[list[psutil.Process]]:
    """Processes to kill at the end whatever happened (what a failing check left)."""
    procs: list[psutil.Process] = []
    yield procs
    reap(procs)


# How the left-behind `sleep` is started: inheriting the run's environment; with an empty
# environment but its cwd in the test's directory; with an empty environment, cwd / and HOME in
# the test's directory. Each is found by another of the marks.
STARTS = {
    "environment": "subprocess.Popen(['sleep', '1000'], cwd='/', start_new_session=True)",
    "cwd": "subprocess.Popen(['sleep', '1000'], cwd=tmp_path, env={'PATH': '/usr/bin:/bin'}, "
    "start_new_session=True)",
    "home": "subprocess.Popen(['sleep', '1000'], cwd='/', env={'PATH': '/usr/bin:/bin', "
    "'HOME': str(tmp_path)}, start_new_session=True)",
}


@pytest.mark.parametrize("how", sorted(STARTS))
def test_a_process_left_running_fails_the_run_and_is_killed(
    tmp_path: Path, how: str, reaped: list[psutil.Process]
) -> None:
    pidfile = tmp_path / "pids"
    r = inner_run(
        tmp_path,
        f"""
        import subprocess
        from pathlib import Path

        def test_leaves_a_sleep_running(tmp_path: Path) -> None:
            p = {STARTS[how]}
            Path({str(pidfile)!r}).write_text(str(p.pid))
        """,
    )
    [pid] = pids_in(pidfile)
    if not gone(pid):
        reaped.append(psutil.Process(pid))
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "1 passed" in out and BANNER in out, out
    [line] = [ln for ln in out.splitlines() if f"pid {pid} " in ln]
    assert "sleep: sleep 1000" in line and "(cwd " in line, line
    assert gone(pid), f"the check did not kill {pid}"


def test_another_runs_processes_do_not_count(tmp_path: Path, reaped: list[psutil.Process]) -> None:
    """A process of another run (its own run id, its cwd outside this run's directories) is
    neither reported nor killed."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = subprocess.Popen(
        ["sleep", "1000"],
        cwd=elsewhere,
        env={"PATH": "/usr/bin:/bin", TEST_RUN_VAR: uuid.uuid4().hex},
        stdin=subprocess.DEVNULL,
    )
    reaped.append(psutil.Process(other.pid))
    try:
        r = inner_run(tmp_path, "def test_nothing() -> None:\n    pass\n")
        assert (r.returncode, BANNER in r.stdout) == (0, False), r.stdout + r.stderr
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_failing_fleet_test_leaves_nothing_running(tmp_path: Path) -> None:
    """What the tests of a fleet make and a failing test leaves: an agent and a shell that
    ignore SIGHUP in their windows (a server's end only hangs up on them), the same once their
    window is gone, a worker whose parent has exited, an extra tmux server. The fixture reaps
    them all although the test fails: the run fails for that test only."""
    pidfile = tmp_path / "pids"
    r = inner_run(
        tmp_path,
        f"""
        import subprocess
        from pathlib import Path

        from tests.fleet import Fleet, wait_for

        HUP_IGNORED = (
            "exec -a claude python3 -c 'import signal,time; "
            "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(1000)'"
        )

        def test_fails_with_everything_running(fleet: Fleet) -> None:
            slot = fleet.slot(1)
            pids = []
            for name in ("kept", "closed"):
                w = fleet.tmux.new_window("firstmate", name, slot, HUP_IGNORED)
                [pid] = fleet.tmux.pane_pids(w)
                pids.append(pid)
            wait_for(lambda: all(Path(f"/proc/{{p}}/cmdline").read_bytes().startswith(b"claude")
                                 for p in pids), what="the agents")
            fleet.tmux.run("kill-window", "-t", "=firstmate:=closed")
            worker = "(sleep 1000 </dev/null >/dev/null 2>&1 & echo $!)"
            spawner = subprocess.run(
                ["bash", "-c", worker], cwd=slot, capture_output=True, text=True, check=True
            )
            pids.append(int(spawner.stdout))
            pids.append(fleet.tmux_server_in(slot).server_pid())
            Path({str(pidfile)!r}).write_text(" ".join(map(str, pids)))
            raise AssertionError("this test fails with all of them running")
        """,
    )
    pids = pids_in(pidfile)
    assert len(pids) == 4, r.stdout + r.stderr
    left = [pid for pid in pids if not gone(pid)]
    reap(psutil.Process(pid) for pid in left)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "1 failed" in out, out
    assert BANNER not in out and not left, out


def test_a_run_stopped_with_sigterm_tears_its_fleet_down(tmp_path: Path) -> None:
    """A run stopped from outside (a time limit) while a fleet test runs: the fixture still
    reaps the test's tmux server and the agent that ignores SIGHUP in it."""
    pidfile = tmp_path / "pids"
    proc = subprocess.Popen(
        inner_argv(
            tmp_path,
            f"""
            import time
            from pathlib import Path

            from tests.fleet import Fleet, tid

            def test_runs_until_stopped(fleet: Fleet) -> None:
                slot = fleet.slot(1)
                task = fleet.task(tid("stopped"), slot)
                pids = [fleet.tmux.server_pid(), *task.pids]
                Path({str(pidfile)!r}).write_text(" ".join(map(str, pids)))
                time.sleep(1000)
            """,
        ),
        cwd=REPO,
        env=INNER_ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(pidfile.exists, timeout=60, what="the inner test's fleet")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    pids = pids_in(pidfile)
    left = [pid for pid in pids if not gone(pid)]
    reap(psutil.Process(pid) for pid in left)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert len(pids) >= 3 and not left, (pids, left, out)
    assert BANNER not in out, out


# -- fm's half of the question: its processes step never reports done over a survivor -------


def slot_processes(slot: Path) -> list[str]:
    """Every running process whose cwd is in `slot` (name and pid)."""
    out = []
    for p in psutil.process_iter(["pid", "name", "cwd", "status"], ad_value=None):
        cwd = p.info["cwd"] or ""
        if p.info["status"] != psutil.STATUS_ZOMBIE and f"{cwd}/".startswith(f"{slot}/"):
            out.append(f"{p.info['name']} ({p.info['pid']})")
    return out


def test_the_processes_step_done_leaves_nothing_of_the_slot_running(fleet: Fleet) -> None:
    """Workers started in the slot after the decision (in no list the decision made), one of
    them ignoring SIGTERM: once the processes step is done, and before the pool's return
    (which would end what is in the slot anyway), nothing runs in the slot."""
    task = tid("pr")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    recheck, after = fleet.root / "pause-recheck", fleet.root / "pause-after"
    recheck.touch()
    after.touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", "teardown", task, "--json"],
        cwd=fleet.fm_home,
        env=fleet.env(
            FM_TEST_FAULT=f"pause:before-recheck:{recheck},pause:after-processes:{after}",
            FM_TERM_GRACE_SECS="0.5",
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(Path(f"{recheck}.reached").exists, timeout=60, what="the pause at the re-check")
        fleet.spawn(["sleep", "100000"], slot)
        ready = fleet.root / "ready"
        fleet.spawn([sys.executable, "-c", IGNORES_TERM.format(ready=str(ready))], slot)
        wait_for(ready.exists, what="the worker that ignores SIGTERM")
        recheck.unlink()
        wait_for(Path(f"{after}.reached").exists, timeout=60, what="the processes step's end")
        left = slot_processes(slot)
        after.unlink()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    doc = json.loads(out)
    assert (proc.returncode, doc["verdict"]) == (0, "proceed"), (doc, err)
    [step] = [s for s in doc["steps"] if s["step"] == "processes"]
    assert step["outcome"] == "done" and left == [], (step, left)


IGNORES_TERM = (
    "import pathlib,signal,time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "pathlib.Path({ready!r}).touch()\n"
    "time.sleep(100000)\n"
)


def test_a_process_forked_as_the_step_signals_fails_the_step(fleet: Fleet) -> None:
    """A process in the slot that, on SIGTERM, forks a child (which ignores SIGTERM, and takes
    a terminal of its own) and exits: the child was in no scan before the signal. The step
    scans the slot again, finds it, and fails: exit 1, the record kept, the child named;
    nothing reports done over it. A child with no terminal (and no agent) would be TASK's
    leftover, ended on a later pass (`tests/test_later_pass.py`); one with a terminal may be
    someone's."""
    task = tid("pf")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    childfile = fleet.root / "child"
    forker = fleet.spawn(
        [
            sys.executable,
            "-c",
            "import fcntl,os,pathlib,signal,sys,termios,time\n"
            "def forked(*a):\n"
            "    r, w = os.pipe()\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "        os.setsid()\n"
            "        master, tty = os.openpty()\n"
            "        fcntl.ioctl(tty, termios.TIOCSCTTY, 0)\n"
            "        os.write(w, b'.')\n"
            "        time.sleep(100000)\n"
            "    os.read(r, 1)\n"  # the child has its terminal: then exit
            f"    pathlib.Path({str(childfile)!r}).write_text(str(pid))\n"
            "    os._exit(0)\n"
            "signal.signal(signal.SIGTERM, forked)\n"
            f"pathlib.Path({str(fleet.root / 'ready')!r}).touch()\n"
            "time.sleep(100000)\n",
        ],
        slot,
    )
    wait_for((fleet.root / "ready").exists, what="the forker")
    code, doc = fleet.fm_json(
        "teardown", task, env=fleet.env(FM_TERM_GRACE_SECS="0.5", FM_KILL_WAIT_SECS="0.5")
    )
    child = int(childfile.read_text())
    assert forker.wait(timeout=10) == 0
    assert (code, doc["verdict"]) == (1, "failed"), doc
    [step] = [s for s in doc["steps"] if s["step"] == "processes"]
    assert step["outcome"] == "failed" and str(child) in step["detail"], step
    assert not gone(child)
    assert (fleet.state / f"{task}.meta").exists()
