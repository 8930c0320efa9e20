"""Reading the files git reads (config files, the index, `.git` files, `commondir`) as fm
must: a regular file only (a FIFO must not hang fm), bounded in size, with its stat signature
for the caches that keep what was read while the file is unchanged (`git_config`)."""

from __future__ import annotations

import os
import stat
from typing import TypeVar

__all__ = ["CACHED", "Unreadable", "kept", "read", "signature"]


class Unreadable(Exception):
    """A file git would read exists but cannot be read (or parsed): the scan fails closed."""


def signature(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read(path: str, limit: int, what: str = "file") -> tuple[bytes, tuple[int, ...]] | None:
    """A regular file's bytes and stat signature (followed through links, as git does);
    None when it does not exist; Unreadable when it exists but is not a regular file git
    could read (a FIFO must not hang fm), is too large, or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise Unreadable(f"cannot read the {what} ({exc.strerror}): {path}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(f"the {what} is not a regular file: {path}")
        if st.st_size > limit:
            raise Unreadable(f"the {what} is larger than {limit >> 20} MiB: {path}")
        # One read asking for a byte more than its size says: a regular file that gives less
        # than asked is at its end (a fleet's slots have a few such files each, and a second
        # read to hear that would be a fifth of the look's system calls); one that grew since
        # is read on, within the bound.
        chunks = [os.read(fd, st.st_size + 1)]
        got = len(chunks[0])
        while got > st.st_size:
            if got > limit:
                raise Unreadable(f"the {what} is larger than {limit >> 20} MiB: {path}")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks), signature(st)
    except OSError as exc:
        raise Unreadable(f"cannot read the {what} ({exc.strerror}): {path}") from None
    finally:
        os.close(fd)


# Entries each of these caches keeps (a fleet's repositories): each is checked against its
# file's stat, and past the bound it starts afresh, so a long-lived process does not grow.
CACHED = 4096
_K = TypeVar("_K")
_V = TypeVar("_V")


def kept(cache: dict[_K, _V], key: _K, val: _V) -> _V:
    if len(cache) >= CACHED:
        cache.clear()
    cache[key] = val
    return val
