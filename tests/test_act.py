"""Real teardowns (issue: acting): real tmux, git slots returned through the treehouse
stand-in, real processes. Each test asserts what the operator sees and what changed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.fleet import Fleet, git, gone, tid, tree_hash, wait_for

ID_A = tid("a")
ID_A_B = tid("a.b")
ID_B = tid("b")
ID_DONE = tid("done")
ID_INTRUDER = tid("intruder")
ID_LIVE = tid("live")
ID_NEWER = tid("newer")
ID_OLDER = tid("older")
ID_T0 = tid("t0")
ID_T1 = tid("t1")
ID_T10 = tid("t10")
ID_T2 = tid("t2")


def pool_entry(fleet: Fleet, slot: Path) -> dict[str, Any]:
    doc = json.loads((fleet.pool / "treehouse-state.json").read_text())
    return next(e for e in doc["worktrees"] if e["path"] == str(slot))


def journal(fleet: Fleet) -> list[dict[str, Any]]:
    return fleet.journal()


def outcomes(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["step"], s["outcome"]) for s in doc["steps"]]


def test_happy_path_returns_the_slot_and_clears_the_record(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    # An untracked scaffold file does not make the slot dirty; the return removes it.
    (slot / ".claude").mkdir()
    (slot / ".claude" / "settings.local.json").write_text("{}\n")
    (slot / "build.cache").write_text("ignored\n")
    task = fleet.task(ID_T1, slot, "alive", extra={"treehouse_lease_holder": ID_T1})
    worker = fleet.spawn(["sleep", "100000"], slot)
    tmp = fleet.make_tasktmp(ID_T1)
    (fleet.state / f"{ID_T1}.status").write_text("done\n")
    (fleet.state / f"{ID_T1}.inbox").mkdir()
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert outcomes(doc) == [
        ("endpoint", "done"),
        ("processes", "done"),
        ("hooks", "done"),  # the untracked .claude/settings.local.json
        ("pool", "done"),
        ("auth", "absent"),
        ("attribution", "done"),
        ("record", "done"),
    ]
    assert f"firstmate:fm-{ID_T1}" not in fleet.tmux.windows()
    wait_for(lambda: all(gone(p) for p in task.pids) and gone(worker.pid), what="processes gone")
    entry = pool_entry(fleet, slot)
    assert "leased" not in entry and "lease_id" not in entry
    assert not (slot / ".claude" / "settings.local.json").exists()
    assert (slot / "build.cache").read_text() == "ignored\n"
    assert git(slot, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"
    assert sorted(os.listdir(fleet.state)) == sorted(
        n for n in os.listdir(fleet.state) if n.startswith(".")
    )
    assert not tmp.exists()
    [call] = fleet.treehouse_calls()
    # Unforced (no --force given): the pool would decline a tree holding changes.
    assert call["argv"] == [
        "return",
        "--if-lease-id",
        f"{1:032x}",
        "--if-lease-holder",
        ID_T1,
        str(slot),
    ]
    assert call["stdin_closed_or_devnull"] is True
    assert call["env"]["TREEHOUSE_NO_UPDATE_CHECK"] == "1"
    assert not str(call["cwd"]).startswith(str(slot))
    [line] = journal(fleet)
    assert line["task"] == ID_T1 and line["verdict"] == "proceed" and line["exit_code"] == 0
    assert worker.pid in [s["pid"] for s in line["signalled"]]
    assert [s["step"] for s in line["steps"]] == [
        "endpoint",
        "processes",
        "hooks",
        "pool",
        "auth",
        "attribution",
        "record",
    ]


def test_exact_window_target_spares_a_prefix_neighbour(fleet: Fleet) -> None:
    """With `fm-t1` gone already, `fm-t10` must survive t1's teardown."""
    s1 = fleet.slot(1, holder=ID_T1)
    fleet.record(ID_T1, s1)
    s2 = fleet.slot(2, holder=ID_T10)
    t10 = fleet.task(ID_T10, s2, "alive")
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0 and outcomes(doc)[0] == ("endpoint", "absent")
    assert f"firstmate:fm-{ID_T10}" in fleet.tmux.windows()
    assert not any(gone(p) for p in t10.pids)


