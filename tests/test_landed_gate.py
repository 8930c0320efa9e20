"""Rule 5 end to end: a real run refuses (exit 3) when TASK's own work would be lost, says
what, and `--force` saves the work under refs/fm/discarded/<id>/<time> before discarding it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet import Fleet, git, gone, tid, tree_hash

ID_T1 = tid("t1")


def commit(slot: Path, name: str, text: str, msg: str) -> str:
    (slot / name).write_text(text)
    git(slot, "add", name)
    git(slot, "commit", "-q", "-m", msg)
    return git(slot, "rev-parse", "--short", "HEAD")


def teardown(fleet: Fleet, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    return fleet.fm_json("teardown", *args, env=fleet.env(**env))


@pytest.fixture
def slot(fleet: Fleet) -> Path:
    s = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, s, "dead")
    return s


def test_clean_and_pushed_proceeds(fleet: Fleet, slot: Path) -> None:
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc


def test_dirty_tracked_refuses_and_names_the_paths(fleet: Fleet, slot: Path) -> None:
    (slot / "README").write_text("changed\n")
    before = fleet.snapshot(slot)
    r = fleet.fm("teardown", ID_T1)
    assert r.returncode == 3
    assert "README" in r.stderr and "--force" in r.stderr and "land it" in r.stderr
    assert fleet.snapshot(slot) == before
    assert fleet.treehouse_calls() == []


def test_untracked_only_refuses(fleet: Fleet, slot: Path) -> None:
    git(slot, "config", "status.showUntrackedFiles", "no")
    (slot / "notes.txt").write_text("mine\n")
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (3, "unlanded")
    assert any("notes.txt" in r for r in doc["reasons"])


def test_scaffold_files_only_proceed(fleet: Fleet, slot: Path) -> None:
    (slot / ".fm-grok-turnend").write_text("")
    (slot / ".claude").mkdir()
    (slot / ".claude" / "settings.local.json").write_text("{}")
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc


def test_unpushed_commit_refuses_and_lists_it(fleet: Fleet, slot: Path) -> None:
    sha = commit(slot, "feature.txt", "x\n", "add the feature")
    r = fleet.fm("teardown", ID_T1)
    assert r.returncode == 3
    assert f"{sha} add the feature" in r.stderr


def test_pushed_to_a_fork_proceeds(fleet: Fleet, slot: Path) -> None:
    commit(slot, "feature.txt", "x\n", "feature")
    fork = fleet.root / "fork.git"
    git(fleet.root, "init", "-q", "--bare", str(fork))
    git(fleet.project, "remote", "add", "fork", str(fork))
    git(slot, "push", "-q", "fork", f"HEAD:refs/heads/fm/{ID_T1}")
    git(fleet.project, "fetch", "-q", "fork")
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc


def test_squash_merged_with_a_stale_origin_ref(fleet: Fleet, slot: Path) -> None:
    """A dry run never fetches (stale ref: not landed); a real run fetches and proceeds."""
    commit(slot, "feature.txt", "squashed\n", "feature, local")
    other = fleet.root / "other"
    git(fleet.root, "clone", "-q", str(fleet.origin), str(other))
    git(other, "config", "user.name", "O")
    git(other, "config", "user.email", "o@example.invalid")
    commit(other, "feature.txt", "squashed\n", "feature (squash merge)")
    git(other, "push", "-q", "origin", "main")
    code, doc = teardown(fleet, ID_T1, "--dry-run")
    assert (code, doc["verdict"]) == (3, "unlanded")
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc


def test_merged_pr_via_gh(fleet: Fleet, slot: Path) -> None:
    commit(slot, "feature.txt", "pr\n", "feature")
    head = git(slot, "rev-parse", "HEAD")
    fake = fleet.root / "gh"
    fake.write_text(f"#!/bin/sh\necho '{json.dumps({'state': 'MERGED', 'headRefOid': head})}'\n")
    fake.chmod(0o755)
    fleet.record(ID_T1, slot, extra={"pr": "https://example.invalid/o/r/pull/7"})
    code, doc = teardown(fleet, ID_T1, FM_GH_BIN=str(fake))
    assert (code, doc["verdict"]) == (0, "proceed"), doc


def test_local_only_merged_and_unmerged(fleet: Fleet, slot: Path) -> None:
    fleet.record(ID_T1, slot, extra={"mode": "local-only"})
    sha = commit(slot, "feature.txt", "local\n", "local feature")
    code, doc = teardown(fleet, ID_T1, "--dry-run")
    assert code == 3
    git(fleet.project, "merge", "-q", "--ff-only", sha)
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc


def test_scout_needs_its_report(fleet: Fleet, slot: Path) -> None:
    fleet.record(ID_T1, slot, extra={"kind": "scout"})
    (slot / "scratch.txt").write_text("a scout's tree is not checked\n")
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (3, "unlanded")
    (fleet.data / ID_T1).mkdir()
    (fleet.data / ID_T1 / "report.md").write_text("# findings\n")
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc


def test_secondmate_with_children_refuses(fleet: Fleet, slot: Path) -> None:
    home = fleet.root / "mate"
    (home / "state").mkdir(parents=True)
    (home / "state" / "child.meta").write_text(
        f"window=x:fm-child\nworktree={fleet.root / 'elsewhere'}\nproject={fleet.project}\n"
    )
    fleet.record(ID_T1, slot, extra={"kind": "secondmate", "home": str(home)})
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (3, "unlanded")
    # A child record fm cannot read might claim any slot, this one too: fail closed.
    (home / "state" / "child.meta").write_text("window=x:fm-child\n")
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    (home / "state" / "child.meta").unlink()
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc


def test_force_saves_the_work_and_it_comes_back_byte_identical(fleet: Fleet, slot: Path) -> None:
    commit(slot, "feature.txt", "committed, unpushed\n", "feature")
    (slot / "README").write_bytes(b"edited \x00 binary\n")
    (slot / "new").mkdir()
    (slot / "new" / "untracked.txt").write_text("untracked\n")
    (slot / "tool.sh").write_text("#!/bin/sh\n")
    os.chmod(slot / "tool.sh", 0o755)
    (slot / "out.cache").write_text("ignored: not saved\n")
    files = {
        p: (slot / p).read_bytes()
        for p in ("feature.txt", "README", "new/untracked.txt", "tool.sh")
    }
    code, doc = teardown(fleet, ID_T1, "--dry-run", "--force")
    assert code == 0
    assert [s["step"] for s in doc["steps"]] == [
        "endpoint",
        "processes",
        "save-discarded",
        "hooks",
        "pool",
        "auth",
        "attribution",
        "record",
    ]
    r = fleet.fm("teardown", ID_T1, "--force")
    assert r.returncode == 0, r.stderr
    assert f"refs/fm/discarded/{ID_T1}/" in r.stdout and "to bring it back" in r.stdout
    refs = git(fleet.project, "for-each-ref", "--format=%(refname)", f"refs/fm/discarded/{ID_T1}")
    assert refs.count("\n") == 0 and refs.startswith(f"refs/fm/discarded/{ID_T1}/")
    assert not (slot / "new").exists()  # the slot was returned: the work is gone from it
    line = json.loads((fleet.data / "teardown-log.jsonl").read_text().splitlines()[-1])
    assert line["discarded_ref"] == refs
    restore = r.stdout.split("to bring it back: ", 1)[1].strip()
    subprocess.run(restore, shell=True, check=True, capture_output=True)
    restored = Path(restore.split()[-2])
    for path, data in files.items():
        assert (restored / path).read_bytes() == data, path
    assert os.access(restored / "tool.sh", os.X_OK)
    assert not (restored / "out.cache").exists()


def test_old_lock_without_holder_is_removed_and_the_return_goes_on(
    fleet: Fleet, slot: Path
) -> None:
    lock = Path(git(slot, "rev-parse", "--path-format=absolute", "--git-path", "index.lock"))
    lock.write_text("")
    os.utime(lock, (946684800, 946684800))  # the year 2000
    r = fleet.fm(
        "teardown",
        ID_T1,
        env=fleet.env(
            FM_TREEHOUSE_RETURN_LOCK_RETRIES="1", FM_TREEHOUSE_RETURN_LOCK_RETRY_WAIT_SECS="0"
        ),
    )
    assert r.returncode == 0, r.stderr
    assert "removed provably-stale git lock" in r.stderr
    assert not lock.exists()
    assert not (fleet.state / f"{ID_T1}.meta").exists()


def test_old_lock_with_a_live_holder_is_kept(fleet: Fleet, slot: Path) -> None:
    lock = Path(git(slot, "rev-parse", "--path-format=absolute", "--git-path", "index.lock"))
    lock.write_text("")
    os.utime(lock, (946684800, 946684800))
    ready = fleet.root / "holder-ready"
    holder = fleet.spawn(
        [
            "python3",
            "-c",
            f"import time; f=open({str(lock)!r}); "
            f"open({str(ready)!r},'w').close(); time.sleep(100000)",
        ],
        fleet.root,
    )
    from tests.fleet import wait_for

    wait_for(ready.exists, what="lock holder ready")
    tree = tree_hash(slot)
    code, doc = teardown(
        fleet,
        ID_T1,
        FM_TREEHOUSE_RETURN_LOCK_RETRIES="1",
        FM_TREEHOUSE_RETURN_LOCK_RETRY_WAIT_SECS="0",
    )
    assert (code, doc["verdict"]) == (1, "failed")
    assert lock.exists() and holder.poll() is None
    assert (fleet.state / f"{ID_T1}.meta").exists()
    assert tree_hash(slot) == tree


def test_fresh_lock_that_clears_on_retry(fleet: Fleet, slot: Path) -> None:
    """The first return fails on a live writer's index.lock; the lock goes away; the retry
    succeeds and the lock is never force-removed."""
    from tests.fleet import wait_for

    lock = Path(git(slot, "rev-parse", "--path-format=absolute", "--git-path", "index.lock"))
    lock.write_text("")
    env = fleet.env(
        FM_TREEHOUSE_RETURN_LOCK_RETRIES="3", FM_TREEHOUSE_RETURN_LOCK_RETRY_WAIT_SECS="1"
    )
    proc = subprocess.Popen(
        ["python3", "-m", "fm_teardown", "teardown", ID_T1],
        cwd=fleet.fm_home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: len(fleet.treehouse_calls()) >= 1, timeout=30, what="the first return")
    first = int(fleet.treehouse_calls()[0]["pid"])
    wait_for(lambda: gone(first), timeout=30, what="the first return to fail")
    lock.unlink()  # the writer finished
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "succeeded on retry" in err
    # Each retry is announced in firstmate's script's words, which its operators look for.
    assert "waiting 1s and retrying (1/3)" in err
    assert len(fleet.treehouse_calls()) == 2
    assert "removed provably-stale" not in err


def _steps(doc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {s["step"]: (s["outcome"], s["detail"]) for s in doc["steps"]}


def _other_clone(fleet: Fleet) -> Path:
    other = fleet.root / "other"
    git(fleet.root, "clone", "-q", str(fleet.origin), str(other))
    git(other, "config", "user.name", "O")
    git(other, "config", "user.email", "o@example.invalid")
    return other


def test_a_squash_merge_then_a_later_edit_proceeds_naming_the_squash_rung(
    fleet: Fleet, slot: Path
) -> None:
    commit(slot, "feature.txt", "part 1\n", "feature part 1")
    commit(slot, "feature.txt", "part 1\npart 2\n", "feature part 2")
    other = _other_clone(fleet)
    commit(other, "feature.txt", "part 1\npart 2\n", "feature (#7) squashed")
    commit(other, "feature.txt", "part 1\npart 2, revised\n", "revise the feature")
    git(other, "push", "-q", "origin", "main")
    code, doc = teardown(fleet, ID_T1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert any(r.startswith("own work: squash: ") for r in doc["reasons"]), doc["reasons"]


@pytest.mark.parametrize("with_pr", [False, True])
def test_a_whitespace_only_difference_refuses_and_touches_nothing(
    fleet: Fleet, slot: Path, with_pr: bool
) -> None:
    """PR #7 squash-merged as P; the task's unpushed commit differs from P only in a Makefile
    recipe's TAB turned to spaces: exit 3, and slot, branch and pool stay as they were."""
    other = _other_clone(fleet)
    landed = commit(other, "Makefile", "all:\n\techo build\n", "PR #7 (squashed)")
    git(other, "push", "-q", "origin", "main")
    git(slot, "switch", "-q", "-c", f"fm/{ID_T1}")
    commit(slot, "Makefile", "all:\n        echo build\n", "the task's Makefile")
    extra = {"pr": "https://example.invalid/o/r/pull/7"} if with_pr else {}
    fleet.record(ID_T1, slot, extra=extra)
    gh = fleet.root / "gh"
    head = git(other, "rev-parse", landed)
    gh.write_text(f"#!/bin/sh\necho '{json.dumps({'state': 'MERGED', 'headRefOid': head})}'\n")
    gh.chmod(0o755)
    before = fleet.snapshot(slot)
    branch = git(fleet.project, "rev-parse", f"refs/heads/fm/{ID_T1}")
    code, doc = teardown(fleet, ID_T1, FM_GH_BIN=str(gh))
    assert (code, doc["verdict"]) == (3, "unlanded"), doc
    assert fleet.snapshot(slot) == before
    assert git(fleet.project, "rev-parse", f"refs/heads/fm/{ID_T1}") == branch
    assert fleet.treehouse_calls() == []


