"""What a teardown ends beyond the slot (docs/firstmate.md, "Today's firstmate"): the task's
headless browser stack, identified as firstmate's reaper identifies it, and the remote-job
workers whose code root is gone. Stand-in processes whose argv carries the bridge and stack
markers, as firstmate's own test makes them; real tmux, git and the pool stand-in."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil

from tests.fleet import Fleet, gone, tid, wait_for

ID_T1 = tid("t1")
ID_OTHER = tid("other")

BRIDGE_JS = "node_modules/chrome-devtools-axi/dist/bin/chrome-devtools-axi-bridge.js"


def session_for(fleet: Fleet, task_id: str) -> str:
    """firstmate's session name for TASK in this home: `fm-firstmate-<8 hex of sha256 of the
    home's physical path>-<id>` (bin/fm-backend-hometag-lib.sh, bin/fm-browser-reaper.sh)."""
    digest = hashlib.sha256(os.path.realpath(fleet.fm_home).encode()).hexdigest()[:8]
    return f"fm-firstmate-{digest}-{task_id}"


def sessions(fleet: Fleet) -> Path:
    return fleet.home / ".chrome-devtools-axi" / "sessions"


def register(fleet: Fleet, session: str, pid: int) -> None:
    d = sessions(fleet) / session
    d.mkdir(parents=True, exist_ok=True)
    (d / "bridge.pid").write_text(f'{{"pid":{pid},"port":9999}}\n')


def bridge(fleet: Fleet, session: str, *, members: bool = False) -> subprocess.Popen[bytes]:
    """A stand-in bridge (argv names the bridge script), detached in a session of its own and
    registered under `session`; with `members`, it runs a stack member (argv carries
    `chrome-devtools-mcp`) and a bystander (no marker) under it."""
    script = fleet.root / "browser" / BRIDGE_JS
    body = "while :; do sleep 0.2; done"
    if members:
        body = (
            f"bash -c 'while :; do sleep 0.2; done' chrome-devtools-mcp@latest & "
            f"{fleet.bin / 'bystander'} 100000 & wait"
        )
        shutil.copy("/bin/sleep", fleet.bin / "bystander")
    p = fleet.spawn(["bash", "-c", body, str(script)], fleet.root, new_session=True)
    if members:

        def settled() -> bool:  # both forked children have exec'd their own argv
            argvs = [" ".join(c.cmdline()) for c in psutil.Process(p.pid).children()]
            return len(argvs) == 2 and all(
                a.endswith(("chrome-devtools-mcp@latest", "bystander 100000")) for a in argvs
            )

        wait_for(settled, what="the stack's members")
    register(fleet, session, p.pid)
    return p


def children_named(pid: int, name: str) -> list[int]:
    return [c.pid for c in psutil.Process(pid).children() if c.name() == name]


