"""`fm restore` (spec §12) end to end on real git: list the saves `fm teardown --force`
made, bring one back byte for byte as uncommitted work, never write into an existing
directory, never move the ref, and refuse a journal that is not a regular file.

The CLI is not wired yet, so `restore()` runs in a subprocess exactly as `fm restore` will
(`run`); when it is, `run` becomes `fleet.fm("restore", ...)`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fm_teardown.act.discard import save_discarded
from fm_teardown.model.records import Record
from tests.fleet import Fleet, files_of, git, tid, tree_hash

# Task ids of their own: /tmp/fm-<id> is global, and other runs on this machine use t1, t2.
TASK = tid("rs")
OTHER = f"{TASK}x"
STATUS = ("status", "--porcelain=v1", "--untracked-files=all", "--no-renames")


def run(
    fleet: Fleet,
    task: str,
    *,
    to: str | Path | None = None,
    ref: str | None = None,
    project: str | Path | None = None,
    json_out: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`fm restore TASK [--to DIR] [--ref REF] [--project DIR] [--json]`."""
    args = ["restore", task]
    if to is not None:
        args += ["--to", str(to)]
    if ref is not None:
        args += ["--ref", ref]
    if project is not None:
        args += ["--project", str(project)]
    if json_out:
        args.append("--json")
    return subprocess.run(
        [sys.executable, "-m", "fm_teardown", *args],
        capture_output=True,
        text=True,
        cwd=fleet.fm_home,
        env=env or fleet.env(),
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def run_json(fleet: Fleet, task: str, **kw: Any) -> tuple[int, dict[str, Any]]:
    r = run(fleet, task, json_out=True, **kw)
    try:
        doc = json.loads(r.stdout)
    except ValueError as exc:
        raise AssertionError(f"not one JSON object: {r.stdout!r} / {r.stderr!r}") from exc
    assert isinstance(doc, dict)
    assert doc["schema"] == "fm-teardown/1" and doc["restore"] is True and doc["task"] == task
    return r.returncode, doc


def worktrees(fleet: Fleet) -> list[str]:
    out = git(fleet.project, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def refs(fleet: Fleet, task: str = TASK) -> str:
    """Every save of `task` with its sha, and the reflogs: what restore must never change."""
    listing = git(fleet.project, "for-each-ref", f"refs/fm/discarded/{task}/")
    logs = [
        git(fleet.project, "reflog", "show", "--format=%H %gs", line.split()[-1])
        for line in listing.splitlines()
    ]
    return listing + "\n" + "\n".join(logs)


def make_dirty(slot: Path) -> None:
    """Every kind of work a slot can hold: an unpushed commit, modified tracked files (one
    binary), a deleted tracked file, untracked files (one executable, one binary, one in a
    new directory) and an ignored file (not saved)."""
    (slot / "feature.txt").write_text("committed, unpushed\n")
    (slot / "doomed.txt").write_text("tracked, then deleted\n")
    git(slot, "add", "feature.txt", "doomed.txt")
    git(slot, "commit", "-q", "-m", "feature")
    (slot / "README").write_bytes(b"edited \x00 binary\n")
    (slot / "feature.txt").write_text("committed, then edited\n")
    (slot / "doomed.txt").unlink()
    (slot / "new").mkdir()
    (slot / "new" / "untracked.txt").write_text("untracked\n")
    (slot / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(slot / "tool.sh", 0o755)
    (slot / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (slot / "out.cache").write_text("ignored: not saved\n")


@pytest.fixture
def slot(fleet: Fleet) -> Path:
    s = fleet.slot(1, holder=TASK)
    fleet.task(TASK, s, "dead")
    return s


def hand_save(fleet: Fleet, task: str, stamp: datetime, files: dict[str, str]) -> str:
    """A save made by fm's own discard code (without a teardown, hence without a journal
    line), from a throw-away slot holding `files` as untracked work."""
    n = 10 + len(list(fleet.pool.glob("*")))
    wt = fleet.slot(n, managed=False)
    for name, text in files.items():
        (wt / name).write_text(text)
    record = Record(
        task_id=task,
        meta_path=str(fleet.state / f"{task}.meta"),
        mtime_ns=0,
        window=f"firstmate:fm-{task}",
        session="firstmate",
        worktree=str(wt),
        project=str(fleet.project),
    )
    saved = save_discarded(record, stamp)
    git(fleet.project, "worktree", "remove", "--force", str(wt))
    return saved.ref


# -- (1) a forced teardown, then the work comes back ---------------------------------------


def test_force_teardown_then_restore_gives_the_work_back_byte_identical(
    fleet: Fleet, slot: Path
) -> None:
    make_dirty(slot)
    head = git(slot, "rev-parse", "HEAD")
    before = files_of(slot)
    status = sorted(git(slot, *STATUS).splitlines())
    r = fleet.fm("teardown", TASK, "--force")
    assert r.returncode == 0, r.stderr
    assert not (slot / "new").exists()  # the slot was returned: the work is gone from it
    ref = json.loads((fleet.data / "teardown-log.jsonl").read_text().splitlines()[-1])[
        "discarded_ref"
    ]

    # Listing: the save, found through the journal line that made it.
    code, doc = run_json(fleet, TASK)
    assert code == 0, doc
    assert doc["project"] == str(fleet.project) and doc["projects"] == [str(fleet.project)]
    [save] = doc["saves"]
    assert save["ref"] == ref and save["head"] == head
    assert save["commit"] == git(fleet.project, "rev-parse", ref)
    assert save["files"] == len(status)  # every change and untracked file, one path each
    assert save["time"].startswith(ref.rsplit("/", 1)[1][:4])
    listing = run(fleet, TASK)
    assert listing.returncode == 0, listing.stderr
    assert ref in listing.stdout and "newest first" in listing.stdout
    command = listing.stdout.split("to restore the newest: ", 1)[1].splitlines()[0]
    dest = Path(command.split("--to ", 1)[1])
    assert command == f"fm restore {TASK} --to {dest}" and not dest.exists()

    # Restoring: the exact command the listing printed.
    kept = refs(fleet)
    r = run(fleet, TASK, to=dest)
    assert r.returncode == 0, r.stderr
    assert f"restored {ref} into {dest}" in r.stdout
    assert f"HEAD:    {head}" in r.stdout and "worktree remove" in r.stdout
    for line in ("modified   README", "deleted    doomed.txt", "untracked  new/untracked.txt"):
        assert line in r.stdout, r.stdout
    expected = {p: v for p, v in before.items() if p != "out.cache"}
    assert files_of(dest) == expected  # bytes and exec bits of every file
    assert os.access(dest / "tool.sh", os.X_OK)
    assert not (dest / "out.cache").exists()  # ignored: never saved
    assert git(dest, "rev-parse", "HEAD") == head  # the unpushed commit included
    assert sorted(git(dest, *STATUS).splitlines()) == status  # uncommitted, untracked again
    assert git(dest, "diff", "--cached", "--name-only") == ""  # nothing staged
    assert refs(fleet) == kept  # the ref and its reflog are untouched
    assert str(dest) in worktrees(fleet)


def test_restore_json_names_what_came_back(fleet: Fleet, slot: Path) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    dest = fleet.root / "back"
    code, doc = run_json(fleet, TASK, to=dest)
    assert code == 0, doc
    assert doc["to"] == str(dest) and doc["project"] == str(fleet.project)
    assert doc["ref"].startswith(f"refs/fm/discarded/{TASK}/")
    assert sorted(doc["modified"]) == ["README", "feature.txt"]
    assert doc["deleted"] == ["doomed.txt"]
    assert sorted(doc["untracked"]) == ["blob.bin", "new/untracked.txt", "tool.sh"]
    assert doc["ignored"] == [] and doc["warnings"] == []


# -- (2) several saves ------------------------------------------------------------------------


def test_saves_are_listed_newest_first_and_ref_picks_an_older_one(fleet: Fleet, slot: Path) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    older = hand_save(fleet, TASK, datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), {"old.txt": "o\n"})
    assert older == f"refs/fm/discarded/{TASK}/20200102T030405Z"
    code, doc = run_json(fleet, TASK)
    assert code == 0
    names = [s["ref"] for s in doc["saves"]]
    assert len(names) == 2 and names[1] == older and names[0] > older
    listing = run(fleet, TASK).stdout
    assert listing.index(names[0]) < listing.index(older)
    assert "--ref" in listing  # how to pick an older one

    main = git(fleet.project, "rev-parse", "main")
    for i, given in enumerate((older, "20200102T030405Z")):  # the full name or the stamp
        dest = fleet.root / f"older{i}"
        code, doc = run_json(fleet, TASK, to=dest, ref=given)
        assert code == 0, doc
        assert doc["ref"] == older and doc["untracked"] == ["old.txt"]
        assert git(dest, "rev-parse", "HEAD") == main
        assert (dest / "old.txt").read_text() == "o\n" and not (dest / "new").exists()


# -- (3) never into an existing directory ---------------------------------------------------


@pytest.mark.parametrize("kind", ["empty", "full", "file", "dangling-link", "no-parent"])
def test_an_existing_directory_is_never_written_into(fleet: Fleet, slot: Path, kind: str) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    dest = fleet.root / "there"
    if kind == "empty":
        dest.mkdir()
    elif kind == "full":
        dest.mkdir()
        (dest / "mine.txt").write_text("keep\n")
    elif kind == "file":
        dest.write_text("a file\n")
    elif kind == "dangling-link":
        dest.symlink_to(fleet.root / "nowhere")
    else:
        dest = fleet.root / "missing" / "there"
    state = tree_hash(fleet.root / "there") if os.path.lexists(dest) else "absent"
    kept, trees = refs(fleet), worktrees(fleet)
    r = run(fleet, TASK, to=dest)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("fm: ") and "Traceback" not in r.stderr
    if kind == "no-parent":
        assert "does not exist" in r.stderr and not (fleet.root / "missing").exists()
    else:
        assert "never writes into an existing directory" in r.stderr
        assert os.path.lexists(dest) and tree_hash(fleet.root / "there") == state
    assert (refs(fleet), worktrees(fleet)) == (kept, trees)
    code, doc = run_json(fleet, TASK, to=dest)
    assert code == 2 and doc["exit_code"] == 2 and doc["reasons"] and "hints" in doc


# -- (4) where the project comes from --------------------------------------------------------


def test_no_journal_and_no_project_is_exit_2_with_the_hint(fleet: Fleet) -> None:
    hand_save(fleet, TASK, datetime(2026, 1, 1, tzinfo=UTC), {"a.txt": "a\n"})
    assert not (fleet.data / "teardown-log.jsonl").exists()
    r = run(fleet, TASK)
    assert r.returncode == 2
    assert "cannot tell which project" in r.stderr
    assert f"hint: fm restore {TASK} --project <project checkout>" in r.stderr
    code, doc = run_json(fleet, TASK, to=fleet.root / "x")
    assert code == 2 and doc["hints"] == [f"fm restore {TASK} --project <project checkout>"]
    assert not (fleet.root / "x").exists()


def test_project_flag_works_without_a_journal(fleet: Fleet) -> None:
    ref = hand_save(fleet, TASK, datetime(2026, 1, 1, tzinfo=UTC), {"a.txt": "a\n"})
    code, doc = run_json(fleet, TASK, project=fleet.project)
    assert code == 0 and [s["ref"] for s in doc["saves"]] == [ref]
    listing = run(fleet, TASK, project=fleet.project)
    assert f"--project {fleet.project}" in listing.stdout  # the command says it too
    dest = fleet.root / "back"
    code, doc = run_json(fleet, TASK, to=dest, project=fleet.project)
    assert code == 0, doc
    assert (dest / "a.txt").read_text() == "a\n" and doc["untracked"] == ["a.txt"]


def test_project_flag_must_be_a_git_repository(fleet: Fleet) -> None:
    (fleet.root / "plain").mkdir()
    for where in (fleet.root / "plain", fleet.root / "absent"):
        r = run(fleet, TASK, project=where)
        assert r.returncode == 2 and "is not a git repository" in r.stderr, r.stderr


def test_no_saves_is_not_an_error_but_nothing_to_restore_is(fleet: Fleet) -> None:
    r = run(fleet, TASK, project=fleet.project)
    assert r.returncode == 0 and f"no saves of task {TASK}" in r.stdout
    code, doc = run_json(fleet, TASK, project=fleet.project)
    assert code == 0 and doc["saves"] == [] and doc["restore_command"] is None
    r = run(fleet, TASK, project=fleet.project, to=fleet.root / "x")
    assert r.returncode == 2 and "nothing to restore" in r.stderr
    assert not (fleet.root / "x").exists()


def test_an_old_journal_line_without_project_asks_for_it(fleet: Fleet) -> None:
    line = {"task": TASK, "verdict": "proceed", "discarded_ref": f"refs/fm/discarded/{TASK}/x"}
    (fleet.data / "teardown-log.jsonl").write_text(json.dumps(line) + "\n")
    r = run(fleet, TASK)
    assert r.returncode == 2 and "before v1.2" in r.stderr
    assert f"hint: fm restore {TASK} --project" in r.stderr


def test_saves_in_several_projects_are_grouped_and_to_needs_project(
    fleet: Fleet, slot: Path
) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    other = fleet.root / "other"
    git(fleet.root, "clone", "-q", str(fleet.origin), str(other))
    main = git(other, "rev-parse", "HEAD")
    tree = git(other, "rev-parse", "HEAD^{tree}")
    sha = git(
        other, "commit-tree", tree, "-p", main, "-m", f"fm teardown: unlanded work of task {TASK}"
    )
    git(other, "update-ref", f"refs/fm/discarded/{TASK}/20250101T000000Z", sha)
    with (fleet.data / "teardown-log.jsonl").open("a") as fh:
        fh.write("not json\n")  # a torn line is skipped
        line = {"task": TASK, "discarded_ref": f"refs/fm/discarded/{TASK}/20250101T000000Z"}
        fh.write(json.dumps({**line, "project": str(other)}) + "\n")
    code, doc = run_json(fleet, TASK)
    assert code == 0 and doc["project"] is None
    assert doc["projects"] == [str(other), str(fleet.project)]  # newest journal line first
    assert [s["project"] for s in doc["saves"]] == [str(other), str(fleet.project)]
    listing = run(fleet, TASK).stdout
    assert f"in {other} (from the journal)" in listing and str(fleet.project) in listing
    dest = fleet.root / "back"
    r = run(fleet, TASK, to=dest)
    assert r.returncode == 2 and "more than one project" in r.stderr and not dest.exists()
    assert f"--project {fleet.project}" in r.stderr
    code, doc = run_json(fleet, TASK, to=dest, project=fleet.project)
    assert code == 0 and doc["project"] == str(fleet.project)
    # A --ref that only one project holds is not ambiguous.
    code, doc = run_json(fleet, TASK, to=fleet.root / "b2", ref="20250101T000000Z")
    assert code == 0 and doc["project"] == str(other)


# -- (5) a ref that is not a save of the task ------------------------------------------------


def test_ref_must_be_one_of_the_tasks_saves(fleet: Fleet, slot: Path) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    theirs = hand_save(fleet, OTHER, datetime(2026, 1, 1, tzinfo=UTC), {"a.txt": "a\n"})
    ours = git(fleet.project, "for-each-ref", "--format=%(refname)", f"refs/fm/discarded/{TASK}/")
    dest = fleet.root / "back"
    for bad in (theirs, "20000101T000000Z", "main", "HEAD", ours.split("/")[-1] + "x"):
        r = run(fleet, TASK, to=dest, ref=bad)
        assert r.returncode == 2, (bad, r.stderr)
        assert (
            f"is not a save of task {TASK}" in r.stderr and f"hint: the saves: {ours}" in r.stderr
        )
        assert not dest.exists()
    r = run(fleet, TASK, ref=ours)  # --ref without --to
    assert r.returncode == 2 and "--to" in r.stderr


def test_invalid_task_id_is_exit_2(fleet: Fleet) -> None:
    for bad in ("", "../t1", "a/b", ".hidden"):
        code, doc = run_json(fleet, bad, project=fleet.project)
        assert code == 2 and "invalid task id" in doc["reasons"][0], doc


# -- (6) a planted journal -------------------------------------------------------------------


def test_a_fifo_journal_is_refused_without_hanging(fleet: Fleet) -> None:
    os.mkfifo(fleet.data / "teardown-log.jsonl")
    r = run(fleet, TASK)  # run() has a timeout: a blocking open would fail the test
    assert r.returncode == 5, r.stderr
    assert "refusing to read the journal" in r.stderr and "FIFO" in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if not ln.startswith("hint:")]) == 1
    code, doc = run_json(fleet, TASK)
    assert code == 5 and doc["exit_code"] == 5
    # --project does not read the journal at all.
    assert run(fleet, TASK, project=fleet.project).returncode == 0


def test_a_symlinked_journal_is_refused(fleet: Fleet, slot: Path) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    journal = fleet.data / "teardown-log.jsonl"
    real = fleet.root / "elsewhere.jsonl"
    journal.rename(real)
    journal.symlink_to(real)
    r = run(fleet, TASK)
    assert r.returncode == 5 and "symlink" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


# -- leaving nothing half-made ---------------------------------------------------------------


def test_a_failing_worktree_add_leaves_nothing_behind(fleet: Fleet, slot: Path) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    # fm runs no hook a repository names (spec §15.1): the failure comes from git itself,
    # here a `git` on PATH that refuses `worktree add`.
    wrapper = fleet.root / "failing-git"
    wrapper.mkdir()
    real = shutil.which("git")
    (wrapper / "git").write_text(
        '#!/bin/sh\ncase " $* " in *" worktree add "*) echo "worktree says no" >&2; exit 1;; esac\n'
        f'exec {real} "$@"\n'
    )
    os.chmod(wrapper / "git", 0o755)
    env = fleet.env(PATH=f"{wrapper}:{fleet.env()['PATH']}")
    kept, trees = refs(fleet), worktrees(fleet)
    dest = fleet.root / "back"
    r = run(fleet, TASK, to=dest, env=env)
    assert r.returncode == 1, r.stderr
    assert "git worktree add failed" in r.stderr and "nothing was restored" in r.stderr
    assert not os.path.lexists(dest)
    assert (refs(fleet), worktrees(fleet)) == (kept, trees)


def test_a_journal_project_that_is_gone_is_a_warning_unless_it_is_the_only_one(
    fleet: Fleet, slot: Path
) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    journal = fleet.data / "teardown-log.jsonl"
    line = {"task": TASK, "discarded_ref": f"refs/fm/discarded/{TASK}/20250101T000000Z"}
    with journal.open("a") as fh:
        fh.write(json.dumps({**line, "project": str(fleet.root / "moved")}) + "\n")
    r = run(fleet, TASK)
    assert r.returncode == 0 and f"refs/fm/discarded/{TASK}/" in r.stdout
    assert f"warning: the project {fleet.root / 'moved'}" in r.stderr
    journal.write_text(json.dumps({**line, "project": str(fleet.root / "moved")}) + "\n")
    r = run(fleet, TASK)
    assert r.returncode == 2 and "is not a git repository now" in r.stderr
    assert f"hint: fm restore {TASK} --project <project checkout>" in r.stderr


def test_a_relative_to_is_taken_from_the_current_directory_and_the_suggestion_is_free(
    fleet: Fleet, slot: Path
) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    code, doc = run_json(fleet, TASK, to="back")
    assert code == 0 and doc["to"] == str(fleet.fm_home / "back")
    assert (fleet.fm_home / "back" / "tool.sh").exists()
    _, listed = run_json(fleet, TASK)
    suggested = listed["restore_command"].split("--to ", 1)[1]
    assert run_json(fleet, TASK, to=suggested)[0] == 0
    _, listed = run_json(fleet, TASK)
    assert listed["restore_command"].endswith(f"{suggested}-2")  # that one exists now


def test_an_interrupt_while_restoring_leaves_nothing_behind(fleet: Fleet, slot: Path) -> None:
    make_dirty(slot)
    assert fleet.fm("teardown", TASK, "--force").returncode == 0
    # Ctrl-C reaches fm (git's parent) while git is adding the worktree: a `git` on PATH
    # that signals its parent first (fm runs no hook a repository names, spec §15.1).
    wrapper = fleet.root / "interrupting-git"
    wrapper.mkdir()
    (wrapper / "git").write_text(
        '#!/bin/sh\ncase " $* " in *" worktree add "*) kill -INT "$PPID";; esac\n'
        f'exec {shutil.which("git")} "$@"\n'
    )
    os.chmod(wrapper / "git", 0o755)
    env = fleet.env(PATH=f"{wrapper}:{fleet.env()['PATH']}")
    kept, trees = refs(fleet), worktrees(fleet)
    dest = fleet.root / "back"
    code, doc = run_json(fleet, TASK, to=dest, env=env)
    assert code == 130, doc
    assert "interrupted; nothing was restored" in doc["reasons"][0]
    assert not os.path.lexists(dest)
    assert (refs(fleet), worktrees(fleet)) == (kept, trees)
