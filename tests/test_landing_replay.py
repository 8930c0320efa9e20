"""Proof of landing, exact (spec §14.6, rungs 2 and 3 confirmed by replay; remote refs
confirmed by the real run's fetch; the task's branch beyond HEAD; nested repositories), on
real git repositories, and as properties over generated histories: identical blocks, moved
blocks, renames, CRLF line ends and mode bits.

Layout per case (as `tests/test_landed.py`): a bare `origin.git` with `main`, a `project`
clone of it, and the slot, a linked worktree of the project detached at origin/main.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fm_teardown.act.discard import save_discarded
from fm_teardown.decide.landed import judge
from fm_teardown.model.errors import FmError, Verdict
from fm_teardown.model.landing import LandedFacts, LandedRung
from fm_teardown.model.not_landed import BranchNotLanded
from fm_teardown.model.records import Record
from fm_teardown.observe.landed import gather
from fm_teardown.report.cause_words import not_landed_text

TID = "task-r1"


def git(cwd: Path, *args: str, check: bool = True) -> str:
    r = subprocess.run(
        ["git", "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    if check:
        assert r.returncode == 0, f"git {' '.join(args)} failed: {r.stderr}"
    return r.stdout.strip()


def identity(repo: Path) -> None:
    git(repo, "config", "user.name", "Test Person")
    git(repo, "config", "user.email", "test@example.com")


def write(repo: Path, name: str, data: bytes, mode: int | None = None) -> None:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mode is not None:
        path.chmod(mode)


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass
class Repos:
    root: Path
    origin: Path
    project: Path
    slot: Path

    def record(self) -> Record:
        return Record(
            task_id=TID,
            meta_path=str(self.root / "state" / f"{TID}.meta"),
            mtime_ns=0,
            window=f"firstmate:fm-{TID}",
            session="firstmate",
            worktree=str(self.slot),
            project=str(self.project),
        )

    def check(self, *, fetch: bool = False) -> LandedFacts:
        return judge(gather(self.record(), self.root, fetch=fetch, fetch_timeout=30.0))

    def main(self) -> Path:
        """A clone of origin on main, as another person's: their commits land on origin."""
        path = self.root / "other"
        if not path.exists():
            subprocess.run(["git", "clone", "-q", str(self.origin), str(path)], check=True)
            identity(path)
        git(path, "pull", "-q", "--ff-only")
        return path

    def land(self) -> None:
        """Push the other clone's main to origin and fetch it into the project."""
        git(self.root / "other", "push", "-q", "origin", "main")
        git(self.project, "fetch", "-q", "origin")


def make_repos(root: Path, files: dict[str, tuple[bytes, int]]) -> Repos:
    origin = root / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    seed = root / "seed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(seed)], check=True)
    identity(seed)
    git(seed, "config", "core.autocrlf", "false")
    for name, (data, mode) in files.items():
        write(seed, name, data, mode)
    commit_all(seed, "initial")
    git(seed, "push", "-q", str(origin), "main")
    project = root / "project"
    subprocess.run(["git", "clone", "-q", str(origin), str(project)], check=True)
    identity(project)
    slot = root / "pool" / "1" / "project"
    git(project, "worktree", "add", "-q", "--detach", str(slot), "origin/main")
    return Repos(root, origin, project, slot)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME and no system git config, for every git this module runs."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_CONFIG_GLOBAL", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


# --------------------------------------------------------------------------- identical blocks


def block(name: str, timeout: int, eol: bytes = b"\n") -> bytes:
    """A config block whose changed line has three identical lines of context on each side:
    a diff of it reads the same whichever block it is in, but for its line numbers."""
    lines = [f"[{name}]", "host = db", "port = 5432", "user = app", f"timeout = {timeout}",
             "pool = 5", "ssl = on", "log = warn", ""]  # fmt: skip
    return eol.join(x.encode() for x in lines) + eol


def conf(staging: int, production: int) -> bytes:
    return block("staging", staging) + block("production", production)


