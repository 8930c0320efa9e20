"""Races: concurrent teardowns of two tasks that share a slot, and a teardown racing a new
task that claims its slot between deciding and acting.

Invariants (spec §4, §5):
- the slot is returned at most once, and only conditionally on the lease seen;
- a live owner is never touched (processes, tree, record, window, lease) unless discarded
  explicitly: the other task's teardown never signals its processes nor returns the slot
  while its record claims it;
- a claimant that is live before the teardown takes the slot lock (so before its re-check)
  makes the teardown refuse, with nothing of the claimant touched; a claimant that honours the
  slot lock is never touched at all, and a slot returned while it exists was returned before
  it took the lock.

One fleet serves the module; every iteration builds its own slot and task ids.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from fm_teardown.act.lock import slot_lock
from fm_teardown.model.own_files import lock_path
from fm_teardown.model.paths import canonical
from tests.fleet import SESSION, Fleet, Task, gone, tid, tree_hash, wait_for
from tests.reliability.figures import count, soak
from tests.reliability.test_crash import (
    add_slot,
    fm_env,
    fm_json,
    journal,
    lease_id,
    live_owner_ids,
    log_time,
    pool_entry,
    popen_fm,
    return_calls,
    stop,
)

RUNS_PER_SHAPE = 5
CLAIM_RACES = 10  # per claimant kind
MAX_RERUNS = 3


@dataclass
class RaceFleet:
    fleet: Fleet
    n: int = 0

    def slot_number(self) -> int:
        self.n += 1
        return self.n


@pytest.fixture(scope="module")
def races(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RaceFleet]:
    fleet = Fleet(tmp_path_factory.mktemp("races"))
    try:
        yield RaceFleet(fleet)
    finally:
        fleet.close()


def finish(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        stop(proc)
    assert "Traceback" not in err, err
    try:
        return proc.returncode, json.loads(out)
    except ValueError as exc:
        raise AssertionError(f"not one JSON object: {out!r} / {err!r}") from exc


def brief(doc: dict[str, Any]) -> str:
    """What a failed assertion shows of a run: its verdict, reasons, owners and steps."""
    keys = ("verdict", "exit_code", "reasons", "owners", "steps", "warnings")
    return json.dumps({k: doc.get(k) for k in keys}, indent=1)


def journal_of(fleet: Fleet, task: str) -> list[dict[str, Any]]:
    return [e for e in journal(fleet) if e["task"] == task]


def signalled(entries: list[dict[str, Any]]) -> set[int]:
    return {int(s["pid"]) for e in entries for s in e["signalled"]}


def pool_steps(entries: list[dict[str, Any]]) -> list[str]:
    return [s["outcome"] for e in entries for s in e["steps"] if s["step"] == "pool"]


# -- a. two teardowns of two tasks sharing one slot ---------------------------------------------

# (A's endpoint, B's endpoint). A holds the pool lease and is the more recent launch; B's record
# still claims the slot from an earlier lease of its own (the slot was recycled from B to A).
SHAPES = {
    "holder-dead-claimant-dead": ("dead", "dead"),
    "holder-alive-claimant-dead": ("alive", "dead"),
    "holder-dead-claimant-alive": ("dead", "alive"),
}


@dataclass
class Pair:
    slot: Path
    a: Task
    b: Task
    lease_a: str
    worker: int


def make_pair(races: RaceFleet, a_state: str, b_state: str) -> Pair:
    fleet = races.fleet
    n = races.slot_number()
    tag = tid(uuid.uuid4().hex[:6])
    a_id, b_id = f"a{n}-{tag}", f"b{n}-{tag}"
    lease_a = lease_id(a_id)
    slot = add_slot(fleet, n, holder=a_id, lease=lease_a)
    b = fleet.task(
        b_id, slot, b_state, extra={"treehouse_lease": lease_id(b_id), "spawn_gen": "s1000.1.b"}
    )
    a = fleet.task(
        a_id,
        slot,
        a_state,
        extra={
            "treehouse_lease": lease_a,
            "treehouse_lease_holder": a_id,
            "spawn_gen": "s2000.1.a",
        },
    )
    worker = fleet.spawn(["sleep", "100000"], slot).pid  # a leftover of A's in the slot
    return Pair(slot, a, b, lease_a, worker)


def run_pair(fleet: Fleet, pair: Pair, offset: float) -> tuple[tuple[int, dict[str, Any]], ...]:
    """Both teardowns with the same environment, B started `offset` seconds after A (0: both
    together), so that B decides at every stage of A's run. A short grace keeps it quick: a
    bare interactive shell ignores SIGTERM."""
    env = fm_env(fleet, FM_TERM_GRACE_SECS="0.3")
    pa = popen_fm(fleet, "teardown", pair.a.id, "--json", env=env)
    pb = None
    try:
        if offset:
            time.sleep(offset)  # the deliberate random start offset
        pb = popen_fm(fleet, "teardown", pair.b.id, "--json", env=env)
        return finish(pa), finish(pb)
    finally:
        stop(pa)
        if pb is not None:
            stop(pb)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_two_teardowns_of_one_slot(races: RaceFleet, shape: str) -> None:
    fleet = races.fleet
    a_state, b_state = SHAPES[shape]
    seed = int(os.environ.get("FM_RACE_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    stats: dict[str, int] = {}
    for i in range(RUNS_PER_SHAPE * soak()):
        pair = make_pair(races, a_state, b_state)
        offset = 0.0 if i == 0 else rng.uniform(0.0, 2.0)
        what = f"{shape}, run {i} (seed {seed}, B started {offset:.2f}s after A)"
        a_record = pair.a.meta.read_bytes()
        tree = tree_hash(pair.slot)
        (a_code, a_doc), (b_code, b_doc) = run_pair(fleet, pair, offset)
        count("races")
        outcome = f"A {a_code}:{a_doc['verdict']} B {b_code}:{b_doc['verdict']}"
        stats[outcome] = stats.get(outcome, 0) + 1
        if b_state == "alive":
            # B is live: while it is, A refuses, naming B, and never touches B. A's lease is
            # A's claim (spec §7a) and A's endpoint is dead, so the pool says the slot is A's: B's
            # own teardown finds its slot stale and clears only B's window and record. A
            # that decides only after that proceeds, as the slot's sole claimant.
            assert (b_code, b_doc["verdict"]) == (0, "stale"), (what, brief(b_doc))
            if a_code == 4:
                assert live_owner_ids(a_doc) == [pair.b.id], (what, brief(a_doc))
                assert pair.a.meta.read_bytes() == a_record, what
                assert pair.a.window in fleet.tmux.windows(), what
                assert not gone(pair.worker), what
                assert tree_hash(pair.slot) == tree, what
                entry = pool_entry(fleet, pair.slot)
                assert (entry.get("lease_id"), entry.get("lease_holder")) == (
                    pair.lease_a,
                    pair.a.id,
                ), what
                assert return_calls(fleet, pair.slot) == [], what
            else:
                # A decided (and re-checked under the lock) once B was no longer live.
                assert (a_code, a_doc["verdict"]) == (0, "proceed"), (what, brief(a_doc))
                assert pair.b.id not in live_owner_ids(a_doc), (what, brief(a_doc))
                assert len(return_calls(fleet, pair.slot)) == 1, what
            continue
        # A holds the lease: its teardown goes ahead, even with its own pane alive.
        assert (a_code, a_doc["verdict"]) == (0, "proceed"), (what, brief(a_doc))
        # B: refused while A's lease or live record claims the slot (naming A), a stale slot
        # (A is the more recent launch), already returned, or a changed decision (exit 1).
        assert b_code in (0, 1, 4), (what, brief(b_doc))
        if b_code == 4:
            assert live_owner_ids(b_doc) == [pair.a.id], (what, brief(b_doc))
        if b_code == 0:
            assert b_doc["verdict"] in ("stale", "proceed"), (what, brief(b_doc))
        for _ in range(MAX_RERUNS):
            if not pair.b.meta.exists():
                break
            code, doc = fm_json(fleet, "teardown", pair.b.id)
            assert code in (0, 1), (what, brief(doc))
        assert not pair.b.meta.exists(), f"{what}: B's record was never cleared"
        assert not pair.a.meta.exists(), what
        # The slot was returned exactly once: by A, conditionally on A's lease.
        calls = return_calls(fleet, pair.slot)
        assert len(calls) == 1, (what, [c["argv"] for c in calls])
        assert "--if-lease-id" in calls[0]["argv"] and pair.lease_a in calls[0]["argv"]
        assert not pool_entry(fleet, pair.slot).get("leased"), what
        # B's teardowns never signalled A's processes and never returned the slot.
        b_runs = journal_of(fleet, pair.b.id)
        assert not signalled(b_runs) & set(pair.a.pids), (what, b_runs)
        assert "done" not in pool_steps(b_runs), (what, b_runs)
        windows = fleet.tmux.windows()
        assert pair.a.window not in windows and pair.b.window not in windows, what
        pids = [*pair.a.pids, pair.worker]

        def all_gone(p: list[int] = pids) -> bool:
            return all(gone(x) for x in p)

        wait_for(all_gone, what=f"{what}: A's processes gone")
    print(f"{shape}: {stats}")


# -- b. a teardown racing a new claimant of its slot -------------------------------------------


@dataclass
class Claim:
    task: Task
    acquired: float  # when the claimant started to exist (its record is written after this)
    alive_before_lock: bool  # record + alive endpoint while the teardown had not taken the lock
    tree: str
    work: Path


def open_claimant(fleet: Fleet, slot: Path, cid: str) -> tuple[Task, bool]:
    """The claimant's record, then its window running an agent in the slot. A teardown that
    does not see it in time may end it while it starts: then it is not alive (False)."""
    meta = fleet.record(cid, slot)
    command = f"bash --norc --noprofile -c '{fleet.bin}/claude 100000; exec bash'"
    r = fleet.tmux.run(
        "new-window", "-d", "-P", "-F", "#{window_id} #{pane_pid}", "-t", f"={SESSION}:",
        "-n", f"fm-{cid}", "-c", str(slot), command,
    )  # fmt: skip
    wid, pane = r.stdout.split()
    for option in ("automatic-rename", "allow-rename"):
        fleet.tmux.run("set-option", "-w", "-t", wid, option, "off", check=False)
    pids = [int(pane)]
    fleet.tracked.update(pids)

    def agent() -> list[int] | None:
        try:
            kids = psutil.Process(pids[0]).children()
            return [k.pid for k in kids if k.name() == "claude"]
        except psutil.Error:
            return None  # the pane is gone

    wait_for(lambda: agent() != [], what=f"the claimant {cid}'s agent")
    found = agent()
    pids += found or []
    fleet.tracked.update(pids)
    task = Task(cid, slot, meta, f"{SESSION}:fm-{cid}", pids)
    return task, bool(found)


def claim(fleet: Fleet, slot: Path, cid: str, torn: Path, *, honour_lock: bool) -> Claim:
    """A new task takes the slot: record, live endpoint, then (only then) its work file.

    With `honour_lock`, it creates its record and endpoint holding the slot lock fm documents
    (`fm_teardown.act.lock.slot_lock`), as a spawner that cooperates with fm would. `torn` is the
    record of the task being torn down: fm removes it under the lock, and removes the lock file
    on release, so "no lock file while that record still exists" means fm has not taken the
    lock yet."""
    lock = lock_path(fleet.state, canonical(str(slot)))
    with contextlib.ExitStack() as stack:
        if honour_lock:
            stack.enter_context(slot_lock(fleet.state, canonical(str(slot)), 60))
        acquired = time.time()
        task, alive = open_claimant(fleet, slot, cid)
        alive_before_lock = alive and not honour_lock and not lock.exists() and torn.exists()
    work = slot / f"{cid}-work.txt"
    work.write_text(f"{cid}'s work\n")
    return Claim(task, acquired, alive_before_lock, tree_hash(slot), work)


def wait_decided(fleet: Fleet, proc: subprocess.Popen[str], window: str) -> None:
    """The teardown decided and ended TASK's window; next come the lock and the re-check."""
    wait_for(
        lambda: proc.poll() is not None or window not in fleet.tmux.windows(),
        timeout=60,
        what="the teardown to end TASK's window",
    )