def test_an_unleased_slot_merged_into_origin_but_not_a_stale_local_main_is_left_to_the_pool(
    fleet: Fleet,
) -> None:
    """The pool resets to whichever of local and origin's main is ahead: origin's here, so
    a slot whose HEAD origin/main has is reused as it is, though local main is stale."""
    task = tid("reuse")
    s = fleet.slot(2, leased=False)
    fleet.task(task, s, "dead")
    commit(s, "feature.txt", "landed\n", "feature, pushed to main")
    git(s, "push", "-q", "origin", "HEAD:main")
    assert git(fleet.project, "rev-parse", "main") != git(s, "rev-parse", "HEAD")
    code, doc = teardown(fleet, task)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert _steps(doc)["pool"][0] == "skipped", doc["steps"]
    assert [c for c in fleet.treehouse_calls() if c["argv"][0] == "return"] == []


def test_a_branch_held_by_a_rebase_update_refs_elsewhere_is_kept(fleet: Fleet) -> None:
    """Another worktree runs `git rebase -i --update-refs` over a branch stacked on
    fm/<task>, stopped at its first commit: git will move fm/<task> when it finishes, so the
    branch step keeps it, with a warning, and that rebase still completes."""
    from tests.test_attacks_links import branch_task, run_paused_at_pool, steps

    task, _, branch = branch_task(fleet, commits=2)
    who = ["-c", "user.name=O", "-c", "user.email=o@example.invalid"]
    doc = run_paused_at_pool(
        fleet,
        task,
        [
            ["switch", "-q", "-c", "stacked", branch],
            [*who, "commit", "-q", "--allow-empty", "-m", "stacked on the task"],
            [*who, "-c", "sequence.editor=sed -i s/^pick/edit/", "rebase", "-q", "-i",
             "--update-refs", "main"],
        ],
    )  # fmt: skip
    other = fleet.root / "other-wt"
    gitdir = Path(git(other, "rev-parse", "--absolute-git-dir"))
    held = (gitdir / "rebase-merge" / "update-refs").read_text().splitlines()
    assert held[0] == f"refs/heads/{branch}", held
    outcome, detail = steps(doc)["branch"]
    assert outcome == "skipped" and str(other) in detail and "--update-refs" in detail, detail
    assert any(branch in w and "--update-refs" in w for w in doc["warnings"])  # type: ignore[attr-defined]
    assert git(fleet.project, "branch", "--list", branch).strip().endswith(branch)
    r = subprocess.run(
        ["git", "-C", str(other), *who, "-c", "core.editor=true", "rebase", "--continue"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_loose_end_branches_advise_saving_unmerged_work_and_skip_branches_in_use(
    fleet: Fleet, slot: Path
) -> None:
    """The audit's loose task branches: a branch at main may be deleted; one holding commits
    of its own is to be saved or landed first, and no `branch -D` is offered; branches that
    another worktree rebases, bisects from or will move for a `rebase --update-refs` are in
    use, not loose."""
    merged, mine, rebased, bisected, stacked = (
        f"fm/{tid(n)}" for n in ("merged", "mine", "rebased", "bisected", "stacked")
    )
    edit = ["-c", "sequence.editor=sed -i s/^pick/edit/"]
    git(fleet.project, "branch", merged, "main")

    def worktree(name: str, branch: str) -> Path:
        path = fleet.root / name
        git(fleet.project, "worktree", "add", "-q", "-b", branch, str(path), "main")
        commit(path, f"{name}.txt", f"{name}\n", f"work of {name}")
        return path

    git(worktree("wt-mine", mine), "switch", "-q", "--detach")
    git(worktree("wt-rebased", rebased), *edit, "rebase", "-q", "-i", "HEAD~1")
    git(worktree("wt-bisected", bisected), "bisect", "start", bisected, "main")
    wt = worktree("wt-stacked", stacked)
    git(wt, "switch", "-q", "-c", "on-top")
    commit(wt, "top.txt", "top\n", "on top")
    git(wt, *edit, "rebase", "-q", "-i", "--update-refs", "main")
    held = Path(git(wt, "rev-parse", "--absolute-git-dir")) / "rebase-merge" / "update-refs"
    assert held.read_text().splitlines()[0] == f"refs/heads/{stacked}"

    code, doc = fleet.fm_json("teardown", "--dry-run")
    assert code == 0, doc
    branches = {o["id"]: o["detail"] for o in doc["orphans"] if o["kind"] == "branch"}
    assert set(branches) == {merged, mine}, doc["orphans"]
    assert f"branch -D {merged}" in branches[merged]
    assert "save or land it first" in branches[mine]
    assert "-D" not in branches[mine]