def test_a_change_to_one_of_two_identical_blocks_is_not_landed_by_the_other(home: Path) -> None:
    """The loss the issue reproduced: the slot sets staging's timeout, main later sets
    production's. The patch ids are equal (line numbers aside); replay tells them apart."""
    repos = make_repos(home / "r", {"conf.ini": (conf(30, 30), 0o644)})
    write(repos.slot, "conf.ini", conf(60, 30))
    mine = commit_all(repos.slot, "staging: timeout 60")
    other = repos.main()
    write(other, "conf.ini", conf(30, 60))
    theirs = commit_all(other, "production: timeout 60")
    repos.land()
    ids = {_patch_id(repos.slot, c) for c in (mine, theirs)}
    assert len(ids) == 1, "the two diffs have one patch id: the case replay must catch"
    for fetch in (False, True):
        facts = repos.check(fetch=fetch)
        assert not facts.landed and facts.rung is None, facts
        assert not facts.merged
        assert [u.split(" ", 1)[1] for u in facts.unpushed] == ["staging: timeout 60"]
    assert (repos.slot / "conf.ini").read_bytes() == conf(60, 30)


def _patch_id(repo: Path, commit: str) -> str:
    show = subprocess.run(
        ["git", "-C", str(repo), "show", commit], capture_output=True, check=True, timeout=60
    )
    pid = subprocess.run(
        ["git", "-C", str(repo), "patch-id", "--verbatim"],
        input=show.stdout,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return pid.stdout.decode().split()[0]


def test_the_same_change_cherry_picked_onto_main_is_landed_by_the_patches_rung(
    home: Path,
) -> None:
    repos = make_repos(home / "r", {"conf.ini": (conf(30, 30), 0o644)})
    write(repos.slot, "conf.ini", conf(60, 30))
    mine = commit_all(repos.slot, "staging: timeout 60")
    write(repos.slot, "notes.txt", b"second\n")
    commit_all(repos.slot, "notes")
    other = repos.main()
    write(other, "unrelated.txt", b"theirs\n")
    commit_all(other, "unrelated")
    git(other, "fetch", "-q", str(repos.project), mine)
    git(other, "cherry-pick", "FETCH_HEAD")
    write(other, "notes.txt", b"second\n")
    commit_all(other, "notes, again")
    repos.land()
    facts = repos.check()
    assert facts.landed and facts.rung is LandedRung.PATCHES, facts


def test_a_squash_of_the_branch_is_landed_by_the_squash_rung_after_later_edits(
    home: Path,
) -> None:
    repos = make_repos(home / "r", {"conf.ini": (conf(30, 30), 0o644)})
    write(repos.slot, "conf.ini", conf(60, 30))
    commit_all(repos.slot, "staging: timeout 60")
    write(repos.slot, "conf.ini", conf(90, 30))
    commit_all(repos.slot, "staging: timeout 90")
    other = repos.main()
    write(other, "unrelated.txt", b"theirs\n")
    commit_all(other, "unrelated")
    write(other, "conf.ini", conf(90, 30))
    commit_all(other, "staging: timeout 90 (#7, squashed)")
    write(other, "conf.ini", conf(91, 30))
    commit_all(other, "staging: timeout 91")
    repos.land()
    facts = repos.check()
    assert facts.landed and facts.rung is LandedRung.SQUASH, facts


def test_without_merge_tree_write_tree_no_match_holds_and_a_note_says_why(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git older than 2.38 (no `merge-tree --write-tree`): nothing replays, so no match by
    patch id holds (fail closed), and the notes say why."""
    repos = make_repos(home / "r", {"conf.ini": (conf(30, 30), 0o644)})
    write(repos.slot, "conf.ini", conf(60, 30))
    mine = commit_all(repos.slot, "staging: timeout 60")
    other = repos.main()
    write(other, "unrelated.txt", b"theirs\n")
    commit_all(other, "unrelated")
    git(other, "fetch", "-q", str(repos.project), mine)
    git(other, "cherry-pick", "FETCH_HEAD")
    repos.land()
    assert repos.check().rung is LandedRung.PATCHES
    real = shutil.which("git")
    bin_dir = home / "old-git"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = merge-tree ] && '
        "{ echo \"error: unknown option 'write-tree'\" >&2; exit 129; }; done\n"
        f'exec {real} "$@"\n'
    )
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    facts = repos.check()
    assert not facts.landed, facts
    assert any("git 2.38 or later" in n for n in facts.notes), facts.notes


def test_a_squash_of_the_other_block_is_not_landed(home: Path) -> None:
    """Two commits on identical blocks: the branch's whole diff matches main's one commit
    on the other block by patch id, and replay refuses it."""
    repos = make_repos(home / "r", {"conf.ini": (conf(30, 30), 0o644)})
    write(repos.slot, "conf.ini", conf(45, 30))
    commit_all(repos.slot, "staging: 45")
    write(repos.slot, "conf.ini", conf(60, 30))
    commit_all(repos.slot, "staging: 60")
    other = repos.main()
    write(other, "conf.ini", conf(30, 60))
    commit_all(other, "production: 60 (#8, squashed)")
    repos.land()
    facts = repos.check()
    assert not facts.landed, facts


# --------------------------------------------------------------------------- remote refs


def test_a_remote_branch_gone_from_the_server_counts_only_in_a_dry_run(home: Path) -> None:
    repos = make_repos(home / "r", {"a.txt": (b"a\n", 0o644)})
    write(repos.slot, "feature.txt", b"f\n")
    commit_all(repos.slot, "feature")
    git(repos.slot, "push", "-q", "origin", f"HEAD:refs/heads/fm/{TID}")
    git(repos.project, "fetch", "-q", "origin")
    # Someone deletes the branch on the server; the project's remote-tracking ref stays.
    other = repos.main()
    git(other, "push", "-q", "origin", "--delete", f"fm/{TID}")
    tracking = f"refs/remotes/origin/fm/{TID}"
    assert git(repos.project, "rev-parse", "--verify", "--quiet", tracking)

    dry = repos.check(fetch=False)
    assert dry.landed and dry.rung is LandedRung.REACHABLE, dry
    assert dry.unfetched == ("a remote-tracking branch",)
    assert git(repos.project, "rev-parse", "--verify", "--quiet", tracking), (
        "a dry run fetches nothing"
    )

    real = repos.check(fetch=True)
    assert not real.landed, real
    assert real.unfetched == ()
    assert [u.split(" ", 1)[1] for u in real.unpushed] == ["feature"]
    assert git(repos.project, "rev-parse", "--verify", "--quiet", tracking, check=False) == ""


def test_a_remote_whose_fetch_fails_does_not_count_in_a_real_run(home: Path) -> None:
    repos = make_repos(home / "r", {"a.txt": (b"a\n", 0o644)})
    fork = home / "fork.git"
    subprocess.run(["git", "init", "-q", "--bare", str(fork)], check=True)
    git(repos.project, "remote", "add", "fork", str(fork))
    write(repos.slot, "feature.txt", b"f\n")
    commit_all(repos.slot, "feature")
    git(repos.slot, "push", "-q", "fork", f"HEAD:refs/heads/fm/{TID}")
    assert repos.check(fetch=True).landed, "a fork fetched with success counts"
    shutil.rmtree(fork)
    facts = repos.check(fetch=True)
    assert not facts.landed, facts
    assert any("fetch of remote fork failed" in n for n in facts.notes), facts.notes


def test_a_failed_fetch_of_origin_still_fetches_its_default_branch_alone(home: Path) -> None:
    """origin's refspec names a branch the server lacks: its fetch with prune fails, and the
    real run still fetches the default branch on its own (as firstmate's tests expect)."""
    repos = make_repos(home / "r", {"a.txt": (b"a\n", 0o644)})
    write(repos.slot, "feature.txt", b"hello\n")
    commit_all(repos.slot, "feature")
    git(repos.project, "config", "--unset-all", "remote.origin.fetch")
    git(
        repos.project,
        "config",
        "--add",
        "remote.origin.fetch",
        "+refs/heads/nope:refs/remotes/origin/nope",
    )
    other = repos.main()
    write(other, "feature.txt", b"hello\n")
    commit_all(other, "feature, landed")
    git(other, "push", "-q", "origin", "main")  # the project's origin/main is stale now
    assert not repos.check(fetch=False).landed
    facts = repos.check(fetch=True)
    assert facts.landed and facts.merged, facts
    assert any("fetch of remote origin failed" in n for n in facts.notes), facts.notes


def test_a_landed_verdict_of_a_dry_run_names_the_ref_it_rests_on(home: Path) -> None:
    repos = make_repos(home / "r", {"a.txt": (b"a\n", 0o644)})
    facts = repos.check(fetch=False)
    assert facts.landed and facts.unfetched == ("origin/main",)
    assert repos.check(fetch=True).unfetched == ()


# --------------------------------------------------------------------------- the task's branch


def test_the_tasks_branch_beyond_head_must_be_landed_too(home: Path) -> None:
    repos = make_repos(home / "r", {"a.txt": (b"a\n", 0o644)})
    git(repos.slot, "switch", "-q", "-c", f"fm/{TID}")
    write(repos.slot, "feature.txt", b"f\n")
    commit_all(repos.slot, "beyond HEAD")
    # The slot goes back to main's commit, detached: the branch keeps the commit.
    git(repos.slot, "switch", "-q", "--detach", "origin/main")
    facts = repos.check()
    assert not facts.landed, facts
    assert isinstance(facts.summary, BranchNotLanded)
    assert not_landed_text(facts.summary).startswith(f"branch fm/{TID} has commits beyond HEAD")
    assert [u.split(" ", 1)[1] for u in facts.unpushed] == ["beyond HEAD"]
    git(repos.slot, "push", "-q", "origin", f"fm/{TID}")
    git(repos.project, "fetch", "-q", "origin")
    assert repos.check().landed, "pushed, the branch is landed"


def test_the_tasks_branch_behind_head_is_covered_by_head(home: Path) -> None:
    repos = make_repos(home / "r", {"a.txt": (b"a\n", 0o644)})
    git(repos.project, "branch", f"fm/{TID}", "origin/main")
    write(repos.slot, "feature.txt", b"f\n")
    commit_all(repos.slot, "feature")
    git(repos.slot, "push", "-q", "origin", "HEAD:main")
    git(repos.project, "fetch", "-q", "origin")
    facts = repos.check()
    assert facts.landed and facts.merged, facts


# --------------------------------------------------------------------------- nested repositories


def test_a_nested_repository_is_named_with_its_work(home: Path) -> None:
    repos = make_repos(home / "r", {"a.txt": (b"a\n", 0o644)})
    lib = repos.slot / "vendor" / "lib"
    lib.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(lib)], check=True)
    identity(lib)
    write(lib, "lib.py", b"v1\n")
    commit_all(lib, "lib")
    write(lib, "lib.py", b"v1, fixed\n")
    inner = lib / "deep"
    inner.mkdir()
    subprocess.run(["git", "init", "-q", str(inner)], check=True)
    write(inner, "x.txt", b"x\n")
    facts = repos.check()
    assert not facts.landed
    assert facts.dirty == ("vendor/lib/",)
    [outer, deeper] = facts.nested
    assert (outer.path, outer.total, outer.commits) == ("vendor/lib/", 2, 1)
    assert outer.named == ("vendor/lib/lib.py", "vendor/lib/deep/")
    assert (deeper.path, deeper.total, deeper.named) == (
        "vendor/lib/deep/",
        1,
        ("vendor/lib/deep/x.txt",),
    )


def test_a_save_never_keeps_a_nested_repository_as_a_bare_commit_id(home: Path) -> None:
    """`--force` refuses while a repository is nested in the slot; one made since the
    decision fails the save itself (exit 1, nothing discarded) instead of a gitlink that
    `fm restore` would bring back as an empty directory."""
    repos = make_repos(home / "r", {"a.txt": (b"a\n", 0o644)})
    lib = repos.slot / "vendor" / "lib"
    lib.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(lib)], check=True)
    identity(lib)
    write(lib, "lib.py", b"v1\n")
    commit_all(lib, "lib")
    write(repos.slot, "notes.txt", b"mine\n")
    with pytest.raises(FmError) as err:
        save_discarded(repos.record(), datetime(2026, 12, 1, tzinfo=UTC))
    assert err.value.verdict is Verdict.FAILED
    assert "nested repositories (vendor/lib)" in err.value.message
    assert git(repos.project, "for-each-ref", "refs/fm") == ""


