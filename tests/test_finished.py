"""Finished means finished: `--landed` and batches never end work that is still running.

Real fleets (private tmux, real git, agent stand-ins): `--landed` selects only finished tasks
and names why it skips the others; a batch re-selects each task at its turn (a relaunch is
skipped); an interrupt at any step boundary stops the batch; a slot is returned once.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fleet import (
    Fleet,
    Task,
    agent_alone,
    gh_answering,
    git,
    gone,
    other_tmux,
    pane_agent,
    tid,
    tree_hash,
    wait_for,
)

OLD = {"spawn_gen": "s1000.1.a"}  # launched long ago (epoch 1000)


def summary(doc: dict[str, Any]) -> list[tuple[object, object, object]]:
    return [(r["task"], r["verdict"], r["exit_code"]) for r in doc["results"]]


def not_selected(doc: dict[str, Any]) -> dict[str, tuple[str, str, str | None]]:
    return {n["task"]: (n["verdict"], n["reason"], n["opt_in"]) for n in doc["not_selected"]}


def commit(slot: Path, name: str, text: str) -> str:
    (slot / name).write_text(text)
    git(slot, "add", name)
    git(slot, "-c", "user.name=T", "-c", "user.email=t@x.invalid", "commit", "-q", "-m", name)
    return git(slot, "rev-parse", "HEAD").strip()


def land_on_main(fleet: Fleet, name: str, text: str) -> None:
    """Someone else lands `name` on origin's main as a new commit (a squash merge)."""
    tmp = fleet.root / f"squash-{name}"
    git(fleet.project, "fetch", "-q", "origin", "main")
    git(fleet.project, "worktree", "add", "-q", "--detach", str(tmp), "origin/main")
    commit(tmp, name, text)
    git(tmp, "push", "-q", "origin", "HEAD:main")
    git(fleet.project, "worktree", "remove", "--force", str(tmp))


def mixed_fleet(fleet: Fleet) -> dict[str, Task]:
    t: dict[str, Task] = {}
    # Spawned a moment ago, agent working, nothing written yet.
    t["fresh"] = fleet.task(tid("fresh"), fleet.slot(1, holder=tid("fresh")), "alive")
    # Done, but launched a moment ago (no launch time but the record's own).
    t["young"] = fleet.task(tid("young"), fleet.slot(2, holder=tid("young")), "dead")
    # Work pushed to a branch, not merged.
    s3 = fleet.slot(3, holder=tid("pushed"))
    t["pushed"] = fleet.task(tid("pushed"), s3, "dead", extra=OLD)
    commit(s3, "pushed.txt", "wip\n")
    git(s3, "push", "-q", "origin", f"HEAD:refs/heads/{tid('pushed')}")
    # Work merged into main (fast-forward).
    s4 = fleet.slot(4, holder=tid("merged"))
    t["merged"] = fleet.task(tid("merged"), s4, "dead", extra=OLD)
    commit(s4, "merged.txt", "done\n")
    git(s4, "push", "-q", "origin", "HEAD:main")
    # Work pushed to a branch and squash-merged into main by someone else.
    s5 = fleet.slot(5, holder=tid("squash"))
    t["squash"] = fleet.task(tid("squash"), s5, "dead", extra=OLD)
    commit(s5, "squash.txt", "squashed\n")
    git(s5, "push", "-q", "origin", f"HEAD:refs/heads/{tid('squash')}")
    land_on_main(fleet, "squash.txt", "squashed\n")
    # A live agent with uncommitted work whose slot's lease belongs to another, dead task:
    # its verdict is stale, and it is still working.
    s6 = fleet.slot(6, holder=tid("other"))
    t["other"] = fleet.task(tid("other"), s6, "dead", extra=OLD)
    t["stalelive"] = fleet.task(tid("stalelive"), s6, "alive", extra=OLD)
    (s6 / "unsaved.txt").write_text("in progress\n")
    return t


