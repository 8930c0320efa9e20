"""Another tool's `git worktree lock` on a slot is that tool's claim on the tree.

The pool never locks its slots; an agent tool does (`git worktree lock --reason "claude-code
agent session …"`). A teardown refuses (exit 5) naming the lock's reason, with the command
that removes the lock as its hint; `--landed` does not select the task; fm never unlocks.
Real git worktrees (the lock is git's own), a real tmux server and real processes.
"""

from __future__ import annotations

from pathlib import Path

from tests.fleet import Fleet, git, gone, tid
from tests.test_finished import OLD, commit, not_selected

REASON = "claude-code agent session 5f1c2a (pid 4242)"


def lock(fleet: Fleet, slot: Path, reason: str = REASON) -> None:
    git(fleet.project, "worktree", "lock", "--reason", reason, str(slot))


def locked_reason(fleet: Fleet, slot: Path) -> str | None:
    """The slot's lock as git itself reports it (None: not locked)."""
    out = git(fleet.project, "worktree", "list", "--porcelain")
    for block in out.split("\n\n"):
        lines = block.splitlines()
        if f"worktree {slot}" in lines:
            for line in lines:
                if line == "locked":
                    return ""
                if line.startswith("locked "):
                    return line[len("locked ") :]
            return None
    raise AssertionError(f"{slot} is not a worktree of the project: {out}")


def test_a_teardown_refuses_a_locked_slot_and_changes_nothing(fleet: Fleet) -> None:
    t_id = tid("wl-lock")
    slot = fleet.slot(1, holder=t_id)
    t = fleet.task(t_id, slot, "alive", extra={"treehouse_lease_holder": t_id})
    worker = fleet.spawn(["sleep", "100000"], slot)
    lock(fleet, slot)
    before = fleet.snapshot(slot)
    for args in ([t_id], [t_id, "--force"], [t_id, "--dry-run"]):
        code, doc = fleet.fm_json("teardown", *args)
        assert (code, doc["verdict"]) == (5, "unsafe"), (args, doc)
        said = " ".join(doc["reasons"])
        assert "locked by another tool" in said and REASON in said, said
        unlock = f"git -C {fleet.project} worktree unlock {slot}"
        assert any(h.endswith(unlock) for h in doc["hints"]), doc["hints"]
        assert fleet.snapshot(slot) == before
        assert not any(gone(p) for p in [*t.pids, worker.pid])
        assert t.meta.exists() and fleet.treehouse_calls() == []
        assert locked_reason(fleet, slot) == REASON  # fm never unlocks
    human = fleet.fm("teardown", t_id)
    assert human.returncode == 5
    assert REASON in human.stdout + human.stderr


def test_landed_does_not_select_a_locked_task(fleet: Fleet) -> None:
    # Finished in every other way: merged, old, its endpoint gone.
    done = tid("wl-done")
    s1 = fleet.slot(1, holder=done)
    fleet.task(done, s1, "dead", extra=OLD)
    commit(s1, "done.txt", "done\n")
    git(s1, "push", "-q", "origin", "HEAD:main")
    held = tid("wl-held")
    s2 = fleet.slot(2, holder=held)
    t = fleet.task(held, s2, "dead", extra=OLD)
    lock(fleet, s2)
    before = fleet.snapshot(s2)
    code, doc = fleet.fm_json("teardown", "--landed")
    assert code == 0, doc
    assert [r["task"] for r in doc["results"]] == [done]
    verdict, reason, opt = not_selected(doc)[held]
    assert (verdict, opt) == ("unsafe", None) and REASON in reason, reason
    assert fleet.snapshot(s2)["slots"] == before["slots"] and t.meta.exists()
    assert locked_reason(fleet, s2) == REASON
    # The audit's FINISHED column says the same.
    code, audit = fleet.fm_json("teardown", "--dry-run")
    row = next(r for r in audit["tasks"] if r["task"] == held)
    assert not row["finished"]["finished"] and REASON in row["finished"]["reason"]


def test_a_lock_without_a_reason_still_refuses(fleet: Fleet) -> None:
    t_id = tid("wl-bare")
    slot = fleet.slot(1, holder=t_id)
    t = fleet.task(t_id, slot, "dead")
    git(fleet.project, "worktree", "lock", str(slot))
    code, doc = fleet.fm_json("teardown", t_id)
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    assert "no reason given" in " ".join(doc["reasons"])
    assert t.meta.exists() and locked_reason(fleet, slot) == ""
