"""Appending a line to a file fm does not own alone, without ever writing through a link.

The journal, the cost-attribution table and its lock live in the fleet's `data/` directory,
where anyone can plant a symlink or a hard link to another task's record. fm writes such a
file only when it is absent or a regular file with exactly one link: judged with `lstat`,
opened with `O_NOFOLLOW | O_NONBLOCK` (a FIFO must not hang fm) and judged again on the open
descriptor, so that a swap between the check and the open is caught. A file whose last line
lacks its newline gets one first, so fm's line never glues onto someone else's.

fm's own files (the journal, the cost table, the locks) are never written inside a task's
work either (spec §14.8): when a directory on the path to one of them is, resolved, inside a
slot of the fleet (`forbid`: the slots the records name, registered once they are observed) or
inside a task's temp dir (`forbid_task_tmps`: `/tmp/fm-<id>` of every task the records name,
and every `tasktmp=`), fm does not create or write anything there
(`InsideWork`); its callers warn, and a real run that needs its journal refuses.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable

from fm_teardown.model.paths import canonical, is_within

__all__ = [
    "TASK_TMP_PREFIX",
    "InsideWork",
    "LinkRefused",
    "append_line",
    "forbid",
    "forbid_task_tmps",
    "inside_work",
    "open_single",
    "problem",
    "refuse_inside_work",
    "task_tmp_of",
]

# Every task's temp dir is `/tmp/fm-<id>` (the record format fixes it).
TASK_TMP_PREFIX = "fm-"

# The canonical slots of the fleets this process observed, and their tasks' temp dirs: fm's
# own files never go there.
_FORBIDDEN: set[str] = set()
_TASK_TMPS: set[str] = set()


class LinkRefused(OSError):
    """The file is a link (symbolic or hard) or not a regular file: fm does not write it."""


class InsideWork(LinkRefused):
    """A directory on the way to one of fm's own files lies inside a slot or a task's temp
    dir: fm does not write there (another task's tree, or a tree the pool resets)."""


def forbid(slots: Iterable[str]) -> None:
    """Register slots (canonical paths) that fm's own files must never be inside."""
    _FORBIDDEN.update(s for s in slots if s and os.path.isabs(s))


def forbid_task_tmps(dirs: Iterable[str]) -> None:
    """Register the temp dirs (canonical) of the tasks the fleet records. Only those: a
    directory merely named `/tmp/fm-<something>` (a test harness's, a backup's) is no task's
    until a record names that task, and fm's own files may live there."""
    _TASK_TMPS.update(d for d in dirs if d and os.path.isabs(d))


def task_tmp_of(real: str) -> str | None:
    """The task temp dir (`/tmp/fm-<anything>`, the one root every task's temp dir has,
    whoever's record names it) that the resolved path `real` lies in, or None."""
    tmp = canonical("/tmp")
    if not is_within(real, tmp) or real == tmp:
        return None
    first = os.path.relpath(real, tmp).split(os.sep, 1)[0]
    return os.path.join(tmp, first) if first.startswith(TASK_TMP_PREFIX) else None


def inside_work(path: str) -> str | None:
    """Why fm must not write its own file `path`, or None: the directory holding it, every
    link on the way resolved, is inside a slot of the fleet or a task's temp dir."""
    where = os.path.dirname(os.path.abspath(path))
    real = canonical(where)
    for tmp in sorted(_TASK_TMPS, key=len, reverse=True):
        if is_within(real, tmp):
            return f"{where} is inside the task temp dir {tmp}"
    for slot in sorted(_FORBIDDEN, key=len, reverse=True):
        if is_within(real, slot):
            said = where if real == where else f"{where} (resolved: {real})"
            return f"{said} is inside the slot {slot}, a task's work"
    return None


def refuse_inside_work(path: str) -> None:
    """Raise `InsideWork` when fm must not write its own file `path` (`inside_work`)."""
    why = inside_work(path)
    if why is not None:
        raise InsideWork(errno.EPERM, f"{why}: fm does not write its own files there", path)


def problem(st: os.stat_result) -> str | None:
    """Why a file with this (l)stat must not be written, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_nlink != 1:
        return f"it has {st.st_nlink} hard links (another name may be someone else's file)"
    return None


def open_single(path: str, flags: int, mode: int = 0o644) -> int:
    """Open `path` (created if absent) only if it is a regular file with one link and not a
    symlink, checked before the open and again on the descriptor, and never inside a task's
    work (`inside_work`); raises `LinkRefused`."""
    refuse_inside_work(path)
    try:
        why = problem(os.lstat(path))
    except FileNotFoundError:
        why = None
    if why is not None:
        raise LinkRefused(errno.EPERM, why, path)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(errno.ELOOP, "it is a symlink", path) from None
        raise
    try:
        why = problem(os.fstat(fd))
        if why is not None:
            raise LinkRefused(errno.EPERM, why, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _needs_newline(fd: int) -> bool:
    """Does the file's last byte lack a newline (a non-empty file whose last line is open)?"""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def append_line(path: str, line: bytes) -> None:
    """Append one line (ending in a newline) in one write, a missing final newline first.
    Raises `LinkRefused` or another `OSError`; the caller warns and goes on."""
    fd = open_single(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        payload = (b"\n" if _needs_newline(fd) else b"") + line
        os.write(fd, payload)  # one write: appends of several fm runs never interleave
    finally:
        os.close(fd)
