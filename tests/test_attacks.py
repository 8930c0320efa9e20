"""spec §7a on real fleets: the ways a teardown used to destroy someone else's live work.

Each test builds the world of one attack found by held-out testing (real tmux on a private
socket, real git worktrees in a treehouse pool, real processes, the treehouse stand-in) and
asserts what the operator sees and that the other task's record, tree, processes, window and
lease are unchanged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fleet import Fleet, git, gone, tid, tree_hash, wait_for

ID_ALPHA = tid("alpha")
ID_BRAVO = tid("bravo")
ID_C = tid("c")
ID_COPY = tid("copy")
ID_D = tid("d")
ID_INTRUDER = tid("intruder")
ID_LIVE = tid("live")
ID_NESTED = tid("nested")
ID_NEWTASK = tid("newtask")
ID_OLD = tid("old")
ID_OTHER = tid("other")
ID_OUTER = tid("outer")
ID_T1 = tid("t1")
ID_T2 = tid("t2")


def journal(fleet: Fleet) -> list[dict[str, Any]]:
    path = fleet.data / "teardown-log.jsonl"
    if not path.exists():
        return []
    # The result lines (a real run's intent line before acting is not one).
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in lines if e.get("phase") != "intent"]


def outcomes(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["step"], s["outcome"]) for s in doc["steps"]]


def live_ids(doc: dict[str, Any]) -> list[str]:
    return sorted(o["id"] for o in doc["owners"] if o["live"])


def pool_entry(fleet: Fleet, slot: Path) -> dict[str, Any]:
    doc = json.loads((fleet.pool / "treehouse-state.json").read_text())
    return next(e for e in doc["worktrees"] if e["path"] == str(slot))


@pytest.fixture
def tasktmp(fleet: Fleet) -> Path:
    """TASK `t1`'s global /tmp/fm-t1: never run over one that exists, always removed."""
    return fleet.claim_tasktmp(ID_T1)


# -- 1. a tmux server started from inside a slot --------------------------------------------


@pytest.mark.parametrize("binary", ["tmux", "mux"])
def test_a_tmux_server_in_the_slot_refuses_and_keeps_the_fleet(fleet: Fleet, binary: str) -> None:
    """Whatever its binary is called: a copy of tmux named `mux` runs as `mux: server`."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    other = fleet.task(ID_T2, fleet.slot(2, holder=ID_T2), "alive")
    # An operator ran `tmux` while cd'd into the slot.
    server = fleet.tmux_server_in(slot, binary)
    server_pid = server.server_pid()
    before = fleet.snapshot(slot)
    for args in ([], ["--force"]):
        code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run", *args)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        reason = str(doc["reasons"][0])
        assert "tmux server" in reason and str(server_pid) in reason
        assert any("outside the pool" in h for h in doc["hints"])
    r = fleet.fm("teardown", ID_T1)
    assert r.returncode == 5 and "tmux server" in r.stderr
    assert fleet.snapshot(slot) == before
    assert not gone(server_pid) and not any(gone(p) for p in other.pids)
    assert fleet.treehouse_calls() == []


def test_the_fleets_own_server_is_never_signalled_even_from_the_slot(fleet: Fleet) -> None:
    """The fleet's tmux server itself lives in the slot: refused, server and windows kept."""
    fleet.tmux.kill()
    slot = fleet.slot(1, holder=ID_T1)
    fleet.tmux.dir.mkdir(parents=True, exist_ok=True)
    fleet.tmux.start(cwd=slot)
    fleet.task(ID_T1, slot, "dead")
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    assert (
        "firstmate:keep" in fleet.tmux.windows() and f"firstmate:fm-{ID_T1}" in fleet.tmux.windows()
    )


def test_a_dry_run_lists_every_process_it_would_signal(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "alive")
    workers = [fleet.spawn(["sleep", "100000"], slot) for _ in range(7)]
    code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run")
    assert code == 0, doc
    [step] = [s for s in doc["steps"] if s["step"] == "processes"]
    for w in workers:
        assert f"sleep ({w.pid})" in step["detail"]
    assert "…" not in step["detail"]


