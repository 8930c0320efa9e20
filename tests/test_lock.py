"""The slot lock: mutual exclusion across processes, a bounded wait, and no file left behind
(the lock file is removed on release, which must not let two takers in at once)."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from fm_teardown.act.lock import slot_lock
from fm_teardown.model.errors import FmError, Verdict
from fm_teardown.model.own_files import lock_path

SLOT = "/pool/1/project"


def _worker(state: str, log: str, rounds: int) -> None:
    for _ in range(rounds):
        with slot_lock(Path(state), SLOT, 30):
            with open(log, "a") as f:
                f.write(f"in {os.getpid()}\n")
            time.sleep(0.002)
            with open(log, "a") as f:
                f.write(f"out {os.getpid()}\n")


def test_mutual_exclusion_across_processes_and_no_file_left(tmp_path: Path) -> None:
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), str(log), 15)) for _ in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 8 * 15 * 2
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("in ") and leave == "out " + enter[3:], (enter, leave)
    assert not lock_path(tmp_path, SLOT).exists()


def _hold(state: str, ready: str, release: str) -> None:
    with slot_lock(Path(state), SLOT, 30):
        Path(ready).touch()
        deadline = time.monotonic() + 30
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.01)


def test_a_held_lock_makes_the_next_taker_fail_after_its_timeout(tmp_path: Path) -> None:
    ready, release = tmp_path / "ready", tmp_path / "release"
    holder = multiprocessing.get_context("fork").Process(
        target=_hold, args=(str(tmp_path), str(ready), str(release))
    )
    holder.start()
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(FmError) as err, slot_lock(tmp_path, SLOT, 0.2):
            pass
        assert err.value.verdict == Verdict.FAILED
        assert "still holds" in err.value.message
    finally:
        release.touch()
        holder.join(30)
    with slot_lock(tmp_path, SLOT, 1):
        pass
