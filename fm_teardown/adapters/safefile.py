"""Appending a line to a file fm does not own alone, without ever writing through a link.

The journal, the cost-attribution table and its lock live in the fleet's `data/` directory,
where anyone can plant a symlink or a hard link to another task's record. fm writes such a
file only when it is absent or a regular file with exactly one link: judged with `lstat`,
opened with `O_NOFOLLOW | O_NONBLOCK` (a FIFO must not hang fm) and judged again on the open
descriptor, so that a swap between the check and the open is caught. A file whose last line
lacks its newline gets one first, so fm's line never glues onto someone else's.

fm's own files (the journal, the cost table, the locks) are never written inside a task's
work either (spec §14.8, §15.2): when a directory on the path to one of them is, resolved,
inside a slot or a task's temp dir of the run's `WorkPlaces` (`model/own_files.py`: what the
run found when it looked at the fleet, passed down by the caller; nothing is kept here between
runs), fm does not create or write anything there (`InsideWork`); its callers warn, and a
real run that needs its journal refuses.
"""

from __future__ import annotations

import errno
import os
import stat

from fm_teardown.model.own_files import WorkPlaces
from fm_teardown.model.paths import canonical, is_within

__all__ = [
    "TASK_TMP_PREFIX",
    "InsideWork",
    "LinkRefused",
    "append_line",
    "inside_work",
    "open_single",
    "problem",
    "refuse_inside_work",
    "task_tmp_of",
]

# Every task's temp dir is `/tmp/fm-<id>` (the record format fixes it).
TASK_TMP_PREFIX = "fm-"


class LinkRefused(OSError):
    """The file is a link (symbolic or hard) or not a regular file: fm does not write it."""


class InsideWork(LinkRefused):
    """A directory on the way to one of fm's own files lies inside a slot or a task's temp
    dir: fm does not write there (another task's tree, or a tree the pool resets)."""


def task_tmp_of(real: str) -> str | None:
    """The task temp dir (`/tmp/fm-<anything>`, the one root every task's temp dir has,
    whoever's record names it) that the resolved path `real` lies in, or None."""
    tmp = canonical("/tmp")
    if not is_within(real, tmp) or real == tmp:
        return None
    first = os.path.relpath(real, tmp).split(os.sep, 1)[0]
    return os.path.join(tmp, first) if first.startswith(TASK_TMP_PREFIX) else None


def inside_work(path: str, places: WorkPlaces) -> str | None:
    """Why fm must not write its own file `path`, or None: the directory holding it, every
    link on the way resolved, is inside a slot or a task's temp dir of `places`."""
    where = os.path.dirname(os.path.abspath(path))
    real = canonical(where)
    # The directory and each one above it, deepest first: the innermost place that holds it
    # (a lookup per level, whatever the number of places: an audit asks for every row).
    ancestors = [real]
    while ancestors[-1] != "/":
        ancestors.append(os.path.dirname(ancestors[-1]))
    tmp = next((a for a in ancestors if a in places.task_tmps), None)
    if tmp is not None:
        return f"{where} is inside the task temp dir {tmp}"
    slot = next((a for a in ancestors if a in places.slots), None)
    if slot is not None:
        said = where if real == where else f"{where} (resolved: {real})"
        return f"{said} is inside the slot {slot}, a task's work"
    return None


def refuse_inside_work(path: str, places: WorkPlaces) -> None:
    """Raise `InsideWork` when fm must not write its own file `path` (`inside_work`)."""
    why = inside_work(path, places)
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
    symlink, checked before the open and again on the descriptor; raises `LinkRefused`.
    Where it lies is the caller's to check first (`refuse_inside_work`)."""
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


def append_line(path: str, line: bytes, places: WorkPlaces) -> None:
    """Append one line (ending in a newline) in one write, a missing final newline first,
    never inside a task's work (`places`). Raises `LinkRefused` (`InsideWork`) or another
    `OSError`; the caller warns and goes on."""
    refuse_inside_work(path, places)
    fd = open_single(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        payload = (b"\n" if _needs_newline(fd) else b"") + line
        os.write(fd, payload)  # one write: appends of several fm runs never interleave
    finally:
        os.close(fd)
