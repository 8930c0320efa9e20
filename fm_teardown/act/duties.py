"""The teardown duties of firstmate's shell script that `fm` carries (spec §10).

When the plan returns the slot: the fleet's hook files are removed from the slot before the
return (the next task's slot must not fire turn-end signals for a dead task); after a verified
return, TASK's branch is deleted by compare-and-swap and TASK's own slot claim is removed.
Whenever the record is removed (proceed and stale alike): the grok, kimi and agy hook auth
entries named by TASK's token files are removed, and one cost-attribution row is appended.

Nothing here follows a symlink: paths inside the slot are walked with directory file
descriptors opened `O_NOFOLLOW`, and an unlink removes a link, never its target.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime

from fm_teardown.adapters import runner, safefile
from fm_teardown.model.own_files import WorkPlaces
from fm_teardown.model.paths import canonical
from fm_teardown.model.records import Record, RecordProblem, read_meta
from fm_teardown.model.results import (
    AttributionResult,
    AttributionWhat,
    AuthLeft,
    AuthLeftWhy,
    AuthResult,
    BranchResult,
    BranchWhat,
    ClaimResult,
    ClaimWhat,
    HookFile,
    HooksResult,
    HooksWhat,
    Unlinked,
    UnlinkWhat,
)
from fm_teardown.model.scaffold import SCAFFOLD_PATHS
from fm_teardown.model.world import BranchUse

__all__ = [
    "ATTRIBUTION",
    "ATTRIBUTION_LOCK",
    "HEADER",
    "SCHEMA_LINE",
    "DutyWarning",
    "append_attribution",
    "delete_branch",
    "remove_auth_entries",
    "remove_hooks",
    "remove_own_claim",
]

_TOKEN = re.compile(r"[A-Za-z0-9._-]+")


class DutyWarning(Exception):
    """The attribution row could not be appended; it only warns, the teardown goes on."""


# -- hooks --------------------------------------------------------------------------------------


def remove_hooks(slot: str) -> HooksResult:
    """Remove the scaffold files git does not track from the slot; what was done, per path."""
    tracked = runner.git(slot, "ls-files", "-z", "--", *SCAFFOLD_PATHS)
    if not tracked.ok:
        return HooksResult(HooksWhat.UNTRACKED_UNKNOWN, error=tracked.why())
    kept = {p.decode("utf-8", "replace") for p in tracked.out.split(b"\0") if p}
    files = []
    for rel in SCAFFOLD_PATHS:
        if rel in kept:
            files.append(HookFile(rel, tracked=True))
            continue
        outcome = _unlink_inside(slot, rel)
        if outcome.what != UnlinkWhat.ABSENT:
            files.append(HookFile(rel, tracked=False, unlinked=outcome))
    return HooksResult(HooksWhat.DONE if files else HooksWhat.NONE, tuple(files))


def _unlink_inside(root: str, rel: str, *, single: bool = False) -> Unlinked:
    """Unlink `root/rel` without following a symlink anywhere on the way: removed, absent, or
    why it was left. `single`: a regular file is removed only when it has one link."""
    parts = rel.split("/")
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return Unlinked(UnlinkWhat.ROOT_UNOPENED, error=exc.strerror)
    try:
        for part in parts[:-1]:
            try:
                nfd = os.open(
                    part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            except FileNotFoundError:
                return Unlinked(UnlinkWhat.ABSENT)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    return Unlinked(UnlinkWhat.NOT_A_DIR, part)
                return Unlinked(UnlinkWhat.DIR_UNOPENED, part, exc.strerror)
            os.close(fd)
            fd = nfd
        leaf = parts[-1]
        try:
            st = os.stat(leaf, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return Unlinked(UnlinkWhat.ABSENT)
        if stat.S_ISDIR(st.st_mode):
            return Unlinked(UnlinkWhat.IS_DIR)
        # Removing a symlink never touches its target; a hard link's other name would lose
        # nothing either, but it may be another task's file: leave it to its owner.
        why = safefile.problem(st) if single and not stat.S_ISLNK(st.st_mode) else None
        if why is not None:
            return Unlinked(UnlinkWhat.NOT_SINGLE, error=why)
        os.unlink(leaf, dir_fd=fd)
        return Unlinked(UnlinkWhat.REMOVED_LINK if stat.S_ISLNK(st.st_mode) else UnlinkWhat.REMOVED)
    except OSError as exc:
        return Unlinked(UnlinkWhat.FAILED, error=exc.strerror)
    finally:
        os.close(fd)


# -- branch -------------------------------------------------------------------------------------


def delete_branch(
    project: str,
    branch: str,
    commit: str,
    default: str | None,
    slot: str | None,
    held_by: Callable[[str, str], tuple[str, BranchUse] | None],
) -> BranchResult:
    """Delete `refs/heads/<branch>` only if it still names `commit` (the one seen when
    deciding), never the default branch, never one checked out in any worktree (`slot`,
    TASK's own canonical slot, still has it when the pool reuses the slot as it is), never one
    another worktree's operation holds (`held_by(common git dir, ref)`, read right before)."""
    seen = BranchResult(BranchWhat.DELETED, branch, commit, project)
    if default is not None and branch == default:
        return replace(seen, what=BranchWhat.KEPT_DEFAULT)
    listed = runner.git(project, "worktree", "list", "--porcelain")
    if not listed.ok:
        return replace(seen, what=BranchWhat.UNLISTED, error=listed.why())
    checked_out: dict[str, str] = {}  # ref -> the worktree that has it checked out
    worktree = ""
    for line in listed.out.decode("utf-8", "surrogateescape").splitlines():
        if line.startswith("worktree "):
            worktree = line[len("worktree ") :]
        elif line.startswith("branch "):
            checked_out[line[len("branch ") :]] = worktree
    ref = f"refs/heads/{branch}"
    if ref in checked_out:
        where = checked_out[ref]
        if slot is not None and where and canonical(where) == slot:
            return replace(seen, what=BranchWhat.KEPT_IN_SLOT, worktree=where)
        return replace(seen, what=BranchWhat.KEPT_CHECKED_OUT, worktree=where)
    common = runner.git(project, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if not common.ok or not os.path.isabs(common.text):
        return replace(seen, what=BranchWhat.NO_GIT_DIR, error=common.why())
    busy = held_by(common.text, ref)
    if busy is not None:
        return replace(seen, what=BranchWhat.KEPT_IN_USE, worktree=busy[0], use=busy[1])
    r = runner.git(project, "update-ref", "-d", ref, commit)
    if not r.ok:
        return replace(seen, what=BranchWhat.KEPT_MOVED, error=r.why())
    return seen


# -- claim --------------------------------------------------------------------------------------


def remove_own_claim(path: str, task: str, still_names: Callable[[str, str], bool]) -> ClaimResult:
    """TASK's own slot claim goes once the slot is back in the pool; re-read right before
    (`still_names(path, task)`: does it still name TASK?)."""
    if not still_names(path, task):
        return ClaimResult(ClaimWhat.NOT_TASKS, path, task)
    try:
        why = safefile.problem(os.lstat(path))
        if why is not None:
            return ClaimResult(ClaimWhat.KEPT_UNSAFE, path, task, why)
        os.unlink(path)
    except FileNotFoundError:
        return ClaimResult(ClaimWhat.ALREADY_GONE, path, task)
    except OSError as exc:
        return ClaimResult(ClaimWhat.FAILED, path, task, exc.strerror)
    return ClaimResult(ClaimWhat.REMOVED, path, task)


# -- hook auth entries --------------------------------------------------------------------------


def _auth_dirs(
    home: str | None, grok_home: str | None, agy_config_home: str | None = None
) -> dict[str, str | None]:
    """token sidecar suffix -> the directory of the entries it names."""
    return {
        "grok-turnend-token": os.path.join(grok_home, "hooks", "fm-turn-end.d")
        if grok_home
        else None,
        "kimi-turnend-token": os.path.join(home, ".kimi-code", "fm-turn-end.d") if home else None,
        # agy's turn-end hook is one global plugin; each task's entry is its token's file.
        "agy-turnend-token": os.path.join(
            agy_config_home, "plugins", "fm-turn-end", "fm-turn-end.d"
        )
        if agy_config_home
        else None,
    }


def remove_auth_entries(
    state_dir: str,
    task: str,
    home: str | None,
    grok_home: str | None,
    agy_config_home: str | None = None,
) -> AuthResult:
    """The hook auth entries TASK's token files name (grok, kimi, agy), removed; a token file
    that is unreadable or holds no usable token, or an entry that cannot go, only warns."""
    removed: list[str] = []
    warnings: list[AuthLeft] = []
    for suffix, directory in _auth_dirs(home, grok_home, agy_config_home).items():
        token_file = os.path.join(state_dir, f"{task}.{suffix}")
        try:
            text, _ = read_meta(token_file)
        except FileNotFoundError:
            continue
        except RecordProblem as exc:
            warnings.append(AuthLeft(AuthLeftWhy.UNREADABLE, token_file, problem=exc.problem))
            continue
        token = text.split("\n", 1)[0].strip()
        if not _TOKEN.fullmatch(token) or token in (".", ".."):
            warnings.append(AuthLeft(AuthLeftWhy.NO_TOKEN, token_file, token=token[:40]))
            continue
        if directory is None:
            warnings.append(AuthLeft(AuthLeftWhy.NO_HOME, token_file))
            continue
        outcome = _unlink_inside(directory, token, single=True)
        if outcome.removed:
            removed.append(os.path.join(directory, token))
        elif outcome.what != UnlinkWhat.ABSENT:
            entry = os.path.join(directory, token)
            warnings.append(AuthLeft(AuthLeftWhy.NOT_UNLINKED, entry, unlinked=outcome))
    return AuthResult(tuple(removed), tuple(warnings))


# -- cost attribution ---------------------------------------------------------------------------

ATTRIBUTION = "cost-attribution.tsv"
ATTRIBUTION_LOCK = ".cost-attribution.lock"
SCHEMA_LINE = "# schema=firstmate-effort-attribution-v2"
HEADER = "\t".join(
    ("task", "worktree", "harness", "model", "effort", "kind", "project", "started_at", "ended_at")
)


def _escape(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")
    )


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _attribution_row(record: Record, now: float) -> str:
    """The row exactly as firstmate writes it: 9 tab-separated, escaped fields."""
    started = record.started_at or _utc(record.mtime_ns / 1e9)
    fields = (
        record.task_id,
        record.worktree,
        record.harness or "default",
        record.model or "default",
        record.effort or "default",
        record.kind,
        record.project,
        started,
        _utc(now),
    )
    return "\t".join(_escape(f) for f in fields) + "\n"


@contextmanager
def _attribution_lock(data_dir: str, attempts: int) -> Iterator[None]:
    """firstmate's lock on the attribution file, `attempts` tries 0.1 s apart; when it cannot
    be taken the row is appended anyway (as the script does)."""
    lock = os.path.join(data_dir, ATTRIBUTION_LOCK)
    try:
        fd = safefile.open_single(lock, os.O_RDWR | os.O_CREAT)
    except safefile.LinkRefused as exc:
        raise DutyWarning(f"{lock}: {exc.strerror}; the row is not appended") from None
    try:
        for _ in range(max(attempts, 1)):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)


def append_attribution(
    data_dir: str, record: Record, now: float, attempts: int, places: WorkPlaces
) -> AttributionResult:
    """Append TASK's row to `data/cost-attribution.tsv` in one write: a missing final newline
    first, and the schema marker and header when the last marker is not this schema's.

    A re-run after a crash between this row and the record's removal finds the row already
    there (every field but `ended_at` the same: this very record's) and appends nothing, so
    running the same command again does not count the task's cost twice."""
    if os.path.lexists(data_dir) and not os.path.isdir(data_dir):
        raise DutyWarning(f"the data dir {data_dir} is not a directory")
    path = os.path.join(data_dir, ATTRIBUTION)
    why = safefile.inside_work(path, places)  # never inside a slot or a task's temp dir
    if why is not None:
        raise DutyWarning(f"{why}: the row is not appended")
    os.makedirs(data_dir, exist_ok=True)
    with _attribution_lock(data_dir, attempts):
        try:
            fd = safefile.open_single(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        except safefile.LinkRefused as exc:
            raise DutyWarning(f"{path}: {exc.strerror}; the row is not appended") from None
        try:
            existing = _read_all(fd)
            row = _attribution_row(record, now)
            same_run = row[: row.rindex("\t") + 1].encode()
            if any(line.startswith(same_run) for line in existing.splitlines()):
                return AttributionResult(AttributionWhat.ALREADY_THERE, record.task_id, path)
            payload = ""
            if existing and not existing.endswith(b"\n"):
                payload += "\n"
            schema = [
                line
                for line in existing.decode("utf-8", "replace").splitlines()
                if line.startswith("# schema=")
            ]
            if not schema or schema[-1] != SCHEMA_LINE:
                payload += f"{SCHEMA_LINE}\n{HEADER}\n"
            payload += row
            os.write(fd, payload.encode())
        finally:
            os.close(fd)
    return AttributionResult(AttributionWhat.APPENDED, record.task_id, path)


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
