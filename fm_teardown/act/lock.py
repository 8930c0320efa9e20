"""The slot lock: an flock that serialises teardowns touching the same slot.

It lives in the state dir (`.slot-<hash>.lock`; a leading dot, so it can never be taken for a
task's sidecar) and is released by the kernel when the process dies, so a crashed teardown
never leaves a lock held (at most an unheld file, which the next taker reuses and removes).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fm_teardown.adapters import interrupts, safefile
from fm_teardown.model.errors import ErrorCode, FmError, Verdict
from fm_teardown.model.own_files import NOWHERE, WorkPlaces, lock_path

__all__ = ["slot_lock"]


@contextmanager
def slot_lock(
    state_dir: Path, slot: str, timeout: float, places: WorkPlaces = NOWHERE
) -> Iterator[None]:
    """Hold the slot's lock; the file is removed on release, so the state dir stays clean.

    Removing an flock file is safe only if every taker checks, once it holds the lock, that
    the path still names the file it locked (else a waiter could lock a file already unlinked
    while a newcomer creates and locks a fresh one): so a taker retries until it does.
    """
    path = lock_path(state_dir, slot)
    inside = safefile.inside_work(str(path), places)
    if inside is not None:
        # A lock file created inside a slot would be another task's tree (or reset away).
        raise FmError(
            Verdict.UNSAFE,
            f"the slot lock {path} would be written where fm never writes its own files: {inside}",
            ("point the state dir (FM_HOME, FM_STATE_OVERRIDE) outside every slot, then re-run",),
            code=ErrorCode.SLOT_LOCK_INSIDE_WORK,
        )
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise FmError(
                Verdict.FAILED, f"cannot open the slot lock {path}: {exc.strerror}"
            ) from None
        try:
            _acquire(fd, path, slot, timeout, deadline)
            held = os.fstat(fd)
            try:
                now = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
                continue  # released and removed meanwhile: take the current file
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            return
        finally:
            os.close(fd)


def _acquire(fd: int, path: Path, slot: str, timeout: float, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if interrupts.requested():
                # Ctrl-C while another teardown holds the slot: stop here, not when the
                # (long) wait runs out; nothing was done under the lock.
                raise interrupts.Interrupted(f"waiting for the slot lock {path}") from None
            if time.monotonic() >= deadline:
                raise FmError(
                    Verdict.FAILED,
                    f"another teardown of slot {slot} still holds {path} after {timeout:g}s",
                    code=ErrorCode.SLOT_LOCK_BUSY,
                ) from None
            time.sleep(0.05)
