"""Crash injection: SIGKILL `fm teardown` at every step boundary (and in the middle of the pool
return), then re-run the same command and check that the run converges without ever touching
anyone else's live work (spec §5 "re-running the same command finishes the job and
re-checks ownership first").

Invariants checked around every crash:
- convergence: within 3 re-runs the record is gone, the slot is unleased in the pool's state
  file, the window is gone and the task's processes (pane, slot and tasktmp) are gone;
- "no record disappears while its resources remain": right after the crash, a missing record
  implies a gone window, gone processes and a returned slot;
- bystanders (a live task on another slot of the same pool, and a live task sharing nothing)
  keep their processes, a byte-identical tree, their record and their lease;
- the return is never unconditional, and the journal holds one line per finished run;
- if the pool re-issues the slot to a new live task B between the crash and the re-run, the
  re-run refuses (4, naming B) or clears only TASK's endpoint and record; B is never touched.

One fleet serves the whole module (each scenario gets its own slot and task ids), so the
cost is the teardowns themselves. `FM_SOAK` > 1 adds rounds of random crash points.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fleet import Fleet, Task, git, gone, tid, tree_hash, wait_for
from tests.reliability.figures import count, soak
from tests.standin.pool_fixtures import hold_state_lock, state_lock_held

ID_BYSTANDER = tid("bystander")
ID_LONE = tid("lone")

BOUNDARIES = (
    "before-endpoint",
    "after-endpoint",
    "before-recheck",
    "after-processes",
    "after-save",
    "after-pool",
    "before-meta",
    "after-record",
)
# SIGKILL while the stand-in sleeps inside `treehouse return` holding the pool's lock: kill
# only fm (the stand-in finishes the return on its own), or fm's whole process group.
POOL_KILLS = ("pool-return:fm-only", "pool-return:group")
CRASH_POINTS = BOUNDARIES + POOL_KILLS
MAX_RERUNS = 3


# -- running fm ---------------------------------------------------------------------------------


def fm_env(fleet: Fleet, **extra: str) -> dict[str, str]:
    env = fleet.env(**extra)
    # Let a run against another checkout (PYTHONPATH) reach the fm it is testing.
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def fm_json(fleet: Fleet, *args: str, **extra: str) -> tuple[int, dict[str, Any]]:
    r = fleet.fm(*args, "--json", env=fm_env(fleet, **extra))
    try:
        doc = json.loads(r.stdout)
    except ValueError as exc:
        raise AssertionError(f"not one JSON object: {r.stdout!r} / {r.stderr!r}") from exc
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, doc


def popen_fm(
    fleet: Fleet, *args: str, env: dict[str, str] | None = None, new_session: bool = False
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fm_teardown", *args],
        cwd=fleet.fm_home,
        env=env or fm_env(fleet),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill (if still running) and reap a process this test started."""
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            proc.kill()
    with suppress(Exception):
        proc.communicate(timeout=10)


def journal(fleet: Fleet) -> list[dict[str, Any]]:
    return fleet.journal()


def live_owner_ids(doc: dict[str, Any]) -> list[str]:
    return sorted(o["id"] for o in doc.get("owners", []) if o["live"])


