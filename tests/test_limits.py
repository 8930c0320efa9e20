"""Limits fail closed (spec §14.8): a recorded slot whose path runs into a link loop is not a
slot that is gone. Before, `os.path.isdir` said False and fm went on as for a vanished slot:
it cleared the record and killed the window of a task whose tree it could not see."""

from __future__ import annotations

import os

from tests.fleet import Fleet, tid


def test_a_slot_path_through_a_link_loop_refuses_and_changes_nothing(fleet: Fleet) -> None:
    slot = fleet.slot(1)  # a real slot beside it: the pool's state reads fine
    loop = slot.parent.parent / "7"
    os.symlink(loop, loop)  # a link to itself: every path through it is ELOOP
    task = tid("lk")
    t = fleet.task(task, loop / "project", "dead")
    before = fleet.snapshot()
    dry = fleet.fm("teardown", task, "--dry-run")
    real = fleet.fm("teardown", task)
    assert dry.returncode == 5, dry.stdout + dry.stderr
    assert real.returncode == 5, real.stdout + real.stderr
    # Refused, by whichever rule sees it first; never "no longer exists".
    assert "no longer exists" not in dry.stderr + real.stderr, real.stderr
    assert "Traceback" not in real.stderr
    assert t.meta.exists()
    assert fleet.snapshot() == before