@pytest.mark.parametrize("honour_lock", [True, False], ids=["lock-honouring", "lock-ignoring"])
def test_teardown_racing_a_new_claimant(races: RaceFleet, honour_lock: bool) -> None:
    fleet = races.fleet
    seed = int(os.environ.get("FM_RACE_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    stats: dict[str, int] = {}
    # How long the teardown takes to decide on this machine (start to TASK's window gone, just
    # before the slot lock), measured on the runs anchored there.
    decide_time: float | None = None
    for i in range(CLAIM_RACES * soak()):
        n = races.slot_number()
        tag = tid(uuid.uuid4().hex[:6])
        task_id, cid = f"t{n}-{tag}", f"c{n}-{tag}"
        lease = lease_id(task_id)
        slot = add_slot(fleet, n, holder=task_id, lease=lease)
        task = fleet.task(task_id, slot, "dead", extra={"treehouse_lease": lease})
        worker = fleet.spawn(["sleep", "100000"], slot)
        # Anchors: anywhere from the start; in the 0-300 ms before the teardown's lock (it
        # has decided, or nearly, and is about to act); 0-300 ms into the locked section.
        anchor = "decided" if decide_time is None else rng.choice(["start", "lock", "decided"])
        if anchor == "start":
            assert decide_time is not None
            delay = rng.uniform(0.0, 1.2 * decide_time)
        elif anchor == "lock":
            assert decide_time is not None
            delay = max(0.0, decide_time - rng.uniform(0.0, 0.3))
        else:
            delay = rng.uniform(0.0, 0.3)
        what = f"race {i} (seed {seed}, {delay:.3f}s after {anchor})"
        started = time.monotonic()
        proc = popen_fm(fleet, "teardown", task_id, "--json")
        try:
            if anchor == "decided":
                wait_decided(fleet, proc, task.window)
                if proc.poll() is None:
                    took = time.monotonic() - started
                    decide_time = took if decide_time is None else (decide_time + took) / 2
            time.sleep(delay)  # the deliberate random timing
            c = claim(fleet, slot, cid, task.meta, honour_lock=honour_lock)
            code, doc = finish(proc)
        finally:
            stop(proc)
        count("races")
        outcome = f"{code}:{doc['verdict']}" + (
            "(re-check)" if any("decision changed" in w for w in doc.get("warnings", [])) else ""
        )
        stats[outcome] = stats.get(outcome, 0) + 1
        calls = return_calls(fleet, slot)
        assert c.task.meta.exists(), f"{what}: the claimant's record was removed"
        if code in (3, 4):
            # Refused: nothing of the claimant, the slot or the lease was touched. 4 names the
            # claimant; 3 is the teardown taking the claimant's new file for TASK's own
            # unlanded work (it read the records before the claimant's, git after): safe.
            if code == 4:
                # The claimant by its id; or, when fm read the records before the claimant's
                # was written and the tmux panes after its window opened, the claimant's pane
                # as a terminal no task holds (`pid:`), which refuses as well.
                named = [cid], *([f"pid:{p}"] for p in c.task.pids)
                assert live_owner_ids(doc) in named, (what, brief(doc))
            assert doc["verdict"] == {3: "unlanded", 4: "live-owner"}[code], (what, brief(doc))
            check_untouched(fleet, c, what)
            assert calls == [], f"{what}: refused, yet the slot was returned"
            assert task.meta.exists(), f"{what}: refused, yet TASK's record was removed"
            assert pool_entry(fleet, slot).get("lease_id") == lease, f"{what}: lease changed"
            assert not gone(worker.pid), f"{what}: refused, yet the slot's processes ended"
            continue
        if code == 1 and arrived(doc):
            # Seen coming to work in the slot right before a destructive call (spec §15.4):
            # the run stopped there, nothing of the claimant's touched, nothing returned.
            check_untouched(fleet, c, what)
            assert calls == [], f"{what}: an arrival was seen, yet the slot was returned"
            assert task.meta.exists(), f"{what}: stopped, yet TASK's record was removed"
            assert pool_entry(fleet, slot).get("lease_id") == lease, f"{what}: lease changed"
            continue
        assert code != 0 or not c.alive_before_lock, (
            f"{what}: the claimant was live before the teardown took the slot lock (so before "
            f"its re-check), yet the teardown did not refuse: {code} {doc}"
        )
        if honour_lock:
            # It waited for the lock, so it came after the whole locked section.
            assert (code, doc["verdict"]) == (0, "proceed"), (what, brief(doc))
            check_untouched(fleet, c, what)
        else:
            assert code in (0, 1), (what, brief(doc))
            if c.work.exists():
                assert c.work.read_text() == f"{cid}'s work\n", what
        if code == 0:
            assert doc["verdict"] == "proceed", (what, brief(doc))
            assert not task.meta.exists(), f"{what}: torn down, yet TASK's record is kept"
            assert len(calls) == 1 and lease in calls[0]["argv"], (what, calls)
            if honour_lock:
                ret = log_time(str(calls[0]["time"]))
                assert ret < c.acquired, f"{what}: returned at {ret}, claimant at {c.acquired}"
        else:
            assert doc["verdict"] == "failed" and task.meta.exists(), (what, brief(doc))
            assert len(calls) <= 1, what
    print(f"claim races ({'honouring' if honour_lock else 'ignoring'} the lock): {stats}")


def arrived(doc: dict[str, Any]) -> bool:
    """The run stopped because someone came to work in the slot after the decision."""
    return any(
        s["outcome"] == "failed" and "came to work in the slot" in s["detail"]
        for s in doc.get("steps", [])
    )


def check_untouched(fleet: Fleet, c: Claim, what: str) -> None:
    dead = [p for p in c.task.pids if gone(p)]
    assert not dead, f"{what}: the claimant's processes were killed: {dead}"
    assert tree_hash(c.task.slot) == c.tree, f"{what}: the claimant's tree changed"
    assert c.task.window in fleet.tmux.windows(), f"{what}: the claimant's window is gone"
