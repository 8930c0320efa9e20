"""The slot claim `<pool>/<N>/.fm-slot-owner` (spec §10 "Ownership evidence").

firstmate's spawn writes it at the slot root (the parent of the worktree directory) when the
pool hands the slot to a task: lines `task=<id>` and `home=<home>`. It is read here, never
written: read-only, never through a symlink, never blocking on a FIFO. A claim that exists
but cannot be read or parsed is reported as a problem (the teardown refuses, naming it).
"""

from __future__ import annotations

import os
import stat

from fm_teardown.model.records import RecordProblem, parse_lines, read_meta, task_id_problem
from fm_teardown.model.world import SlotClaim

__all__ = [
    "CLAIM_FILE",
    "MAX_CLAIM_BYTES",
    "read_claim",
    "still_names",
]

CLAIM_FILE = ".fm-slot-owner"
MAX_CLAIM_BYTES = 4096


def _claim_path(slot: str) -> str:
    return os.path.join(os.path.dirname(slot), CLAIM_FILE)


def read_claim(slot: str) -> SlotClaim | None:
    """The claim of a canonical slot, or None when there is none."""
    return _read_claim_at(_claim_path(slot))


def _read_claim_at(path: str) -> SlotClaim | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return SlotClaim(path, None, None, f"cannot be read ({exc.strerror})")
    if stat.S_ISLNK(st.st_mode):
        return SlotClaim(path, None, None, "is a symlink")
    if not stat.S_ISREG(st.st_mode):
        return SlotClaim(path, None, None, "is not a regular file")
    if st.st_size > MAX_CLAIM_BYTES:
        return SlotClaim(path, None, None, f"is larger than {MAX_CLAIM_BYTES} bytes")
    try:
        text, _ = read_meta(path)  # the same careful read as a record's
    except FileNotFoundError:
        return None  # removed since the lstat: no claim
    except RecordProblem as exc:
        return SlotClaim(path, None, None, exc.problem)
    values = dict(parse_lines(text))
    task = values.get("task", "").strip()
    home = values.get("home", "").strip() or None
    if not task:
        return SlotClaim(path, None, home, "has no task= line")
    problem = task_id_problem(task)
    if problem:
        return SlotClaim(path, None, home, f"names an invalid task id ({problem})")
    if home is not None and not os.path.isabs(home):
        return SlotClaim(path, None, None, f"names a home that is not an absolute path: {home}")
    return SlotClaim(path, task, home)


def still_names(path: str, task: str) -> bool:
    """Right before removing TASK's own claim: does it still name TASK?"""
    claim = _read_claim_at(path)
    return claim is not None and claim.problem is None and claim.task == task
