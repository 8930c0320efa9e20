"""The fleet audit tells the truth (spec §8), on real fleets: each row is the one-task dry
run, rule 5 included; the loose ends; what the audit costs in git calls; what a person reads."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tests.fleet import Fleet, git, tid

ID_AHEAD = tid("ahead")
ID_ALPHA = tid("alpha")
ID_BRAVO = tid("bravo")
ID_BUSY = tid("busy")
ID_CHARLIE = tid("charlie")
ID_CLEAN = tid("clean")
ID_DELTA = tid("delta")
ID_DIRTY = tid("dirty")
ID_GHOST = tid("ghost")
ID_IDLE = tid("idle")
ID_T1 = tid("t1")
ID_TYPO = tid("typo")
ID_ZERO = tid("zero")


def audit(fleet: Fleet, env: dict[str, str] | None = None) -> dict[str, Any]:
    code, doc = fleet.fm_json("teardown", "--dry-run", env=env)
    assert code == 0 and doc["exit_code"] == 0, doc
    return doc


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(r["task"]): r for r in doc["tasks"]}


def same_as_dry_run(fleet: Fleet, doc: dict[str, Any]) -> None:
    for task, row in rows(doc).items():
        code, one = fleet.fm_json("teardown", task, "--dry-run")
        got = (row["verdict"], row["exit_code"], row["reasons"], row["plan_id"])
        want = (one["verdict"], code, one["reasons"], one.get("plan_id"))
        assert got == want, (task, row, one)


def test_a_dirty_task_is_unlanded_in_the_audit_as_in_its_dry_run(fleet: Fleet) -> None:
    clean = fleet.slot(1, holder=ID_CLEAN)
    fleet.task(ID_CLEAN, clean, "dead")
    dirty = fleet.slot(2, holder=ID_DIRTY)
    fleet.task(ID_DIRTY, dirty, "dead")
    (dirty / "notes.txt").write_text("not committed\n")
    unpushed = fleet.slot(3, holder=ID_AHEAD)
    fleet.task(ID_AHEAD, unpushed, "dead")
    (unpushed / "feature.txt").write_text("x\n")
    git(unpushed, "add", "feature.txt")
    git(unpushed, "commit", "-q", "-m", "feature not pushed")
    before = fleet.snapshot(clean, dirty, unpushed)
    doc = audit(fleet)
    r = rows(doc)
    assert (r[ID_CLEAN]["verdict"], r[ID_DIRTY]["verdict"], r[ID_AHEAD]["verdict"]) == (
        "proceed",
        "unlanded",
        "unlanded",
    )
    assert (
        "notes.txt" in str(r[ID_DIRTY]["headline"])
        and "untracked: notes.txt" in r[ID_DIRTY]["reasons"]
    )
    assert any("feature not pushed" in x for x in r[ID_AHEAD]["reasons"])
    same_as_dry_run(fleet, doc)
    assert fleet.snapshot(clean, dirty, unpushed) == before
    assert not (fleet.data / "teardown-log.jsonl").exists()


def test_loose_ends_are_listed_and_change_no_exit_code(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    free = fleet.slot(2, holder="ci-bot")  # leased, but no record claims it
    agent = fleet.agent_in(free)
    ghost = fleet.endpoint(ID_GHOST, fleet.root, "alive")  # a window with no record
    doc = audit(fleet)
    orphans = {(o["kind"], o["id"]): o for o in doc["orphans"]}
    assert set(orphans) == {
        ("window", ID_GHOST),
        ("lease", "lease:ci-bot"),
        ("process", f"pid:{agent.pid}"),
    }, orphans
    assert orphans[("window", ID_GHOST)]["slot"] is None
    assert orphans[("lease", "lease:ci-bot")]["slot"] == str(free)
    assert orphans[("process", f"pid:{agent.pid}")]["slot"] == str(free)
    assert rows(doc)[ID_T1]["verdict"] == "proceed"
    r = fleet.fm("teardown", "--dry-run")
    assert r.returncode == 0
    tail = r.stdout.split("loose ends", 1)[1]
    assert ID_GHOST in tail and "lease:ci-bot" in tail and f"pid:{agent.pid}" in tail
    assert ghost  # its window stays


def test_names_no_task_can_have_are_loose_ends_and_an_empty_record_still_blocks(
    fleet: Fleet,
) -> None:
    """`bad id.meta` naming t1's slot and a stray `notes.txt` are loose ends and a warning,
    never owners; an empty `<valid id>.meta` may be a spawn in progress: it blocks (exit 5)
    and its reason points at the runbook that tells it from a live task's record."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    (fleet.state / "bad id.meta").write_text(f"window=firstmate:fm-x\nworktree={slot}\n")
    (fleet.state / "notes.txt").write_text("mine\n")
    (fleet.state / f"{ID_T1}.status").write_text("done\n")  # t1's sidecar: no loose end
    doc = audit(fleet)
    assert rows(doc)[ID_T1]["verdict"] == "proceed", doc
    files = {o["id"]: o for o in doc["orphans"] if o["kind"] == "file"}
    assert sorted(files) == ["bad id.meta", "notes.txt"], doc["orphans"]
    assert "can never be a task id" in files["bad id.meta"]["detail"]
    code, one = fleet.fm_json("teardown", ID_T1, "--dry-run")
    assert (code, one["verdict"]) == (0, "proceed"), one
    assert any(w.startswith("bad id.meta in the state dir") for w in one["warnings"]), one
    r = fleet.fm("teardown", "--dry-run")
    assert r.returncode == 0 and "file bad id.meta: no task's record" in r.stdout
    # An empty record of a valid id: every task is refused, pointed at the safe way out.
    before = fleet.snapshot(slot)
    (fleet.state / f"{ID_ZERO}.meta").write_text("")
    code, one = fleet.fm_json("teardown", ID_T1)
    assert (code, one["verdict"]) == (5, "unsafe"), one
    assert "is empty: a record being written, or one left half-written" in one["reasons"][0]
    assert any("fm runbook unsafe" in h for h in one["hints"]), one["hints"]
    assert fleet.snapshot(slot)["slots"] == before["slots"]
    text = fleet.fm("runbook", "unsafe").stdout
    flat = " ".join(text.split())
    assert "An empty or half-written record is a spawn in progress" in flat and "ALL hold" in flat


