"""A closed stdout (`fm teardown X | head -1`, a reader that exits early) never changes what
fm does or the exit code it returns.

Python raises BrokenPipeError on the write or flush that meets the closed pipe, wherever
that is: in the middle of a batch it would stop the batch, at exit it turns the exit code
into 1 and prints a traceback. `guard()` wraps stdout once, at the entry point: the first
write that finds the reader gone points fd 1 at /dev/null, and everything after it (the rest
of the output, the flush at exit) goes there quietly. The run goes on exactly as it would
have with a reader.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO

__all__ = ["guard", "settle"]


class _Guarded:
    """stdout, with a closed reader treated as one that reads nothing."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def _divert(self) -> None:
        # The reader is gone: what is still buffered and everything later goes nowhere.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._inner.fileno())
            os.close(devnull)

    def write(self, text: str) -> int:
        try:
            return self._inner.write(text)
        except BrokenPipeError:
            self._divert()
            return len(text)

    def flush(self) -> None:
        try:
            self._inner.flush()
        except BrokenPipeError:
            self._divert()
            with contextlib.suppress(OSError, ValueError):
                self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def guard() -> None:
    """Wrap sys.stdout (once) so that a closed reader never raises."""
    if not isinstance(sys.stdout, _Guarded) and sys.stdout is not None:
        sys.stdout = _Guarded(sys.stdout)


def settle() -> None:
    """Flush stdout before exiting, without a traceback when its reader is gone (the
    interpreter's own flush at exit would otherwise report the closed pipe)."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
