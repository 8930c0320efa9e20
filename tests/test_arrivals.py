"""Arrivals after the decision (spec §15.4), on real fleets: someone who comes to work in a
slot after fm decided (a shell in someone's pane, an agent in no pane or in an operator's
pane, another tool's `git worktree lock`) is seen right before each destructive call (the
processes step's signals, the pool's return, the branch delete): nothing of theirs is ended
or reset, the run stops (exit 1, "re-run to decide again"), and a batch goes on with its
next task.

Each test pauses a real run at a step boundary (`FM_TEST_FAULT`), brings the arrival, and
lets the run go on; then checks that nothing changed: the slot's tree, the record, the lease,
the branch, the arrival's processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fleet import (
    Fleet,
    Task,
    agent_alone,
    git,
    gone,
    pane_agent,
    pane_shell,
    resumed,
    resumed_json,
    tid,
    tree_hash,
)

# Where a batch's first task is paused, and the step whose look stops it there.
PAUSES = {
    "before-endpoint": "processes",  # before the endpoint step (its quit keys)
    "before-kill": "processes",  # right before TASK's own panes are killed
    "before-recheck": "processes",  # under the slot lock, before the re-check
    "before-processes": "processes",
    "before-pool": "pool",
    "before-branch": "branch",
}
STOPPED = "re-run to decide again"


def _steps(doc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {s["step"]: (s["outcome"], s["detail"]) for s in doc["steps"]}


def _finished(fleet: Fleet, name: str, n: int) -> Task:
    """A finished task: its endpoint dead, its branch `fm/<id>` at the default branch's tip
    (merged), checked out in its leased slot."""
    t_id = tid(name)
    slot = fleet.slot(n, holder=t_id)
    git(slot, "checkout", "-q", "-b", f"fm/{t_id}")
    return fleet.task(t_id, slot, "dead")


def _branch_exists(fleet: Fleet, t: Task) -> bool:
    return (
        git(fleet.project, "rev-parse", "--verify", "-q", f"refs/heads/fm/{t.id}", check=False)
        != ""
    )


def _leased(fleet: Fleet, t: Task) -> bool:
    doc = json.loads((fleet.pool / "treehouse-state.json").read_text())
    entry = next(e for e in doc["worktrees"] if e["path"] == str(t.slot))
    return bool(entry.get("leased"))


def _arrive(fleet: Fleet, kind: str, slot: Path) -> list[int]:
    """Someone comes to work in `slot`: a shell in an operator's pane, or an agent started
    with nohup (in no pane, on no terminal). Their pids."""
    if kind == "shell":
        _, shell = pane_shell(fleet, fleet.tmux, "ops", "desk", slot)
        return [shell]
    return [agent_alone(fleet, slot).pid]


@pytest.mark.parametrize("boundary", list(PAUSES))
@pytest.mark.parametrize("kind", ["shell", "agent"])
def test_landed_an_arrival_after_selection_stops_that_task_and_the_batch_goes_on(
    fleet: Fleet, kind: str, boundary: str
) -> None:
    first = _finished(fleet, f"arr-a-{kind[0]}", 1)
    second = _finished(fleet, f"arr-b-{kind[0]}", 2)
    proc, pause = fleet.fm_paused(boundary, "--landed", "--min-age", "0")
    tree = tree_hash(first.slot)
    leased = _leased(fleet, first)  # returned already when paused before the branch delete
    pids = _arrive(fleet, kind, first.slot)
    code, doc = resumed_json(proc, pause)
    results = {r["task"]: r for r in doc["results"]}
    assert list(results) == [first.id, second.id], doc
    stopped = results[first.id]
    assert (code, stopped["exit_code"]) == (1, 1), doc
    outcome, detail = _steps(stopped)[PAUSES[boundary]]
    assert outcome == "failed" and STOPPED in detail, detail
    assert "came to work in the slot" in detail or "no longer" in detail, detail
    # The batch went on: the second task is torn down.
    assert results[second.id]["exit_code"] == 0, results[second.id]
    assert not second.meta.exists()
    # Nothing of the arrival's was ended; nothing of the first task's slot changed since.
    assert not any(gone(p) for p in pids)
    assert tree_hash(first.slot) == tree
    assert first.meta.exists() and _branch_exists(fleet, first)
    assert _leased(fleet, first) == leased
    assert leased == (boundary != "before-branch")


def test_an_agent_in_an_operators_pane_after_the_recheck_is_not_signalled(fleet: Fleet) -> None:
    """After the re-check under the slot lock (its scan done; a slow `git status`, say), an
    agent starts in an operator's pane in the slot: the processes step looks again before its
    first signal, signals nothing, and the run stops."""
    t = _finished(fleet, "arr-pane", 1)
    worker = fleet.spawn(["sleep", "100000"], t.slot)  # TASK's own leftover, to be ended
    proc, pause = fleet.fm_paused("before-processes", t.id)
    before = fleet.snapshot(t.slot)
    _, agent = pane_agent(fleet, fleet.tmux, "ops", "agent", t.slot)
    code, doc = resumed_json(proc, pause)
    assert (code, doc["verdict"]) == (1, "failed"), doc
    outcome, detail = _steps(doc)["processes"]
    assert outcome == "failed" and STOPPED in detail, detail
    assert f"claude ({agent})" in detail and "ops:agent" in detail, detail
    # Only TASK's own window's shell was hung up by the window kill; nothing else signalled.
    assert {s["pid"] for s in doc["signalled"]} <= set(t.pids), doc["signalled"]
    assert not gone(agent) and not gone(worker.pid)  # nothing at all was signalled
    after = fleet.snapshot(t.slot)
    assert after["slots"] == before["slots"] and after["pool"] == before["pool"]
    assert t.meta.exists() and fleet.treehouse_calls() == []


@pytest.mark.parametrize("arrival", ["agent", "lock"])
def test_an_arrival_after_the_processes_step_keeps_the_tree(fleet: Fleet, arrival: str) -> None:
    """An agent (nohup'd) or another tool's `git worktree lock` arriving after the processes
    step, right before the return: the tree is not reset, the lease and record are kept."""
    t = _finished(fleet, f"arr-ret-{arrival[0]}", 1)
    (t.slot / "build.cache").write_text("ignored, kept by any reset\n")
    proc, pause = fleet.fm_paused("before-pool", t.id)
    before = fleet.snapshot(t.slot)
    pids: list[int] = []
    if arrival == "agent":
        pids = [agent_alone(fleet, t.slot).pid]
    else:
        git(fleet.project, "worktree", "lock", "--reason", "agent session 42", str(t.slot))
    code, doc = resumed_json(proc, pause)
    if arrival == "agent":
        assert (code, doc["verdict"]) == (1, "failed"), doc
        outcome, detail = _steps(doc)["pool"]
        assert outcome == "failed" and STOPPED in detail and "an agent in no pane" in detail
    else:
        # Decided otherwise: the lock refuses as it would have before acting (5), with what
        # this run had done by then.
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        said = " ".join(doc["reasons"])
        assert "locked by another tool" in said and "agent session 42" in said, said
        assert _steps(doc)["pool"][0] == "skipped"
    assert not any(gone(p) for p in pids)
    after = fleet.snapshot(t.slot)
    assert after["slots"] == before["slots"] and after["pool"] == before["pool"]
    assert t.meta.exists() and _branch_exists(fleet, t)
    assert fleet.treehouse_calls() == []


def test_a_lock_on_a_worktree_nested_in_the_slot_claims_it(fleet: Fleet) -> None:
    """`git worktree lock` on a worktree whose path is inside the slot (an agent tool's
    session worktree under `.claude/worktrees/`) refuses like a lock on the slot (5), names
    the nested worktree and its unlock command, and `--landed` does not select the task."""
    t = _finished(fleet, "arr-nest", 1)
    nested = t.slot / ".claude" / "worktrees" / "session-1"
    git(fleet.project, "worktree", "add", "-q", "--detach", str(nested), "main")
    git(fleet.project, "worktree", "lock", "--reason", "claude-code agent session 7", str(nested))
    before = fleet.snapshot(t.slot)
    for args in ([t.id, "--dry-run"], [t.id], [t.id, "--force"]):
        code, doc = fleet.fm_json("teardown", *args)
        assert (code, doc["verdict"]) == (5, "unsafe"), (args, doc)
        said = " ".join(doc["reasons"])
        assert str(nested) in said and "claude-code agent session 7" in said, said
        unlock = f"git -C {fleet.project} worktree unlock {nested}"
        assert any(h.endswith(unlock) for h in doc["hints"]), doc["hints"]
    code, doc = fleet.fm_json("teardown", "--landed", "--min-age", "0")
    assert (code, doc["results"]) == (0, []), doc
    [row] = [n for n in doc["not_selected"] if n["task"] == t.id]
    assert "claude-code agent session 7" in row["reason"], row
    assert fleet.snapshot(t.slot) == before and t.meta.exists()
    assert fleet.treehouse_calls() == []
    # Not a lock on the slot's own worktree: the project's other worktrees are left alone.
    assert "locked" in git(fleet.project, "worktree", "list", "--porcelain")


# -- late work in the tree: preserved without --force, saved then discarded with it ---------


def test_late_work_without_force_is_preserved_not_reset(fleet: Fleet) -> None:
    """Work written into the tree after the decision (its processes ended, nothing left
    running: an editor's save from outside the slot, say): the pool's return is unforced, the
    pool declines the tree that holds it, and fm says so: exit 1, the work preserved, the
    lease and the record kept. The same command then refuses it as unlanded (3)."""
    t = _finished(fleet, "arr-late", 1)
    proc, pause = fleet.fm_paused("after-processes", t.id)
    (t.slot / "late.txt").write_text("written after the decision\n")
    before = fleet.snapshot(t.slot)
    code, doc = resumed_json(proc, pause)
    assert (code, doc["verdict"]) == (1, "failed"), doc
    outcome, detail = _steps(doc)["pool"]
    assert outcome == "failed", detail
    assert "declined to return" in detail and "preserved, not discarded" in detail, detail
    assert "late.txt" in detail, detail
    [call] = fleet.treehouse_calls()
    assert "--force" not in call["argv"] and call["stdin_closed_or_devnull"] is True
    after = fleet.snapshot(t.slot)
    assert after["slots"] == before["slots"] and after["pool"] == before["pool"]
    assert (t.slot / "late.txt").read_text() == "written after the decision\n"
    assert t.meta.exists() and _branch_exists(fleet, t) and _leased(fleet, t)
    code, doc = fleet.fm_json("teardown", t.id)
    assert (code, doc["verdict"]) == (3, "unlanded"), doc


def test_late_work_in_the_drop_in_is_a_declined_return(fleet: Fleet) -> None:
    """firstmate's drop-in says it in the script's words: exit 1, `declined to return`."""
    t = _finished(fleet, "arr-late-fm", 1)
    proc, pause = fleet.run_paused("after-processes", ["fm_teardown.commands.firstmate", t.id])
    (t.slot / "late.txt").write_text("late\n")
    code, _, err = resumed(proc, pause)
    assert code == 1, err
    assert err.startswith("error: ") and "declined to return" in err, err
    assert (t.slot / "late.txt").exists() and t.meta.exists()


def test_late_work_with_force_is_saved_then_discarded(fleet: Fleet) -> None:
    """With --force the return is forced, after its save: the work seen when deciding and the
    work written after it are both in the save, and the slot is returned."""
    t = _finished(fleet, "arr-late-f", 1)
    (t.slot / "wip.txt").write_text("unlanded when deciding\n")
    proc, pause = fleet.fm_paused("after-processes", t.id, "--force")
    (t.slot / "late.txt").write_text("written after the decision\n")
    code, doc = resumed_json(proc, pause)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    steps = _steps(doc)
    assert steps["save-discarded"][0] == "done" and steps["pool"][0] == "done", steps
    [call] = fleet.treehouse_calls()
    assert call["argv"][:2] == ["return", "--force"]
    assert not (t.slot / "late.txt").exists() and not (t.slot / "wip.txt").exists()
    [ref] = git(
        fleet.project, "for-each-ref", "--format=%(refname)", f"refs/fm/discarded/{t.id}"
    ).split()
    saved = git(fleet.project, "ls-tree", "-r", "--name-only", ref).split()
    assert "late.txt" in saved and "wip.txt" in saved, saved
    assert not t.meta.exists()


def test_another_tasks_endpoint_arriving_before_the_recheck_stops_the_run(fleet: Fleet) -> None:
    """Another task's window with a live agent opens in the slot while fm waits for the slot
    lock: the look under the lock sees it came, and the run stops (exit 1) naming it and what
    the decision is now; its agent keeps running."""
    t = _finished(fleet, "arr-ep", 1)
    proc, pause = fleet.fm_paused("before-recheck", t.id)
    before = fleet.snapshot(t.slot)
    other = fleet.task(tid("arr-ep-other"), t.slot, "alive")
    code, doc = resumed_json(proc, pause)
    assert (code, doc["verdict"]) == (1, "failed"), doc
    outcome, detail = _steps(doc)["processes"]
    assert outcome == "failed" and STOPPED in detail, detail
    assert f"{other.id}'s endpoint" in detail and "now live-owner" in detail, detail
    assert not any(gone(p) for p in other.pids)
    after = fleet.snapshot(t.slot)
    assert after["slots"] == before["slots"] and after["pool"] == before["pool"]
    assert t.meta.exists() and fleet.treehouse_calls() == []
