"""Held-out attacks, round three, on real fleets: links into other tasks' files, branches in
use by an operation in progress, restore targets reached through links, the unleased return.

Each test builds the attack's world (real tmux on a private socket, real git worktrees in a
treehouse pool, real processes, the treehouse stand-in) and asserts what the operator sees and
that the other task's files, tree and branch are as they were.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

from tests.fleet import Fleet, git, tid, tree_hash


def finished(fleet: Fleet, name: str, n: int) -> tuple[str, Path]:
    """A task whose work is done: dead endpoint, clean slot at main, its own lease."""
    task = tid(name)
    slot = fleet.slot(n, holder=task)
    fleet.task(task, slot, "dead", extra={"treehouse_lease_holder": task})
    return task, slot


def steps(doc: dict[str, object]) -> dict[str, tuple[str, str]]:
    return {
        str(s["step"]): (str(s["outcome"]), str(s["detail"]))
        for s in doc["steps"]  # type: ignore[attr-defined]
    }


# -- files fm writes are never reached through a link -------------------------------------


def test_a_hard_linked_attribution_table_is_not_written(fleet: Fleet) -> None:
    """The table hard-linked to another task's live record: the row does not land in it."""
    t1, _ = finished(fleet, "t1", 1)
    other = fleet.task(tid("t2"), fleet.slot(2, holder=tid("t2")), "alive")
    before = other.meta.read_bytes()
    os.link(other.meta, fleet.data / "cost-attribution.tsv")
    r = fleet.fm("teardown", t1, "--json")
    doc = json.loads(r.stdout)
    assert (r.returncode, doc["verdict"]) == (0, "proceed"), r.stderr
    outcome, detail = steps(doc)["attribution"]
    assert outcome == "skipped" and "hard links" in detail
    warning = f"could not append AI effort attribution for task {t1}; teardown will continue"
    assert warning in doc["warnings"]
    assert other.meta.read_bytes() == before
    assert not (fleet.state / f"{t1}.meta").exists()  # the teardown went on


