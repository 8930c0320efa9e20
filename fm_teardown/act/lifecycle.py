"""firstmate's lifecycle locks, taken as firstmate's own scripts take them.

firstmate serialises every action on one task (spawn, relaunch, promote, teardown) with two
locks in the state dir: `.control-<id>.lock` (one lifecycle action at a time: a second one
refuses at once) and `.meta-<id>.lock` (writers of `<id>.meta`: a teardown waits for the
writer to finish). fm joins that protocol, so it never races firstmate's scripts on a task.

The lock format is firstmate's: the lock path is a symlink to an owner directory
`<lock>.owner.XXXXXX` holding a `pid` file (an older firstmate made the lock path itself a
directory holding `pid`). A lock is held while that pid is alive, or while the pid file is
not yet written and the lock is younger than 2 s (a taker between its two writes). A lock
whose holder died is taken over the way firstmate does it: under `<lock>.steal`, after
checking again that the same dead holder still has it. fm's pid is written, so a crashed fm
leaves a lock firstmate's next taker recovers.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from fm_teardown.model.errors import ErrorCode, FmError, refused

__all__ = [
    "Held",
    "control_path",
    "descendant_locks",
    "holder",
    "lifecycle_locks",
    "meta_path",
    "probe",
    "probe_descendants",
    "release",
    "try_acquire",
]

# A lock whose pid file is still empty is "being taken" for this long (firstmate's
# FM_LOCK_STALE_AFTER floor).
_MID_ACQUIRE_FRESH = 2.0
_POLL = 0.1  # firstmate's own wait step


def control_path(state_dir: Path, task: str) -> Path:
    return state_dir / f".control-{task}.lock"


def meta_path(state_dir: Path, task: str) -> Path:
    return state_dir / f".meta-{task}.lock"


class Held(Exception):
    """The lock is held by a live process (`pid`, or None while it is being taken)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(str(path))
        self.path = path
        self.pid = pid


def _pid_dir(lock: Path) -> Path | None:
    """The directory holding the lock's `pid` file: the symlink's owner dir, or the lock
    itself (firstmate's older directory form); None when there is no lock."""
    try:
        st = os.lstat(lock)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(lock)
        return Path(target) if os.path.isabs(target) else lock.parent / target
    return lock


def _read_pid(lock: Path) -> str | None:
    """The recorded holder's pid text ("" when not written yet); None when there is no lock."""
    where = _pid_dir(lock)
    if where is None:
        return None
    try:
        with open(where / "pid", encoding="utf-8", errors="replace") as f:
            return f.read(64).strip()
    except OSError:
        return ""


