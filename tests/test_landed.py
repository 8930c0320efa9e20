"""The landed-work check and the --force save, against real git repositories.

Layout per test (all under tmp_path, HOME isolated): a bare `origin.git` with `main`, a
`project` clone of it, and the slot: a linked worktree of the project made with
`git worktree add --detach`, as the pool makes them.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from fm_teardown.act.discard import save_discarded
from fm_teardown.decide.landed import judge
from fm_teardown.model.errors import FmError, Verdict
from fm_teardown.model.landing import LandedFacts, LandedRung
from fm_teardown.model.records import Record
from fm_teardown.model.scaffold import SCAFFOLD_PATHS
from fm_teardown.observe.landed import gather
from fm_teardown.report.messages import landed_text
from tests.fleet import files_of, gh_answering

TID = "task-x1"


def git(cwd: Path, *args: str) -> str:
    r = subprocess.run(
        ["git", "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, f"git {' '.join(args)} failed: {r.stderr}"
    return r.stdout.strip()


def identity(repo: Path) -> None:
    git(repo, "config", "user.name", "Test Person")
    git(repo, "config", "user.email", "test@example.com")


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        git(repo, "add", "--", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass
class Repos:
    root: Path
    origin: Path
    project: Path
    slot: Path
    data: Path

    def record(self, **changes: object) -> Record:
        base = Record(
            task_id=TID,
            meta_path=str(self.root / "state" / f"{TID}.meta"),
            mtime_ns=0,
            window=f"firstmate:fm-{TID}",
            session="firstmate",
            worktree=str(self.slot),
            project=str(self.project),
        )
        return replace(base, **changes)  # type: ignore[arg-type]

    def check(self, record: Record | None = None, **kw: object) -> LandedFacts:
        kw.setdefault("fetch", False)
        kw.setdefault("fetch_timeout", 30.0)
        return judge(gather(record or self.record(), self.data, **kw))  # type: ignore[arg-type]

    def other_clone(self, name: str = "other") -> Path:
        path = self.root / name
        subprocess.run(["git", "clone", "-q", str(self.origin), str(path)], check=True, timeout=60)
        identity(path)
        return path


@pytest.fixture
def repos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repos:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_CONFIG_GLOBAL", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(var, raising=False)
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    identity(seed)
    commit(seed, {"README.md": "hello\n", "src/app.py": "print('v1')\n"}, "initial")
    git(seed, "push", "-q", str(origin), "main")
    project = tmp_path / "project"
    subprocess.run(["git", "clone", "-q", str(origin), str(project)], check=True)
    identity(project)
    slot = tmp_path / "pool" / "1" / "project"
    git(project, "worktree", "add", "-q", "--detach", str(slot), "origin/main")
    data = tmp_path / "data"
    data.mkdir()
    return Repos(tmp_path, origin, project, slot, data)


def snapshot(repo: Path) -> tuple[str, bytes]:
    """All refs and the slot's index bytes: what a dry run must leave unchanged."""
    index = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)"), index.read_bytes()


# --------------------------------------------------------------------------- ship: dirtiness


def test_clean_slot_at_origin_main_is_landed(repos: Repos) -> None:
    facts = repos.check()
    assert facts.landed, facts
    assert facts.rung is LandedRung.REACHABLE and facts.merged
    assert landed_text(facts) == "reachable: HEAD is in origin/main"
    assert facts.dirty == () and facts.unpushed == ()


def test_a_dry_run_reads_the_projects_refs_beside_the_slots_status(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The refs need no status: a dry run reads them in the statuses' batch, not after it; a
    # real run reads them after its fetch (which they must see). Which HEADs a remote has and
    # which origin's default branch has are two rev-lists of one batch.
    from fm_teardown.adapters import runner
    from fm_teardown.observe import landed_project

    batches: list[list[str]] = []
    alone: list[str] = []
    real_many, real_git = runner.git_many, landed_project._git

    def many(calls: list[tuple[str, list[str]]], **kw: float) -> list[runner.Result]:
        batches.append([args[2] if args[0] == "-c" else args[0] for _, args in calls])
        return real_many(calls, **kw)  # type: ignore[arg-type]

    def one(repo: str, *args: str, **kw: object) -> runner.Result:
        alone.append(args[0])
        return real_git(repo, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "git_many", many)
    monkeypatch.setattr(landed_project, "_git", one)
    assert repos.check().landed
    assert batches == [["for-each-ref", "status"], ["rev-list", "rev-list"]], batches
    assert "for-each-ref" not in alone, alone
    batches.clear()
    alone.clear()
    assert repos.check(fetch=True).landed
    assert batches == [["status"], ["fetch"], ["rev-list", "rev-list"]], batches
    assert not any("for-each-ref" in b for b in batches), batches
    assert "for-each-ref" in alone, alone


def test_commit_pushed_to_a_branch_is_landed(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "f\n"}, "feature")
    git(repos.slot, "push", "-q", "origin", "HEAD:refs/heads/fm/task-x1")
    assert repos.check().landed


