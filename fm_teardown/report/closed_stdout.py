"""A closed or broken stdout or stderr (`fm teardown X | head -1`, `2>&1 | head -0`, `>&-`,
`2>&-`) never changes what fm does or the exit code it returns.

Python raises BrokenPipeError on the write or flush that meets a pipe whose reader is gone,
wherever that is: in the middle of a batch it would stop the batch, at exit it turns the
exit code into 1 and prints a traceback (to a stderr that may be that very pipe). A stream
closed before fm starts is worse: Python sets `sys.stdout` (or `sys.stderr`) to None, every
line fm writes fails, and the first file fm opens gets that descriptor, so a child process
or a stray write would put its output into it.

`guard()` runs once, first thing at each entry point (`fm`, `fm-teardown`): a standard
descriptor (0, 1, 2) that is closed is opened on /dev/null, so nothing of fm's ever lands
there; stdout and stderr are wrapped so that the first write or flush that finds them broken
points the descriptor at /dev/null, and everything after it (the rest of the output, the
flush at exit) goes there quietly. The run goes on exactly as it would have with a reader.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO

__all__ = ["guard", "settle"]

# What a write may meet on a stream nobody reads any more: the pipe's reader gone (EPIPE),
# a terminal hung up (EIO), a full disk under a redirection; and a stream already closed.
_BROKEN = (OSError, ValueError)


class _Guarded:
    """A standard stream, with a reader that is gone treated as one that reads nothing."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def _divert(self) -> None:
        # The reader is gone: what is still buffered and everything later goes nowhere.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._inner.fileno())
            os.close(devnull)

    def write(self, text: str) -> int:
        try:
            return self._inner.write(text)
        except _BROKEN:
            self._divert()
            return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._inner.flush()
        except _BROKEN:
            self._divert()
            with contextlib.suppress(*_BROKEN):
                self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _fill_closed_descriptors() -> None:
    """Open /dev/null on each standard descriptor that is closed (`>&-`, `2>&-`, `<&-`), in
    order, so that the lowest free descriptor a later open gets is never 0, 1 or 2."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_RDWR)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)


def _quiet(stream: TextIO | None) -> TextIO:
    """A stream that was closed when fm started writes to /dev/null (its descriptor is)."""
    if stream is not None:
        return stream
    return open(os.devnull, "w", encoding="utf-8")  # lives as long as fm


def guard() -> None:
    """Fill closed standard descriptors and wrap sys.stdout and sys.stderr (once each) so
    that a closed or broken reader never raises."""
    _fill_closed_descriptors()
    if not isinstance(sys.stdout, _Guarded):
        sys.stdout = _Guarded(_quiet(sys.stdout))
    if not isinstance(sys.stderr, _Guarded):
        sys.stderr = _Guarded(_quiet(sys.stderr))


def settle() -> None:
    """Flush stdout and stderr before exiting, without a traceback when a reader is gone
    (the interpreter's own flush at exit would otherwise report the closed pipe)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