def test_landed_selects_only_finished_tasks_and_says_why_not_the_others(fleet: Fleet) -> None:
    t = mixed_fleet(fleet)
    ids = {k: v.id for k, v in t.items()}
    slots = [v.slot for v in t.values()]
    before = fleet.snapshot(*slots)
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run")
    assert code == 0, doc
    assert [r["task"] for r in doc["results"]] == sorted([ids["merged"], ids["squash"]])
    skipped = not_selected(doc)
    assert set(skipped) == {ids[k] for k in ("fresh", "young", "pushed", "other", "stalelive")}
    # Fresh has nothing of its own: no opt-in would include it (spec §15.4: an opt-in is
    # offered only when it would), though the first condition it fails is its live endpoint.
    verdict, reason, opt = skipped[ids["fresh"]]
    assert (verdict, opt) == ("proceed", None) and "endpoint is alive" in reason
    # Stalelive's slot holds other's (dead) window's shell too: --include-live would not take
    # it (spec §15.4), so it is offered nothing.
    verdict, reason, opt = skipped[ids["stalelive"]]
    assert (verdict, opt) == ("stale", None) and "endpoint is alive" in reason
    assert f"{ids['other']}'s endpoint" in reason
    verdict, reason, opt = skipped[ids["young"]]
    assert (verdict, opt) == ("proceed", "--min-age 0") and "--min-age 1h" in reason
    verdict, reason, opt = skipped[ids["pushed"]]
    assert (verdict, opt) == ("proceed", "--include-pushed") and "not merged" in reason
    verdict, reason, opt = skipped[ids["other"]]
    assert (verdict, opt) == ("live-owner", None) and reason.startswith("refused (live-owner)")
    assert fleet.snapshot(*slots) == before
    # The audit's column is the same classification.
    code, audit = fleet.fm_json("teardown", "--dry-run")
    finished = {r["task"] for r in audit["tasks"] if r["finished"]["finished"]}
    assert (code, finished) == (0, {ids["merged"], ids["squash"]})
    rows = {r["task"]: r["finished"] for r in audit["tasks"]}
    assert rows[ids["pushed"]]["opt_in"] == "--include-pushed"
    human = fleet.fm("teardown", "--dry-run").stdout
    assert "FINISHED" in human.splitlines()[2] or "FINISHED" in human
    line = next(x for x in human.splitlines() if x.startswith(ids["young"]))
    assert " no " in line and "[include with --min-age 0]" in line
    # The human --landed lists every task not selected, with its reason and the opt-in.
    r = fleet.fm("teardown", "--landed", "--dry-run")
    assert r.stdout.splitlines()[0] == (
        f"--landed selected 2 tasks: {', '.join(sorted([ids['merged'], ids['squash']]))}"
    )
    assert "not selected (5):" in r.stdout
    assert f"{ids['pushed']}" in r.stdout and "[include with --include-pushed]" in r.stdout
    # Each opt-in lifts exactly one condition.
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--include-pushed")
    assert ids["pushed"] in [r["task"] for r in doc["results"]] and len(doc["results"]) == 3
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--min-age", "0")
    assert ids["young"] in [r["task"] for r in doc["results"]] and len(doc["results"]) == 3
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--include-live")
    picked = [r["task"] for r in doc["results"]]
    assert ids["stalelive"] not in picked and ids["fresh"] not in picked and len(picked) == 2
    verdict, reason, opt = not_selected(doc)[ids["stalelive"]]
    assert (verdict, opt) == ("live-owner", None) and reason.startswith("refused (live-owner)")
    assert f"{ids['other']}'s endpoint" in reason
    verdict, reason, opt = not_selected(doc)[ids["fresh"]]
    assert opt is None and "--min-age 1h" in reason  # fresh is young, and has nothing of its own
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--include-live", "--min-age=0")
    picked = [r["task"] for r in doc["results"]]
    assert ids["fresh"] not in picked and len(picked) == 3
    verdict, reason, opt = not_selected(doc)[ids["fresh"]]
    assert opt is None and "nothing of its own" in reason
    # The real run ends only the finished ones.
    code, doc = fleet.fm_json("teardown", "--landed")
    assert (code, summary(doc)) == (
        0,
        [(i, "proceed", 0) for i in sorted([ids["merged"], ids["squash"]])],
    )
    assert ids["fresh"] in not_selected(doc)
    for k in ("fresh", "young", "pushed", "other", "stalelive"):
        assert (fleet.state / f"{ids[k]}.meta").exists(), k
    for k in ("fresh", "stalelive"):
        assert not any(gone(p) for p in t[k].pids), k
        assert t[k].window in fleet.tmux.windows()
    assert tree_hash(t["pushed"].slot) == before["slots"][str(t["pushed"].slot)]
    assert (t["stalelive"].slot / "unsaved.txt").exists()