_RFC3339 = re.compile(r"^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def log_time(stamp: str) -> float:
    """The stand-in's RFC3339Nano call time as a POSIX timestamp."""
    m = _RFC3339.match(stamp)
    assert m, stamp
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(f"{m.group(1)}.{frac}{zone}").timestamp()


# -- the pool's state file ----------------------------------------------------------------------


def lease_id(tag: str) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()[:32]


def pool_doc(fleet: Fleet) -> dict[str, Any]:
    path = fleet.pool / "treehouse-state.json"
    if not path.exists():
        return {"worktrees": None}
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def pool_entry(fleet: Fleet, slot: Path) -> dict[str, Any]:
    entries = pool_doc(fleet)["worktrees"] or []
    return next(e for e in entries if e["path"] == str(slot))


def add_slot(fleet: Fleet, n: int, *, holder: str, lease: str) -> Path:
    """A new leased slot, without rewriting what the stand-in has written for the others."""
    with hold_state_lock(fleet.pool):
        fleet.entries = list(pool_doc(fleet)["worktrees"] or [])
        return fleet.slot(n, holder=holder, lease_id=lease)


def reissue(fleet: Fleet, slot: Path, *, holder: str, lease: str) -> None:
    """The pool hands the slot to someone else (as `treehouse get --lease` would, under the
    pool's lock, so never in the middle of a return)."""
    with hold_state_lock(fleet.pool):
        doc = pool_doc(fleet)
        for e in doc["worktrees"] or []:
            if e["path"] == str(slot):
                e.update(
                    leased=True,
                    lease_id=lease,
                    lease_holder=holder,
                    leased_at="2026-12-02T00:00:00Z",
                )
        tmp = fleet.pool / "treehouse-state.json.test-tmp"
        tmp.write_text(json.dumps(doc, indent=2))
        os.replace(tmp, fleet.pool / "treehouse-state.json")
        fleet.entries = list(doc["worktrees"] or [])


def return_calls(fleet: Fleet, slot: Path) -> list[dict[str, Any]]:
    return [
        c
        for c in fleet.treehouse_calls()
        if c["argv"] and c["argv"][0] == "return" and c["argv"][-1] == str(slot)
    ]


# -- the fleet: bystanders and scenes -----------------------------------------------------------


@dataclass
class Guarded:
    """Live work the teardowns must never touch: its pids, tree, record, lease and window."""

    tasks: list[Task] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    trees: dict[Path, str] = field(default_factory=dict)
    metas: dict[Path, bytes] = field(default_factory=dict)
    leases: dict[Path, dict[str, Any]] = field(default_factory=dict)

    def add(self, fleet: Fleet, task: Task, *, extra_pids: tuple[int, ...] = ()) -> None:
        self.tasks.append(task)
        self.pids += task.pids + list(extra_pids)
        self.trees[task.slot] = tree_hash(task.slot)
        self.metas[task.meta] = task.meta.read_bytes()
        with suppress(StopIteration):
            self.leases[task.slot] = pool_entry(fleet, task.slot)

    def check(self, fleet: Fleet, what: str) -> None:
        dead = [p for p in self.pids if gone(p)]
        assert not dead, f"{what}: live owner processes were killed: {dead}"
        for slot, h in self.trees.items():
            assert tree_hash(slot) == h, f"{what}: the tree of {slot} changed"
        for meta, body in self.metas.items():
            assert meta.exists() and meta.read_bytes() == body, f"{what}: record {meta} changed"
        for slot, entry in self.leases.items():
            assert pool_entry(fleet, slot) == entry, f"{what}: the lease on {slot} changed"
        windows = fleet.tmux.windows()
        for t in self.tasks:
            assert t.window in windows, f"{what}: window {t.window} is gone"


@dataclass
class Shared:
    fleet: Fleet
    bystanders: Guarded
    next_slot: int = 1

    def slot_number(self) -> int:
        self.next_slot += 1
        return self.next_slot


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    fleet = Fleet(tmp_path_factory.mktemp("crash"))
    try:
        guarded = Guarded()
        # A live task on ANOTHER slot of the same pool, with a worker and work in progress.
        other_slot = add_slot(fleet, 1, holder=ID_BYSTANDER, lease=lease_id(ID_BYSTANDER))
        (other_slot / "bystander-work.txt").write_text("in progress\n")
        other = fleet.task(
            ID_BYSTANDER, other_slot, "alive", extra={"treehouse_lease": lease_id(ID_BYSTANDER)}
        )
        worker = fleet.spawn(["sleep", "100000"], other_slot)
        guarded.add(fleet, other, extra_pids=(worker.pid,))
        # A live task sharing nothing: its own session, a directory outside the pool.
        lone_dir = fleet.root / ID_LONE
        lone_dir.mkdir()
        (lone_dir / "notes.txt").write_text("mine\n")
        lone = fleet.task(ID_LONE, lone_dir, "alive", session="solo")
        lone_worker = fleet.agent_in(lone_dir)
        guarded.add(fleet, lone, extra_pids=(lone_worker.pid,))
        yield Shared(fleet, guarded)
    finally:
        fleet.close()


@dataclass
class Scene:
    """TASK on its own leased slot: a live pane, a worker in the slot, one in its tasktmp, a
    sidecar; with `force`, unlanded work that `--force` must save before discarding."""

    tid: str
    slot: Path
    lease: str
    task: Task
    tasktmp: Path
    pids: list[int]
    force: bool

    @property
    def args(self) -> tuple[str, ...]:
        return ("teardown", self.tid, *(("--force",) if self.force else ()))

    @property
    def meta(self) -> Path:
        return self.task.meta


def make_scene(shared: Shared, label: str, *, force: bool) -> Scene:
    fleet = shared.fleet
    task_id = tid(f"{label}-{uuid.uuid4().hex[:6]}")
    lease = lease_id(task_id)
    slot = add_slot(fleet, shared.slot_number(), holder=task_id, lease=lease)
    tasktmp = fleet.make_tasktmp(task_id)
    (tasktmp / "scratch").write_text("x\n")
    task = fleet.task(
        task_id, slot, "alive", extra={"treehouse_lease": lease, "treehouse_lease_holder": task_id}
    )
    (fleet.state / f"{task_id}.status").write_text("done\n")
    if force:
        (slot / "wip.txt").write_text("unlanded work\n")
    workers = [fleet.spawn(["sleep", "100000"], slot), fleet.spawn(["sleep", "100000"], tasktmp)]
    return Scene(task_id, slot, lease, task, tasktmp, task.pids + [w.pid for w in workers], force)


def cleanup(scene: Scene) -> None:
    shutil.rmtree(scene.tasktmp, ignore_errors=True)


# -- the invariants -----------------------------------------------------------------------------


def check_after_crash(fleet: Fleet, scene: Scene, where: str) -> None:
    """No record disappears while its resources remain; the pool is never left half-owned."""
    entry = pool_entry(fleet, scene.slot)
    if not scene.meta.exists():
        assert scene.task.window not in fleet.tmux.windows(), f"{where}: window outlived record"
        alive = [p for p in scene.pids if not gone(p)]
        assert not alive, f"{where}: processes {alive} outlived the record"
        assert not entry.get("leased"), f"{where}: the record went before the slot's return"
    if not entry.get("leased"):
        # The return comes after the processes step (and treehouse ends them as well).
        wait_for(
            lambda: all(gone(p) for p in scene.pids),
            what=f"{where}: slot processes gone once the slot is returned",
        )
    else:
        assert entry.get("lease_id") == scene.lease, f"{where}: lease changed: {entry}"
    for call in return_calls(fleet, scene.slot):
        argv = call["argv"]
        assert "--if-lease-id" in argv and scene.lease in argv, f"unconditional return: {argv}"


def check_converged(fleet: Fleet, scene: Scene) -> None:
    assert not scene.meta.exists(), "record still there"
    assert not any(n.startswith(f"{scene.tid}.") for n in os.listdir(fleet.state)), "sidecars"
    assert not os.path.lexists(scene.tasktmp), "tasktmp still there"
    assert scene.task.window not in fleet.tmux.windows(), "window still there"
    wait_for(lambda: all(gone(p) for p in scene.pids), what="the task's processes gone")
    entry = pool_entry(fleet, scene.slot)
    assert not entry.get("leased") and "lease_id" not in entry, f"slot still leased: {entry}"
    if scene.force:
        refs = git(
            fleet.project, "for-each-ref", "--format=%(refname)", f"refs/fm/discarded/{scene.tid}/"
        )
        assert refs, "--force discarded work without saving it"
        ref = refs.splitlines()[-1]
        assert git(fleet.project, "show", f"{ref}:wip.txt") == "unlanded work"


def rerun_until_done(fleet: Fleet, scene: Scene) -> list[int]:
    """Re-run the same command until it exits 0 (at most MAX_RERUNS times)."""
    codes = []
    for _ in range(MAX_RERUNS):
        code, doc = fm_json(fleet, *scene.args)
        codes.append(code)
        if code == 0:
            assert doc["verdict"] == "proceed", doc
            return codes
        assert code == 1 and doc["verdict"] == "failed", doc
    raise AssertionError(f"no convergence after {MAX_RERUNS} re-runs: exit codes {codes}")


# -- crashing -----------------------------------------------------------------------------------


def crash(fleet: Fleet, scene: Scene, point: str) -> int | None:
    """Run the teardown and SIGKILL it at `point`; the crashed run writes no journal line.
    Returns the pid of a stand-in left running (killing fm alone in the pool return)."""
    before = len(journal(fleet))
    orphan = None
    if point in BOUNDARIES:
        r = fleet.fm(*scene.args, env=fm_env(fleet, FM_TEST_FAULT=f"crash:{point}"))
        assert r.returncode == -signal.SIGKILL, (point, r.returncode, r.stderr)
    else:
        orphan = kill_in_pool_return(fleet, scene, group=point.endswith(":group"))
    count("crashes")
    assert len(journal(fleet)) == before
    return orphan


def reap_orphan(pid: int | None) -> None:
    """Wait for the orphaned stand-in to finish its return (it is not our child)."""
    if pid is None:
        return
    try:
        wait_for(lambda: gone(pid), timeout=30, what="the orphaned stand-in to finish")
    finally:
        with suppress(ProcessLookupError):
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def kill_in_pool_return(fleet: Fleet, scene: Scene, *, group: bool) -> int | None:
    calls = len(fleet.treehouse_calls())
    proc = popen_fm(
        fleet, *scene.args, env=fm_env(fleet, TREEHOUSE_STANDIN_FAULT="sleep:5"), new_session=True
    )
    standin = 0
    try:
        wait_for(
            lambda: len(fleet.treehouse_calls()) > calls or proc.poll() is not None,
            timeout=60,
            what="the stand-in's return call",
        )
        assert proc.poll() is None, f"fm ended before the return: {proc.communicate()}"
        [call] = fleet.treehouse_calls()[calls:]
        assert call["argv"][0] == "return"
        standin = int(call["pid"])
        # Inside the return: the stand-in sleeps holding the pool's lock.
        wait_for(lambda: state_lock_held(fleet.pool) or gone(standin), what="the pool lock held")
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        if group:
            wait_for(lambda: gone(standin), what="the stand-in killed with fm's group")
        else:
            assert not gone(standin), "killing fm alone must leave the stand-in running"
    finally:
        stop(proc)
    # Killing fm alone leaves the stand-in to finish the return by itself: the re-run starts
    # while it still holds the pool's lock.
    return None if group else standin


# -- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_then_rerun_converges_and_spares_live_owners(shared: Shared, point: str) -> None:
    fleet = shared.fleet
    scene = make_scene(shared, "crash", force=point == "after-save")
    orphan = None
    try:
        orphan = crash(fleet, scene, point)
        check_after_crash(fleet, scene, point)
        shared.bystanders.check(fleet, f"after the crash at {point}")
        finished = len(journal(fleet))
        if point == "after-record":
            # Everything was done; only the result line was lost. The same command says the
            # task was torn down when its intent was journalled (exit 0, spec §15.8), and
            # changes nothing.
            assert not scene.meta.exists()
            code, doc = fm_json(fleet, *scene.args)
            assert (code, doc["verdict"]) == (0, "already-torn-down"), doc
            reruns = 0
        else:
            reruns = len(rerun_until_done(fleet, scene))
        check_converged(fleet, scene)
        check_after_crash(fleet, scene, f"{point}, converged")
        shared.bystanders.check(fleet, f"after the re-runs ({point})")
        assert len(journal(fleet)) == finished + reruns
        # Every call named TASK's lease (checked above); a second call only after a return
        # that was killed or was still running when the re-run decided.
        assert 1 <= len(return_calls(fleet, scene.slot)) <= 1 + (point in POOL_KILLS)
    finally:
        reap_orphan(orphan)
        cleanup(scene)


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_then_slot_reissued_to_a_live_task_is_never_touched(
    shared: Shared, point: str
) -> None:
    fleet = shared.fleet
    scene = make_scene(shared, "reissue", force=point == "after-save")
    orphan = None
    try:
        orphan = crash(fleet, scene, point)
        check_after_crash(fleet, scene, point)
        # The pool re-issues the slot to B, which starts working in it.
        b_id = f"b-{scene.tid}"
        b_lease = lease_id(b_id)
        reissue(fleet, scene.slot, holder=b_id, lease=b_lease)
        b = fleet.task(b_id, scene.slot, "alive", extra={"treehouse_lease": b_lease})
        (scene.slot / "b-work.txt").write_text("B's work in progress\n")
        b_worker = fleet.spawn(["sleep", "100000"], scene.slot)
        guard = Guarded()
        guard.add(fleet, b, extra_pids=(b_worker.pid,))
        calls = len(return_calls(fleet, scene.slot))
        code, doc = fm_json(fleet, *scene.args)
        if point == "after-record":
            assert (code, doc["verdict"]) == (0, "already-torn-down"), doc
        elif code == 4:
            assert doc["verdict"] == "live-owner", doc
            assert live_owner_ids(doc) == [b_id], doc
            assert b_id in " ".join(doc["reasons"]), doc
            assert scene.meta.exists()
        else:
            # Only TASK's endpoint and record may go (a stale slot for TASK).
            assert (code, doc["verdict"]) == (0, "stale"), doc
            assert not scene.meta.exists()
        guard.check(fleet, f"after the re-run ({point})")
        shared.bystanders.check(fleet, f"after the re-run ({point})")
        assert len(return_calls(fleet, scene.slot)) == calls, "the slot was returned again"
    finally:
        reap_orphan(orphan)
        cleanup(scene)


def test_random_crash_points_soak(shared: Shared) -> None:
    """Under `--soak N`: (N-1) x |crash points| more crashes at random points, with and without
    `--force` and a re-issued slot."""
    rounds = len(CRASH_POINTS) * (soak() - 1)
    if rounds == 0:
        pytest.skip("soak rounds only run with FM_SOAK > 1")
    seed = int(os.environ.get("FM_SOAK_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    for i in range(rounds):
        point = rng.choice(CRASH_POINTS)
        force = point == "after-save" or rng.random() < 0.3
        print(f"soak round {i} (seed {seed}): {point} force={force}")
        fleet = shared.fleet
        scene = make_scene(shared, "soak", force=force)
        orphan = None
        try:
            orphan = crash(fleet, scene, point)
            check_after_crash(fleet, scene, point)
            if point != "after-record":
                rerun_until_done(fleet, scene)
            check_converged(fleet, scene)
            shared.bystanders.check(fleet, f"soak round {i} ({point}, seed {seed})")
        finally:
            reap_orphan(orphan)
            cleanup(scene)