def test_dirty_tracked_file_is_not_landed(repos: Repos) -> None:
    (repos.slot / "README.md").write_text("changed\n")
    facts = repos.check()
    assert not facts.landed
    assert facts.dirty == ("README.md",)
    assert "uncommitted" in landed_text(facts)


def test_untracked_file_only_is_not_landed(repos: Repos) -> None:
    (repos.slot / "notes").mkdir()
    (repos.slot / "notes" / "draft.md").write_text("wip\n")
    facts = repos.check()
    assert not facts.landed
    assert facts.dirty == ("notes/draft.md",)


def test_untracked_hidden_by_config_still_counts(repos: Repos) -> None:
    git(repos.project, "config", "status.showUntrackedFiles", "no")
    (repos.slot / "new.txt").write_text("wip\n")
    assert git(repos.slot, "status", "--porcelain") == ""  # what a naive check would see
    facts = repos.check()
    assert not facts.landed
    assert facts.dirty == ("new.txt",)


def test_scaffold_files_only_is_landed(repos: Repos) -> None:
    for rel in SCAFFOLD_PATHS:
        path = repos.slot / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("scaffold\n")
    facts = repos.check()
    assert facts.landed, facts
    assert facts.dirty == ()


def test_scaffold_names_elsewhere_are_real_work(repos: Repos) -> None:
    (repos.slot / ".claude").mkdir()
    (repos.slot / ".claude" / "settings.local.json").write_text("{}\n")
    (repos.slot / ".claude" / "agents.md").write_text("mine\n")
    (repos.slot / "sub").mkdir()
    (repos.slot / "sub" / ".fm-grok-turnend").write_text("x\n")
    facts = repos.check()
    assert not facts.landed
    assert set(facts.dirty) == {".claude/agents.md", "sub/.fm-grok-turnend"}


def test_scaffold_list_is_the_contracts() -> None:
    assert SCAFFOLD_PATHS == (
        ".claude/settings.local.json",
        ".fm-grok-turnend",
        ".fm-kimi-turnend",
        ".fm-agy-turnend",
        ".opencode/plugins/fm-turn-end.js",
        ".opencode/plugins/fm-busy-state.js",
    )


def test_dirty_list_is_bounded_and_summary_counts_all(repos: Repos) -> None:
    for i in range(14):
        (repos.slot / f"f{i:02}.txt").write_text(str(i))
    facts = repos.check()
    assert not facts.landed
    assert len(facts.dirty) == 10
    assert "14 paths" in landed_text(facts)


# --------------------------------------------------------------------------- ship: commits


def test_unpushed_commit_is_not_landed_and_listed(repos: Repos) -> None:
    sha = commit(repos.slot, {"feature.txt": "new work\n"}, "add the feature")
    facts = repos.check()
    assert not facts.landed
    assert len(facts.unpushed) == 1
    short, subject = facts.unpushed[0].split(" ", 1)
    assert sha.startswith(short) and subject == "add the feature"
    assert "origin/main" in landed_text(facts)


def test_a_slot_told_by_its_status_and_refs_alone_is_judged_without_a_thread(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Most of an audit's slots (HEAD on a remote and in origin's default branch, or dirty)
    # need no git call of their own: handing them to a thread would cost more than they do.
    # A slot with commits on no remote lists them with git of its own: a few at a time.
    from fm_teardown.observe import landed

    handed: list[int] = []
    real = landed._pmap

    def counted(fn: object, items: list[object]) -> list[object]:
        handed.append(len(items))
        return real(fn, items)  # type: ignore[arg-type]

    monkeypatch.setattr(landed, "_pmap", counted)
    assert repos.check().landed
    assert handed[-1] == 0, handed  # the slot's own facts: none handed over
    commit(repos.slot, {"feature.txt": "new work\n"}, "add the feature")
    facts = repos.check()
    assert not facts.landed and len(facts.unpushed) == 1
    assert handed[-1] == 1, handed