def test_a_hard_linked_attribution_lock_is_not_opened_for_writing(fleet: Fleet) -> None:
    t1, _ = finished(fleet, "t1", 1)
    other = fleet.task(tid("t2"), fleet.slot(2, holder=tid("t2")), "alive")
    os.link(other.meta, fleet.data / ".cost-attribution.lock")
    r = fleet.fm("teardown", t1, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert (
        steps(doc)["attribution"][0] == "skipped" and "hard links" in steps(doc)["attribution"][1]
    )
    assert not (fleet.data / "cost-attribution.tsv").exists()


def test_a_hard_linked_journal_is_not_appended_to(fleet: Fleet) -> None:
    """The journal hard-linked to a record without a final newline: the journal line would
    glue onto its `treehouse_lease=` line and change that task's lease id."""
    t1, _ = finished(fleet, "t1", 1)
    t2 = tid("t2")
    meta = fleet.state / f"{t2}.meta"
    fleet.slot(2, holder="someone", lease_id="ab" * 16)
    fleet.task(t2, fleet.pool / "2" / "project", "dead")
    meta.write_bytes(meta.read_bytes() + b"treehouse_lease=" + b"ab" * 16)  # no final newline
    before = meta.read_bytes()
    dry_before = fleet.fm_json("teardown", t2, "--dry-run")
    os.link(meta, fleet.data / "teardown-log.jsonl")
    # The intent line cannot be written there: the real run refuses before acting...
    r = fleet.fm("teardown", t1)
    assert r.returncode == 5, r.stderr
    assert "could not append to the journal" in r.stderr and "hard links" in r.stderr
    assert (fleet.state / f"{t1}.meta").exists()
    assert meta.read_bytes() == before
    # ...and with --no-journal it goes on without writing through the link.
    r = fleet.fm("teardown", t1, "--no-journal")
    assert r.returncode == 0, r.stderr
    assert not (fleet.state / f"{t1}.meta").exists()
    assert meta.read_bytes() == before
    # t2's lease id is as it was (its dry run, the journal aside: the dry run also predicts
    # the refusal a hard-linked journal makes, spec §15.9).
    again = fleet.fm_json("teardown", t2, "--dry-run", "--no-journal")
    assert again[1]["verdict"] == dry_before[1]["verdict"]


def test_a_symlinked_journal_is_not_followed(fleet: Fleet) -> None:
    t1, _ = finished(fleet, "t1", 1)
    target = fleet.root / "elsewhere.txt"
    target.write_bytes(b"keep\n")
    (fleet.data / "teardown-log.jsonl").symlink_to(target)
    r = fleet.fm("teardown", t1)
    assert r.returncode == 5, r.stderr
    assert "could not append to the journal" in r.stderr
    assert (fleet.state / f"{t1}.meta").exists()
    assert target.read_bytes() == b"keep\n"
    r = fleet.fm("teardown", t1, "--no-journal")
    assert r.returncode == 0, r.stderr
    assert target.read_bytes() == b"keep\n"


def test_a_journal_without_a_final_newline_gets_one_before_fms_line(fleet: Fleet) -> None:
    """fm's line is never glued onto the last one, and `fm restore` still finds the project
    from the journal."""
    t1 = tid("t1")
    slot = fleet.slot(1, holder=t1)
    fleet.task(t1, slot, "dead", extra={"treehouse_lease_holder": t1})
    (slot / "work.txt").write_text("unlanded\n")
    journal = fleet.data / "teardown-log.jsonl"
    journal.write_bytes(b'{"note": "written by another tool, no newline"}')
    r = fleet.fm("teardown", t1, "--force")
    assert r.returncode == 0, r.stderr
    lines = journal.read_bytes().split(b"\n")
    assert lines[0] == b'{"note": "written by another tool, no newline"}'
    assert lines[-1] == b"" and json.loads(lines[1])["task"] == t1
    listed = fleet.fm("restore", t1, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["project"] == str(fleet.project)


def test_restore_skips_an_overlong_journal_line_without_holding_it(fleet: Fleet) -> None:
    """A line far longer than any fm writes is skipped in pieces; the lines after it count."""
    t1 = tid("t1")
    slot = fleet.slot(1, holder=t1)
    fleet.task(t1, slot, "dead", extra={"treehouse_lease_holder": t1})
    (slot / "work.txt").write_text("unlanded\n")
    journal = fleet.data / "teardown-log.jsonl"
    with journal.open("wb") as f:  # 512 MiB of NULs and no newline, sparse: instant to make
        f.truncate(512 << 20)
    assert fleet.fm("teardown", t1, "--force").returncode == 0
    # The address space capped well below the junk line: reading it whole cannot fit.
    r = subprocess.run(
        [sys.executable, "-m", "fm_teardown", "restore", t1, "--json"],
        capture_output=True,
        text=True,
        cwd=fleet.fm_home,
        env=fleet.env(),
        timeout=120,
        check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (384 << 20, 384 << 20)),
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["project"] == str(fleet.project)


def test_a_hard_linked_hook_auth_entry_is_left(fleet: Fleet) -> None:
    t1, _ = finished(fleet, "t1", 1)
    entries = fleet.home / ".kimi-code" / "fm-turn-end.d"
    entries.mkdir(parents=True)
    precious = fleet.root / "precious"
    precious.write_text("another task's\n")
    os.link(precious, entries / "tok-k1")
    (fleet.state / f"{t1}.kimi-turnend-token").write_text("tok-k1\n")
    r = fleet.fm("teardown", t1)
    assert r.returncode == 0, r.stderr
    assert (entries / "tok-k1").exists() and "hard links" in r.stderr


def test_a_hard_linked_slot_claim_is_left(fleet: Fleet) -> None:
    t1, slot = finished(fleet, "t1", 1)
    claim = slot.parent / ".fm-slot-owner"
    claim.write_text(f"task={t1}\nhome={fleet.fm_home}\n")
    os.link(claim, fleet.root / "claim-copy")
    r = fleet.fm("teardown", t1, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert steps(doc)["claim"][0] == "skipped" and "hard links" in steps(doc)["claim"][1]
    assert claim.exists()
    assert git(slot, "status", "--porcelain") == ""


# -- a branch in use by an operation in progress is kept ----------------------------------


def branch_task(fleet: Fleet, commits: int = 1) -> tuple[str, Path, str]:
    """A finished task on its own pushed branch `fm/<task>` (landed: on a remote branch)."""
    task = tid("t1")
    slot = fleet.slot(1, holder=task)
    branch = f"fm/{task}"
    git(slot, "checkout", "-q", "-b", branch)
    for i in range(commits):
        (slot / "feature.txt").write_text(f"step {i}\n")
        git(slot, "add", "feature.txt")
        git(slot, "commit", "-q", "-m", f"feature {i}")
    git(slot, "push", "-q", "origin", branch)
    fleet.task(task, slot, "dead")
    return task, slot, branch


def run_paused_at_pool(fleet: Fleet, task: str, meanwhile: list[list[str]]) -> dict[str, object]:
    """Tear TASK down, running `meanwhile` (git commands in another worktree) right after the
    pool took the slot back (its reset detached the slot's HEAD)."""
    other = fleet.root / "other-wt"
    if not other.exists():
        git(fleet.project, "worktree", "add", "-q", "--detach", str(other), "main")
    proc, pause = fleet.fm_paused("after-pool", task)
    for argv in meanwhile:
        git(other, *argv, check=False)
    pause.unlink()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    doc: dict[str, object] = json.loads(out)
    return doc


def test_a_branch_being_rebased_in_another_worktree_is_kept(fleet: Fleet) -> None:
    task, _, branch = branch_task(fleet)
    other = fleet.root / "other-wt"
    git(fleet.project, "worktree", "add", "-q", "-b", "base", str(other), "main")
    (other / "feature.txt").write_text("the other side\n")
    git(other, "add", "feature.txt")
    git(other, "commit", "-q", "-m", "conflicting base")
    # Stops on a conflict: fm/<task> is the branch being rebased, HEAD is detached.
    doc = run_paused_at_pool(fleet, task, [["rebase", "base", branch]])
    assert (other / ".git").is_file()
    gitdir = Path(git(other, "rev-parse", "--absolute-git-dir"))
    assert (gitdir / "rebase-merge" / "head-name").read_text().strip() == f"refs/heads/{branch}"
    outcome, detail = steps(doc)["branch"]
    assert outcome == "skipped" and str(other) in detail and "rebasing" in detail
    assert any(str(other) in w and branch in w for w in doc["warnings"])  # type: ignore[attr-defined]
    assert git(fleet.project, "branch", "--list", branch).strip().endswith(branch)
    r = git(other, "rebase", "--abort", check=False)
    assert "cannot lock ref" not in r


def test_a_branch_bisected_from_in_another_worktree_is_kept(fleet: Fleet) -> None:
    task, _, branch = branch_task(fleet, commits=3)
    other = fleet.root / "other-wt"
    doc = run_paused_at_pool(
        fleet,
        task,
        [["switch", "-q", branch], ["bisect", "start", branch, "main"]],
    )
    gitdir = Path(git(other, "rev-parse", "--absolute-git-dir"))
    assert (gitdir / "BISECT_START").read_text().strip() == branch
    assert git(other, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached mid-bisect
    outcome, detail = steps(doc)["branch"]
    assert outcome == "skipped" and str(other) in detail and "bisecting" in detail
    assert git(fleet.project, "branch", "--list", branch).strip().endswith(branch)
    git(other, "bisect", "reset")
    assert git(other, "rev-parse", "--abbrev-ref", "HEAD") == branch


# -- an unleased slot the pool reuses as it is is not returned ------------------------------


def test_an_unleased_clean_merged_slot_is_left_to_the_pool(fleet: Fleet) -> None:
    """No lease facts, the slot unleased, clean, HEAD on main: no `treehouse return` (it could
    clear a lease granted meanwhile); the pool hands the slot out by itself."""
    t1 = tid("t1")
    slot = fleet.slot(1, leased=False)
    fleet.task(t1, slot, "dead")
    # The dry run cannot promise either outcome (the real run looks again under the slot
    # lock): its plan says both, so the real run never contradicts it.
    code, dry = fleet.fm_json("teardown", t1, "--dry-run")
    assert code == 0, dry
    planned = steps(dry)["pool"][1]
    assert planned.startswith(f"treehouse return {slot}"), planned
    assert "or no call at all if the slot is still unleased, clean and its HEAD merged" in planned
    code, doc = fleet.fm_json("teardown", t1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    outcome, detail = steps(doc)["pool"]
    assert outcome == "skipped" and "the pool reuses it as it is" in detail
    assert [c for c in fleet.treehouse_calls() if c["argv"][0] == "return"] == []
    assert not (fleet.state / f"{t1}.meta").exists()
    got = subprocess.run(
        [str(fleet.treehouse), "get", "--lease", "--lease-holder", "next", "--json", "--no-fetch"],
        cwd=fleet.project, env=fleet.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(got.stdout)["path"] == str(slot)


def test_a_branch_left_checked_out_in_a_slot_the_pool_reuses_is_said_to_be_there(
    fleet: Fleet,
) -> None:
    """The pool reuses the slot as it is, so TASK's branch stays checked out in TASK's own
    slot: kept, and said so (not "in another worktree"); the pool's next get resets it."""
    t1 = tid("t1")
    slot = fleet.slot(1, leased=False)
    git(slot, "switch", "-q", "-c", f"fm/{t1}")  # on main's commit: clean and merged
    fleet.task(t1, slot, "dead")
    code, doc = fleet.fm_json("teardown", t1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert steps(doc)["pool"][0] == "skipped"
    outcome, detail = steps(doc)["branch"]
    assert outcome == "skipped", doc["steps"]
    assert detail == (
        f"kept fm/{t1}: the slot, left to the pool as it is, still has it checked out "
        "(the pool's next get resets it)"
    )
    assert "another worktree" not in json.dumps(doc)
    assert git(slot, "rev-parse", "--abbrev-ref", "HEAD") == f"fm/{t1}"


def test_an_unleased_slot_whose_head_is_not_merged_is_still_returned(fleet: Fleet) -> None:
    """The pool would not hand it out (HEAD only on a pushed branch): the return goes on."""
    t1 = tid("t1")
    slot = fleet.slot(1, leased=False)
    (slot / "feature.txt").write_text("pushed, not merged\n")
    git(slot, "add", "feature.txt")
    git(slot, "commit", "-q", "-m", "feature")
    git(slot, "push", "-q", "origin", f"HEAD:refs/heads/fm/{t1}")
    git(slot, "fetch", "-q", "origin")
    fleet.task(t1, slot, "dead")
    code, doc = fleet.fm_json("teardown", t1)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert steps(doc)["pool"][0] == "done"
    [call] = [c for c in fleet.treehouse_calls() if c["argv"][0] == "return"]
    assert call["argv"] == ["return", str(slot)]


# -- restore never writes into or through a slot -------------------------------------------


def saved_task(fleet: Fleet) -> tuple[str, Path]:
    """A task torn down with --force (its unlanded work saved), and another task's live slot
    with uncommitted work of its own."""
    t1 = tid("t1")
    slot = fleet.slot(1, holder=t1)
    fleet.task(t1, slot, "dead", extra={"treehouse_lease_holder": t1})
    (slot / "work.txt").write_text("t1's unlanded work\n")
    assert fleet.fm("teardown", t1, "--force").returncode == 0
    t2 = tid("t2")
    live = fleet.slot(2, holder=t2)
    git(live, "switch", "-q", "-c", f"fm/{t2}")
    fleet.task(t2, live, "alive")
    (live / "README").write_text("t2's uncommitted change\n")
    return t1, live


def live_state(slot: Path) -> tuple[str, str, str, str]:
    return (
        tree_hash(slot),
        git(slot, "status", "--porcelain", "--untracked-files=all"),
        git(slot, "rev-parse", "HEAD"),
        git(slot, "symbolic-ref", "-q", "HEAD", check=False),
    )


def test_restore_into_a_live_slot_is_refused(fleet: Fleet) -> None:
    t1, live = saved_task(fleet)
    before = live_state(live)
    link = fleet.root / "into-slot"
    link.symlink_to(live)
    for to in (live / "restored", link / "restored", live.parent / "restored", fleet.project / "r"):
        r = fleet.fm("restore", t1, "--to", str(to))
        assert r.returncode == 2, (to, r.stdout, r.stderr)
        assert "never writes into a slot" in r.stderr
        assert not os.path.lexists(to)
    assert live_state(live) == before


def test_restore_through_a_link_switched_to_a_live_slot_never_acts_there(fleet: Fleet) -> None:
    """A link in the target path flips between an empty directory and another task's live
    slot while fm restores: git runs only in the directory fm created, the live slot is as it
    was, and every restore that succeeded is in the empty directory."""
    t1, live = saved_task(fleet)
    before = live_state(live)
    empty = fleet.root / "empty"
    empty.mkdir()
    link = fleet.root / "flip"
    link.symlink_to(empty)
    stop = threading.Event()

    def flip() -> None:
        tmp = fleet.root / "flip.tmp"
        while not stop.is_set():
            for target in (live, empty):
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
                tmp.symlink_to(target)
                os.replace(tmp, link)

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        codes = [fleet.fm("restore", t1, "--to", str(link / f"r{i}")).returncode for i in range(8)]
    finally:
        stop.set()
        flipper.join()
    assert set(codes) <= {0, 2}, codes
    assert live_state(live) == before
    made = sorted(p.name for p in empty.iterdir())
    assert made == [f"r{i}" for i, c in enumerate(codes) if c == 0]
    for name in made:
        assert (empty / name / "work.txt").read_text() == "t1's unlanded work\n"


def test_restore_into_a_tasks_temp_dir_or_a_recorded_tree_is_refused(fleet: Fleet) -> None:
    """Another task's temp dir (`/tmp/fm-<id>`, whose teardown would end what runs there and
    remove it) and trees a record names outside the pool are never restore targets."""
    t1, live = saved_task(fleet)
    before = live_state(live)
    bravo = tid("bravo")
    tmp = fleet.make_tasktmp(bravo)
    elsewhere = fleet.root / "elsewhere"  # a task's worktree and project outside the pool
    elsewhere.mkdir()
    fleet.record(
        bravo,
        elsewhere,
        lines=[
            f"window=firstmate:fm-{bravo}",
            f"worktree={elsewhere}",
            f"project={elsewhere}",
            f"tasktmp={tmp}",
        ],
    )
    for to in (tmp / "restored", elsewhere / "restored", Path(f"/tmp/fm-{tid('nobody')}-r")):
        r = fleet.fm("restore", t1, "--to", str(to))
        assert r.returncode == 2, (to, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) <= 2, r.stderr  # one line (and its hint)
        assert "never writes into a slot" in r.stderr
        assert not os.path.lexists(to)
    assert list(tmp.iterdir()) == [] and list(elsewhere.iterdir()) == []
    assert live_state(live) == before


# -- the sidecar sweep keeps what firstmate does not write -------------------------------------


def test_an_operators_backup_beside_a_record_is_kept_and_listed(fleet: Fleet) -> None:
    t1, _ = finished(fleet, "t1", 1)
    meta = fleet.state / f"{t1}.meta"
    kept = {f"{t1}.meta.bak": meta.read_bytes(), f"{t1}.meta~": b"an editor's copy\n"}
    for name, data in kept.items():
        (fleet.state / name).write_bytes(data)
    (fleet.state / f"{t1}.status").write_text("done\n")  # firstmate's sidecar: swept
    # The audit lists them as loose ends while the record is there.
    code, doc = fleet.fm_json("teardown", "--dry-run")
    assert code == 0, doc
    files = {o["id"]: o["detail"] for o in doc["orphans"] if o["kind"] == "file"}
    assert sorted(files) == sorted(kept), doc["orphans"]
    code, doc = fleet.fm_json("teardown", t1)
    assert code == 0, doc
    outcome, detail = steps(doc)["record"]
    assert outcome == "done"
    assert all(f"kept {', '.join(sorted(kept))}" in detail for _ in kept), detail
    assert not meta.exists() and not (fleet.state / f"{t1}.status").exists()
    for name, data in kept.items():
        assert (fleet.state / name).read_bytes() == data


# -- fm's own files are never written inside a slot or a task's temp dir ----------------------


def test_a_data_dir_linked_into_a_live_slot_gets_nothing(fleet: Fleet) -> None:
    """`$FM_HOME/data` is a link to a directory of another task's live slot: the journal, the
    cost table and its lock would be created in that task's tree. A real run refuses (the
    journal is needed, exit 5); with --no-journal it goes on and only warns about the cost
    row; nothing appears in the live slot."""
    t1, _ = finished(fleet, "t1", 1)
    t2 = tid("t2")
    live = fleet.slot(2, holder=t2)
    fleet.task(t2, live, "alive")
    (live / "notes").mkdir()
    (live / "notes" / "t2.md").write_text("t2's notes\n")
    before = tree_hash(live)
    fleet.data.rmdir()
    fleet.data.symlink_to(live / "notes")
    r = fleet.fm("teardown", t1)
    assert r.returncode == 5, (r.stdout, r.stderr)
    assert "could not append to the journal" in r.stderr and f"inside the slot {live}" in r.stderr
    assert (fleet.state / f"{t1}.meta").exists()
    assert tree_hash(live) == before
    code, doc = fleet.fm_json("teardown", t1, "--no-journal")
    assert code == 0, doc
    outcome, detail = steps(doc)["attribution"]
    assert outcome == "skipped" and f"inside the slot {live}" in detail, detail
    assert not (fleet.state / f"{t1}.meta").exists()
    assert tree_hash(live) == before
    assert sorted(p.name for p in (live / "notes").iterdir()) == ["t2.md"]


def test_a_data_dir_inside_a_tasks_temp_dir_gets_nothing(fleet: Fleet) -> None:
    t1, _ = finished(fleet, "t1", 1)
    other, _ = finished(fleet, "other", 2)  # a task of the fleet: its temp dir is its work
    tmp = fleet.make_tasktmp(other)
    fleet.data.rmdir()
    r = fleet.fm("teardown", t1, env=fleet.env(FM_DATA_OVERRIDE=str(tmp / "data")))
    assert r.returncode == 5, (r.stdout, r.stderr)
    assert "inside the task temp dir" in r.stderr
    assert list(tmp.iterdir()) == [] and (fleet.state / f"{t1}.meta").exists()


def test_a_data_dir_in_a_tmp_dir_named_like_a_task_s_but_no_task_s_is_used(
    fleet: Fleet,
) -> None:
    """`/tmp/fm-<name>` is a task's temp dir only when a record names that task: a harness's
    or an operator's directory of that shape holds fm's own files as any other does."""
    t1, _ = finished(fleet, "t1", 1)
    tmp = fleet.make_tasktmp(tid("no-such-task"))
    fleet.data.rmdir()
    r = fleet.fm("teardown", t1, env=fleet.env(FM_DATA_OVERRIDE=str(tmp / "data")))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (tmp / "data" / "teardown-log.jsonl").exists()
    assert not (fleet.state / f"{t1}.meta").exists()