@pytest.mark.parametrize("bad", ["1x", "-5m", "soon", "1.5h"])
def test_a_bad_min_age_is_a_usage_error(fleet: Fleet, bad: str) -> None:
    fleet.task(tid("t1"), fleet.slot(1, holder=tid("t1")), "dead", extra=OLD)
    before = fleet.snapshot()
    r = fleet.fm("teardown", "--landed", f"--min-age={bad}")
    assert r.returncode == 2 and "--min-age" in r.stderr and "Traceback" not in r.stderr
    assert fleet.snapshot() == before


def test_min_age_takes_durations(fleet: Fleet) -> None:
    now = int(time.time())
    a = fleet.task(tid("a"), fleet.slot(1, holder=tid("a")), "dead",
                   extra={"spawn_gen": f"s{now - 120}.1.a"})  # fmt: skip
    b = fleet.task(tid("b"), fleet.slot(2, holder=tid("b")), "dead",
                   extra={"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                      time.gmtime(now - 3 * 86400))})  # fmt: skip
    picks = {}
    for age in ("90s", "10m", "1h", "2d", "4d", "0"):
        code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--min-age", age)
        assert code == 0, doc
        picks[age] = [r["task"] for r in doc["results"]]
    assert picks["90s"] == sorted([a.id, b.id]) and picks["0"] == picks["90s"]
    assert picks["10m"] == picks["1h"] == picks["2d"] == [b.id]
    assert picks["4d"] == []


def test_a_task_relaunched_after_the_selection_is_skipped(fleet: Fleet) -> None:
    a = fleet.task(tid("a"), fleet.slot(1, holder=tid("a")), "dead", extra=OLD)
    b = fleet.task(tid("b"), fleet.slot(2, holder=tid("b")), "dead", extra=OLD)
    new_slot = fleet.slot(3, holder=b.id)
    proc, pause = fleet.fm_paused("after-endpoint", "--landed")
    # While A is being torn down, B is relaunched into slot 3 with a live agent.
    fleet.tmux.run("kill-window", "-t", f"={b.window}")
    fleet.record(b.id, new_slot, extra={"spawn_gen": f"s{int(time.time())}.2.b"})
    again = fleet.endpoint(b.id, new_slot, "alive")
    fleet.tracked.update(again)
    before = fleet.snapshot(new_slot, b.slot)
    pause.unlink()
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert proc.returncode == 1, err
    assert summary(doc) == [(a.id, "proceed", 0), (b.id, "skipped", None)]
    assert doc["results"][1]["reasons"][0].startswith("relaunched")
    after = fleet.snapshot(new_slot, b.slot)
    assert [after[k] for k in ("slots", "windows", "live")] == [
        before[k] for k in ("slots", "windows", "live")
    ]
    lease = next(e for e in json.loads(after["pool"])["worktrees"] if e["path"] == str(new_slot))
    assert lease.get("lease_holder") == b.id
    assert not any(gone(p) for p in again) and (fleet.state / f"{b.id}.meta").exists()
    returned = [c for c in fleet.treehouse_calls() if c["argv"][:1] == ["return"]]
    assert all(str(new_slot) not in json.dumps(c) for c in returned), returned


BOUNDARIES = [
    "before-endpoint",
    "after-endpoint",
    "before-recheck",
    "after-processes",
    "after-pool",
    "in-sweep",  # a slow sidecar sweep: the interrupt lands in the middle of it
    "before-meta",
    "after-record",
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_an_interrupt_at_any_step_boundary_stops_the_batch(
    fleet: Fleet, boundary: str, sig: signal.Signals
) -> None:
    x = fleet.task(tid("x"), fleet.slot(1, holder=tid("x")), "dead")
    y = fleet.task(tid("y"), fleet.slot(2, holder=tid("y")), "dead")
    for t in (x, y):
        for suffix in ("note", "status"):
            (fleet.state / f"{t.id}.{suffix}").write_text("x\n")
    before = fleet.snapshot(y.slot)
    proc, pause = fleet.fm_paused(boundary, x.id, y.id)
    proc.send_signal(sig)
    time.sleep(0.1)  # let the handler run while still paused: the signal lands mid-step
    pause.unlink()
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert (proc.returncode, doc["exit_code"]) == (130, 130), err
    first = summary(doc)[0]
    if boundary in ("in-sweep", "before-meta", "after-record"):
        assert first == (x.id, "proceed", 0)  # the record step under way finishes
    else:
        assert first == (x.id, "failed", 130)
        assert (fleet.state / f"{x.id}.meta").exists()
    assert summary(doc)[1:] == [(y.id, "skipped", None)]
    assert doc["results"][1]["reasons"] == ["not run: interrupted"]
    assert fleet.snapshot(y.slot)["slots"] == before["slots"]
    assert (fleet.state / f"{y.id}.meta").exists() and y.window in fleet.tmux.windows()
    assert (fleet.state / f"{y.id}.note").exists()


def test_a_slot_is_returned_once_per_batch(fleet: Fleet) -> None:
    slot = fleet.slot(2, holder=tid("owner"))
    owner = fleet.task(tid("owner"), slot, "dead", extra={"spawn_gen": "s2000.1.a"})
    sibling = fleet.task(tid("sibling"), slot, "dead", extra={"spawn_gen": "s1000.1.a"})
    code, doc = fleet.fm_json("teardown", owner.id, sibling.id)
    returns = [c for c in fleet.treehouse_calls() if c["argv"][:1] == ["return"]]
    assert len(returns) == 1, returns
    assert summary(doc)[0] == (owner.id, "proceed", 0)
    assert summary(doc)[1] == (sibling.id, "skipped", None), doc
    assert "returned earlier in this batch" in doc["results"][1]["reasons"][0]
    assert code == 1 and (fleet.state / f"{sibling.id}.meta").exists()


def test_a_selected_task_whose_agent_came_back_is_skipped_at_its_turn(fleet: Fleet) -> None:
    a = fleet.task(tid("a"), fleet.slot(1, holder=tid("a")), "dead", extra=OLD)
    b = fleet.task(tid("b"), fleet.slot(2, holder=tid("b")), "dead", extra=OLD)
    proc, pause = fleet.fm_paused("after-endpoint", "--landed")
    # Same window, same record: an agent starts in B's shell after the selection.
    fleet.tmux.run("send-keys", "-t", f"={b.window}", f"exec {fleet.bin}/claude 100000", "Enter")
    pane = fleet.tmux.pane_pids(f"={b.window}")[0]
    wait_for(lambda: Path(f"/proc/{pane}/comm").read_text().strip() == "claude", what="agent")
    fleet.tracked.add(pane)
    pause.unlink()
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert proc.returncode == 1, err
    assert summary(doc) == [(a.id, "proceed", 0), (b.id, "skipped", None)]
    assert doc["results"][1]["reasons"][0].startswith("no longer finished: still working")
    assert not gone(pane) and (fleet.state / f"{b.id}.meta").exists()


def test_local_only_merged_and_a_scout_report_count_as_finished(fleet: Fleet) -> None:
    merged = fleet.slot(1, holder=tid("lomerged"))
    fleet.task(tid("lomerged"), merged, "dead", extra={**OLD, "mode": "local-only"})
    sha = commit(merged, "local.txt", "merged locally\n")
    git(fleet.project, "merge", "-q", "--ff-only", sha)
    waiting = fleet.slot(2, holder=tid("lowait"))
    fleet.task(tid("lowait"), waiting, "dead", extra={**OLD, "mode": "local-only"})
    commit(waiting, "wait.txt", "not merged\n")
    scout = fleet.slot(3, holder=tid("scout"))
    fleet.task(tid("scout"), scout, "dead", extra={**OLD, "kind": "scout"})
    (fleet.data / tid("scout")).mkdir()
    (fleet.data / tid("scout") / "report.md").write_text("findings\n")
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run")
    assert code == 0, doc
    assert [r["task"] for r in doc["results"]] == sorted([tid("lomerged"), tid("scout")])
    verdict, reason, opt = not_selected(doc)[tid("lowait")]
    assert (verdict, opt) == ("unlanded", None) and reason.startswith("refused (unlanded)")


def test_telling_merged_from_pushed_costs_no_git_call_per_slot(fleet: Fleet) -> None:
    from tests.test_audit import _git_log_wrapper

    t = mixed_fleet(fleet)
    env, log = _git_log_wrapper(fleet)
    code, doc = fleet.fm_json("teardown", "--dry-run", env=env)
    assert code == 0, doc
    finished = {r["task"] for r in doc["tasks"] if r["finished"]["finished"]}
    assert finished == {t["merged"].id, t["squash"].id}
    calls = [line.split("\t", 1)[1] for line in log.read_text().splitlines()]
    # The loose ends' task branches: one call per project, beside rule 5's work.
    branches = [c for c in calls if c.endswith(" refs/heads/fm/")]
    assert len(branches) == 1 and branches[0].startswith(f"-C {fleet.project} "), calls
    calls = [c for c in calls if c not in branches]
    per_project = [c for c in calls if c.startswith(f"-C {fleet.project} ")]
    assert len(per_project) <= 4, per_project
    status = [c for c in calls if " status " in f" {c} "]
    others = [c for c in calls if c not in status and c not in per_project]
    assert others == [], others  # pushed, squash-merged and merged slots: git status only


def test_landed_selects_work_whose_recorded_pr_is_merged(fleet: Fleet) -> None:
    """Work pushed to a branch is finished once its recorded PR is merged (gh says so, and
    its head contains the slot's HEAD), though no commit of it is on main yet: `--landed`
    selects it then, and only then."""
    task = tid("viapr")
    slot = fleet.slot(1, holder=task)
    pr = "https://github.com/acme/project/pull/7"
    fleet.task(task, slot, "dead", extra={**OLD, "pr": pr})
    head = commit(slot, "pr.txt", "reviewed\n")
    git(slot, "push", "-q", "origin", f"HEAD:refs/heads/{task}")
    before = fleet.snapshot(slot)
    open_pr = fleet.env(FM_GH_BIN=gh_answering(fleet.root, "OPEN", head))
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", env=open_pr)
    assert code == 0 and doc["results"] == [], doc
    assert not_selected(doc)[task][2] == "--include-pushed", doc
    env = fleet.env(FM_GH_BIN=gh_answering(fleet.root, "MERGED", head))
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", env=env)
    assert code == 0, doc
    assert [r["task"] for r in doc["results"]] == [task], doc
    assert fleet.snapshot(slot) == before
    code, doc = fleet.fm_json("teardown", "--landed", env=env)
    assert code == 0 and [r["verdict"] for r in doc["results"]] == ["proceed"], doc
    assert not (fleet.state / f"{task}.meta").exists()


def test_someone_else_working_in_the_slot_is_not_finished_and_no_opt_in_lifts_it(
    fleet: Fleet,
) -> None:
    """spec §14.1, §15.4: an agent in no pane in a merged task's slot keeps the task from being
    finished (listed with what it is); no opt-in lifts it, `--include-live` included: mass
    cleanup never ends an agent that is not the task's own endpoint."""
    task = tid("orphaned")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead", extra=OLD)
    agent = agent_alone(fleet, slot)
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run")
    assert (code, doc["results"]) == (0, []), doc
    reason, opt_in = not_selected(doc)[task][1:]
    assert opt_in is None
    assert reason == f"still working in its slot: claude ({agent.pid}), an agent in no pane"
    for extra in ((), ("--min-age", "0", "--include-pushed")):
        code, doc = fleet.fm_json("teardown", "--landed", "--include-live", *extra)
        assert (code, doc["results"]) == (0, []), doc
        assert not_selected(doc)[task][2] is None
    assert not gone(agent.pid) and (fleet.state / f"{task}.meta").exists()


def test_a_process_under_a_tmux_server_that_cannot_be_listed_is_doubt(fleet: Fleet) -> None:
    """spec §14.1: a process in the slot runs in a pane of another tmux server of the user that
    does not answer: whose it is cannot be told. Not finished (no opt-in lifts it), and a
    single teardown refuses (5)."""
    task = tid("doubt")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead", extra=OLD)
    server = other_tmux(fleet)
    _, agent = pane_agent(fleet, server, "ops", "work", slot)
    server_pid = server.server_pid()
    env = fleet.env(FM_TMUX_TIMEOUT_SECS="1")
    before = fleet.snapshot(slot)
    os.kill(server_pid, signal.SIGSTOP)  # a hung server: it never answers
    try:
        code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--include-live", env=env)
        assert (code, doc["results"]) == (0, []), doc
        reason, opt_in = not_selected(doc)[task][1:]
        assert opt_in is None and "cannot be listed" in reason and server.socket in reason
        code, doc = fleet.fm_json("teardown", task, env=env)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        assert server.socket in doc["reasons"][0]
    finally:
        os.kill(server_pid, signal.SIGCONT)
    assert fleet.snapshot(slot) == before and not gone(agent)