def test_dotted_task_id_and_spaced_session(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_A_B)
    fleet.task(ID_A_B, slot, "dead", session="team work")
    (fleet.state / f"{ID_A_B}.status").write_text("x")
    fleet.record(ID_A, fleet.slot(2, holder=ID_A))
    (fleet.state / f"{ID_A}.status").write_text("x")
    code, doc = fleet.fm_json("teardown", ID_A)
    assert code == 0
    # Task `a`'s sidecars go; task `a.b`'s records and window stay.
    assert (fleet.state / f"{ID_A_B}.meta").exists() and (fleet.state / f"{ID_A_B}.status").exists()
    assert f"team work:fm-{ID_A_B}" in fleet.tmux.windows()
    code, doc = fleet.fm_json("teardown", ID_A_B)
    assert code == 0, doc
    assert f"team work:fm-{ID_A_B}" not in fleet.tmux.windows()


def test_process_ignoring_sighup_and_sigterm_is_killed(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    stubborn = fleet.spawn(
        [
            sys.executable,
            "-c",
            "import signal,time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
            f"open({str(fleet.root / 'ready')!r},'w').close()\n"
            "time.sleep(100000)",
        ],
        slot,
    )
    wait_for(lambda: (fleet.root / "ready").exists(), what="stubborn process ready")
    code, doc = fleet.fm_json("teardown", ID_T1, env=fleet.env(FM_TERM_GRACE_SECS="0.5"))
    assert code == 0, doc
    wait_for(lambda: stubborn.poll() is not None, what="stubborn process killed")
    assert stubborn.returncode == -signal.SIGKILL
    [line] = journal(fleet)
    sig = next(s for s in line["signalled"] if s["pid"] == stubborn.pid)
    assert sig["signals"] == ["SIGTERM", "SIGKILL"]


def test_a_dead_endpoints_shell_whose_window_goes_meanwhile_is_ended(fleet: Fleet) -> None:
    """Another task's dead endpoint has a shell in the slot: spared at the first scan (it is
    that task's endpoint). Its window is killed while fm waits for the slot's processes (that
    task's own teardown, say): the shell, there from the start, is now just a leftover in the
    slot, ended like one, not mistaken for a newcomer that stops the run."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead", extra={"treehouse_lease_holder": ID_T1})
    # t0's dead endpoint: a shell that outlives its window (HUP ignored, blocked in a builtin
    # `read` on a FIFO rather than on the terminal), as a shell still exiting would.
    fleet.record(ID_T0, slot, extra={"spawn_gen": "s1000.1.a"})
    fifo = fleet.root / f"{ID_T0}.fifo"
    os.mkfifo(fifo)
    window = fleet.tmux.new_window(
        "firstmate",
        f"fm-{ID_T0}",
        slot,
        f'bash --norc --noprofile -c \'trap "" HUP; exec 9<>{fifo}; '
        "while :; do read -t 1 -u 9; done'",
    )
    [shell] = fleet.tmux.pane_pids(window)
    fleet.tracked.add(shell)
    marker = fleet.root / "got-term"
    stubborn = fleet.spawn(
        [
            sys.executable,
            "-c",
            "import pathlib,signal,time\n"
            f"signal.signal(signal.SIGTERM, lambda *a: pathlib.Path({str(marker)!r}).touch())\n"
            f"open({str(fleet.root / 'ready')!r},'w').close()\n"
            "time.sleep(100000)",
        ],
        slot,
    )
    wait_for(lambda: (fleet.root / "ready").exists(), what="stubborn process ready")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", "teardown", ID_T1, "--json"],
        cwd=fleet.fm_home,
        env=fleet.env(FM_TERM_GRACE_SECS="3"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(marker.exists, what="fm's SIGTERM to the stubborn process")
        fleet.tmux.run("kill-window", "-t", window)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    doc = json.loads(out)
    assert (proc.returncode, doc["verdict"]) == (0, "proceed"), (doc, err)
    wait_for(lambda: gone(shell), what=f"{ID_T0}'s shell ended")
    [line] = journal(fleet)
    ended = {s["pid"] for s in line["signalled"]}
    assert stubborn.pid in ended and shell in ended
    assert (fleet.state / f"{ID_T0}.meta").exists()  # t0's record is t0's own teardown's business


def test_processes_that_keep_coming_back_stop_the_run(fleet: Fleet) -> None:
    """A spawner outside the slot keeps starting workers inside: the re-scan finds survivors,
    so the run stops before the pool, keeps the record and exits 1."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    spawner = fleet.spawn(
        ["bash", "-c", f"while true; do (cd {slot} && exec sleep 100000) & sleep 0.02; done"],
        fleet.root,
    )
    wait_for(
        lambda: any(c.name() == "sleep" for c in psutil.Process(spawner.pid).children()),
        what="spawned workers",
    )
    try:
        code, doc = fleet.fm_json(
            "teardown", ID_T1, env=fleet.env(FM_TERM_GRACE_SECS="0.2", FM_KILL_WAIT_SECS="0.2")
        )
    finally:
        spawner.kill()
        spawner.wait()
        # The workers were re-parented when the spawner died: find them by their cwd.
        for p in psutil.process_iter(["cwd"]):
            if (p.info["cwd"] or "").startswith(str(slot)):
                p.kill()
    assert (code, doc["verdict"]) == (1, "failed")
    # fm's re-scan finds the newcomers, or (when none was starting at that instant) the pool's
    # own re-scan does and the return fails: either way nothing is reset and the lease kept.
    if ("processes", "failed") in outcomes(doc):
        assert ("pool", "skipped") in outcomes(doc)
        assert fleet.treehouse_calls() == []
    else:
        assert ("pool", "failed") in outcomes(doc)
    assert ("record", "skipped") in outcomes(doc)
    assert (fleet.state / f"{ID_T1}.meta").exists()
    assert pool_entry(fleet, slot)["leased"] is True


