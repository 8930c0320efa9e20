"""A closed stdout (`fm teardown X | head -0`, a reader gone before fm writes) never changes
the exit code, never stops a batch and never prints a traceback. Real pipes: the reading
end is closed before fm starts, so its first write meets EPIPE."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.fleet import Fleet, tid

ID_MINE = tid("cs-mine")
ID_GONE = tid("cs-gone")
ID_WORKER = tid("cs-worker")
ID_LATER = tid("cs-later")


def closed_reader(fleet: Fleet, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run argv with stdout a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", *argv],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=fleet.fm_home,
            env=fleet.env(),
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    finally:
        os.close(write)


def recycled(fleet: Fleet) -> None:
    """ID_GONE's slot now belongs to a live worker (exit 4); ID_MINE and ID_LATER are done."""
    fleet.task(ID_MINE, fleet.slot(1, holder=ID_MINE), "dead")
    slot = fleet.slot(2, holder=ID_WORKER, lease_id=f"{ID_WORKER:>032}")
    fleet.task(ID_GONE, slot, "dead", extra={"spawn_gen": "s100.1.a"})
    fleet.task(ID_WORKER, slot, "alive", extra={"spawn_gen": "s900.1.b"})
    fleet.task(ID_LATER, fleet.slot(3, holder=ID_LATER), "dead")


@pytest.mark.parametrize("json_out", [False, True])
def test_a_refusal_into_a_closed_pipe_keeps_its_exit_code(fleet: Fleet, json_out: bool) -> None:
    recycled(fleet)
    args = ["fm_teardown", "teardown", ID_GONE, *(["--json"] if json_out else [])]
    r = closed_reader(fleet, *args)
    assert r.returncode == 4, r.stderr  # was 1: BrokenPipeError at exit
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr
    for args in (["--dry-run"], ["--dry-run", "--json"]):
        r = closed_reader(fleet, "fm_teardown", "teardown", ID_GONE, *args)
        assert r.returncode == 4, r.stderr


def test_a_batch_into_a_closed_pipe_tears_down_every_task(fleet: Fleet) -> None:
    recycled(fleet)
    r = closed_reader(fleet, "fm_teardown", "teardown", ID_MINE, ID_GONE, ID_LATER)
    assert r.returncode == 4, r.stderr
    assert "Traceback" not in r.stderr
    # The pipe closed at the first task's output; the batch went on to the last one.
    assert not (fleet.state / f"{ID_MINE}.meta").exists()
    assert (fleet.state / f"{ID_GONE}.meta").exists()
    assert not (fleet.state / f"{ID_LATER}.meta").exists()


def test_the_dropin_into_a_closed_pipe_keeps_its_exit_codes(fleet: Fleet) -> None:
    recycled(fleet)
    refused = closed_reader(fleet, "fm_teardown.commands.firstmate", ID_GONE)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    done = closed_reader(fleet, "fm_teardown.commands.firstmate", ID_MINE)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and not (fleet.state / f"{ID_MINE}.meta").exists()