# --------------------------------------------------------------------------- properties


EOLS = st.sampled_from([b"\n", b"\r\n"])


@dataclass(frozen=True)
class History:
    """A generated history: the slot changes block `mine` of identical blocks (and, with
    `mode`, makes `run.sh` executable); main first does `before` (an unrelated commit,
    the blocks reversed, the file renamed), then lands (`how`) or not, then maybe edits the
    landed block again (`after`)."""

    blocks: int
    eol: bytes
    mine: int
    mode: bool
    before: tuple[str, ...]
    how: str  # "cherry-pick", "squash", "by-hand", "other-block", "none"
    theirs: int  # the block "other-block" changes
    hand_mode: bool  # "by-hand" makes run.sh executable too
    after: bool

    @property
    def truly_landed(self) -> bool:
        """By construction: main holds the slot's exact change, in the same block (and the
        mode bit when the slot changed it)."""
        if self.how in ("cherry-pick", "squash"):
            return True
        if self.how == "by-hand":
            return self.hand_mode or not self.mode
        return False

    @property
    def git_cannot_tell(self) -> bool:
        """The other block's change, after main reversed the blocks, sits where the slot's
        block sat: the blocks differ only in their headers, so to git's line-by-line merge the
        reversal is two renamed headers and the change is the slot's own, in place (a
        cherry-pick of the slot's commit gives main's very tree). No replay, and no merge,
        can tell this apart from a landing: it is left out of the safety claim."""
        if self.how != "other-block" or "reverse" not in self.before:
            return False
        return self.blocks - 1 - self.theirs == self.mine and not self.mode

    @property
    def surely_provable(self) -> bool:
        """A landing git made itself (its own merge), or an edit by hand git's merge can follow
        (not across reversed blocks), in a file of the same name, unless a later edit hides
        it from the one rung left (main's commit holding more than the slot's): some rung must
        prove it."""
        if not self.truly_landed:
            return False
        if "rename" in self.before:
            # The patches name another file: only a merge that changes nothing proves it, and
            # git's rename detection may not pair the two files (identical blocks, shifted).
            return False
        if self.how == "by-hand" and "reverse" in self.before:
            return False  # git's merge cannot tell which of the reversed blocks is which
        if self.how == "by-hand" and self.hand_mode and not self.mode:
            # main's commit holds more (the mode bit): no patch matches, and only a merge
            # that changes nothing proves it, which main's later edit makes conflict.
            return not self.after
        return True