def test_the_tasks_browser_stack_goes_with_it_and_no_other(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    mine = bridge(fleet, session_for(fleet, ID_T1), members=True)
    [member] = children_named(mine.pid, "bash")
    [bystander] = children_named(mine.pid, "bystander")
    other = bridge(fleet, session_for(fleet, ID_OTHER))
    try:
        code, doc = fleet.fm_json("teardown", ID_T1, env=fleet.env(FM_BROWSER_REAP_GRACE_SECS="1"))
        assert code == 0, doc
        wait_for(lambda: gone(mine.pid) and gone(member), what="the task's bridge and member")
        assert not gone(bystander), "a process with no stack marker was ended"
        assert not gone(other.pid), "another task's browser stack was ended"
        [step] = [s for s in doc["steps"] if s["step"] == "browser"]
        assert step["outcome"] == "done" and step["target"] == session_for(fleet, ID_T1)
        assert f"bystander ({bystander})" in step["detail"], step
    finally:
        if not gone(bystander):
            psutil.Process(bystander).kill()


def test_the_drop_in_says_it_closed_the_browser_as_the_reaper_does(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    mine = bridge(fleet, session_for(fleet, ID_T1))
    r = subprocess.run(
        [sys.executable, "-m", "fm_teardown.commands.firstmate", ID_T1],
        capture_output=True,
        text=True,
        cwd=fleet.fm_home,
        env=fleet.env(FM_BROWSER_REAP_GRACE_SECS="0.5"),
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    wait_for(lambda: gone(mine.pid), what="the task's bridge")
    session = session_for(fleet, ID_T1)
    assert f"browser reap: closing browser stack {session} (pid {mine.pid}, up " in r.stderr
    assert f"browser reap: {session} closed" in r.stderr


def test_a_registry_pid_that_is_no_bridge_is_left_and_said(fleet: Fleet) -> None:
    """The registry names a live pid whose argv is no bridge (a recycled pid, say): left
    alone, a warning says so; the teardown goes on. A stale record (the pid gone) is nothing
    to end."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    stranger = fleet.spawn(["sleep", "100000"], fleet.root, new_session=True)
    register(fleet, session_for(fleet, ID_T1), stranger.pid)
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0, doc
    assert not gone(stranger.pid)
    [step] = [s for s in doc["steps"] if s["step"] == "browser"]
    assert step["outcome"] == "skipped", step
    assert any(
        "names no chrome-devtools-axi bridge" in w and session_for(fleet, ID_T1) in w
        for w in doc["warnings"]
    ), doc["warnings"]


def test_a_registry_pid_another_session_also_names_is_left(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    theirs = bridge(fleet, session_for(fleet, ID_OTHER))
    register(fleet, session_for(fleet, ID_T1), theirs.pid)  # TASK's record names it too
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0, doc
    assert not gone(theirs.pid)
    assert any("another session's registry record" in w for w in doc["warnings"]), doc


# -- remote-job workers -------------------------------------------------------------------------


def code_root(fleet: Fleet, name: str) -> Path:
    """A firstmate code root as a remote-job worker runs from (AGENTS.md, the worker script)."""
    root = fleet.root / name
    (root / "bin").mkdir(parents=True)
    (root / "AGENTS.md").write_text("firstmate\n")
    worker = root / "bin" / "fm-remote-job-worker.sh"
    worker.write_text("while :; do sleep 0.2; done\n")
    worker.chmod(0o755)
    return root


def worker(fleet: Fleet, root: Path) -> subprocess.Popen[bytes]:
    """`/bin/bash <root>/bin/fm-remote-job-worker.sh --serve` leading its own process group,
    as firstmate starts one."""
    script = str(root / "bin" / "fm-remote-job-worker.sh")
    p = fleet.spawn(["/bin/bash", script, "--serve"], fleet.root, new_session=True)
    wait_for(lambda: bool(psutil.Process(p.pid).children()), what="the worker's loop")
    return p


def test_remote_job_workers_of_a_pruned_code_root_are_swept(fleet: Fleet) -> None:
    pruned = code_root(fleet, "pruned-root")
    live = code_root(fleet, "live-root")
    orphan = worker(fleet, pruned)
    healthy = worker(fleet, live)
    # Not a worker invocation: the script's path is only the last word of `bash -c`'s.
    lookalike = fleet.spawn(
        ["bash", "-c", "sleep 100000; :", str(pruned / "bin" / "fm-remote-job-worker.sh")],
        fleet.root,
        new_session=True,
    )
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    # The root is pruned while the run is paused just before the record's duties: any fm
    # teardown on this machine sweeps such a worker, so the window in which another test
    # run's could take it first is kept short.
    proc, pause = fleet.fm_paused("after-pool", ID_T1)
    shutil.rmtree(pruned)
    pause.unlink()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    doc = json.loads(out)
    wait_for(lambda: gone(orphan.pid), what="the abandoned worker")
    assert not gone(healthy.pid) and not gone(lookalike.pid)
    steps = [s for s in doc["steps"] if s["step"] == "remote-jobs"]
    assert all(str(live) not in s["detail"] for s in steps)
    if any(str(pruned) in s["detail"] for s in steps) or not _swept_elsewhere():
        [step] = steps
        assert step["outcome"] == "done", step
        assert f"{orphan.pid} (pruned code root {pruned}" in step["detail"], step


def _swept_elsewhere() -> bool:
    """Another fm run on this machine (another test run, or firstmate's suites run against
    the drop-in) may sweep this test's abandoned worker first, in the moment between its
    root's removal and this run's sweep: then this run finds none. True when this run is not
    the only test run here."""
    mine = os.environ.get("FM_TEST_RUN")
    for p in psutil.process_iter(["environ"]):
        try:
            env = p.info["environ"] or {}
        except psutil.Error:
            continue
        if env.get("FM_TEST_RUN") not in (None, mine) or "PEER_TEST_TOKEN" in env:
            return True
    return False


def test_no_step_for_what_is_not_there(fleet: Fleet) -> None:
    """A worker whose root is still a firstmate checkout is never ended, and a task with no
    browser session gets no browser step."""
    live = code_root(fleet, "live-root")
    healthy = worker(fleet, live)
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0, doc
    assert not gone(healthy.pid)
    assert [s for s in doc["steps"] if s["step"] == "browser"] == []
    assert all(str(live) not in s["detail"] for s in doc["steps"] if s["step"] == "remote-jobs")


# -- words ---------------------------------------------------------------------------------------


def test_every_browser_result_has_its_words() -> None:
    from fm_teardown.model.leaks import BrowserResult, BrowserWhat, Ended
    from fm_teardown.report import leak_words

    s = "fm-firstmate-0a1b2c3d-t"
    said = {
        BrowserWhat.CLOSED: "ended the browser stack (bridge pid 9, up 1h1m): node (10), "
        "node (9); left sleep (11): no browser-stack marker",
        BrowserWhat.NOT_RUNNING: "the registry's bridge pid 9 no longer runs: no browser stack "
        "to end",
        BrowserWhat.UNREADABLE: "left as it is: its registry record is a symlink",
        BrowserWhat.NOT_BRIDGE: "left as it is: pid 9 runs, but its argv names no "
        "chrome-devtools-axi bridge",
        BrowserWhat.RECYCLED: "left as it is: pid 9 started after the registry record was "
        "written (a reused pid)",
        BrowserWhat.SHARED: "left as it is: another session's registry record names pid 9 too",
        BrowserWhat.OTHER_SESSION: "left as it is: pid 9's environment names another session "
        "(is a symlink)",
        BrowserWhat.SURVIVED: "the bridge (pid 9) still runs after SIGTERM and SIGKILL; left",
    }
    for what, text in said.items():
        r = BrowserResult(
            what,
            s,
            9,
            ended=(Ended("node", 10), Ended("node", 9)),
            skipped=(Ended("sleep", 11),),
            other="is a symlink",
            age=3660,
        )
        assert leak_words.browser_text(r) == text
    tool = BrowserResult(BrowserWhat.CLOSED, s, 9, by_tool=True, age=5)
    assert leak_words.browser_text(tool) == (
        "closed the browser stack (bridge pid 9, up 5s): chrome-devtools-axi stop"
    )
    assert leak_words.browser_lines(tool) == [
        f"browser reap: closing browser stack {s} (pid 9, up 5s)",
        f"browser reap: {s} closed",
    ]