def test_lease_changed_after_deciding_is_not_returned(fleet: Fleet) -> None:
    """The pool's state is read again right before the return (spec §7a): a lease that is not
    TASK's stops the run there (4, naming it); the return is never even tried."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    proc, pause = fleet.fm_paused("after-processes", ID_T1)
    fleet.slot(1, holder=ID_INTRUDER, lease_id="f" * 32)  # re-leased meanwhile
    pause.unlink()
    out, _ = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert (proc.returncode, doc["verdict"]) == (4, "live-owner")
    reason = doc["reasons"][0]
    assert f"lease:{ID_INTRUDER}" in reason and "already done by this run: endpoint" in reason
    assert "nothing was changed" not in reason
    assert ("pool", "skipped") in outcomes(doc) and ("record", "skipped") in outcomes(doc)
    assert fleet.treehouse_calls() == []
    assert pool_entry(fleet, slot)["lease_holder"] == ID_INTRUDER
    assert (fleet.state / f"{ID_T1}.meta").exists()


def test_stale_index_lock_that_stays_fails_and_keeps_everything(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    lock = Path(git(slot, "rev-parse", "--path-format=absolute", "--git-path", "index.lock"))
    lock.write_text("")  # fresh: not provably stale
    env = fleet.env(
        FM_TREEHOUSE_RETURN_LOCK_RETRIES="1", FM_TREEHOUSE_RETURN_LOCK_RETRY_WAIT_SECS="0"
    )
    code, doc = fleet.fm_json("teardown", ID_T1, env=env)
    assert (code, doc["verdict"]) == (1, "failed")
    pool_step = next(s for s in doc["steps"] if s["step"] == "pool")
    assert pool_step["outcome"] == "failed" and "not provably stale" in pool_step["detail"]
    assert lock.exists()
    assert pool_entry(fleet, slot)["leased"] is True
    assert (fleet.state / f"{ID_T1}.meta").exists()
    assert len(fleet.treehouse_calls()) == 2


def test_missing_treehouse_and_unmanaged_slot_refuse_before_anything(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    t1 = fleet.task(ID_T1, slot, "alive")
    s2 = fleet.slot(2, managed=False)
    t2 = fleet.task(ID_T2, s2, "alive")
    before = fleet.snapshot(slot, s2)
    env = fleet.env(FM_TREEHOUSE_BIN="", PATH="/usr/bin:/bin")
    code, doc = fleet.fm_json("teardown", ID_T1, env=env)
    assert (code, doc["verdict"]) == (5, "unsafe")
    assert "treehouse" in doc["reasons"][0]
    code, doc = fleet.fm_json("teardown", ID_T2)
    assert (code, doc["verdict"]) == (5, "unsafe")
    assert "not managed" in doc["reasons"][0]
    assert fleet.snapshot(slot, s2) == before
    assert not any(gone(p) for p in t1.pids + t2.pids)
    # Refusals are journalled too.
    assert [e["exit_code"] for e in journal(fleet)] == [5, 5]


@pytest.mark.parametrize("other_state", ["dead", "missing"])
def test_stale_slot_clears_only_the_tasks_own_endpoint_and_record(
    fleet: Fleet, other_state: str
) -> None:
    slot = fleet.slot(1, leased=False)
    fleet.task(ID_OLDER, slot, "dead", extra={"spawn_gen": "s100.1.a"})
    newer = fleet.task(ID_NEWER, slot, other_state, extra={"spawn_gen": "s200.1.a"})
    worker = fleet.spawn(["sleep", "100000"], slot)
    (slot / "work.txt").write_text("newer's work\n")
    tree = tree_hash(slot)
    pool_before = (fleet.pool / "treehouse-state.json").read_bytes()
    r = fleet.fm("teardown", ID_OLDER)
    assert r.returncode == 0, r.stderr
    assert ID_NEWER in r.stderr and "stale" in r.stderr
    assert not (fleet.state / f"{ID_OLDER}.meta").exists()
    assert newer.meta.exists()
    assert f"firstmate:fm-{ID_OLDER}" not in fleet.tmux.windows()
    assert tree_hash(slot) == tree
    assert (fleet.pool / "treehouse-state.json").read_bytes() == pool_before
    assert not gone(worker.pid)
    assert fleet.treehouse_calls() == []
    if other_state == "dead":
        assert f"firstmate:fm-{ID_NEWER}" in fleet.tmux.windows()


def test_discard_live_owner_keeps_its_record_and_window_name(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_DONE)
    fleet.task(ID_DONE, slot, "dead", extra={"treehouse_lease_holder": ID_DONE})
    live = fleet.task(ID_LIVE, fleet.root, "alive")  # its pane is elsewhere
    fleet.record(ID_LIVE, slot)
    worker = fleet.agent_in(slot)
    code, doc = fleet.fm_json(
        "teardown", ID_DONE, "--force", "--discard-live-owner=pid:" + str(worker.pid)
    )
    assert (code, doc["verdict"]) == (4, "live-owner")  # `live` is live too: two owners
    code, doc = fleet.fm_json("teardown", ID_DONE)
    assert code == 4
    # The unattributed agent is gone once the live task's record no longer shares the slot.
    worker.kill()
    worker.wait()
    code, doc = fleet.fm_json("teardown", ID_DONE, "--force", f"--discard-live-owner={ID_LIVE}")
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert any(f"{ID_LIVE}'s record is kept" in w for w in doc["warnings"])
    assert (fleet.state / f"{ID_LIVE}.meta").exists()
    assert f"firstmate:fm-{ID_LIVE}" in fleet.tmux.windows()
    assert not any(gone(p) for p in live.pids)


def test_missing_slot_directory_cleans_endpoint_and_record(fleet: Fleet) -> None:
    gone_slot = fleet.root / "pool" / "vanished" / "3" / "project"
    fleet.task(ID_T1, gone_slot, "dead")
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0, doc
    assert outcomes(doc) == [
        ("endpoint", "done"),
        ("processes", "skipped"),
        ("pool", "skipped"),
        ("auth", "absent"),
        ("attribution", "done"),
        ("record", "done"),
    ]
    assert not (fleet.state / f"{ID_T1}.meta").exists()
    assert fleet.treehouse_calls() == []


@pytest.mark.parametrize(
    "boundary", ["after-endpoint", "after-processes", "after-pool", "before-meta"]
)
def test_crash_at_a_step_boundary_then_rerun_completes(fleet: Fleet, boundary: str) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "alive", extra={"treehouse_lease": f"{1:032x}"})
    (fleet.state / f"{ID_T1}.status").write_text("x")
    r = fleet.fm("teardown", ID_T1, env=fleet.env(FM_TEST_FAULT=f"crash:{boundary}"))
    assert r.returncode == -signal.SIGKILL
    assert (fleet.state / f"{ID_T1}.meta").exists()  # the record goes last
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert not (fleet.state / f"{ID_T1}.meta").exists()
    assert "leased" not in pool_entry(fleet, slot)
    assert len(journal(fleet)) == 1  # the crashed run wrote none; the re-run one


def test_rerun_after_crash_protects_a_task_that_took_the_slot(fleet: Fleet) -> None:
    """The shell script's #2454: a retry must re-check ownership before touching the slot."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead", extra={"treehouse_lease": f"{1:032x}"})
    r = fleet.fm("teardown", ID_T1, env=fleet.env(FM_TEST_FAULT="crash:after-pool"))
    assert r.returncode == -signal.SIGKILL
    fleet.slot(1, holder=ID_B, lease_id="b" * 32)  # the pool re-issues slot 1 to b
    b = fleet.task(ID_B, slot, "alive")
    (slot / "b-work.txt").write_text("in progress\n")
    before = fleet.snapshot(slot)
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 4 and [o["id"] for o in doc["owners"] if o["live"]] == [ID_B]
    assert fleet.snapshot(slot) == before
    assert not any(gone(p) for p in b.pids)


