"""Teardowns of a ship task whose own no-mistakes run is parked at a gate (docs/spec.md
§15.5b): the run is aborted before anything of the task is destroyed, a run not read back
stopped stops the teardown with nothing of the task touched, a dry run only says it would
look. Real tmux, git, processes and the pool stand-in; `no-mistakes` is the stand-in of
`tests/nm_fake.py`, first on PATH."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet import SESSION, Fleet, git, tid
from tests.nm_fake import NmFake, parked_toon, running_toon

ID_T1 = tid("t1")
BRANCH = f"fm/{ID_T1}"


def ship(fleet: Fleet, state: str = "alive") -> tuple[Path, list[int]]:
    """TASK's slot on its own branch, at a commit already on origin (landed), its window."""
    slot = fleet.slot(1, holder=ID_T1)
    git(slot, "checkout", "-q", "-b", BRANCH)
    task = fleet.task(ID_T1, slot, state)
    return slot, task.pids


def head(slot: Path) -> str:
    return git(slot, "rev-parse", "HEAD")


@pytest.fixture
def nm(fleet: Fleet) -> NmFake:
    return NmFake(fleet.root)


def env(fleet: Fleet, nm: NmFake, **extra: str) -> dict[str, str]:
    base = fleet.env(**extra)
    return {**base, **nm.env(base["PATH"])}


