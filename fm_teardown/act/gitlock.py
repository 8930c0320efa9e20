"""A git `index.lock` left behind in a slot: tell whether it is provably stale, and only then
remove it.

A lock blocks the pool return (treehouse reports `Unable to create '…index.lock': File
exists`). The caller retries a bounded number of times; if the lock persists, it may remove it
only when it is provably stale:

- no process holds the lock file open or has the slot open (its cwd, or an open file or
  directory, inside the slot), read from /proc (psutil where there is no /proc), never lsof;
- its mtime is readable and at least `min_age` seconds old (a git command that is merely slow
  keeps writing, a crashed one stops).

Anything uncertain keeps the lock, with the reason: a process we are not allowed to inspect
that could be relevant, an unreadable mtime, a lock that changed while we looked. After a
removal the caller must run its safety checks again before the return, since the index may
hold a half-written state.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator

import psutil

from fm_teardown.adapters import runner
from fm_teardown.model.paths import canonical, is_within
from fm_teardown.model.values import value

__all__ = ["LockVerdict", "assess", "index_lock_path", "remove_if_provably_stale"]

# `rev-parse` is local and instant; the bound only guards against a hung filesystem.
_GIT_TIMEOUT = 30.0
_PROC = "/proc"


@value
class LockVerdict:
    stale: bool
    reason: str


def index_lock_path(worktree: str) -> str | None:
    """The absolute path of the slot's index lock, or None when git cannot tell.

    For a linked worktree this is `<common dir>/worktrees/<name>/index.lock`, outside the
    slot, so it is asked of git rather than guessed as `<slot>/.git/index.lock`.
    """
    r = runner.git(
        worktree,
        "rev-parse",
        "--path-format=absolute",
        "--git-path",
        "index.lock",
        timeout=_GIT_TIMEOUT,
    )
    path = r.out.decode("utf-8", "surrogateescape").strip()
    if not r.ok or not path:
        return None
    # Older gits ignore --path-format and answer relative to the directory they ran in.
    return path if os.path.isabs(path) else os.path.join(canonical(os.path.abspath(worktree)), path)


def remove_if_provably_stale(lock: str, slot: str, min_age: float) -> LockVerdict:
    """Remove `lock` only when it is provably stale; `stale` is True when it is gone now.

    The unlink removes the directory entry itself and never follows a symlink (a lock that
    is a symlink is not provably stale anyway). Just before it, the lock is looked at again:
    a lock replaced or touched since it was judged belongs to a new git command and is kept.
    """
    verdict, seen = assess(lock, slot, min_age)
    if not verdict.stale or seen is None:
        return verdict
    try:
        again = os.lstat(lock)
    except FileNotFoundError:
        return LockVerdict(True, f"git lock {lock} disappeared on its own")
    except OSError as exc:
        return LockVerdict(False, f"cannot read git lock {lock} again: {exc.strerror}; kept")
    if _identity(again) != _identity(seen):
        return LockVerdict(
            False, f"git lock {lock} changed while it was being checked (a new git command?); kept"
        )
    try:
        os.unlink(lock)
    except FileNotFoundError:
        return LockVerdict(True, f"git lock {lock} disappeared on its own")
    except OSError as exc:
        return LockVerdict(False, f"could not remove git lock {lock}: {exc.strerror}")
    return LockVerdict(True, f"removed provably-stale git lock {lock} ({verdict.reason})")


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


def assess(
    lock: str, slot: str, min_age: float, now: float | None = None
) -> tuple[LockVerdict, os.stat_result | None]:
    """Whether `lock` may be removed (old enough, held by no process), and the stat it was
    judged on (None unless stale)."""
    keep = "not provably stale"
    try:
        st = os.lstat(lock)
    except FileNotFoundError:
        return LockVerdict(False, f"git lock {lock} does not exist (nothing to remove)"), None
    except OSError as exc:
        return LockVerdict(False, f"cannot read mtime for git lock {lock}: {exc.strerror}"), None
    if not stat.S_ISREG(st.st_mode):
        return LockVerdict(False, f"git lock {lock} is not a regular file; {keep}"), None
    age = (time.time() if now is None else now) - st.st_mtime
    if age < min_age:
        # A fresh lock most likely belongs to a git command still running (or one that has
        # just ended, in which case the retry succeeds on its own).
        return (
            LockVerdict(
                False,
                f"git lock {lock} is only {max(age, 0.0):.0f}s old (under {min_age:g}s); {keep}",
            ),
            None,
        )
    holder = _holder(lock, slot, {os.getuid(), st.st_uid})
    if holder is not None:
        return LockVerdict(False, f"git lock {lock}: {holder}; {keep}"), None
    reason = f"it is {age:.0f}s old and no process holds it or has the slot open"
    return LockVerdict(True, reason), st


def _holder(lock: str, slot: str, owners: set[int]) -> str | None:
    """Why some process may still be using the lock or the slot, or None when none is.

    A process we may not inspect makes the answer "cannot tell", unless it cannot matter:
    - a process of another user (not ours, not the lock's owner) is skipped, as lsof skips
      it: it could not have written this user's lock, short of root, and then we would be
      root and could inspect it;
    - one of our own ancestors (e.g. a non-dumpable init or sudo) is waiting for this very
      command, so it is not in the middle of a git command; it is still checked when it can
      be read.
    A same-user process that hides its cwd and files (a non-dumpable agent such as
    ssh-agent) therefore keeps the lock: the reason names it, so the operator can act.
    """
    lock_path = canonical(os.path.abspath(lock))
    slot_path = canonical(os.path.abspath(slot))
    me = os.getpid()
    ancestors = _ancestors()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            cwd = proc.cwd()
            if cwd and is_within(cwd, slot_path):
                return f"process {proc.pid} ({_name(proc)}) works inside the slot {slot}"
            for path in _open_paths(proc):
                if path == lock_path:
                    return f"process {proc.pid} ({_name(proc)}) holds it open"
                if is_within(path, slot_path):
                    return f"process {proc.pid} ({_name(proc)}) has {path} open in the slot"
        except psutil.NoSuchProcess:  # includes zombies: an exited process holds nothing
            continue
        except psutil.AccessDenied:
            if proc.pid not in ancestors and _may_matter(proc, owners):
                return (
                    f"cannot tell: process {proc.pid} ({_name(proc)}) "
                    "may not be inspected (access denied)"
                )
    return None


def _ancestors() -> set[int]:
    try:
        return {p.pid for p in psutil.Process().parents()}
    except psutil.Error:
        return set()  # unknown ancestry: nothing is exempt, so we only keep more locks


def _open_paths(proc: psutil.Process) -> Iterator[str]:
    """Every path the process has open, directories included (psutil lists only files)."""
    fd_dir = f"{_PROC}/{proc.pid}/fd"
    if not os.path.isdir(_PROC):
        yield from (f.path for f in proc.open_files())
        return
    try:
        fds = os.listdir(fd_dir)
    except FileNotFoundError:
        raise psutil.NoSuchProcess(proc.pid) from None
    except PermissionError:
        raise psutil.AccessDenied(proc.pid) from None
    for fd in fds:
        try:
            yield os.readlink(f"{fd_dir}/{fd}")
        except FileNotFoundError:
            continue  # closed since the listing
        except PermissionError:
            raise psutil.AccessDenied(proc.pid) from None


def _may_matter(proc: psutil.Process, owners: set[int]) -> bool:
    try:
        uids = proc.uids()
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
    return uids.real in owners or uids.effective in owners


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return "?"