def _alive(pid: str) -> bool:
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process: held (firstmate's kill -0 would miss it)
    except (OverflowError, ValueError):
        return False
    return True


def _fresh(lock: Path) -> bool:
    try:
        age = time.time() - os.lstat(lock).st_mtime
    except OSError:
        return False
    return age < _MID_ACQUIRE_FRESH


def holder(lock: Path) -> Held | None:
    """Who holds `lock` now (a live pid, or a taker between its writes), or None: no lock,
    or one whose holder is gone (the next taker recovers it). Reads only."""
    pid = _read_pid(lock)
    if pid is None:
        return None
    if pid == str(os.getpid()):
        return None
    if _alive(pid):
        return Held(lock, int(pid))
    if not pid.isdigit() and _fresh(lock):
        return Held(lock, None)
    return None


def _owner_dir(lock: Path) -> Path:
    return Path(tempfile.mkdtemp(prefix=lock.name + ".owner.", dir=lock.parent))


# The files firstmate's scripts may put in a lock's owner dir (fm_lock_clean_known_files).
_KNOWN_FILES = ("pid", "fm-home", "pid-identity", "role", "watcher-path")


def _discard(owner: Path) -> None:
    for name in _KNOWN_FILES:
        with contextlib.suppress(OSError):
            os.unlink(owner / name)
    with contextlib.suppress(OSError):
        os.rmdir(owner)


def _points_to(lock: Path, owner: Path) -> bool:
    try:
        return os.readlink(lock) == str(owner)
    except OSError:
        return False


def _try_create(lock: Path, allowed_steal: Path | None = None) -> Path | None:
    """firstmate's fm_lock_try_create: an owner dir with our pid, then the symlink; the
    claim holds only if the link still points at it and no steal is under way."""
    if os.path.lexists(lock):
        return None
    owner = _owner_dir(lock)
    try:
        (owner / "pid").write_text(f"{os.getpid()}\n", encoding="utf-8")
        os.symlink(str(owner), lock)
    except OSError:
        _discard(owner)
        return None
    steal = lock.with_name(lock.name + ".steal")
    blocked = os.path.lexists(steal) and not (
        allowed_steal is not None and _points_to(steal, allowed_steal)
    )
    if not _points_to(lock, owner) or blocked:
        if _points_to(lock, owner):
            with contextlib.suppress(OSError):
                os.unlink(lock)
        _discard(owner)
        return None
    return owner


def _remove(lock: Path) -> None:
    where = _pid_dir(lock)
    if where is None:
        return
    if where != lock:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        _discard(where)
        return
    _discard(lock)


def try_acquire(lock: Path) -> Path:
    """Take `lock` once, as firstmate's fm_lock_try_acquire does: the owner dir fm now holds,
    or Held. A lock whose holder died is taken over under `<lock>.steal`."""
    owner = _try_create(lock)
    if owner is not None:
        return owner
    pid = _read_pid(lock) or ""
    if _alive(pid) or (not pid.isdigit() and _fresh(lock)):
        raise Held(lock, int(pid) if pid.isdigit() else None)
    steal = lock.with_name(lock.name + ".steal")
    steal_owner = try_acquire(steal)  # raises Held when another taker is recovering it
    try:
        again = _read_pid(lock) or ""
        if again != pid or _alive(again) or (not again.isdigit() and _fresh(lock)):
            raise Held(lock, int(again) if again.isdigit() else None)
        _remove(lock)
        owner = _try_create(lock, steal_owner)
        if owner is None:
            now = _read_pid(lock) or ""
            raise Held(lock, int(now) if now.isdigit() else None)
        return owner
    finally:
        release(steal, steal_owner)


def release(lock: Path, owner: Path) -> None:
    """Release a lock fm holds: only while it still points at fm's owner dir."""
    if _points_to(lock, owner):
        with contextlib.suppress(OSError):
            os.unlink(lock)
    _discard(owner)


def _waited(lock: Path, timeout: float) -> Path:
    """Take `lock`, waiting up to `timeout` for its holder; an interrupt ends the wait (in a
    batch, where it only raises a flag, too): nothing was changed yet."""
    from fm_teardown.adapters import interrupts

    deadline = time.monotonic() + timeout
    while True:
        try:
            return try_acquire(lock)
        except Held:
            if time.monotonic() >= deadline:
                raise
            if interrupts.sleep(_POLL):
                raise KeyboardInterrupt from None


def _taken_by(held: Held) -> str:
    return f"pid {held.pid}" if held.pid is not None else "a process taking it now"


@contextmanager
def lifecycle_locks(state_dir: Path, task: str, meta_wait: float) -> Iterator[None]:
    """Hold TASK's control lock (refused at once when held: another lifecycle action is
    running) and then its meta lock (waited for up to `meta_wait` seconds: a writer of the
    record finishes first), for the whole run; released in reverse order.

    Raises FmError (a refusal, nothing changed) when either cannot be had. No lock is taken
    when the state dir does not exist: there is no record to protect."""
    if not state_dir.is_dir():
        yield
        return
    control = control_path(state_dir, task)
    try:
        control_owner = try_acquire(control)
    except Held as held:
        raise _running(task, control, held) from None
    except OSError as exc:
        raise _refusal(
            f"cannot take firstmate's lifecycle lock {control}: {exc.strerror or exc}",
            task,
        ) from None
    try:
        meta = meta_path(state_dir, task)
        try:
            meta_owner = _waited(meta, meta_wait)
        except Held as held:
            raise _refusal(
                f"the record of {task} is still being written: firstmate's lock {meta} is "
                f"held by {_taken_by(held)} after {meta_wait:g}s",
                task,
            ) from None
        except OSError as exc:
            raise _refusal(
                f"cannot take firstmate's record lock {meta}: {exc.strerror or exc}",
                task,
            ) from None
        try:
            yield
        finally:
            release(meta, meta_owner)
    finally:
        release(control, control_owner)


def _refusal(message: str, task: str) -> FmError:
    return refused(
        message,
        f"wait for it to finish, then run: fm teardown {task} --dry-run",
        unchanged=True,
        code=ErrorCode.LIFECYCLE_BUSY,
    )


def probe(state_dir: Path, task: str) -> FmError | None:
    """What a dry run predicts: the refusal a real run would make now because another
    lifecycle action holds TASK's control lock, or None. Takes nothing."""
    control = control_path(state_dir, task)
    try:
        held = holder(control)
    except OSError:
        return None  # unreadable here; the real run's take of it says why
    if held is None:
        return None
    return _running(task, control, held)


def _running(task: str, control: Path, held: Held) -> FmError:
    # firstmate's own words ("another lifecycle action is already running"): its callers
    # and tests read them.
    return _refusal(
        f"another lifecycle action is already running for task {task} (firstmate's lock "
        f"{control}, held by {_taken_by(held)})",
        task,
    )


_CHILD_ID = re.compile(r"[A-Za-z0-9._-]+")
_MAX_DEPTH = 8  # secondmate homes nested deeper than this are refused, never skipped


@contextmanager
def descendant_locks(home: Path) -> Iterator[None]:
    """For a forced secondmate teardown, which takes its children's records with it: every
    descendant's lifecycle locks, as firstmate's script takes them (each home's
    `.task-set.lock` first, so no task is published meanwhile; then per child, sorted by id,
    its control lock before its meta lock; a child secondmate's home after its own locks),
    each tried once: one held refuses the run before anything is changed."""
    with ExitStack() as stack:
        _walk_home(home, 0, lambda lock, busy: _take(stack, lock, busy))
        yield


def probe_descendants(home: Path) -> FmError | None:
    """What a dry run of a forced secondmate teardown predicts: the refusal the real run's
    `descendant_locks` would make now (the first of them held, in the same order), or None.
    Takes nothing."""
    try:
        _walk_home(home, 0, _check)
    except FmError as err:
        return err
    return None


def _check(lock: Path, busy: str) -> None:
    try:
        held = holder(lock)
    except OSError:
        return  # unreadable here; the real run's take of it says why
    if held is not None:
        raise refused(busy, unchanged=True, code=ErrorCode.LIFECYCLE_BUSY)


def _walk_home(home: Path, depth: int, visit: Callable[[Path, str], None]) -> None:
    """Visit every lock of `home`'s descendants in the order firstmate's script takes them."""
    state = home / "state"
    if not state.is_dir() or state.is_symlink():
        return
    if depth >= _MAX_DEPTH:
        raise refused(
            f"secondmate homes nest deeper than {_MAX_DEPTH} below {home}", unchanged=True
        )
    visit(
        state / ".task-set.lock",
        f"secondmate home {home} is publishing a task right now (task-set lock is held)",
    )
    children = sorted(
        name[: -len(".meta")]
        for name in os.listdir(state)
        if name.endswith(".meta") and _CHILD_ID.fullmatch(name[: -len(".meta")])
    )
    for child in children:
        visit(
            control_path(state, child),
            f"descendant task {child} has a lifecycle action in flight (control lock is held)",
        )
        visit(
            meta_path(state, child),
            f"descendant task {child} has a metadata update in flight (metadata lock is held)",
        )
        sub = _secondmate_home(state, child)
        if sub is not None:
            _walk_home(sub, depth + 1, visit)


def _take(stack: ExitStack, lock: Path, busy: str) -> None:
    try:
        owner = try_acquire(lock)
    except Held:
        raise refused(busy, unchanged=True, code=ErrorCode.LIFECYCLE_BUSY) from None
    except OSError as exc:
        raise refused(
            f"cannot take firstmate's lock {lock}: {exc.strerror or exc}", unchanged=True
        ) from None
    stack.callback(release, lock, owner)


def _secondmate_home(state: Path, child: str) -> Path | None:
    """A child secondmate's home (`home=`, else `worktree=`), read as the script reads it."""
    from fm_teardown.model.records import RecordKind, RecordProblem, read_meta

    try:
        text, _ = read_meta(str(state / f"{child}.meta"))
    except (OSError, RecordProblem):
        return None
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, eq, val = line.partition("=")
        if eq and key in ("kind", "home", "worktree") and key not in values:
            values[key] = val.strip()
    if values.get("kind") != RecordKind.SECONDMATE:
        return None
    where = values.get("home") or values.get("worktree")
    return Path(where) if where and os.path.isabs(where) else None
