"""The slot lock: an flock that serialises teardowns touching the same slot.

It lives in the state dir (`.slot-<hash>.lock`; a leading dot, so it can never be taken for a
task's sidecar) and is released by the kernel when the process dies, so a crashed teardown
never leaves a lock behind.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fm_teardown.errors import FmError, Verdict


def lock_path(state_dir: Path, slot: str) -> Path:
    return state_dir / f".slot-{hashlib.sha256(slot.encode()).hexdigest()[:16]}.lock"


@contextmanager
def slot_lock(state_dir: Path, slot: str, timeout: float) -> Iterator[None]:
    path = lock_path(state_dir, slot)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise FmError(Verdict.FAILED, f"cannot open the slot lock {path}: {exc.strerror}") from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise FmError(
                        Verdict.FAILED,
                        f"another teardown of slot {slot} still holds {path} after {timeout:g}s",
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)
