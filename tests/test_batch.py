"""Several tasks at once (spec §9), on real fleets: `fm teardown A B C` and `--landed`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fleet import Fleet, Task, gone, tid, tree_hash, wait_for

ID_BUSY = tid("busy")
ID_F1 = tid("f1")
ID_F2 = tid("f2")
ID_F3 = tid("f3")
ID_I1 = tid("i1")
ID_I2 = tid("i2")
ID_I3 = tid("i3")
ID_T1 = tid("t1")
ID_T2 = tid("t2")
ID_M1 = tid("m1")
ID_M2 = tid("m2")
ID_M3 = tid("m3")
ID_M4 = tid("m4")
ID_DIRTY = tid("dirty")
ID_M5 = tid("m5")
ID_OK = tid("ok")
ID_S6 = tid("s6")
ID_S7 = tid("s7")
ID_SHARED = tid("shared")
ID_W3 = tid("w3")
ID_W4 = tid("w4")


def journal(fleet: Fleet) -> list[dict[str, Any]]:
    path = fleet.data / "teardown-log.jsonl"
    if not path.exists():
        return []
    # The result lines (a real run's intent line before acting is not one).
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in lines if e.get("phase") != "intent"]


def summary(doc: dict[str, Any]) -> list[tuple[object, object, object]]:
    return [(r["task"], r["verdict"], r["exit_code"]) for r in doc["results"]]


def incident(fleet: Fleet) -> tuple[list[Path], list[Task], list[Path]]:
    """Four merged tasks; the slots of two of them were recycled to live workers."""
    mine = []
    for i, task_id in enumerate([ID_M1, ID_M2], start=1):
        slot = fleet.slot(i, holder=task_id)
        fleet.task(task_id, slot, "dead", extra={"treehouse_lease_holder": task_id})
        mine.append(slot)
    workers, recycled = [], []
    for i, (task_id, worker) in enumerate([(ID_M3, ID_W3), (ID_M4, ID_W4)], start=3):
        slot = fleet.slot(i, holder=worker, lease_id=f"{worker:>032}")
        fleet.task(task_id, slot, "dead", extra={"spawn_gen": "s100.1.a"})
        workers.append(fleet.task(worker, slot, "alive", extra={"spawn_gen": "s900.1.b"}))
        (slot / f"{worker}-work.txt").write_text("in progress\n")
        recycled.append(slot)
    return mine, workers, recycled


def test_the_incident_fleet_as_a_batch_spares_the_live_workers(fleet: Fleet) -> None:
    _, workers, recycled = incident(fleet)
    trees = {s: tree_hash(s) for s in recycled}
    code, doc = fleet.fm_json("teardown", ID_M1, ID_M3, ID_M2, ID_M4)
    assert (code, doc["batch"], doc["dry_run"], doc["exit_code"]) == (4, True, False, 4)
    assert summary(doc) == [
        (ID_M1, "proceed", 0),
        (ID_M3, "live-owner", 4),
        (ID_M2, "proceed", 0),
        (ID_M4, "live-owner", 4),
    ]
    for w, s in zip(workers, recycled, strict=True):
        assert not any(gone(p) for p in w.pids) and tree_hash(s) == trees[s]
        assert w.window in fleet.tmux.windows()
    assert (fleet.state / f"{ID_M3}.meta").exists() and (fleet.state / f"{ID_M4}.meta").exists()
    assert (
        not (fleet.state / f"{ID_M1}.meta").exists()
        and not (fleet.state / f"{ID_M2}.meta").exists()
    )
    assert [e["task"] for e in journal(fleet)] == [ID_M1, ID_M3, ID_M2, ID_M4]
    # The human form: what each single command prints, then one summary line per task.
    r = fleet.fm("teardown", ID_M3, ID_M4)
    assert r.returncode == 4
    tail = r.stdout.split("summary", 1)[1].splitlines()[1:]
    assert [line.split()[:3] for line in tail] == [
        [ID_M3, "live-owner", "4"],
        [ID_M4, "live-owner", "4"],
    ]
    assert ID_W3 in tail[0] and ID_W4 in tail[1]


def test_landed_selects_exactly_what_the_audit_says_is_ready(fleet: Fleet) -> None:
    mine, workers, recycled = incident(fleet)
    dirty = fleet.slot(5, holder=ID_M5)
    fleet.task(ID_M5, dirty, "dead")
    (dirty / "unsaved.txt").write_text("wip\n")
    stale = fleet.slot(6, leased=False)
    fleet.task(ID_S6, stale, "dead", extra={"spawn_gen": "s1.1.a"})
    # s7 is the newer launch on s6's slot, without a window: s6 is stale, s7 the current owner
    fleet.record(ID_S7, stale, extra={"spawn_gen": "s2.1.b"})
    before = fleet.snapshot(*mine, *recycled, dirty, stale)
    # Launched a moment ago (m1, m2 by their records' mtime): only --min-age 0 selects them.
    # s7 is not finished while s6's window (another task's endpoint) works in its slot.
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--min-age", "0")
    assert code == 0, doc
    ready = [
        (ID_M1, "proceed", 0),
        (ID_M2, "proceed", 0),
        (ID_S6, "stale", 0),
    ]
    assert summary(doc) == ready
    assert all(r["steps"] for r in doc["results"])
    s7 = next(n for n in doc["not_selected"] if n["task"] == ID_S7)
    # No opt-in takes it: mass cleanup never ends another task's endpoint (spec §15.4).
    assert f"{ID_S6}'s endpoint" in s7["reason"] and s7["opt_in"] is None
    assert fleet.snapshot(*mine, *recycled, dirty, stale) == before
    r = fleet.fm("teardown", "--landed", "--dry-run", "--min-age", "0")
    assert r.stdout.splitlines()[0] == f"--landed selected 3 tasks: {ID_M1}, {ID_M2}, {ID_S6}"
    code, doc = fleet.fm_json("teardown", "--landed", "--min-age", "0")
    assert (code, summary(doc)) == (0, ready)
    for t in (ID_M3, ID_M4, ID_M5, ID_W3, ID_W4):
        assert (fleet.state / f"{t}.meta").exists(), t
    assert all(not any(gone(p) for p in w.pids) for w in workers)
    # s6's window is gone: s7, the slot's current owner, is finished now.
    code, doc = fleet.fm_json("teardown", "--landed", "--min-age", "0")
    assert (code, summary(doc)) == (0, [(ID_S7, "proceed", 0)]), doc
    # Nothing is ready any more: an empty selection, exit 0.
    code, doc = fleet.fm_json("teardown", "--landed", "--min-age", "0")
    assert (code, doc["results"]) == (0, [])


def test_a_failure_stops_the_batch_and_skips_the_rest(fleet: Fleet) -> None:
    for i, task_id in enumerate([ID_F1, ID_F2, ID_F3], start=1):
        fleet.task(task_id, fleet.slot(i, holder=task_id), "dead")
    fleet.spawn(["sleep", "100000"], fleet.root)  # keep a bystander around
    env = fleet.env(TREEHOUSE_STANDIN_FAULT="survivor")  # every return fails
    r = fleet.fm("teardown", ID_F1, ID_F2, ID_F3, "--json", env=env)
    doc = json.loads(r.stdout)
    assert (r.returncode, doc["exit_code"]) == (1, 1)
    assert summary(doc) == [
        (ID_F1, "failed", 1),
        (ID_F2, "skipped", None),
        (ID_F3, "skipped", None),
    ]
    assert doc["results"][1]["reasons"] == [f"not run: {ID_F1} failed"]
    assert all((fleet.state / f"{t}.meta").exists() for t in (ID_F1, ID_F2, ID_F3))
    assert [e["task"] for e in journal(fleet)] == [ID_F1]


def test_the_exit_code_rule(fleet: Fleet) -> None:
    s1 = fleet.slot(1, holder=ID_OK)
    fleet.task(ID_OK, s1, "dead")
    s2 = fleet.slot(2, holder=ID_DIRTY)
    fleet.task(ID_DIRTY, s2, "dead")
    (s2 / "x.txt").write_text("x\n")
    s3 = fleet.slot(3, holder=ID_BUSY)
    fleet.task(ID_SHARED, s3, "dead")
    fleet.task(ID_BUSY, s3, "alive", extra={"treehouse_lease_holder": ID_BUSY})
    code, doc = fleet.fm_json("teardown", ID_DIRTY, ID_SHARED, "--dry-run")
    assert (code, summary(doc)) == (4, [(ID_DIRTY, "unlanded", 3), (ID_SHARED, "live-owner", 4)])
    code, _ = fleet.fm_json("teardown", ID_DIRTY, ID_OK, "--dry-run")
    assert code == 3  # the largest refusal code
    code, _ = fleet.fm_json("teardown", ID_OK, ID_BUSY, "--dry-run")
    assert code == 0
    code, doc = fleet.fm_json("teardown", ID_OK, "nosuch", "--dry-run")
    assert (code, summary(doc)[1]) == (2, ("nosuch", "invalid", 2))


@pytest.mark.parametrize(
    "args",
    [
        ["--landed", ID_T1],
        ["--landed", "--force"],
        ["--landed", "--discard-live-owner=x"],
        [ID_T1, ID_T2, "--force"],
        [ID_T1, ID_T2, "--force", "--discard-live-owner=x"],
        [ID_T1, ID_T1],
    ],
)
def test_forbidden_combinations_are_usage_errors(fleet: Fleet, args: list[str]) -> None:
    for t in (ID_T1, ID_T2):
        fleet.task(t, fleet.slot(int(t[1]), holder=t), "dead")
    before = fleet.snapshot()
    r = fleet.fm("teardown", *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.splitlines()[0]) < 200
    assert fleet.snapshot() == before and journal(fleet) == []


def test_an_interrupted_batch_stops_at_a_step_boundary_and_converges(fleet: Fleet) -> None:
    for i, task_id in enumerate([ID_I1, ID_I2, ID_I3], start=1):
        fleet.task(task_id, fleet.slot(i, holder=task_id), "dead")
    pause = fleet.root / "pause"
    pause.touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", "teardown", ID_I1, ID_I2, ID_I3, "--json"],
        cwd=fleet.fm_home,
        env=fleet.env(FM_TEST_FAULT=f"pause:after-endpoint:{pause}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: Path(f"{pause}.reached").exists(), what="the first task paused")
    proc.send_signal(signal.SIGINT)
    pause.unlink()
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert (proc.returncode, doc["exit_code"]) == (130, 130), err
    assert summary(doc) == [
        (ID_I1, "failed", 130),
        (ID_I2, "skipped", None),
        (ID_I3, "skipped", None),
    ]
    assert all((fleet.state / f"{t}.meta").exists() for t in (ID_I1, ID_I2, ID_I3))
    assert doc["not_done"] == [ID_I1, ID_I2, ID_I3]
    assert doc["finish"] == f"fm teardown -- {ID_I1} {ID_I2} {ID_I3}"
    assert [(e["task"], e["exit_code"]) for e in journal(fleet)] == [(ID_I1, 130)]
    code, doc = fleet.fm_json("teardown", ID_I1, ID_I2, ID_I3)  # the same command converges
    assert (code, [v for _, v, _ in summary(doc)]) == (0, ["proceed"] * 3)


ID_B1 = tid("b1")
ID_B2 = tid("b2")
ID_B3 = tid("b3")
ID_B4 = tid("b4")


def test_a_batch_interrupted_after_its_first_task_is_finished_by_the_same_command(
    fleet: Fleet,
) -> None:
    """Ctrl-C in `fm teardown b1 b2 b3 b4` after b1 is done (b2 interrupted, b3 b4
    skipped): the summary names every task not done and one command for them; re-running
    the very same command finishes the batch, b1 reported `already torn down at …`."""
    ids = [ID_B1, ID_B2, ID_B3, ID_B4]
    for i, task_id in enumerate(ids, start=1):
        fleet.task(task_id, fleet.slot(i, holder=task_id), "dead")
    first, second = fleet.root / "pause-b1", fleet.root / "pause-b2"
    first.touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", "teardown", *ids],
        cwd=fleet.fm_home,
        # b1 waits once its record is gone; b2 waits after its endpoint step, once the pause
        # file exists (b1 passes that boundary before the file is made).
        env=fleet.env(FM_TEST_FAULT=f"pause:after-record:{first},pause:after-endpoint:{second}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: Path(f"{first}.reached").exists(), what="b1 torn down")
    Path(f"{second}.reached").unlink(missing_ok=True)  # b1 passed that boundary already
    second.touch()
    first.unlink()
    wait_for(lambda: Path(f"{second}.reached").exists(), what="b2 paused")
    proc.send_signal(signal.SIGINT)
    second.unlink()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert not (fleet.state / f"{ID_B1}.meta").exists()
    assert all((fleet.state / f"{t}.meta").exists() for t in ids[1:])
    finish = f"fm teardown -- {ID_B2} {ID_B3} {ID_B4}"
    assert f"not done: {ID_B2}, {ID_B3}, {ID_B4}; to finish them: {finish}" in out

    again = fleet.fm("teardown", *ids)  # the very same command
    assert again.returncode == 0, again.stdout + again.stderr
    line = next(x for x in again.stdout.splitlines() if x.startswith(f"{ID_B1}: "))
    assert line.startswith(f"{ID_B1}: already torn down at 20"), line
    assert not any((fleet.state / f"{t}.meta").exists() for t in ids)
    # The finishing command the summary named converges too, now that all are done.
    r = fleet.fm("teardown", "--json", *finish.split()[2:])  # its options go before `--`
    code, doc = r.returncode, json.loads(r.stdout)
    assert (code, [v for _, v, _ in summary(doc)]) == (0, ["already-torn-down"] * 3)
    # Re-runs that did nothing leave no line of their own: the journal keeps the teardowns'.
    done = [(e["task"], e["exit_code"]) for e in journal(fleet) if e["exit_code"] == 0]
    assert sorted(done) == sorted((t, 0) for t in ids)


def test_a_task_torn_down_earlier_converges_alone_and_an_unknown_one_stays_unknown(
    fleet: Fleet,
) -> None:
    fleet.task(ID_T1, fleet.slot(1, holder=ID_T1), "dead")
    assert fleet.fm("teardown", ID_T1).returncode == 0
    for args in ([ID_T1], [ID_T1, "--dry-run"]):
        code, doc = fleet.fm_json("teardown", *args)
        assert (code, doc["verdict"], doc["exit_code"]) == (0, "already-torn-down", 0)
        assert doc["reasons"][0].startswith("already torn down at ")
    # Never torn down here: still no such task (exit 2), alone and in a batch.
    code, doc = fleet.fm_json("teardown", ID_T2)
    assert (code, doc["verdict"]) == (2, "invalid")
    code, doc = fleet.fm_json("teardown", ID_T1, ID_T2)
    assert (code, summary(doc)) == (2, [(ID_T1, "already-torn-down", 0), (ID_T2, "invalid", 2)])


ID_N1 = tid("n1")
ID_N2 = tid("n2")


def test_an_agent_that_came_to_a_selected_slot_keeps_it_unfinished_at_its_turn(
    fleet: Fleet,
) -> None:
    """Selected finished, then an agent (in no pane) starts in n2's slot while n1 is torn
    down: at n2's turn the census sees it, n2 is skipped and the agent keeps running."""
    slots = []
    for i, task_id in enumerate([ID_N1, ID_N2], start=1):
        slot = fleet.slot(i, holder=task_id)
        fleet.task(task_id, slot, "dead")
        slots.append(slot)
    proc, pause = fleet.fm_paused("after-endpoint", "--landed", "--min-age", "0")
    agent = fleet.agent_in(slots[1])
    pause.unlink()
    out, err = proc.communicate(timeout=120)
    doc = json.loads(out)
    results = {r["task"]: r for r in doc["results"]}
    assert results[ID_N1]["verdict"] == "proceed", err
    assert results[ID_N2]["verdict"] == "skipped", doc
    assert not gone(agent.pid)
    assert (fleet.state / f"{ID_N2}.meta").exists()
