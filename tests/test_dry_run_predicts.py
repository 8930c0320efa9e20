"""A dry run checks what the real run checks before its first destructive step (spec §15.9):
the gate, the journal's place and writability, and where fm's own files would go. For each,
the dry run exits as the real run does (both 5 here; the dry run said 0 before), and the
real run changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fleet import Fleet, Task, gone, python_in, tid

ID_ALPHA = tid("dp-alpha")
ID_BRAVO = tid("dp-bravo")


def alpha(fleet: Fleet) -> Task:
    """A finished task whose teardown would proceed; its agent's window is still open."""
    return fleet.task(ID_ALPHA, fleet.slot(1, holder=ID_ALPHA), "alive")


def _fm(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`fm teardown ARGS` run from `cwd` with `env`."""
    return python_in(cwd, env, "-m", "fm_teardown", "teardown", *args)


def fm_in(fleet: Fleet, cwd: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    r = _fm(cwd, env, *args)
    return r.returncode, r.stderr


def both_refuse(fleet: Fleet, t: Task, env: dict[str, str], said: str, cwd: Path) -> None:
    """The dry run and the real run exit 5 saying `said`; nothing of the task changed."""
    snap = fleet.snapshot(t.slot)
    code, err = fm_in(fleet, cwd, env, t.id, "--dry-run")
    assert code == 5 and said in err, err  # was 0
    code, err = fm_in(fleet, cwd, env, t.id)
    assert code == 5 and said in err, err
    assert fleet.snapshot(t.slot) == snap and t.meta.exists()
    assert not any(gone(p) for p in t.pids) and t.window in fleet.tmux.windows()
    # The audit says what the task's dry run says: its row refuses, or (the gate) the audit
    # refuses as a whole.
    code, out, err = audit_in(cwd, env)
    if code == 5:
        assert said in out + err, (out, err)
    else:
        rows = {r["task"]: r for r in json.loads(out)["tasks"]}
        assert (code, rows[t.id]["verdict"]) == (0, "unsafe"), rows[t.id]  # was proceed
        assert said in " ".join(str(x) for x in rows[t.id]["reasons"]), rows[t.id]


def audit_in(cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    r = _fm(cwd, env, "--dry-run", "--json")
    return r.returncode, r.stdout, r.stderr


def test_the_gate_by_its_variable(fleet: Fleet) -> None:
    t = alpha(fleet)
    env = fleet.env(NO_MISTAKES_GATE="1")
    both_refuse(fleet, t, env, "no-mistakes gate agent must not drive the fleet", fleet.fm_home)


def test_the_gate_by_its_directory(fleet: Fleet) -> None:
    t = alpha(fleet)
    gate = fleet.root / ".no-mistakes" / "repos" / "project.git"
    gate.mkdir(parents=True)
    both_refuse(fleet, t, fleet.env(), "inside a no-mistakes gate worktree", gate)


def _symlink(fleet: Fleet, journal: Path) -> str:
    target = fleet.root / "elsewhere.jsonl"
    target.write_text("")
    journal.symlink_to(target)
    return "it is a symlink"


def _directory(fleet: Fleet, journal: Path) -> str:
    journal.mkdir()
    return "it is not a regular file"


def _hard_link(fleet: Fleet, journal: Path) -> str:
    other = fleet.root / "other.jsonl"
    other.write_text("")
    os.link(other, journal)
    return "it has 2 hard links (another name may be someone else's file)"


@pytest.mark.parametrize("odd", [_symlink, _directory, _hard_link])
def test_an_odd_journal(fleet: Fleet, odd: Callable[[Fleet, Path], str]) -> None:
    t = alpha(fleet)
    journal = fleet.data / "teardown-log.jsonl"
    said = odd(fleet, journal)
    both_refuse(fleet, t, fleet.env(), f"cannot be written ({said})", fleet.fm_home)
    # --no-journal: both would go on (the dry run says so; the real run is not needed).
    code, err = fm_in(fleet, fleet.fm_home, fleet.env(), t.id, "--dry-run", "--no-journal")
    assert code == 0, err


def test_a_data_dir_inside_a_slot(fleet: Fleet) -> None:
    t = alpha(fleet)
    bravo = fleet.task(ID_BRAVO, fleet.slot(2, holder=ID_BRAVO), "alive")
    data = bravo.slot / "fm-data"
    env = fleet.env(FM_DATA_OVERRIDE=str(data))
    both_refuse(fleet, t, env, "fm does not write its own files there", fleet.fm_home)
    assert not data.exists()


def test_a_state_dir_inside_a_slot(fleet: Fleet) -> None:
    """The slot lock is taken in the state dir: inside bravo's slot, both runs refuse before
    anything is done (the real run used to end alpha's agent first)."""
    t = alpha(fleet)
    fleet.task(ID_BRAVO, fleet.slot(2, holder=ID_BRAVO), "alive")
    state = fleet.slot(2) / "fm-state"
    shutil.copytree(fleet.state, state)
    moved = Task(t.id, t.slot, state / t.meta.name, t.window, t.pids)
    env = fleet.env(FM_STATE_OVERRIDE=str(state))
    both_refuse(fleet, moved, env, "the slot lock", fleet.fm_home)
    assert not list(state.glob(".slot-*.lock"))
