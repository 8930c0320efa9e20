"""A repository's config cannot point fm's git at another tree (`core.worktree`).

An agent can write to its slot's git config and to the project's. A `core.worktree` there
makes every `git status` in the slot read the tree it names: a clean copy elsewhere makes a
slot with unsaved work read as clean, so the work would be judged landed and the slot
returned. fm runs no git where the config names another tree than the one it asks about:
whether the work is landed cannot be told, so the task is unlanded (3) in its dry run, its
real run and the audit, and nothing changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fleet import Fleet, git, tid


def _clean_copy(fleet: Fleet, slot: Path) -> Path:
    clean = fleet.root / "clean"
    clean.mkdir()
    for name in ("README", ".gitignore"):
        (clean / name).write_bytes((slot / name).read_bytes())
    return clean


@pytest.mark.parametrize("where", ["config.worktree", "project config"])
def test_core_worktree_elsewhere_does_not_hide_a_slots_work(fleet: Fleet, where: str) -> None:
    task = tid("cwt")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    clean = _clean_copy(fleet, slot)
    (slot / "work.txt").write_text("unsaved\n")
    git(slot, "config", "extensions.worktreeConfig", "true")
    if where == "config.worktree":
        git(slot, "config", "--worktree", "core.worktree", str(clean))
    else:
        # With per-worktree config on, git reads the common config's for every worktree.
        git(fleet.project, "config", "core.worktree", str(clean))
    # git itself now reads the clean copy: the unsaved file is not in its status.
    assert "work.txt" not in git(slot, "status", "--porcelain", "--untracked-files=all")
    before = fleet.snapshot(slot)
    for args in ((task, "--dry-run"), (task,)):
        code, doc = fleet.fm_json("teardown", *args)
        assert code == 3 and doc["verdict"] == "unlanded", doc
        said = " ".join(doc["reasons"])
        assert "the repository's config sets core.worktree to" in said, said
    code, doc = fleet.fm_json("teardown", "--dry-run")
    [row] = [r for r in doc["tasks"] if r["task"] == task]
    assert (code, row["verdict"], row["exit_code"]) == (0, "unlanded", 3), row
    assert (slot / "work.txt").read_text() == "unsaved\n"
    assert fleet.snapshot(slot) == before


def test_core_worktree_naming_the_tree_itself_is_no_obstacle(fleet: Fleet) -> None:
    """The project checkout's config naming the project itself (a linked worktree would
    then read the project's tree: the slot's work cannot be told) and a slot's own config
    naming the slot: the slot's git runs, and a clean landed slot proceeds."""
    task = tid("cwt-own")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    git(slot, "config", "extensions.worktreeConfig", "true")
    git(slot, "config", "--worktree", "core.worktree", str(slot))
    code, doc = fleet.fm_json("teardown", task, "--dry-run")
    assert code == 0 and doc["verdict"] == "proceed", doc