def test_the_audit_names_the_state_dir_owners_and_bad_records(fleet: Fleet) -> None:
    shared = fleet.slot(1, holder=ID_BRAVO)
    fleet.task(ID_ALPHA, shared, "dead")
    fleet.task(ID_BRAVO, shared, "alive", extra={"treehouse_lease_holder": ID_BRAVO})
    other = fleet.slot(2, holder=ID_CHARLIE)
    fleet.task(ID_CHARLIE, other, "dead")
    # A typo in one record: `worktree =` — the record is invalid, but it still names its slot,
    # so only the task on that slot is refused for it, with the reason.
    typo = fleet.slot(3, holder=ID_DELTA)
    fleet.task(ID_DELTA, typo, "dead")
    fleet.record(
        ID_TYPO,
        typo,
        lines=[f"window=firstmate:fm-{ID_TYPO}", f"worktree ={typo}", f"project={fleet.project}"],
    )
    r = fleet.fm("teardown", "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"fleet audit of {fleet.state}")
    by_task = {line.split()[0]: line for line in lines if line.split()[:1] and line.split()[0] in
               (ID_ALPHA, ID_BRAVO, ID_CHARLIE, ID_DELTA, ID_TYPO)}  # fmt: skip
    assert (
        "live-owner" in by_task[ID_ALPHA]
        and f"{ID_BRAVO} is working in this slot" in by_task[ID_ALPHA]
    )
    assert "proceed" in by_task[ID_CHARLIE]
    assert "unsafe" in by_task[ID_DELTA] and f"{ID_TYPO}.meta" in by_task[ID_DELTA]
    # A reason too long for its row is cut there and said in full once, below the table.
    assert by_task[ID_TYPO].endswith("…")
    assert any(
        x.startswith(f"  {ID_TYPO}: ") and "'worktree=' must appear exactly once" in x
        for x in lines
    )
    assert str(fleet.pool) not in by_task[ID_CHARLIE]  # pool paths are shortened
    doc = audit(fleet)
    assert doc["state_dir"] == str(fleet.state)
    assert rows(doc)[ID_ALPHA]["owners"] == [ID_BRAVO]
    same_as_dry_run(fleet, doc)


def test_a_state_dir_that_cannot_be_read_gives_the_audits_own_shape(fleet: Fleet) -> None:
    blocker = fleet.root / "state-is-a-file"
    blocker.write_text("")
    env = fleet.env(FM_STATE_OVERRIDE=str(blocker))
    r = fleet.fm("teardown", "--dry-run", "--json", env=env)
    doc = json.loads(r.stdout)
    assert r.returncode == 5
    assert doc == {
        "schema": "fm-teardown/1",
        "audit": True,
        "exit_code": 5,
        "verdict": "unsafe",
        "reasons": doc["reasons"],
        "reason_codes": ["state-dir-unreadable"],
        "hints": [],
        "runbook": "unsafe",
        "tasks": [],
        "shared_slots": [],
        "orphans": [],
    }
    assert str(blocker) in doc["reasons"][0]


def test_a_pool_executable_that_does_not_exist_refuses_before_anything(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    t1 = fleet.task(ID_T1, slot, "alive")
    before = fleet.snapshot(slot)
    for bad in (str(fleet.root / "no-treehouse"), "/etc/passwd"):
        env = fleet.env(FM_TREEHOUSE_BIN=bad)
        code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run", env=env)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        code, doc = fleet.fm_json("teardown", ID_T1, env=env)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        assert bad in str(doc["reasons"][0])
        assert doc["steps"] == []
    assert fleet.snapshot(slot) == before
    assert f"firstmate:fm-{ID_T1}" in fleet.tmux.windows() and t1.pids


def _git_log_wrapper(fleet: Fleet) -> tuple[dict[str, str], Path]:
    """A `git` first on PATH that logs each call's cwd and argv, then runs the real git."""
    shim = fleet.root / "gitshim"
    shim.mkdir()
    log = fleet.root / "git-calls.log"
    real = shutil.which("git")
    (shim / "git").write_text(
        f'#!/bin/sh\nprintf "%s\\t%s\\n" "$PWD" "$*" >> {log}\nexec {real} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    return fleet.env(PATH=f"{shim}:{os.environ['PATH']}"), log


def test_the_audit_pays_one_status_per_slot_and_a_few_calls_per_project(fleet: Fleet) -> None:
    n = 6
    for i in range(1, n + 1):
        fleet.task(tid(f"t{i}"), fleet.slot(i, holder=tid(f"t{i}")), "dead")
    ahead = fleet.slot(n + 1, holder=ID_AHEAD)
    fleet.task(ID_AHEAD, ahead, "dead")
    (ahead / "f.txt").write_text("x\n")
    git(ahead, "add", "f.txt")
    git(ahead, "commit", "-q", "-m", "unpushed")
    # Refused before rule 5 (a live owner): no git at all for this row.
    shared = fleet.slot(n + 2, holder=ID_BUSY)
    fleet.task(ID_IDLE, shared, "dead")
    fleet.task(ID_BUSY, shared, "alive", extra={"treehouse_lease_holder": ID_BUSY})
    env, log = _git_log_wrapper(fleet)
    doc = audit(fleet, env=env)
    assert rows(doc)[ID_IDLE]["verdict"] == "live-owner"
    calls = [line.split("\t", 1)[1] for line in log.read_text().splitlines()]
    # The loose ends' task branches: one call per project, beside rule 5's work.
    branches = [c for c in calls if c.endswith(" refs/heads/fm/")]
    assert len(branches) == 1 and branches[0].startswith(f"-C {fleet.project} "), calls
    calls = [c for c in calls if c not in branches]
    status = [c for c in calls if " status " in f" {c} "]
    assert len(status) == n + 2, calls  # the clean ones, `ahead` and `busy`: one each
    per_project = [c for c in calls if c.startswith(f"-C {fleet.project} ")]
    assert len(per_project) <= 4, per_project
    per_slot = [c for c in calls if c not in status and c not in per_project]
    assert all(f"-C {ahead} " in c for c in per_slot), per_slot  # only the unpushed slot


# The audit with `runner.git_many`'s batches and `runner.git`'s lone calls written down.
BATCHES = """
import json, sys
from fm_teardown import cli
from fm_teardown.adapters import runner
batches, alone = [], []
real_many, real_git = runner.git_many, runner.git
def many(calls, **kw):
    batches.append([" ".join(args) for _, args in calls])
    return real_many(calls, **kw)
def lone(repo, *args, **kw):
    alone.append(" ".join(args))
    return real_git(repo, *args, **kw)
runner.git_many, runner.git = many, lone
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write(json.dumps({"batches": batches, "alone": alone}) + "\\n")
"""


def test_the_loose_ends_branch_listing_runs_beside_rule_5s_statuses(fleet: Fleet) -> None:
    # It needs no status: it is one more git call of the statuses' batch, not one after it.
    for i in (1, 2):
        fleet.task(tid(f"t{i}"), fleet.slot(i, holder=tid(f"t{i}")), "dead")
    r = fleet.python("-c", BATCHES, "teardown", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stderr.strip().splitlines()[-1])
    listing = [b for b in seen["batches"] if any(c.endswith(" refs/heads/fm/") for c in b)]
    assert len(listing) == 1 and any(" status " in f" {c} " for c in listing[0]), seen
    assert not any(c.endswith(" refs/heads/fm/") for c in seen["alone"]), seen


def test_a_task_branch_left_by_a_stale_teardown_is_a_loose_end(fleet: Fleet) -> None:
    """A stale teardown (the slot is a finished task's now) leaves the tree, and so TASK's
    branch, alone: the audit then lists `fm/<id>` branches whose task has no record and that
    no worktree has checked out, deletes nothing, and changes no exit code."""
    old, new, gone = tid("old"), tid("new"), tid("gone")
    slot = fleet.slot(1, holder=new)
    git(fleet.project, "branch", f"fm/{old}", "main")  # the old task's, no longer checked out
    git(slot, "switch", "-q", "-c", f"fm/{new}")  # the pool handed the slot on
    fleet.task(old, slot, "dead")
    fleet.task(new, slot, "dead", extra={"treehouse_lease_holder": new})
    other = fleet.slot(2, holder="ci-bot")
    git(other, "switch", "-q", "-c", f"fm/{gone}")  # checked out: someone works there
    code, doc = fleet.fm_json("teardown", old)
    assert code == 0 and doc["verdict"] == "stale", doc
    doc = audit(fleet)
    branches = {o["id"]: o for o in doc["orphans"] if o["kind"] == "branch"}
    assert set(branches) == {f"fm/{old}"}, doc["orphans"]
    assert str(fleet.project) in branches[f"fm/{old}"]["detail"]
    assert f"branch -D fm/{old}" in branches[f"fm/{old}"]["detail"]
    r = fleet.fm("teardown", "--dry-run")
    assert r.returncode == 0
    assert f"branch fm/{old}" in r.stdout.split("loose ends", 1)[1]
    refs = git(fleet.project, "for-each-ref", "--format=%(refname:short)", "refs/heads/fm/")
    assert sorted(refs.split()) == sorted([f"fm/{old}", f"fm/{new}", f"fm/{gone}"])


def test_a_secondmates_child_window_and_the_state_dirs_readme_are_no_loose_ends(
    fleet: Fleet,
) -> None:
    """A child recorded in a secondmate's home (`<secondmate>/<id>`) accounts for its window
    `fm-<id>`; a README in the state dir documents it. A window nobody records stays one."""
    from tests.test_secondmate import child, secondmate

    sm, kid, stray = tid("sm"), tid("kid"), tid("nobody")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    kid_slot = fleet.slot(2, holder=kid)
    child(fleet, home, kid, kid_slot)
    fleet.endpoint(kid, kid_slot, "alive")
    fleet.endpoint(stray, fleet.slot(3, holder=stray), "alive")
    (fleet.state / "README.md").write_text("# what this directory holds\n")
    (fleet.state / "notes.txt").write_text("a stray\n")
    loose = {(o["kind"], o["id"]) for o in audit(fleet)["orphans"]}
    assert ("window", kid) not in loose
    assert ("file", "README.md") not in loose
    assert {("window", stray), ("file", "notes.txt")} <= loose


def test_a_long_why_is_cut_in_its_row_and_said_once_in_full_below(fleet: Fleet) -> None:
    """A pool executable that cannot be used names its long path in every row's reason: the
    table's rows stay short, the reason is said once below them for the tasks it applies
    to, --json keeps it."""
    tasks = [tid(f"w{i}") for i in range(3)]
    for i, task in enumerate(tasks, start=1):
        fleet.task(task, fleet.slot(i, holder=task), "dead")
    missing = fleet.root / ("a-pool-executable-installed-somewhere-far-away-" * 3) / "treehouse"
    env = fleet.env(FM_TREEHOUSE_BIN=str(missing))
    r = fleet.fm("teardown", "--dry-run", env=env)
    doc = audit(fleet, env)
    assert r.returncode == 0, r.stderr
    # Refused: the pool cannot return the slot, the executable's path named in full.
    full = {row["task"]: row["finished"]["reason"] for row in doc["tasks"]}
    assert all(len(why) > 120 for why in full.values()), full  # what made 600-char rows
    lines = r.stdout.splitlines()
    table = [x for x in lines if x.startswith(tuple(tasks))]
    assert len(table) == 3 and all(len(x) < 250 for x in table), table
    assert all(x.endswith("…") for x in table)
    below = [x for x in lines if x.startswith("  ") and ", ".join(tasks) in x]
    assert len(below) == 1 and len(below[0]) > 120 + len(", ".join(tasks)), below
    assert str(missing) in below[0] and not below[0].endswith("…")
