"""Ctrl-C and SIGTERM during a real run (spec §7a): stop at the next step boundary.

While deciding, nothing has changed yet, so an interrupt ends the run at once (as
KeyboardInterrupt). Once acting has begun, a signal only raises a flag: the step under way
finishes (a grace wait ends early), no later step runs, the record is kept when steps are
left, and the run exits 130 with its journal line.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Interrupted", "requested", "sleep", "while_acting", "while_batch", "while_deciding"]

_flag = threading.Event()
# Inside a batch the flag outlives each task's run: an interrupt that lands between two
# step boundaries, in a task's last step or between two tasks is never lost.
_batch = threading.Event()


class Interrupted(Exception):
    """SIGINT, SIGTERM (or, in `fm demo`, SIGHUP) arrived: stop here, at a step boundary or
    where a handler raised it. The one exception fm's commands raise for an interrupt; `what`
    says where it stopped (or what was undone), `hints` what to do next."""

    def __init__(self, what: str, hints: tuple[str, ...] = ()) -> None:
        super().__init__(what)
        self.what = what
        self.hints = hints


def requested() -> bool:
    return _flag.is_set()


def _raise(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _note(signum: int, frame: FrameType | None) -> None:
    _flag.set()


@contextmanager
def while_deciding() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C (KeyboardInterrupt): nothing has been changed yet."""
    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def while_acting() -> Iterator[None]:
    """SIGINT and SIGTERM only raise the flag; steps check it at their boundaries."""
    if not _batch.is_set():
        _flag.clear()
    old_int = signal.signal(signal.SIGINT, _note)
    old_term = signal.signal(signal.SIGTERM, _note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


@contextmanager
def while_batch() -> Iterator[None]:
    """A whole batch: SIGINT and SIGTERM only raise the flag, from the first task to the
    summary; the batch checks it between tasks and each run at its step boundaries."""
    _flag.clear()
    _batch.set()
    old_int = signal.signal(signal.SIGINT, _note)
    old_term = signal.signal(signal.SIGTERM, _note)
    try:
        yield
    finally:
        _batch.clear()
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def sleep(seconds: float) -> bool:
    """Sleep up to `seconds`, ending early on an interrupt; True if interrupted."""
    deadline = time.monotonic() + seconds
    while not _flag.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, 0.02))
    return True
