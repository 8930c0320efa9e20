"""Where fm's own files (the journal, the cost table and its lock, the slot locks, the
secondmate registry) never go: one run's view of the fleet's work, as a value.

fm's own files are never written inside a task's work (spec §14.8, §15.2): not inside a slot
(every worktree of every pool fm reads, claimed or idle, and every slot a record names) and
not inside a task's temp dir (`/tmp/fm-<id>` of a task a record names, counted only while it
is a real directory or absent: a record whose temp dir is a link, a file or a FIFO concerns
that task alone and never puts fm's files "inside" whatever it points at). The pipeline works
the places out once per look at the fleet (`observe/own_places.py`) and passes them down to
every writer of fm's own files; nothing keeps them between runs.
"""

from __future__ import annotations

from pathlib import Path

from fm_teardown.model.digest import sha256_hex
from fm_teardown.model.values import value

__all__ = ["NOWHERE", "WorkPlaces", "lock_path"]


@value
class WorkPlaces:
    """The canonical slots and task temp dirs of one look at the fleet."""

    slots: frozenset[str] = frozenset()
    task_tmps: frozenset[str] = frozenset()


# No place is forbidden: what a writer is given when nothing of the fleet is known to it (a
# caller that checked the directory itself, a test of the writer alone).
NOWHERE = WorkPlaces()


def lock_path(state_dir: Path, slot: str) -> Path:
    """The slot's lock file in the state dir (`act/lock.py` takes it): named here, where a dry
    run can ask where it would lie without importing what acts."""
    return state_dir / f".slot-{sha256_hex(slot.encode())[:16]}.lock"
