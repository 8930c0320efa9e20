"""The state dir's record files, read the cheap way: through the open directory, by name,
and not again while unchanged.

`load_fleet` (`model/records.py`) reads every record of the fleet; a real run reads them
again right before each destructive call. Only what is plainly a record is read here (a
regular file within the size limit, UTF-8 without NUL); anything else goes to the careful
reader (`records.read_meta`), which says what is wrong with it.
"""

from __future__ import annotations

import os
import stat
import time

__all__ = ["MAX_RECORD_BYTES", "RecordDir", "keep_reads", "keeping", "plain_file"]

# A record is a handful of short lines; anything bigger is not one of ours.
MAX_RECORD_BYTES = 64 * 1024


def plain_file(entry: os.DirEntry[str]) -> bool:
    """The listing says a regular file (no extra system call on Linux); anything else is
    read by `read_meta`, which says what it is."""
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


class RecordDir:
    """The state dir, open: its records read by name, without a path join or an lstat each.

    A record is read the cheap way only when it is plainly one (a regular file, within the
    size limit, UTF-8 without NUL); anything else (None) goes to `read_meta`, which reads it
    again and says what is wrong with it. Never follows a link, never blocks on a FIFO."""

    _FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

    def __init__(self, path: str) -> None:
        self._path = path
        self._fd = -1

    def __enter__(self) -> RecordDir:
        try:
            self._fd = os.open(self._path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self._fd = -1  # every record then goes to read_meta
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)

    def read(self, name: str) -> tuple[str, int] | None:
        if self._fd < 0:
            return None
        keep = _KEEPING[0]
        where = f"{self._path}/{name}" if keep else ""
        kept = _SETTLED.get(where) if keep else None
        if kept is not None:
            try:
                now = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
            except OSError:
                now = None  # read below, which says what it is
            if now is not None and _signature(now) == kept[0]:
                return kept[1]
        try:
            fd = os.open(name, self._FLAGS, dir_fd=self._fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RECORD_BYTES:
                return None
            data = os.read(fd, MAX_RECORD_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > MAX_RECORD_BYTES or b"\0" in data:
            return None
        try:
            got = data.decode("utf-8"), st.st_mtime_ns
        except UnicodeDecodeError:
            return None
        if keep and time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS:
            _SETTLED[where] = (_signature(st), got)
        return got


# A real run reads the fleet's records again right before each destructive call. A record
# whose file is unchanged since this process read it (same inode, size, mode, modification and
# change times) is not read again; only one that had settled when it was read is kept, as git
# treats a "racily clean" index entry: a file written within the clock's granularity of the
# read could be written again with the same times and size, and so is always read again.
_SETTLED_NS = 2_000_000_000
# Whether this process keeps what it read (`keep_reads`): only a real run reads the fleet
# more than once; a dry run or an audit reads it once and keeps nothing.
_KEEPING = [False]
_SETTLED: dict[str, tuple[tuple[int, ...], tuple[str, int]]] = {}


def keep_reads() -> None:
    """From now on, what is read is kept for the next look (a real run: `pipeline/stages`)."""
    _KEEPING[0] = True


def keeping() -> bool:
    return _KEEPING[0]


def _signature(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