# -- 2. a symlinked tasktmp ------------------------------------------------------------------


# "fleet": a link to a tree holding every slot of the fleet (the real attack links to `/`,
# which as root would end every process of the machine if fm followed it: not tried here).
@pytest.mark.parametrize("target", ["live-slot", "fleet"])
def test_a_symlinked_tasktmp_is_refused_and_never_a_kill_root(
    fleet: Fleet, tasktmp: Path, target: str
) -> None:
    s1 = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, s1, "dead")
    s2 = fleet.slot(2, holder=ID_LIVE)
    live = fleet.task(ID_LIVE, s2, "alive")
    worker = fleet.spawn(["sleep", "100000"], s2)
    tasktmp.symlink_to(s2 if target == "live-slot" else fleet.root)
    before = fleet.snapshot(s1, s2)
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    reason = str(doc["reasons"][0])
    assert f"/tmp/fm-{ID_T1}" in reason and "symlink" in reason
    assert tasktmp.is_symlink()
    assert fleet.snapshot(s1, s2) == before
    assert not gone(worker.pid) and not any(gone(p) for p in live.pids)


def test_a_tasktmp_that_is_a_file_is_refused(fleet: Fleet, tasktmp: Path) -> None:
    fleet.task(ID_T1, fleet.slot(1, holder=ID_T1), "dead")
    tasktmp.write_text("not a directory\n")
    code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run")
    assert (code, doc["verdict"]) == (5, "unsafe")
    assert "not a directory" in str(doc["reasons"][0])


# -- 3. the sidecar sweep --------------------------------------------------------------------


def test_the_sweep_never_removes_a_record_written_meanwhile(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_ALPHA)
    fleet.task(ID_ALPHA, slot, "dead")
    (fleet.state / f"{ID_ALPHA}.status").write_text("done\n")
    (fleet.state / f"{ID_ALPHA}.backlog-close").write_text("pending\n")
    proc, pause = fleet.fm_paused("after-pool", ID_ALPHA)
    # A new task `alpha.2` is launched while alpha is being torn down.
    (fleet.state / f"{ID_ALPHA}.2.meta").write_text(
        f"window=firstmate:fm-{ID_ALPHA}.2\nworktree={fleet.slot(2, holder=f'{ID_ALPHA}.2')}\n"
        f"project={fleet.project}\n"
    )
    (fleet.state / f"{ID_ALPHA}.2.status").write_text("running\n")
    pause.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, (out, err)
    left = sorted(n for n in os.listdir(fleet.state) if not n.startswith("."))
    assert left == [f"{ID_ALPHA}.2.meta", f"{ID_ALPHA}.2.status", f"{ID_ALPHA}.backlog-close"]


# -- 4. a slot whose .git names another worktree's git dir ------------------------------------