@st.composite
def histories(draw: st.DrawFn) -> History:
    blocks = draw(st.integers(2, 3))
    mine = draw(st.integers(0, blocks - 1))
    how = draw(st.sampled_from(["cherry-pick", "squash", "by-hand", "other-block", "none"]))
    return History(
        blocks=blocks,
        eol=draw(EOLS),
        mine=mine,
        mode=draw(st.booleans()),
        before=tuple(
            draw(
                st.lists(
                    st.sampled_from(["unrelated", "shift", "reverse", "rename"]),
                    max_size=2,
                    unique=True,
                )
            )
        ),
        how=how,
        theirs=draw(st.sampled_from([i for i in range(blocks) if i != mine])),
        hand_mode=draw(st.booleans()),
        after=draw(st.booleans()),
    )


NAMES = ("alpha", "beta", "gamma")


def _blocks(h: History, values: dict[str, int], order: list[str]) -> bytes:
    return b"".join(block(n, values[n], h.eol) for n in order)


def _build(root: Path, h: History) -> tuple[Repos, History]:
    """The repositories of `h`, and `h` as it came out (a landing git refused is none)."""
    names = list(NAMES[: h.blocks])
    values = dict.fromkeys(names, 30)
    repos = make_repos(
        root, {"conf.ini": (_blocks(h, values, names), 0o644), "run.sh": (b"#!/bin/sh\n", 0o644)}
    )
    git(repos.project, "config", "core.autocrlf", "false")
    # The slot: one commit on block `mine` (and the mode bit).
    mine = names[h.mine]
    write(repos.slot, "conf.ini", _blocks(h, {**values, mine: 60}, names))
    if h.mode:
        (repos.slot / "run.sh").chmod(0o755)
    change = commit_all(repos.slot, f"{mine}: timeout 60")
    other = repos.main()
    git(other, "config", "core.autocrlf", "false")
    order, name, prefix = list(names), "conf.ini", b""

    def render(vals: dict[str, int]) -> None:
        write(other, name, prefix + _blocks(h, vals, order))

    for step in h.before:
        if step == "unrelated":
            write(other, "unrelated.txt", b"theirs\n")
        elif step == "reverse":
            order.reverse()
            render(values)
        elif step == "shift":
            prefix = b"".join(b"# managed by ops, line %d" % i + h.eol for i in range(5))
            render(values)
        else:
            git(other, "mv", name, "settings.ini")
            name = "settings.ini"
        commit_all(other, f"before: {step}")
    landed = dict(values)
    if h.how in ("cherry-pick", "squash"):
        git(other, "fetch", "-q", str(repos.project), change)
        if h.how == "cherry-pick":
            git(other, "cherry-pick", "FETCH_HEAD", check=False)
        else:
            git(other, "merge", "-q", "--squash", "FETCH_HEAD", check=False)
            if not git(other, "ls-files", "--unmerged"):
                git(other, "commit", "-q", "-m", "squashed (#7)", check=False)
        if git(other, "status", "--porcelain", "--untracked-files=no"):
            # git could not land it (a conflict): then main does not hold it.
            git(other, "cherry-pick", "--abort", check=False)
            git(other, "reset", "-q", "--hard", "HEAD")
            h = replace(h, how="none")
        else:
            landed[mine] = 60
    elif h.how == "by-hand":
        landed[mine] = 60
        render(landed)
        if h.hand_mode:
            (other / "run.sh").chmod(0o755)
        commit_all(other, f"{mine}: timeout 60, by hand")
    elif h.how == "other-block":
        theirs = names[h.theirs]
        landed[theirs] = 60
        render(landed)
        commit_all(other, f"{theirs}: timeout 60")
    if h.after and h.how != "none":
        target = mine if h.how != "other-block" else names[h.theirs]
        render({**landed, target: 75})
        commit_all(other, f"{target}: timeout 75")
    repos.land()
    return repos, h


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(histories())
def test_generated_histories_land_only_what_main_truly_holds(home: Path, h: History) -> None:
    """Safety: work main does not hold (another block, a lost mode bit, nothing) is never
    landed, dry run or real. Liveness: a landing git made itself (a cherry-pick, a squash)
    and an edit by hand where nothing moved are proven by some rung."""
    root = Path(tempfile.mkdtemp(dir=home))
    try:
        repos, h = _build(root, h)
        facts = repos.check()
        if not h.truly_landed and not h.git_cannot_tell:
            assert not facts.landed and not facts.merged, (h, facts)
        elif h.surely_provable:
            assert facts.landed and facts.merged, (h, facts)
        assert facts.dirty == ()
    finally:
        shutil.rmtree(root, ignore_errors=True)