def test_recheck_under_the_lock_catches_a_new_live_claimant(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    proc, pause = fleet.fm_paused("before-recheck", ID_T1)
    intruder = fleet.task(ID_INTRUDER, slot, "alive")
    (slot / f"{ID_INTRUDER}.txt").write_text("mine\n")
    tree = tree_hash(slot)
    pause.unlink()
    out, _ = proc.communicate(timeout=60)
    doc = json.loads(out)
    # Someone came to work in the slot: the run stops (exit 1, spec §15.4), saying who and
    # what the decision is now; a re-run refuses it as the live owner it is.
    assert (proc.returncode, doc["verdict"]) == (1, "failed")
    [ran] = [s for s in doc["steps"] if s["step"] == "processes"]
    assert ran["outcome"] == "failed" and f"{ID_INTRUDER}'s endpoint" in ran["detail"], ran
    assert "now live-owner" in ran["detail"] and "re-run to decide again" in ran["detail"]
    assert tree_hash(slot) == tree
    assert not any(gone(p) for p in intruder.pids)
    assert fleet.treehouse_calls() == []
    assert (fleet.state / f"{ID_T1}.meta").exists()


def test_every_refusal_changes_nothing(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_LIVE)
    fleet.task(ID_DONE, slot, "alive")
    fleet.task(ID_LIVE, slot, "alive")
    fleet.spawn(["sleep", "100000"], slot)
    before = fleet.snapshot(slot)
    for args in (
        [ID_DONE],
        [ID_DONE, "--force"],
        [ID_DONE, f"--discard-live-owner={ID_LIVE}"],
        [ID_DONE, "--force", "--discard-live-owner=nobody"],
    ):
        r = fleet.fm("teardown", *args)
        assert r.returncode == 4, (args, r.stderr)
        assert "Traceback" not in r.stderr
    assert fleet.snapshot(slot) == before
    assert [e["exit_code"] for e in journal(fleet)] == [4, 4, 4, 4]
    assert fleet.treehouse_calls() == []


def test_journal_failure_warns_and_never_changes_the_result(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    blocker = fleet.root / "not-a-dir"
    blocker.write_text("")
    env = fleet.env(FM_DATA_OVERRIDE=str(blocker))
    # The intent cannot be journalled before acting: the real run refuses, changing nothing.
    r = fleet.fm("teardown", ID_T1, env=env)
    assert r.returncode == 5, r.stderr
    assert "warning: could not append to the journal" in r.stderr
    assert (fleet.state / f"{ID_T1}.meta").exists()
    # --no-journal: it acts without one.
    r = fleet.fm("teardown", ID_T1, "--no-journal", env=env)
    assert r.returncode == 0, r.stderr
    assert not (fleet.state / f"{ID_T1}.meta").exists()


def test_teardown_run_from_a_pane_inside_the_slot_spares_itself(fleet: Fleet) -> None:
    """An operator whose shell sits in the slot runs fm there: its own pane survives."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    done = fleet.root / "fm.rc"
    env_args = " ".join(f"{k}='{v}'" for k, v in fleet.env().items())
    cmd = (
        f'bash --norc --noprofile -c "cd {slot}; env {env_args} {sys.executable} -m '
        f'fm_teardown teardown {ID_T1} > {fleet.root}/fm.out 2>&1; echo $? > {done}; exec bash"'
    )
    fleet.tmux.new_window("ops", "shell", slot, cmd)
    wait_for(
        lambda: done.exists() and done.read_text().strip() != "",
        timeout=60,
        what="fm run from the ops pane",
    )
    assert done.read_text().strip() == "0", (fleet.root / "fm.out").read_text()
    assert "ops:shell" in fleet.tmux.windows()
    assert f"firstmate:fm-{ID_T1}" not in fleet.tmux.windows()


def test_processes_in_tasktmp_end_even_when_the_slot_is_gone(fleet: Fleet) -> None:
    gone_slot = fleet.root / "pool" / "vanished" / "4" / "project"
    fleet.task(ID_T1, gone_slot, "dead")
    tmp = fleet.make_tasktmp(ID_T1)
    worker = fleet.spawn(["sleep", "100000"], tmp)
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0, doc
    assert ("processes", "done") in outcomes(doc)
    wait_for(lambda: gone(worker.pid), what="the tasktmp worker ended")
    assert not tmp.exists()


def _tmux_ignoring_kill_window(fleet: Fleet) -> dict[str, str]:
    """A tmux on PATH whose kill-window and kill-pane do nothing: the window survives its
    kill."""
    shim = fleet.root / "shim"
    shim.mkdir()
    real = shutil.which("tmux")
    (shim / "tmux").write_text(
        '#!/bin/sh\nfor a in "$@"; do case "$a" in kill-window|kill-pane) exit 0;; esac; done\n'
        f'exec {real} "$@"\n'
    )
    (shim / "tmux").chmod(0o755)
    return fleet.env(PATH=f"{shim}:{os.environ['PATH']}")


def test_a_window_that_survives_its_kill_stops_the_run_unless_forced(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    env = _tmux_ignoring_kill_window(fleet)
    r = fleet.fm("teardown", ID_T1, env=env)
    assert r.returncode == 1
    assert "still present" in r.stderr.splitlines()[0]
    assert (fleet.state / f"{ID_T1}.meta").exists() and fleet.treehouse_calls() == []
    r = fleet.fm("teardown", ID_T1, "--force", env=env)
    assert r.returncode == 0, r.stderr
    assert "tmux" in r.stderr and f"=firstmate:=fm-{ID_T1}" in r.stderr and "--force" in r.stderr
    assert not (fleet.state / f"{ID_T1}.meta").exists()


def test_a_shell_in_another_window_is_named_by_its_terminal_before_and_after(
    fleet: Fleet,
) -> None:
    """Someone's shell cd'd into the slot (a pane of a window no task owns) is a person's
    terminal: a teardown refuses (4, `pid:<PID>` named with its pane and terminal) and leaves
    it; only `--force --discard-live-owner=pid:<PID>` ends it, and then the dry run and the
    real run both say which terminal it was (spec §15.4)."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    window = fleet.tmux.new_window("ops", "desk", slot, "bash --norc --noprofile")
    shell = fleet.tmux.pane_pids(window)[0]
    tty = os.readlink(f"/proc/{shell}/fd/0")
    pane = (
        f"ops:desk ({fleet.tmux.run('display', '-p', '-t', window, '#{pane_id}').stdout.strip()})"
    )
    before = fleet.snapshot(slot)
    for dry in (("--dry-run",), (), ("--force",)):
        code, doc = fleet.fm_json("teardown", ID_T1, *dry)
        assert (code, doc["verdict"]) == (4, "live-owner"), doc
        [owner] = [o for o in doc["owners"] if o["live"]]
        assert (owner["id"], owner["kind"]) == (f"pid:{shell}", "terminal"), owner
        assert pane in owner["why"] and tty in owner["why"] and fleet.tmux.socket in owner["why"]
    assert fleet.snapshot(slot) == before and not gone(shell)
    where = f"bash ({shell}, a shell in tmux pane {pane} on {tty}, no task's"
    discard = ("--force", f"--discard-live-owner=pid:{shell}")
    code, plan = fleet.fm_json("teardown", ID_T1, "--dry-run", *discard)
    assert code == 0, plan
    planned = next(s for s in plan["steps"] if s["step"] == "processes")
    assert where + ": cd out of the slot to keep it)" in planned["detail"], planned
    code, doc = fleet.fm_json("teardown", ID_T1, *discard)
    assert code == 0, doc
    ran = next(s for s in doc["steps"] if s["step"] == "processes")
    assert ran["outcome"] == "done" and where + ")" in ran["detail"], ran
    wait_for(lambda: gone(shell), what="the shell in the slot ended")
