"""Appending a line to a file fm does not own alone, without ever writing through a link.

The journal, the cost-attribution table and its lock live in the fleet's `data/` directory,
where anyone can plant a symlink or a hard link to another task's record. fm writes such a
file only when it is absent or a regular file with exactly one link: judged with `lstat`,
opened with `O_NOFOLLOW | O_NONBLOCK` (a FIFO must not hang fm) and judged again on the open
descriptor, so that a swap between the check and the open is caught. A file whose last line
lacks its newline gets one first, so fm's line never glues onto someone else's.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["LinkRefused", "append_line", "open_single", "problem"]


class LinkRefused(OSError):
    """The file is a link (symbolic or hard) or not a regular file: fm does not write it."""


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
    symlink, checked before the open and again on the descriptor; raises `LinkRefused`."""
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
