"""`PoolReader.view`: a slot's entry in its pool's state file, each file read once, each
slot matched by its canonical path among many."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fm_teardown.adapters.pool import STATE_FILE, PoolReader


def pool(root: Path, paths: list[str]) -> None:
    worktrees = [{"name": str(i), "path": p, "leased": i % 2 == 0} for i, p in enumerate(paths)]
    (root / STATE_FILE).write_text(json.dumps({"worktrees": worktrees}))


def test_each_slot_of_a_large_pool_finds_its_own_entry(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    slots = [str(root / str(i) / "project") for i in range(300)]
    pool(root, slots)
    reader = PoolReader(os.path.realpath)
    for i, slot in reversed(list(enumerate(slots))):
        view = reader.view(slot, slot)
        assert view.error is None and view.entry is not None
        assert (view.entry.name, view.entry.canonical, view.entry.leased) == (
            str(i),
            slot,
            i % 2 == 0,
        )
    assert reader.view(str(root / "x" / "project"), str(root / "x" / "project")).entry is None


def test_a_slot_listed_twice_is_an_error_naming_it(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    slot = str(root / "1" / "project")
    pool(root, [str(root / "0" / "project"), slot, slot])
    view = PoolReader(os.path.realpath).view(slot, slot)
    assert view.entry is None
    assert view.error == f"{root / STATE_FILE} lists the slot {slot} more than once"
