"""Stale git index.lock handling, with a real linked worktree and real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from fm_teardown.act.gitlock import (
    assess,
    index_lock_path,
    remove_if_provably_stale,
)
from fm_teardown.adapters.pool import ReturnResult

MIN_AGE = 30.0
# A long-lived child: prints "ready" once it holds what it must hold, then waits to be killed.
HOLD_OPEN = (
    "import sys, time\nf = open(sys.argv[1], 'rb')\nprint('ready', flush=True)\ntime.sleep(600)\n"
)
IDLE = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"


def git(cwd: Path, *args: str) -> str:
    r = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture
def slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", "-b", "main", str(project)], check=True)
    git(project, "config", "user.name", "Test Person")
    git(project, "config", "user.email", "test@example.com")
    (project / "README.md").write_text("hello\n")
    git(project, "add", "README.md")
    git(project, "commit", "-q", "-m", "initial")
    git(project, "remote", "add", "origin", str(origin))
    git(project, "push", "-q", "origin", "main")
    wt = tmp_path / "pool" / "1" / "project"
    git(project, "worktree", "add", "-q", "--detach", str(wt), "main")
    return wt


@pytest.fixture
def lock(slot: Path) -> Path:
    path = index_lock_path(str(slot))
    assert path is not None
    lock = Path(path)
    lock.write_bytes(b"")
    return lock


def age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past), follow_symlinks=False)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def start(children: list[subprocess.Popen[bytes]], code: str, *args: str, cwd: Path) -> int:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, stdout=subprocess.PIPE)
    children.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"  # blocks until the child holds its ground
    return proc.pid


def test_a_held_git_lock_is_read_from_treehouse_output_by_the_pool_adapter() -> None:
    text = (
        "failed to return worktree: git read-tree --reset -u 0123abc: fatal: Unable to create "
        "'/h/project/.git/worktrees/project/index.lock': File exists.\n\nAnother git process..."
    )
    assert ReturnResult(1, text).git_lock_held
    assert ReturnResult(128, 'Unable to create "/x/.git/index.lock": File exists').git_lock_held
    assert not ReturnResult(1, "fatal: not a git repository").git_lock_held
    # A return that succeeded is not a failure on a lock, whatever treehouse printed.
    assert not ReturnResult(0, text).git_lock_held
    assert ReturnResult(1, "worktree /p/1/r is not leased").not_leased
    assert ReturnResult(1, "one\ntwo\n").last_line == "two"


def test_index_lock_path_of_a_linked_worktree(slot: Path, tmp_path: Path) -> None:
    path = index_lock_path(str(slot))
    assert path is not None and os.path.isabs(path)
    assert path.startswith(str(tmp_path / "project" / ".git" / "worktrees"))
    assert path.endswith("/index.lock")
    assert index_lock_path(str(tmp_path / "not-a-repo")) is None


def test_fresh_lock_is_not_stale_and_kept(lock: Path, slot: Path) -> None:
    verdict = remove_if_provably_stale(str(lock), str(slot), MIN_AGE)
    assert not verdict.stale
    assert "old" in verdict.reason
    assert lock.exists()


def test_age_is_measured_against_now(lock: Path, slot: Path) -> None:
    mtime = lock.stat().st_mtime
    assert not assess(str(lock), str(slot), MIN_AGE, now=mtime + 5)[0].stale
    assert assess(str(lock), str(slot), MIN_AGE, now=mtime + 3600)[0].stale
    assert lock.exists(), "judging never removes"


def test_old_lock_without_holder_is_removed(lock: Path, slot: Path) -> None:
    age(lock, 3600)
    verdict = remove_if_provably_stale(str(lock), str(slot), MIN_AGE)
    assert verdict.stale, verdict.reason
    assert "removed provably-stale git lock" in verdict.reason
    assert not lock.exists()
    assert git(slot, "status", "--porcelain") == ""  # git works in the slot again


def test_old_lock_held_open_by_a_live_process_is_kept(
    lock: Path, slot: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    age(lock, 3600)
    pid = start(children, HOLD_OPEN, str(lock), cwd=tmp_path)
    verdict = remove_if_provably_stale(str(lock), str(slot), MIN_AGE)
    assert not verdict.stale
    assert f"process {pid}" in verdict.reason and "holds it open" in verdict.reason
    assert lock.exists()


def test_old_lock_with_a_process_working_in_the_slot_is_kept(
    lock: Path, slot: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    age(lock, 3600)
    (slot / "sub").mkdir()
    pid = start(children, IDLE, cwd=slot / "sub")
    verdict = remove_if_provably_stale(str(lock), str(slot), MIN_AGE)
    assert not verdict.stale
    assert f"process {pid}" in verdict.reason and "inside the slot" in verdict.reason
    assert lock.exists()


def test_old_lock_with_a_file_open_in_the_slot_is_kept(
    lock: Path, slot: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    age(lock, 3600)
    start(children, HOLD_OPEN, str(slot / "README.md"), cwd=tmp_path)
    assert not assess(str(lock), str(slot), MIN_AGE)[0].stale


def test_holder_gone_makes_it_stale(
    lock: Path, slot: Path, tmp_path: Path, children: list[subprocess.Popen[bytes]]
) -> None:
    age(lock, 3600)
    start(children, HOLD_OPEN, str(lock), cwd=tmp_path)
    assert not assess(str(lock), str(slot), MIN_AGE)[0].stale
    children[0].kill()
    children[0].wait(timeout=10)
    assert assess(str(lock), str(slot), MIN_AGE)[0].stale


def test_missing_lock_is_not_stale(slot: Path) -> None:
    path = index_lock_path(str(slot))
    assert path is not None
    verdict = remove_if_provably_stale(path, str(slot), MIN_AGE)
    assert not verdict.stale
    assert "does not exist" in verdict.reason


def test_symlinked_lock_is_not_stale_and_its_target_untouched(slot: Path, tmp_path: Path) -> None:
    path = index_lock_path(str(slot))
    assert path is not None
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    os.symlink(target, path)
    age(Path(path), 3600)
    verdict = remove_if_provably_stale(path, str(slot), MIN_AGE)
    assert not verdict.stale
    assert os.path.islink(path)
    assert target.read_text() == "keep me\n"


class _Uids:
    def __init__(self, uid: int) -> None:
        self.real = self.effective = self.saved = uid


class _HiddenProcess:
    """A process whose cwd and files may not be read (a non-dumpable daemon, say)."""

    def __init__(self, uid: int) -> None:
        self.pid = 4_000_000
        self._uid = uid

    def cwd(self) -> str:
        raise psutil.AccessDenied(self.pid)

    def uids(self) -> _Uids:
        return _Uids(self._uid)

    def name(self) -> str:
        return "ssh-agent"


def test_uninspectable_process_of_the_same_user_means_cannot_tell(
    lock: Path, slot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    age(lock, 3600)
    monkeypatch.setattr(psutil, "process_iter", lambda: iter([_HiddenProcess(os.getuid())]))
    verdict = remove_if_provably_stale(str(lock), str(slot), MIN_AGE)
    assert not verdict.stale
    assert "cannot tell" in verdict.reason and "ssh-agent" in verdict.reason
    assert lock.exists()


def test_uninspectable_process_of_another_user_does_not_matter(
    lock: Path, slot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    age(lock, 3600)
    other = os.getuid() + 4242
    monkeypatch.setattr(psutil, "process_iter", lambda: iter([_HiddenProcess(other)]))
    assert remove_if_provably_stale(str(lock), str(slot), MIN_AGE).stale
    assert not lock.exists()