def test_pushed_only_to_a_fork_is_landed(repos: Repos) -> None:
    fork = repos.root / "fork.git"
    subprocess.run(["git", "init", "-q", "--bare", str(fork)], check=True)
    git(repos.project, "remote", "add", "fork", str(fork))
    commit(repos.slot, {"feature.txt": "new work\n"}, "feature")
    git(repos.slot, "push", "-q", "fork", "HEAD:refs/heads/fm/task-x1")
    facts = repos.check()
    assert facts.landed, facts


def squash_into_origin(repos: Repos, files: dict[str, str]) -> None:
    """Someone else lands the same change on origin/main as one squashed commit, after an
    unrelated commit, so the project's origin/main ref is now stale."""
    other = repos.other_clone()
    commit(other, {"unrelated.txt": "theirs\n"}, "unrelated work")
    commit(other, files, "feature (#7) squashed")
    git(other, "push", "-q", "origin", "main")


def test_squash_merged_with_stale_ref_needs_the_fetch(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "part 1\n"}, "feature part 1")
    commit(repos.slot, {"feature.txt": "part 1\npart 2\n", "src/app.py": "print('v2')\n"}, "p2")
    squash_into_origin(repos, {"feature.txt": "part 1\npart 2\n", "src/app.py": "print('v2')\n"})

    before = snapshot(repos.slot)
    dry = repos.check(fetch=False)
    assert not dry.landed, "a dry run must judge on the stale ref as it is"
    assert len(dry.unpushed) == 2
    assert snapshot(repos.slot) == before, "a dry run must not fetch or write refs or index"

    real = repos.check(fetch=True)
    assert real.landed, real
    assert "origin/main" in landed_text(real)
    assert real.unpushed == ()


def test_replayed_patch_on_fresh_ref_is_landed_without_fetch(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    squash_into_origin(repos, {"feature.txt": "x\n"})
    git(repos.project, "fetch", "-q", "origin")
    assert repos.check(fetch=False).landed


def test_partially_landed_content_is_not_landed(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "x\n", "more.txt": "y\n"}, "feature")
    squash_into_origin(repos, {"feature.txt": "x\n"})
    facts = repos.check(fetch=True)
    assert not facts.landed


def test_failed_fetch_is_inconclusive(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    git(repos.project, "remote", "set-url", "origin", str(repos.root / "gone.git"))
    facts = repos.check(fetch=True)
    assert not facts.landed
    assert any("fetch of origin/main failed" in n for n in facts.notes), facts.notes


def test_default_branch_follows_origin_head(repos: Repos) -> None:
    other = repos.other_clone()
    git(other, "checkout", "-q", "-b", "trunk")
    git(other, "push", "-q", "origin", "trunk")
    git(repos.project, "fetch", "-q", "origin")
    git(repos.project, "remote", "set-head", "origin", "trunk")
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    facts = repos.check()
    assert not facts.landed
    assert "origin/trunk" in landed_text(facts)


def test_slot_directory_gone_is_nothing_to_lose(repos: Repos) -> None:
    record = repos.record(worktree=str(repos.root / "pool" / "9" / "project"))
    facts = repos.check(record)
    assert facts.landed
    assert landed_text(facts) == "slot directory no longer exists: nothing to lose"


def test_not_a_git_directory_is_not_landed(repos: Repos) -> None:
    plain = repos.root / "plain"
    plain.mkdir()
    facts = repos.check(repos.record(worktree=str(plain)))
    assert not facts.landed
    assert facts.notes


# --------------------------------------------------------------------------- ship: PRs


def fake_gh(repos: Repos, payload: dict[str, str] | None, *, fail: bool = False) -> str:
    """A stand-in `gh` that logs its argv and prints the payload (or fails like the API)."""
    bin_dir = repos.root / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    answer = bin_dir / "gh-answer.json"
    answer.write_text(json.dumps(payload or {}))
    log = bin_dir / "gh.log"
    body = f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {shlex.quote(str(log))}\n" + (
        "echo 'HTTP 502: Bad Gateway (https://api.github.com/graphql)' >&2\nexit 1\n"
        if fail
        else f"cat {shlex.quote(str(answer))}\n"
    )
    gh = bin_dir / "gh"
    gh.write_text(body)
    gh.chmod(0o755)
    return str(gh)


PR = "https://github.com/acme/project/pull/7"


