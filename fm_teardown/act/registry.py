"""The secondmate registry `data/secondmates.md`: a retired secondmate's route line goes.

firstmate routes work to a secondmate by its line `- <id> - <description> (home: ...; ...)`
in the registry; once the secondmate is torn down the route must not send work to a home that
no longer exists. Only the lines of exactly that id are removed; the rest of the file is kept
byte for byte. The file is replaced in one rename, never written through a symlink, and not
while firstmate's own writer holds its registry lock (`state/.secondmate-registry.lock`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time

from fm_teardown.adapters import safefile
from fm_teardown.model.own_files import WorkPlaces

__all__ = ["LOCK", "LOCK_WAIT_SECS", "REGISTRY", "RegistryWarning", "remove_route"]

REGISTRY = "secondmates.md"
LOCK = ".secondmate-registry.lock"
# How long a registry lock held by firstmate's writer is waited for (it holds it for one
# rewrite of a small file).
LOCK_WAIT_SECS = 5.0
_POLL_SECS = 0.05
_MAX_BYTES = 4 * 1024 * 1024


class RegistryWarning(Exception):
    """The line could not be removed: the teardown goes on and says so."""


def _routes(line: bytes, task: bytes) -> bool:
    return line == b"- " + task or line.startswith(b"- " + task + b" ")


def remove_route(data_dir: str, state_dir: str, task: str, places: WorkPlaces) -> str:
    """Remove `task`'s route lines from `data_dir/secondmates.md`; what was done, in words.
    Raises RegistryWarning when it cannot be done safely."""
    path = os.path.join(data_dir, REGISTRY)
    inside = safefile.inside_work(path, places)
    if inside is not None:
        # Its rewrite goes through a temporary file beside it: never inside a task's work.
        raise RegistryWarning(f"{inside}: {path} left alone")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f"no {path}: no route to remove"
    except OSError as exc:
        raise RegistryWarning(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise RegistryWarning(f"{path} is not a regular file (a symlink?): left alone")
    lock = os.path.join(state_dir, LOCK)
    deadline = time.monotonic() + LOCK_WAIT_SECS
    while os.path.lexists(lock):
        if time.monotonic() >= deadline:
            raise RegistryWarning(f"firstmate's registry lock {lock} is held: {path} left alone")
        time.sleep(_POLL_SECS)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise RegistryWarning(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_BYTES:
        raise RegistryWarning(f"{path} is larger than {_MAX_BYTES} bytes: left alone")
    lines = data.split(b"\n")
    key = task.encode()
    kept = [line for line in lines if not _routes(line, key)]
    if len(kept) == len(lines):
        return f"{path} has no route for {task}"
    tmp = f"{path}.fm-{os.getpid()}.tmp"
    try:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, st.st_mode & 0o777)
        try:
            os.write(out, b"\n".join(kept))
            os.fsync(out)
        finally:
            os.close(out)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise RegistryWarning(f"cannot rewrite {path}: {exc.strerror}") from None
    return f"removed {task}'s route from {path}"