def fm_teardown(fleet: Fleet, nm: NmFake, *args: str) -> subprocess.CompletedProcess[str]:
    """The drop-in, as firstmate's callers run it."""
    return subprocess.run(
        [sys.executable, "-m", "fm_teardown.commands.firstmate", *args],
        capture_output=True,
        text=True,
        cwd=fleet.fm_home,
        env=env(fleet, nm),
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


ABORTING = (
    f"teardown: no-mistakes run for {ID_T1} is parked at a gate; aborting before the worker "
    "is removed"
)
REFUSED = (
    f"REFUSED: no-mistakes run for {ID_T1} is still parked after axi abort; confirm it stopped "
    "(no-mistakes axi status) or abort it manually (no-mistakes axi abort --run <id>) before "
    "retrying teardown."
)


def test_the_tasks_parked_run_is_aborted_before_its_window_is_killed(
    fleet: Fleet, nm: NmFake
) -> None:
    slot, pids = ship(fleet)
    nm.set("status", parked_toon(BRANCH, head(slot)))
    nm.set("watch", str(pids[0]))  # the pane's process: alive while the window is
    code, doc = fleet.fm_json("teardown", ID_T1, env=env(fleet, nm))
    assert code == 0, doc
    assert nm.aborted() == ["01RUN"]
    assert nm.watched() == ["alive"], "the run was aborted after the window was killed"
    first = doc["steps"][0]
    assert (first["step"], first["outcome"], first["target"]) == ("parked-run", "done", str(slot))
    assert "01RUN" in first["detail"] and "cancelled" in first["detail"], first
    assert {cwd for cwd, _ in nm.calls()} == {str(slot)}
    assert not (fleet.state / f"{ID_T1}.meta").exists()
    assert f"{SESSION}:fm-{ID_T1}" not in fleet.tmux.windows()


def test_the_torn_down_line_says_the_run_was_aborted(fleet: Fleet, nm: NmFake) -> None:
    slot, _ = ship(fleet, "dead")
    nm.set("status", parked_toon(BRANCH, head(slot)))
    r = fleet.fm("teardown", ID_T1, env=env(fleet, nm))
    assert r.returncode == 0, r.stderr
    assert f"TORN DOWN — {ID_T1}: parked no-mistakes run aborted, window killed" in r.stdout, (
        r.stdout
    )


def test_the_drop_in_says_it_aborts_in_the_scripts_words(fleet: Fleet, nm: NmFake) -> None:
    slot, _ = ship(fleet, "dead")
    nm.set("status", parked_toon(BRANCH, head(slot)))
    r = fm_teardown(fleet, nm, ID_T1)
    assert r.returncode == 0, r.stderr
    assert ABORTING in r.stderr.splitlines()
    assert nm.aborted() == ["01RUN"]


@pytest.mark.parametrize("command", ["fm teardown", "fm-teardown"])
def test_a_run_not_read_back_stopped_stops_the_teardown_touching_nothing_of_the_task(
    fleet: Fleet, nm: NmFake, command: str
) -> None:
    """The abort is sent, the run still reads parked: exit 1 before the window, the
    processes, the slot or the record are touched; once the run reads ended, the same
    command finishes the job and leaves it alone."""
    slot, _ = ship(fleet)
    worker = fleet.spawn(["sleep", "100000"], slot, new_session=True)  # left running in the slot
    nm.set("status", parked_toon(BRANCH, head(slot)))
    nm.set("noop", "")
    before = fleet.snapshot(slot)
    if command == "fm teardown":
        code, doc = fleet.fm_json("teardown", ID_T1, env=env(fleet, nm))
        assert (code, doc["verdict"]) == (1, "failed"), doc
        first = doc["steps"][0]
        assert (first["step"], first["outcome"]) == ("parked-run", "failed"), first
        assert "not read back stopped" in first["detail"], first
        assert {s["outcome"] for s in doc["steps"][1:]} == {"skipped"}, doc["steps"]
    else:
        r = fm_teardown(fleet, nm, ID_T1)
        assert r.returncode == 1, r.stderr
        lines = r.stderr.splitlines()
        assert ABORTING in lines and REFUSED in lines, r.stderr
        assert lines.index(ABORTING) < lines.index(REFUSED)
    assert nm.aborted() == ["01RUN"]
    assert fleet.snapshot(slot) == before
    assert worker.poll() is None
    assert fleet.treehouse_calls() == []
    # No-mistakes now reads the run ended: the re-run leaves it alone and finishes.
    (nm.dir / "noop").unlink()
    code, doc = fleet.fm_json("teardown", ID_T1, env=env(fleet, nm))
    assert code == 0, doc
    assert nm.aborted() == ["01RUN"]
    assert not (fleet.state / f"{ID_T1}.meta").exists()


def test_a_dry_run_says_it_would_look_and_runs_no_mistakes(fleet: Fleet, nm: NmFake) -> None:
    slot, _ = ship(fleet)
    nm.set("status", parked_toon(BRANCH, head(slot)))
    code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run", env=env(fleet, nm))
    assert code == 0, doc
    first = doc["steps"][0]
    assert (first["step"], first["outcome"], first["target"]) == (
        "parked-run",
        "planned",
        str(slot),
    )
    assert "no-mistakes axi status" in first["detail"], first
    r = fleet.fm("teardown", "--dry-run", env=env(fleet, nm))  # the audit
    assert r.returncode == 0, r.stdout + r.stderr
    assert nm.calls() == []


def test_a_run_not_the_tasks_or_under_way_is_left_alone(fleet: Fleet, nm: NmFake) -> None:
    slot, _ = ship(fleet, "dead")
    nm.set("status", running_toon(BRANCH, head(slot)))
    code, doc = fleet.fm_json("teardown", ID_T1, env=env(fleet, nm))
    assert code == 0, doc
    assert (doc["steps"][0]["step"], doc["steps"][0]["outcome"]) == ("parked-run", "absent")
    assert nm.aborted() == []


def test_a_query_that_does_not_answer_aborts_nothing_and_says_so(fleet: Fleet, nm: NmFake) -> None:
    slot, _ = ship(fleet, "dead")
    nm.set("status", parked_toon(BRANCH, head(slot)))
    nm.set("hang", "30")
    code, doc = fleet.fm_json("teardown", ID_T1, env=env(fleet, nm, FM_TEARDOWN_NM_TIMEOUT="1"))
    assert code == 0, doc
    assert (doc["steps"][0]["step"], doc["steps"][0]["outcome"]) == ("parked-run", "skipped")
    assert any("timed out after 1s" in w and "not aborted" in w for w in doc["warnings"]), doc
    assert nm.aborted() == []


def test_no_step_without_no_mistakes_on_path(fleet: Fleet) -> None:
    if shutil.which("no-mistakes", path=fleet.env()["PATH"]):
        pytest.skip("this machine has a no-mistakes on PATH")
    slot, _ = ship(fleet, "dead")
    code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run")
    assert code == 0, doc
    assert "parked-run" not in [s["step"] for s in doc["steps"]]
    assert slot.exists()


def test_a_scout_has_no_such_step(fleet: Fleet, nm: NmFake) -> None:
    """Only a ship task drives a no-mistakes run of its own slot."""
    slot = fleet.slot(1, holder=ID_T1)
    git(slot, "checkout", "-q", "-b", BRANCH)
    meta = fleet.record(ID_T1, slot)
    meta.write_text(meta.read_text().replace("kind=ship", "kind=scout"))
    (fleet.data / ID_T1).mkdir()
    (fleet.data / ID_T1 / "report.md").write_text("# report\n")
    nm.set("status", parked_toon(BRANCH, head(slot)))
    code, doc = fleet.fm_json("teardown", ID_T1, env=env(fleet, nm))
    assert code == 0, doc
    assert "parked-run" not in [s["step"] for s in doc["steps"]], doc
    assert nm.calls() == []


def test_a_teardown_that_dies_after_the_abort_is_finished_by_the_same_command(
    fleet: Fleet, nm: NmFake
) -> None:
    """fm killed right after the abort (before its window): the re-run finds the run ended,
    leaves it alone and finishes; the run was aborted once."""
    slot, _ = ship(fleet)
    nm.set("status", parked_toon(BRANCH, head(slot)))
    r = fleet.fm("teardown", ID_T1, env=env(fleet, nm, FM_TEST_FAULT="crash:after-parked-run"))
    assert r.returncode == -9, r.stdout + r.stderr
    assert nm.aborted() == ["01RUN"]
    assert (fleet.state / f"{ID_T1}.meta").exists()
    assert f"{SESSION}:fm-{ID_T1}" in fleet.tmux.windows()
    code, doc = fleet.fm_json("teardown", ID_T1, env=env(fleet, nm))
    assert code == 0, doc
    first = doc["steps"][0]
    assert (first["step"], first["outcome"]) == ("parked-run", "absent"), first
    assert "has ended already (cancelled)" in first["detail"], first
    assert nm.aborted() == ["01RUN"]
    assert not (fleet.state / f"{ID_T1}.meta").exists()
