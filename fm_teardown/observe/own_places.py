"""Where fm's own files never go, as one look at the fleet finds it (`model/own_files.py`).

The slots: every slot a record names (a valid record's worktree and a secondmate's home, the
slots an invalid record or a stray `.meta` names), and every worktree of every pool those
slots belong to, claimed or idle: a pool resets any of them when it hands it out. A slot that
holds the fleet's home itself is fm's own home (a secondmate's fleet lives in its home), not
another task's work. The task temp dirs: `/tmp/fm-<id>` of every task a record names (valid
or not), counted only while it is a real directory or absent; a link, a file or a FIFO there
concerns that task alone (its own teardown refuses it) and is never followed.

Reads the records (already loaded), each pool state file once and one `lstat` per task temp
dir: no subprocess, nothing written.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable

from fm_teardown.adapters.pool import PoolReader
from fm_teardown.model.errors import FmError
from fm_teardown.model.own_files import WorkPlaces
from fm_teardown.model.paths import Canonicalizer, canonical, is_within
from fm_teardown.model.records import Fleet, load_fleet
from fm_teardown.model.settings import Settings

__all__ = ["work_places", "work_places_now"]


def work_places(
    settings: Settings, fleet: Fleet, canon: Callable[[str], str] | None = None
) -> WorkPlaces:
    """The places of `fleet` (as loaded by this run, with its canonicaliser)."""
    canon = canon or Canonicalizer()
    named: dict[str, str] = {}  # canonical slot -> the path a record spells it with
    for r in fleet.records.values():
        _add(named, canon, r.worktree)
        if r.home:
            _add(named, canon, r.home)
    for bad in fleet.invalid.values():
        for path in bad.claimed or ():
            _add(named, canon, path)
    for strays in fleet.stray_slots.values():
        for path in strays:
            _add(named, canon, path)
    reader = PoolReader(canon)
    for slot, spelled in named.items():
        reader.view(spelled, slot)  # each pool's state file read once
    slots = set(named)
    slots.update(e.canonical for e in reader.entries() if os.path.isabs(e.canonical))
    home = canonical(str(settings.fm_home.absolute()))
    ids = {tid.rsplit("/", 1)[-1] for tid in (*fleet.records, *fleet.invalid)}
    return WorkPlaces(
        frozenset(s for s in slots if not is_within(home, s)),
        frozenset(_task_tmps(ids)),
    )


def work_places_now(settings: Settings) -> WorkPlaces | None:
    """The places as the fleet is now, for a run that ended before it looked at the fleet
    (an invalid record, the gate, a lifecycle lock held); None when the fleet cannot be read:
    then no place can be shown to lie outside every slot."""
    try:
        fleet = load_fleet(settings.state_dir)
    except (FmError, OSError, ValueError):
        return None
    try:
        return work_places(settings, fleet)
    except (OSError, ValueError):
        return None


def _add(named: dict[str, str], canon: Callable[[str], str], path: str) -> None:
    if path and os.path.isabs(path):
        named.setdefault(canon(path), path)


def _task_tmps(ids: Iterable[str]) -> list[str]:
    """`/tmp/fm-<id>` of each task id, canonical (its parent resolved, its own name never
    followed), when it is a real directory or absent."""
    tmp = canonical("/tmp")
    out = []
    for tid in ids:
        path = os.path.join(tmp, f"fm-{tid}")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            out.append(path)  # nothing there to follow; fm must not make it either
            continue
        except OSError:
            continue  # cannot be told what it is: it is no directory fm would write into
        if stat.S_ISDIR(st.st_mode):
            out.append(path)
    return out