def test_a_copy_of_a_live_slot_is_refused_with_or_without_force(fleet: Fleet) -> None:
    live_slot = fleet.slot(1, holder=ID_LIVE)
    live = fleet.task(ID_LIVE, live_slot, "alive")
    (live_slot / "staged.txt").write_text("staged work\n")
    git(live_slot, "add", "staged.txt")
    head = git(live_slot, "rev-parse", "HEAD")
    copy = fleet.pool / "2" / "project"
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(live_slot), str(copy)], check=True)
    fleet.entries.append({"name": "2", "path": str(copy), "leased": True,
                          "lease_id": f"{2:032x}", "lease_holder": ID_COPY})  # fmt: skip
    fleet.write_pool()
    fleet.task(ID_COPY, copy, "dead")
    index = Path(git(live_slot, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    before = (index.read_bytes(), tree_hash(live_slot))
    for args in ([], ["--force"]):
        code, doc = fleet.fm_json("teardown", ID_COPY, *args)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        assert "another slot" in str(doc["reasons"][0])
    assert (index.read_bytes(), tree_hash(live_slot)) == before
    assert git(live_slot, "rev-parse", "HEAD") == head
    assert git(live_slot, "diff", "--cached", "--name-only") == "staged.txt"
    assert not any(gone(p) for p in live.pids)
    assert fleet.treehouse_calls() == []


def test_a_slot_without_git_is_refused(fleet: Fleet) -> None:
    slot = fleet.pool / "3" / "project"
    slot.mkdir(parents=True)
    fleet.entries.append({"name": "3", "path": str(slot)})
    fleet.write_pool()
    fleet.task(ID_T1, slot, "dead")
    code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run")
    assert (code, doc["verdict"]) == (5, "unsafe")
    assert "no .git" in str(doc["reasons"][0])


# -- 5. a live slot nested inside TASK's slot --------------------------------------------------


def test_a_live_slot_nested_inside_the_slot_owns_it(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    inner = slot / "vendor" / "inner"
    inner.mkdir(parents=True)
    nested = fleet.task(ID_NESTED, inner, "alive")
    before = fleet.snapshot(slot)
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert (code, doc["verdict"], live_ids(doc)) == (4, "live-owner", [ID_NESTED]), doc
    assert fleet.snapshot(slot) == before
    assert not any(gone(p) for p in nested.pids)
    assert f"firstmate:fm-{ID_NESTED}" in fleet.tmux.windows()


def test_a_live_slot_containing_the_slot_owns_it(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    outer = fleet.task(ID_OUTER, slot.parent, "alive")
    code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run")
    assert (code, live_ids(doc)) == (4, [ID_OUTER])
    assert not any(gone(p) for p in outer.pids)


# -- 6. the world checked again just before each destructive call -----------------------------


def test_a_lease_granted_between_the_recheck_and_the_return_stops_the_run(
    fleet: Fleet,
) -> None:
    """A record without lease facts on an unleased slot: the pool hands the slot to a new task
    while fm is between its re-check and the return."""
    slot = fleet.slot(1, leased=False)
    fleet.task(ID_T1, slot, "dead")
    proc, pause = fleet.fm_paused("after-processes", ID_T1)
    got = subprocess.run(
        [str(fleet.treehouse), "get", "--lease", "--lease-holder", ID_NEWTASK, "--json",
         "--no-fetch"],
        cwd=fleet.project, env=fleet.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(got.stdout)["path"] == str(slot)
    newtask = fleet.task(ID_NEWTASK, slot, "alive")
    pause.unlink()
    out, _ = proc.communicate(timeout=60)
    doc = json.loads(out)
    # The new task's endpoint came to work in the slot: seen right before the return, the run
    # stops (exit 1, re-run to decide again), saying who came and what the decision is now.
    assert (proc.returncode, doc["verdict"]) == (1, "failed"), doc
    [pool] = [s for s in doc["steps"] if s["step"] == "pool"]
    assert pool["outcome"] == "failed" and "re-run to decide again" in pool["detail"], pool
    assert f"{ID_NEWTASK}'s endpoint" in pool["detail"] and "now live-owner" in pool["detail"]
    assert [c for c in fleet.treehouse_calls() if c["argv"][0] == "return"] == []
    assert pool_entry(fleet, slot)["lease_holder"] == ID_NEWTASK
    assert not any(gone(p) for p in newtask.pids)
    assert (fleet.state / f"{ID_T1}.meta").exists()


def test_a_window_renamed_to_the_tasks_name_after_deciding_is_never_killed(
    fleet: Fleet,
) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "missing")  # no window when deciding
    proc, pause = fleet.fm_paused("before-endpoint", ID_T1)
    relaunch = fleet.task(ID_OTHER, fleet.slot(2, holder=ID_OTHER), "alive")
    [wid] = {
        line.split()[0]
        for line in fleet.tmux.run(
            "list-windows", "-a", "-F", "#{window_id} #{window_name}"
        ).stdout.splitlines()
        if line.endswith(f" fm-{ID_OTHER}")
    }
    fleet.tmux.run("rename-window", "-t", wid, f"fm-{ID_T1}")
    pause.unlink()
    out, _ = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert (proc.returncode, doc["verdict"]) == (1, "failed"), doc
    assert outcomes(doc)[0] == ("endpoint", "failed")
    assert f"firstmate:fm-{ID_T1}" in fleet.tmux.windows()
    assert not any(gone(p) for p in relaunch.pids)
    assert (fleet.state / f"{ID_T1}.meta").exists()


def test_a_dying_agent_of_the_task_is_not_taken_for_an_owner(fleet: Fleet) -> None:
    """After TASK's window is killed its agent (SIGHUP ignored) still runs in the slot; with
    another (stale) record on the slot, the re-check must remember it as TASK's own."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.record(ID_OLD, slot, extra={"spawn_gen": "s100.1.a"})  # no window: missing
    fleet.record(ID_T1, slot, extra={"spawn_gen": "s200.1.a", "treehouse_lease_holder": ID_T1})
    agent = (
        f"exec -a claude {sys.executable} -c 'import signal,time; "
        "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(100000)'"
    )
    fleet.tmux.new_window("firstmate", f"fm-{ID_T1}", slot, f'bash --norc --noprofile -c "{agent}"')
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert ("processes", "done") in outcomes(doc)


# -- 7. fail-open inputs and silent ends ------------------------------------------------------


def test_a_state_dir_that_does_not_exist_is_an_error(fleet: Fleet) -> None:
    missing = fleet.root / "no-state"
    env = fleet.env(FM_STATE_OVERRIDE=str(missing))
    r = fleet.fm("teardown", "--dry-run", env=env)
    assert r.returncode == 5 and str(missing) in r.stderr
    r = fleet.fm("teardown", "--dry-run", "--json", env=env)
    doc = json.loads(r.stdout)
    assert (r.returncode, doc["audit"], doc["exit_code"], doc["orphans"]) == (5, True, 5, [])
    r = fleet.fm("teardown", ID_T1, env=env)
    assert r.returncode == 2 and "no such task" in r.stderr and str(missing) in r.stderr


def test_a_fifo_journal_warns_and_never_hangs(fleet: Fleet) -> None:
    fleet.task(ID_T1, fleet.slot(1, holder=ID_T1), "dead")
    os.mkfifo(fleet.data / "teardown-log.jsonl")
    # The intent cannot be journalled: the real run refuses, and never hangs on the FIFO.
    r = fleet.fm("teardown", ID_T1, timeout=60)
    assert r.returncode == 5, r.stderr
    assert "warning: could not append to the journal" in r.stderr
    assert (fleet.state / f"{ID_T1}.meta").exists()
    r = fleet.fm("teardown", ID_T1, "--no-journal", timeout=60)
    assert r.returncode == 0, r.stderr
    assert not (fleet.state / f"{ID_T1}.meta").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_stops_at_a_step_boundary(fleet: Fleet, sig: signal.Signals) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    pool_before = (fleet.pool / "treehouse-state.json").read_bytes()
    proc, pause = fleet.fm_paused("after-endpoint", ID_T1)
    proc.send_signal(sig)
    pause.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "fm: interrupted" in err and "left: processes" in err
    doc = json.loads(out)
    assert (doc["verdict"], doc["exit_code"]) == ("failed", 130)
    assert outcomes(doc) == [
        ("endpoint", "done"),
        ("processes", "skipped"),
        ("hooks", "skipped"),
        ("pool", "skipped"),
        ("auth", "skipped"),
        ("attribution", "skipped"),
        ("record", "skipped"),
    ]
    [line] = journal(fleet)
    assert (line["verdict"], line["exit_code"]) == ("failed", 130)
    assert (fleet.state / f"{ID_T1}.meta").exists()
    assert (fleet.pool / "treehouse-state.json").read_bytes() == pool_before
    code, doc = fleet.fm_json("teardown", ID_T1)  # the same command finishes the job
    assert (code, doc["verdict"]) == (0, "proceed")


def test_an_interrupt_while_waiting_for_the_slot_lock_stops_the_run(fleet: Fleet) -> None:
    """Another teardown holds the slot's lock (FM_LOCK_WAIT_SECS long): Ctrl-C during the
    wait stops the run there (130, the steps after the endpoint left, the record kept), not
    when the wait runs out."""
    import fcntl

    from fm_teardown.model.own_files import lock_path

    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    pool_before = (fleet.pool / "treehouse-state.json").read_bytes()
    lock = lock_path(fleet.state, os.path.realpath(slot))
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        proc, pause = fleet.fm_paused("after-endpoint", ID_T1)
        pause.unlink()

        def waiting() -> bool:  # fm has the lock file open: it is waiting for it
            fds = Path(f"/proc/{proc.pid}/fd")
            return any(os.path.realpath(f) == str(lock) for f in fds.iterdir())

        wait_for(waiting, what="fm waiting for the slot lock")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(fd)
    assert proc.returncode == 130, (out, err)
    assert "fm: interrupted" in err and "left: processes" in err, err
    doc = json.loads(out)
    assert outcomes(doc)[:2] == [("endpoint", "done"), ("processes", "skipped")]
    assert (fleet.state / f"{ID_T1}.meta").exists()
    assert (fleet.pool / "treehouse-state.json").read_bytes() == pool_before


def test_a_refusal_found_at_the_recheck_says_the_endpoint_was_ended(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    proc, pause = fleet.fm_paused("before-recheck", ID_T1)
    # Another tool claims the tree meanwhile (someone who comes to work in the slot is an
    # arrival instead: exit 1, tests/test_arrivals.py).
    git(fleet.project, "worktree", "lock", "--reason", "another tool", str(slot))
    pause.unlink()
    out, _ = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert (proc.returncode, doc["verdict"]) == (5, "unsafe")
    reason = str(doc["reasons"][0])
    assert "already done by this run: endpoint" in reason
    assert "nothing was changed" not in reason


# -- also: leases of dead tasks, discarding a live task, other endpoints in the slot -----------


def test_discarding_a_live_task_saves_its_work_under_its_name(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_BRAVO)
    fleet.task(ID_ALPHA, slot, "dead")
    fleet.task(ID_BRAVO, slot, "alive", extra={"treehouse_lease_holder": ID_BRAVO})
    (slot / "bravo-notes.txt").write_text("bravo's uncommitted work\n")
    r = fleet.fm("teardown", ID_ALPHA, "--force", f"--discard-live-owner={ID_BRAVO}")
    assert r.returncode == 0, r.stderr
    saved = git(fleet.project, "for-each-ref", "--format=%(refname)", "refs/fm/discarded")
    assert saved.startswith(f"refs/fm/discarded/{ID_BRAVO}/"), saved
    assert f"{ID_BRAVO}'s" in r.stderr and f"fm teardown {ID_BRAVO}" in r.stderr
    assert git(fleet.project, "show", f"{saved}:bravo-notes.txt") == "bravo's uncommitted work"


def test_another_tasks_endpoint_working_in_the_slot_owns_it(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    elsewhere = fleet.slot(2, holder=ID_C)
    fleet.record(ID_C, elsewhere)
    c_pids = fleet.endpoint(ID_C, slot, "ambiguous")  # its window works in t1's slot
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert (code, live_ids(doc)) == (4, [ID_C]), doc
    assert not any(gone(p) for p in c_pids)


def test_a_dead_endpoints_shell_in_the_slot_is_never_signalled_by_fm(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    fleet.record(ID_D, fleet.slot(2, holder=ID_D))
    d_pids = fleet.endpoint(ID_D, slot, "dead")
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0, doc
    [line] = journal(fleet)
    sent = {s["pid"] for s in line["signalled"]}
    assert not sent & set(d_pids)