def test_merged_pr_containing_head_is_landed(repos: Repos) -> None:
    head = commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    # The PR head carries a follow-up commit on top of HEAD (made without moving HEAD).
    tree = git(repos.slot, "rev-parse", "HEAD^{tree}")
    follow = git(repos.slot, "commit-tree", tree, "-p", head, "-m", "review follow-up")
    gh = fake_gh(repos, {"state": "MERGED", "headRefOid": follow})
    facts = repos.check(repos.record(pr=PR), gh_bin=gh)
    assert facts.landed, facts
    assert "PR" in landed_text(facts)
    assert (repos.root / "fakebin" / "gh.log").read_text() == (
        f'pr view {PR} --json state,headRefOid -q .state + "\\t" + .headRefOid\n'
    )


def fake_gh_tab(repos: Repos, state: str, head: str) -> str:
    bin_dir = repos.root / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    return gh_answering(bin_dir, state, head)


def test_merged_pr_answered_as_state_tab_head_is_read(repos: Repos) -> None:
    head = commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    facts = repos.check(repos.record(pr=PR), gh_bin=fake_gh_tab(repos, "MERGED", head))
    assert facts.landed, facts
    assert facts.rung is LandedRung.PR_HEAD, facts
    assert landed_text(facts).startswith(f"pr-head: PR {PR} is merged")
    assert not repos.check(repos.record(pr=PR), gh_bin=fake_gh_tab(repos, "OPEN", head)).landed


def test_a_patch_replayed_only_onto_the_merged_pr_head_is_not_landed(repos: Repos) -> None:
    """The PR branch got the same patch as a different commit (a rebase, a cherry-pick) and
    the PR is reported merged, but the default branch does not have it and the PR's head does
    not have HEAD: no rung holds (the PR rung takes HEAD itself, or a descendant of it)."""
    parent = commit(repos.slot, {"base.txt": "b\n"}, "local parent")
    git(repos.slot, "push", "-q", "origin", f"{parent}:refs/heads/topic")
    git(repos.project, "fetch", "-q", "origin")
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    other = repos.other_clone()
    replayed = commit(other, {"feature.txt": "x\n"}, "feature, replayed by the bot")
    git(other, "push", "-q", "origin", "HEAD:refs/heads/pr-head")
    git(repos.project, "fetch", "-q", "origin")
    gh = fake_gh(repos, {"state": "MERGED", "headRefOid": replayed})
    facts = repos.check(repos.record(pr=PR), gh_bin=gh)
    assert not facts.landed, facts
    assert facts.unpushed[0].endswith("feature")


def test_a_commit_that_changes_nothing_is_landed_only_when_reachable(repos: Repos) -> None:
    """Its content is trivially "in" every branch, so a content check proves nothing: only
    reachability lands it (local main for local-only, a remote-tracking ref for all)."""
    git(repos.slot, "commit", "-q", "--allow-empty", "-m", "empty, unpushed")
    for mode in ("local-only", "no-mistakes"):
        facts = repos.check(repos.record(mode=mode), fetch=True)
        assert not facts.landed, (mode, facts)
        assert facts.unpushed[0].endswith("empty, unpushed")
    # Merged into local main (reachable from it): landed for local-only.
    git(repos.project, "merge", "-q", "--ff-only", git(repos.slot, "rev-parse", "HEAD"))
    assert repos.check(repos.record(mode="local-only")).landed
    # Pushed: landed for every mode.
    git(repos.slot, "push", "-q", "origin", "HEAD:refs/heads/empty")
    git(repos.project, "fetch", "-q", "origin")
    assert repos.check(repos.record(mode="no-mistakes")).landed


def test_merged_pr_but_head_moved_after_is_not_landed(repos: Repos) -> None:
    pr_head = commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    commit(repos.slot, {"later.txt": "y\n"}, "later local work")
    gh = fake_gh(repos, {"state": "MERGED", "headRefOid": pr_head})
    facts = repos.check(repos.record(pr=PR), gh_bin=gh)
    assert not facts.landed
    assert facts.unpushed[0].endswith("later local work")


def test_open_pr_is_not_landed(repos: Repos) -> None:
    head = commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    gh = fake_gh(repos, {"state": "OPEN", "headRefOid": head})
    assert not repos.check(repos.record(pr=PR), gh_bin=gh).landed


