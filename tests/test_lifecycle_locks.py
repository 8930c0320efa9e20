"""firstmate's lifecycle locks (`state/.control-<id>.lock`, `state/.meta-<id>.lock`), held
the way firstmate's own scripts hold them: a symlink to an owner directory whose `pid` file
names the holder. `fm teardown` and `fm-teardown` take them for a real run: another action
holding the control lock refuses the run before anything changes; a writer holding the meta
lock is waited for (bounded); a lock whose holder died is taken over."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.fleet import Fleet, tid, wait_for

ID_A = tid("lock-a")
ID_B = tid("lock-b")


def firstmate_lock(lock: Path, pid: int) -> Path:
    """A lock as firstmate's fm_lock_try_acquire leaves it: `<lock>` -> `<lock>.owner.XXXXXX/`
    holding `pid`."""
    owner = Path(tempfile.mkdtemp(prefix=lock.name + ".owner.", dir=lock.parent))
    (owner / "pid").write_text(f"{pid}\n")
    os.symlink(str(owner), lock)
    return owner


def holder(fleet: Fleet) -> subprocess.Popen[bytes]:
    """A live process standing for another firstmate action (reaped by the fleet)."""
    proc = subprocess.Popen(["sleep", "300"])
    fleet.procs.append(proc)
    return proc


def test_a_held_control_lock_refuses_before_anything_changes(fleet: Fleet) -> None:
    t = fleet.task(ID_A, fleet.slot(1, holder=ID_A), "alive")
    lock = fleet.state / f".control-{ID_A}.lock"
    other = holder(fleet)
    firstmate_lock(lock, other.pid)
    before = fleet.snapshot(t.slot)
    for args in ([ID_A], [ID_A, "--dry-run"]):
        r = fleet.fm("teardown", *args)
        assert r.returncode == 5, r.stdout + r.stderr
        assert "another lifecycle action is already running" in r.stderr
        assert f"held by pid {other.pid}" in r.stderr
    dropin = fleet.python("-m", "fm_teardown.commands.firstmate", ID_A, "--force")
    assert dropin.returncode == 1
    assert "another lifecycle action is already running" in dropin.stderr.splitlines()[0]
    assert fleet.snapshot(t.slot) == before  # record, slot, window, agent: as they were
    assert lock.is_symlink() and os.readlink(lock).startswith(str(lock))  # still theirs
    assert not (fleet.state / f".meta-{ID_A}.lock").exists()


def test_a_record_writer_is_waited_for_then_the_teardown_finishes(fleet: Fleet) -> None:
    fleet.task(ID_A, fleet.slot(1, holder=ID_A), "dead")
    meta_lock = fleet.state / f".meta-{ID_A}.lock"
    owner = firstmate_lock(meta_lock, holder(fleet).pid)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", "teardown", ID_A],
        cwd=fleet.fm_home,
        env=fleet.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    fleet.procs.append(proc)  # type: ignore[arg-type]
    control = fleet.state / f".control-{ID_A}.lock"
    wait_for(control.is_symlink, what="fm holding the control lock")
    assert proc.poll() is None and (fleet.state / f"{ID_A}.meta").exists()
    # The writer finishes: firstmate's release removes the link, then the owner dir.
    meta_lock.unlink()
    (owner / "pid").unlink()
    owner.rmdir()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    assert not (fleet.state / f"{ID_A}.meta").exists()
    # fm released both locks: nothing of them is left in the state dir.
    assert not [p for p in os.listdir(fleet.state) if p.startswith((".control-", ".meta-"))]


def test_a_record_writer_that_never_finishes_refuses_after_the_wait(fleet: Fleet) -> None:
    t = fleet.task(ID_A, fleet.slot(1, holder=ID_A), "dead")
    firstmate_lock(fleet.state / f".meta-{ID_A}.lock", holder(fleet).pid)
    before = fleet.snapshot(t.slot)
    r = fleet.fm("teardown", ID_A, env=fleet.env(FM_LOCK_WAIT_SECS="0.3"))
    assert r.returncode == 5, r.stdout + r.stderr
    assert "is still being written" in r.stderr and "after 0.3s" in r.stderr
    assert fleet.snapshot(t.slot) == before
    assert not (fleet.state / f".control-{ID_A}.lock").exists()  # its own lock released


def test_a_lock_whose_holder_died_is_taken_over(fleet: Fleet) -> None:
    fleet.task(ID_A, fleet.slot(1, holder=ID_A), "dead")
    dead = subprocess.Popen(["true"])
    dead.wait()
    firstmate_lock(fleet.state / f".control-{ID_A}.lock", dead.pid)
    r = fleet.fm("teardown", ID_A)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (fleet.state / f"{ID_A}.meta").exists()
    assert not [p for p in os.listdir(fleet.state) if p.startswith((".control-", ".meta-"))]


def test_another_tasks_lock_does_not_concern_this_one(fleet: Fleet) -> None:
    fleet.task(ID_A, fleet.slot(1, holder=ID_A), "dead")
    firstmate_lock(fleet.state / f".control-{ID_B}.lock", holder(fleet).pid)
    r = fleet.fm("teardown", ID_A)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_forced_secondmate_teardown_holds_its_childrens_locks(fleet: Fleet) -> None:
    """The children's records go with the home: one child's control lock held (another
    action on it) refuses the forced teardown before anything changes, naming the child."""
    from tests.test_secondmate import child, secondmate

    sm, kid_a, kid_b = tid("lock-sm"), tid("lock-ka"), tid("lock-kb")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    child(fleet, home, kid_a, fleet.slot(2, holder=kid_a))
    child(fleet, home, kid_b, fleet.slot(3, holder=kid_b))
    firstmate_lock(home / "state" / f".control-{kid_b}.lock", holder(fleet).pid)
    before = fleet.snapshot(home)
    locks_before = sorted(os.listdir(home / "state"))
    # The dry run predicts it, taking nothing (no lock of kid_a's, no owner dir of fm's).
    r = fleet.fm("teardown", sm, "--force", "--dry-run")
    assert r.returncode == 5, r.stdout + r.stderr
    assert f"descendant task {kid_b} has a lifecycle action in flight" in r.stderr
    assert sorted(os.listdir(home / "state")) == locks_before
    # Without --force the children's records stay: their locks are not the run's.
    r = fleet.fm("teardown", sm, "--dry-run")
    assert "lifecycle action" not in r.stdout + r.stderr
    r = fleet.fm("teardown", sm, "--force")
    assert r.returncode == 5, r.stdout + r.stderr
    assert f"descendant task {kid_b} has a lifecycle action in flight" in r.stderr
    assert fleet.snapshot(home) == before
    assert (home / "state" / f"{kid_a}.meta").exists() and (fleet.state / f"{sm}.meta").exists()
    # Nothing of fm's is left: not its own locks, not the locks it took of kid_a.
    left = sorted(p for p in os.listdir(home / "state") if p.startswith("."))
    assert left == [f".control-{kid_b}.lock"] + [
        p for p in left if p.startswith(f".control-{kid_b}.lock.owner.")
    ]


def test_an_interrupt_ends_the_wait_for_a_record_writer_in_a_batch(fleet: Fleet) -> None:
    """In a batch an interrupt only raises a flag: the wait for a held record lock still
    ends at once (not after FM_LOCK_WAIT_SECS), the task changed nothing, the rest skipped."""
    import json
    import signal

    fleet.task(ID_A, fleet.slot(1, holder=ID_A), "dead")
    fleet.task(ID_B, fleet.slot(2, holder=ID_B), "dead")
    firstmate_lock(fleet.state / f".meta-{ID_A}.lock", holder(fleet).pid)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", "teardown", ID_A, ID_B, "--json"],
        cwd=fleet.fm_home,
        env=fleet.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    fleet.procs.append(proc)  # type: ignore[arg-type]
    wait_for((fleet.state / f".control-{ID_A}.lock").is_symlink, what="fm waiting for A")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)  # the default wait is 300 s
    doc = json.loads(out)
    assert proc.returncode == 130, err
    assert [(r["task"], r["verdict"]) for r in doc["results"]] == [
        (ID_A, "failed"),
        (ID_B, "skipped"),
    ]
    assert (fleet.state / f"{ID_A}.meta").exists() and (fleet.state / f"{ID_B}.meta").exists()
    assert not (fleet.state / f".control-{ID_A}.lock").exists()
