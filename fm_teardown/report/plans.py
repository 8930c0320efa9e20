"""The words of plans a dry run printed, kept so that a refusal can say what changed.

A token is a digest: it cannot say what the approved plan was. So a one-task dry run keeps its
plan's fields in words under `data/plans/<token>.json` (the newest `KEEP` plans; older ones are
removed), and a plan-changed refusal reads them back to show each changed field as
`before → now` (spec §14.5). This is the one file a dry run writes; it is written only into a
data dir that already exists, is reached through no link and lies in no slot or task's temp
dir, never through a linked file, and a failure changes nothing (the refusal then says the
approved plan is not known here). The audit keeps no words.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from fm_teardown.adapters import safefile
from fm_teardown.model.paths import is_within

__all__ = ["DIR", "KEEP", "keep", "recall"]

DIR = "plans"
KEEP = 200
_MAX = 4 << 20  # bytes read back at most: a plan's words are far smaller


def _dir(data_dir: Path, slots: Iterable[str]) -> Path | None:
    """`data/plans`, made if the data dir exists; None when it is not a plain directory, is
    reached through a link, or lies inside a slot or a task's temp dir (someone's tree)."""
    path = data_dir / DIR
    try:
        real = os.path.realpath(data_dir)
        if real != os.path.abspath(data_dir) or not stat.S_ISDIR(os.lstat(data_dir).st_mode):
            return None
        if real.startswith("/tmp/fm-") or any(is_within(real, s) for s in slots):
            return None
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        return path if stat.S_ISDIR(os.lstat(path).st_mode) else None
    except OSError:
        return None


def keep(
    data_dir: Path, task: str, token: str, words: Mapping[str, str], slots: Iterable[str] = ()
) -> None:
    """Keep a dry run's plan in words; silently nothing when it cannot. `slots`: the
    canonical slots the fleet's records name (the words are never written inside one)."""
    where = _dir(data_dir, slots)
    if where is None:
        return
    body = json.dumps({"task": task, "plan_id": token, "fields": dict(words)}).encode()
    try:
        fd = safefile.open_single(str(where / f"{token}.json"), os.O_WRONLY | os.O_CREAT)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, body)
        finally:
            os.close(fd)
        _prune(where)
    except OSError:
        return


def _prune(where: Path) -> None:
    with os.scandir(where) as it:
        kept = [
            (e.stat(follow_symlinks=False).st_mtime, e.name)
            for e in it
            if e.name.endswith(".json") and e.is_file(follow_symlinks=False)
        ]
    if len(kept) <= KEEP:
        return
    for _, name in sorted(kept)[: len(kept) - KEEP]:
        with contextlib.suppress(OSError):
            os.unlink(where / name)


def recall(data_dir: Path, task: str, token: str) -> dict[str, str] | None:
    """The words a dry run kept for TASK's plan `token`, or None (not kept here)."""
    path = data_dir / DIR / f"{token}.json"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, _MAX)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("task") != task or doc.get("plan_id") != token:
        return None
    fields = doc.get("fields")
    if not isinstance(fields, dict):
        return None
    return {k: v for k, v in fields.items() if isinstance(k, str) and isinstance(v, str)}