def test_gh_failure_is_a_note_and_not_landed(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    gh = fake_gh(repos, None, fail=True)
    facts = repos.check(repos.record(pr=PR), gh_bin=gh)
    assert not facts.landed
    assert any("gh pr view" in n and "502" in n for n in facts.notes), facts.notes


def test_gh_failure_falls_back_to_content_in_default(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    squash_into_origin(repos, {"feature.txt": "x\n"})
    gh = fake_gh(repos, None, fail=True)
    facts = repos.check(repos.record(pr=PR), gh_bin=gh, fetch=True)
    assert facts.landed, facts


def test_missing_gh_is_a_note(repos: Repos, monkeypatch: pytest.MonkeyPatch) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    monkeypatch.setattr("fm_teardown.observe.landed.shutil.which", lambda name: None)
    facts = repos.check(repos.record(pr=PR))
    assert not facts.landed
    assert any("gh is not installed" in n for n in facts.notes)


def test_pr_head_missing_locally_is_fetched_only_on_a_real_run(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    git(repos.slot, "push", "-q", "origin", "HEAD:refs/pull/7/head")
    other = repos.other_clone()
    git(other, "fetch", "-q", "origin", "refs/pull/7/head")
    git(other, "checkout", "-q", "--detach", "FETCH_HEAD")
    follow = commit(other, {"review.txt": "r\n"}, "review fix")
    git(other, "push", "-q", "origin", "HEAD:refs/pull/7/head")
    gh = fake_gh(repos, {"state": "MERGED", "headRefOid": follow})

    dry = repos.check(repos.record(pr=PR), gh_bin=gh, fetch=False)
    assert not dry.landed
    assert any("dry run does not fetch" in n for n in dry.notes), dry.notes
    real = repos.check(repos.record(pr=PR), gh_bin=gh, fetch=True)
    assert real.landed, real


# --------------------------------------------------------------------------- local-only


def test_local_only_merged_into_local_main_is_landed(repos: Repos) -> None:
    sha = commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    git(repos.project, "merge", "-q", "--no-ff", "-m", "merge feature", sha)
    facts = repos.check(repos.record(mode="local-only"))
    assert facts.landed and facts.merged, facts
    # In the other modes it is landed (local main holds it: nothing would be lost), but not
    # merged: origin does not have it.
    other = repos.check(repos.record(mode="no-mistakes"))
    assert other.landed and not other.merged, other
    assert landed_text(other) == "reachable: HEAD is in local main"


def test_local_only_squash_merged_without_any_remote_is_landed(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature 1")
    sha = commit(repos.slot, {"feature.txt": "x\ny\n"}, "feature 2")
    git(repos.project, "remote", "remove", "origin")
    git(repos.project, "merge", "-q", "--squash", sha)
    git(repos.project, "commit", "-q", "-m", "feature (squashed)")
    facts = repos.check(repos.record(mode="local-only"), fetch=True)
    assert facts.landed, facts
    assert "local main" in landed_text(facts)


def test_local_only_unmerged_is_not_landed(repos: Repos) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    facts = repos.check(repos.record(mode="local-only"))
    assert not facts.landed
    assert "local main" in landed_text(facts)


# --------------------------------------------------------------------------- scout, secondmate


def test_scout_needs_its_report_and_no_git(repos: Repos) -> None:
    (repos.slot / "README.md").write_text("dirty, but a scout's tree is not its product\n")
    scout = repos.record(kind="scout")
    missing = repos.check(scout)
    assert not missing.landed
    assert "report" in landed_text(missing)
    report = repos.data / TID / "report.md"
    report.parent.mkdir()
    report.write_text("# findings\n")
    found = repos.check(scout)
    assert found.landed, found
    assert found.dirty == ()


def test_secondmate_with_child_records_is_not_landed(repos: Repos) -> None:
    home = repos.root / "sm-home"
    (home / "state").mkdir(parents=True)
    sm = repos.record(kind="secondmate", home=str(home))
    assert repos.check(sm).landed
    (home / "state" / "child-b.meta").write_text("window=x:fm-child-b\n")
    (home / "state" / "child-a.meta").write_text("window=x:fm-child-a\n")
    (home / "state" / "child-a.status").write_text("busy\n")
    facts = repos.check(sm)
    assert not facts.landed
    assert "child-a.meta, child-b.meta" in landed_text(facts)


def test_secondmate_home_defaults_to_worktree(repos: Repos) -> None:
    (repos.slot / "state").mkdir()
    (repos.slot / "state" / "kid.meta").write_text("")
    facts = repos.check(repos.record(kind="secondmate"))
    assert not facts.landed
    assert "kid.meta" in landed_text(facts)


# --------------------------------------------------------------------------- save_discarded


@pytest.fixture
def unlanded(repos: Repos) -> Iterator[Repos]:
    """A slot with every kind of work at risk, plus an ignored file that is not work."""
    commit(repos.slot, {".gitignore": "*.log\nbuild/\n"}, "ignore logs")
    commit(repos.slot, {"src/app.py": "print('v2')\n"}, "unpushed commit")
    (repos.slot / "src" / "app.py").write_text("print('v3, uncommitted')\n")  # dirty tracked
    (repos.slot / "README.md").unlink()  # a deletion is work too
    (repos.slot / "notes").mkdir()
    (repos.slot / "notes" / "plan.md").write_text("untracked plan\n")
    (repos.slot / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (repos.slot / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repos.slot / "run.sh").chmod(0o755)
    (repos.slot / "debug.log").write_text("ignored noise\n")
    (repos.slot / "build").mkdir()
    (repos.slot / "build" / "forced.txt").write_text("force-added although ignored\n")
    git(repos.slot, "add", "-f", "build/forced.txt")
    yield repos


def test_save_discarded_then_restore_after_pool_return(unlanded: Repos) -> None:
    repos = unlanded
    expected = files_of(repos.slot)
    del expected["debug.log"]
    head = git(repos.slot, "rev-parse", "HEAD")
    index = Path(git(repos.slot, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    index_before = hashlib.sha256(index.read_bytes()).hexdigest()
    status_before = git(repos.slot, "status", "--porcelain=v1", "--untracked-files=all")

    now = datetime(2026, 12, 1, 7, 25, 50, tzinfo=UTC)
    saved = save_discarded(repos.record(), now)

    assert saved.ref == f"refs/fm/discarded/{TID}/20261201T072550Z"
    assert git(repos.project, "rev-parse", saved.ref) == saved.commit
    assert git(repos.project, "rev-parse", f"{saved.commit}^") == head
    tree = set(git(repos.project, "ls-tree", "-r", "--name-only", saved.ref).splitlines())
    assert "debug.log" not in tree, "an ignored file is not work"
    assert {"notes/plan.md", "blob.bin", "build/forced.txt"} <= tree
    assert "README.md" not in tree
    # The slot itself was not touched: same index bytes, same status.
    assert hashlib.sha256(index.read_bytes()).hexdigest() == index_before
    assert git(repos.slot, "status", "--porcelain=v1", "--untracked-files=all") == status_before

    # The pool return: reset hard to the default branch and clean (ignored files stay).
    git(repos.slot, "checkout", "-q", "-f", "--detach", "origin/main")
    git(repos.slot, "reset", "-q", "--hard", "origin/main")
    git(repos.slot, "clean", "-q", "-fd")
    assert not (repos.slot / "notes").exists()

    r = subprocess.run(saved.restore, shell=True, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    restored = Path(shlex.split(saved.restore)[-2])
    assert restored.is_dir() and not restored.is_relative_to(repos.slot)
    assert files_of(restored) == expected


def test_save_discarded_twice_in_one_second_is_idempotent(unlanded: Repos) -> None:
    now = datetime(2026, 12, 1, 7, 25, 50, tzinfo=UTC)
    first = save_discarded(unlanded.record(), now)
    again = save_discarded(unlanded.record(), now)
    assert again == first


def test_save_discarded_refuses_an_unborn_head(tmp_path: Path, repos: Repos) -> None:
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "init", "-q", str(fresh)], check=True)
    (fresh / "work.txt").write_text("never committed\n")
    record = repos.record(worktree=str(fresh), project=str(fresh))
    with pytest.raises(FmError) as err:
        save_discarded(record, datetime(2026, 12, 1, tzinfo=UTC))
    assert err.value.verdict is Verdict.FAILED
    assert "HEAD" in err.value.message
    assert git(fresh, "for-each-ref") == ""


def test_save_discarded_refuses_a_slot_of_another_repository(tmp_path: Path, repos: Repos) -> None:
    elsewhere = repos.other_clone("elsewhere")
    with pytest.raises(FmError) as err:
        save_discarded(repos.record(worktree=str(elsewhere)), datetime(2026, 12, 1, tzinfo=UTC))
    assert err.value.verdict is Verdict.FAILED
    assert "not a worktree of the project" in err.value.message
    assert git(repos.project, "for-each-ref", "refs/fm") == ""


def test_save_discarded_of_a_missing_slot_fails(repos: Repos) -> None:
    with pytest.raises(FmError) as err:
        save_discarded(
            repos.record(worktree=str(repos.root / "nope")), datetime(2026, 12, 1, tzinfo=UTC)
        )
    assert err.value.exit_code == 1


def test_slot_path_that_is_a_file_is_not_landed(repos: Repos) -> None:
    path = repos.root / "pool" / "2"
    path.write_text("not a slot\n")
    facts = repos.check(repos.record(worktree=str(path)))
    assert not facts.landed
    assert "not a directory" in landed_text(facts)


def test_hanging_fetch_is_bounded_and_its_processes_ended(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    pidfile = repos.root / "ssh.pid"
    hang = repos.root / "hang-ssh"
    hang.write_text(f"#!/bin/sh\necho $$ > {shlex.quote(str(pidfile))}\nexec sleep 300\n")
    hang.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(hang))
    git(repos.project, "remote", "set-url", "origin", "ssh://nowhere.invalid/repo.git")
    started = time.monotonic()
    facts = repos.check(fetch=True, fetch_timeout=1.0)
    assert time.monotonic() - started < 15
    assert not facts.landed
    assert any("timed out" in n for n in facts.notes), facts.notes
    if not pidfile.exists():
        return  # the bounded fetch ended before the hanging transport even started
    pid = int(pidfile.read_text())

    def ended() -> bool:
        try:
            return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return True

    # SIGKILL is asynchronous: poll briefly for the process to be gone.
    deadline = time.monotonic() + 5
    while not ended() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ended()


# --------------------------------------------------------------------------- the ladder (§14.6)


def test_a_squash_merge_then_a_later_edit_of_the_same_file_is_landed_by_the_squash_rung(
    repos: Repos,
) -> None:
    """Two commits squashed into one commit of origin/main, then a later commit of main edits
    the same lines again: HEAD is in no branch, no single commit's patch is there, a merge
    would conflict; the branch's whole diff is the squash commit's patch."""
    commit(repos.slot, {"feature.txt": "part 1\n"}, "feature part 1")
    commit(repos.slot, {"feature.txt": "part 1\npart 2\n"}, "feature part 2")
    other = repos.other_clone()
    squash = commit(other, {"feature.txt": "part 1\npart 2\n"}, "feature (#7) squashed")
    commit(other, {"feature.txt": "part 1\npart 2, revised\n"}, "revise the feature")
    git(other, "push", "-q", "origin", "main")
    git(repos.project, "fetch", "-q", "origin")
    facts = repos.check(fetch=True)
    assert facts.landed and facts.merged, facts
    assert facts.rung is LandedRung.SQUASH
    assert landed_text(facts) == (
        "squash: the branch's whole diff is the patch of one commit of "
        f"origin/main (commit {squash[:12]})"
    )


def test_every_commits_patch_on_main_is_landed_by_the_patches_rung(repos: Repos) -> None:
    commit(repos.slot, {"a.txt": "a\n"}, "a")
    commit(repos.slot, {"b.txt": "b\n"}, "b")
    other = repos.other_clone()
    commit(other, {"b.txt": "b\n"}, "b, cherry-picked")
    commit(other, {"a.txt": "a\n"}, "a, cherry-picked")
    commit(other, {"a.txt": "a, then changed\n"}, "a changed again")
    git(other, "push", "-q", "origin", "main")
    git(repos.project, "fetch", "-q", "origin")
    facts = repos.check()
    assert facts.landed and facts.rung is LandedRung.PATCHES, facts
    assert landed_text(facts).startswith("patches: every commit's patch is in origin/main")


def test_content_merged_under_other_commits_is_landed_by_the_merge_tree_rung(
    repos: Repos,
) -> None:
    """The change reached main split differently (one commit holding it with other work):
    no patch matches, a merge changes nothing."""
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    other = repos.other_clone()
    commit(other, {"feature.txt": "x\n", "other.txt": "o\n"}, "feature and more")
    git(other, "push", "-q", "origin", "main")
    git(repos.project, "fetch", "-q", "origin")
    facts = repos.check()
    assert facts.landed and facts.rung is LandedRung.MERGE_TREE, facts
    assert landed_text(facts) == "merge-tree: merging HEAD into origin/main changes nothing"


PY_LANDED = "def f(x):\n    if x:\n        return 1\n    return 2\n"
PY_LOCAL = "def f(x):\n    if x:\n        return 1\n        return 2\n"  # moved inside the if
MK_LANDED = "all:\n\techo build\n"
MK_LOCAL = "all:\n        echo build\n"  # the recipe's TAB turned to spaces: make fails


@pytest.mark.parametrize(
    ("name", "landed_text", "local_text"),
    [("app.py", PY_LANDED, PY_LOCAL), ("Makefile", MK_LANDED, MK_LOCAL)],
)
@pytest.mark.parametrize("with_pr", [False, True])
def test_a_whitespace_only_difference_is_not_landed(
    repos: Repos, name: str, landed_text: str, local_text: str, with_pr: bool
) -> None:
    """PR #7 squash-merged as P; the task's unpushed commit T differs from P only in
    whitespace. Whitespace is content: T is not landed, with or without the merged PR."""
    base = commit(repos.slot, {name: "# to do\n"}, "before")
    git(repos.slot, "push", "-q", "origin", "HEAD:main")
    git(repos.project, "fetch", "-q", "origin")
    other = repos.other_clone()
    git(other, "pull", "-q", "--ff-only")
    pr_head = commit(other, {name: landed_text}, "PR #7 (squashed)")
    git(other, "push", "-q", "origin", "main")
    git(repos.project, "fetch", "-q", "origin")
    assert git(repos.slot, "rev-parse", "HEAD") == base
    mine = commit(repos.slot, {name: local_text}, "the task's version")
    record = repos.record(pr=PR) if with_pr else repos.record()
    gh = fake_gh(repos, {"state": "MERGED", "headRefOid": pr_head}) if with_pr else None
    facts = repos.check(record, gh_bin=gh, fetch=True)
    assert not facts.landed, facts
    assert facts.rung is None and not facts.merged
    assert facts.unpushed == (f"{mine[:7]} the task's version",)


def test_a_pr_merged_at_an_older_head_does_not_land_newer_commits(repos: Repos) -> None:
    older = commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    git(repos.slot, "push", "-q", "origin", "HEAD:refs/heads/pr-7")
    git(repos.project, "fetch", "-q", "origin")
    gh = fake_gh(repos, {"state": "MERGED", "headRefOid": older})
    at_older = repos.check(repos.record(pr=PR), gh_bin=gh)
    assert at_older.landed and at_older.merged, at_older
    assert at_older.rung is LandedRung.REACHABLE and at_older.merge_rung is LandedRung.PR_HEAD
    commit(repos.slot, {"later.txt": "y\n"}, "after the merge")
    newer = repos.check(repos.record(pr=PR), gh_bin=gh)
    assert not newer.landed and newer.rung is None, newer
    assert [u.split(" ", 1)[1] for u in newer.unpushed] == ["after the merge"]


def test_a_failed_for_each_ref_is_reported_as_such(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fm_teardown.adapters import runner

    real, real_many = runner.git, runner.git_many
    broken = runner.Result(128, b"", "fatal: bad object refs/heads/broken")

    def failing(repo: str, *args: str, **kw: object) -> runner.Result:
        if args[:1] == ("for-each-ref",):
            return broken
        return real(repo, *args, **kw)  # type: ignore[arg-type]

    def failing_many(calls: list[tuple[str, list[str]]], **kw: float) -> list[runner.Result]:
        # A dry run reads the refs in the batch of the slots' statuses.
        ran = real_many(calls, **kw)  # type: ignore[arg-type]
        return [
            broken if args[0] == "for-each-ref" else r
            for (_, args), r in zip(calls, ran, strict=True)
        ]

    monkeypatch.setattr("fm_teardown.observe.landed_project._git", failing)
    monkeypatch.setattr(runner, "git_many", failing_many)
    commit(repos.slot, {"feature.txt": "x\n"}, "feature")
    facts = repos.check()
    assert not facts.landed
    assert any(
        "git for-each-ref failed" in n and "bad object refs/heads/broken" in n for n in facts.notes
    ), facts.notes
    assert not any("cannot determine the default branch" in n for n in facts.notes)


def test_too_many_commits_to_compare_fail_closed_and_say_why(
    repos: Repos, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The squash of the test above, with the comparison bounded below what it needs: not
    landed, and the note says the patches were not compared."""
    monkeypatch.setattr("fm_teardown.observe.landed.MAX_COMPARED", 2)
    commit(repos.slot, {"feature.txt": "part 1\n"}, "feature part 1")
    commit(repos.slot, {"feature.txt": "part 1\npart 2\n"}, "feature part 2")
    other = repos.other_clone()
    commit(other, {"feature.txt": "part 1\npart 2\n"}, "feature (#7) squashed")
    git(other, "push", "-q", "origin", "main")
    git(repos.project, "fetch", "-q", "origin")
    facts = repos.check()
    assert not facts.landed and facts.rung is None, facts
    assert any("more than 2 commits" in n for n in facts.notes), facts.notes
    monkeypatch.setattr("fm_teardown.observe.landed.MAX_COMPARED", 3)
    assert repos.check().rung is LandedRung.SQUASH
