"""fm's own files (the journal, the cost table and its lock, the slot lock) are never created
inside a slot the records name or inside a task's temp dir, whatever link leads there
(spec §14.8): one check, `safefile.inside_work`, for all of them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fm_teardown.act.lock import slot_lock
from fm_teardown.adapters import safefile
from fm_teardown.model.errors import FmError, Verdict
from fm_teardown.model.own_files import NOWHERE, WorkPlaces
from tests.fleet import tid


@pytest.fixture
def task_tmp() -> Iterator[Path]:
    """`/tmp/fm-<id>` of a task id unique to this run (refused if it exists), removed after."""
    path = Path(f"/tmp/fm-{tid('own')}")
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path)


def test_a_state_dir_inside_a_tasks_temp_dir_gets_no_slot_lock(task_tmp: Path) -> None:
    state = task_tmp / "state"
    state.mkdir()
    # A task of the fleet's temp dir (the pipeline's places name every record's).
    places = WorkPlaces(task_tmps=frozenset({os.path.realpath(task_tmp)}))
    with pytest.raises(FmError) as caught, slot_lock(state, "/pool/1/project", 1.0, places):
        pytest.fail("the lock was taken")
    assert caught.value.verdict == Verdict.UNSAFE
    assert f"inside the task temp dir {task_tmp}" in caught.value.message
    assert list(state.iterdir()) == []


def test_a_link_into_a_registered_slot_is_seen_through(tmp_path: Path) -> None:
    slot = tmp_path / "pool" / "1" / "project"
    (slot / "data").mkdir(parents=True)
    home = tmp_path / "fleet"
    home.mkdir()
    (home / "data").symlink_to(slot / "data")
    journal = str(home / "data" / "teardown-log.jsonl")
    assert safefile.inside_work(journal, NOWHERE) is None  # no slot known
    places = WorkPlaces(slots=frozenset({os.path.realpath(slot)}))
    why = safefile.inside_work(journal, places)
    assert why is not None and f"inside the slot {os.path.realpath(slot)}" in why
    with pytest.raises(safefile.InsideWork):
        safefile.append_line(journal, b"line\n", places)
    assert list((slot / "data").iterdir()) == []
    assert safefile.inside_work(str(tmp_path / "elsewhere" / "x"), places) is None
