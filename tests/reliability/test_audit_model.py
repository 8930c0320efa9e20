"""The fleet audit against the one-task dry run, on random real fleets (spec §8).

Each example builds a fleet (real tmux, git slots in a treehouse pool, processes): 2-5 records
over 1-3 slots (records share slots), ship tasks whose slots are clean, dirty, unpushed, pushed
to a branch, or squash-merged into origin's default branch, scouts with and without a report,
endpoints alive, dead or missing, slots leased to a record's task, to a bot or to nobody.
Then the audit runs once and `fm teardown <task> --dry-run` once per task: every row's
verdict, exit code and reasons must be the one-task dry run's, and nothing may change.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fleet import Fleet, git, tid
from tests.reliability.figures import count, soak

IDS = tuple(tid(name) for name in ("am-a", "am-b", "am-c", "am-d", "am-e"))
WORK = ("clean", "dirty", "unpushed", "pushed", "squashed")


@dataclass(frozen=True)
class Rec:
    slot: int
    kind: str  # ship | scout
    report: bool  # a scout's report exists
    endpoint: str  # alive | dead | missing
    epoch: int
    names_lease: bool


@dataclass(frozen=True)
class Slot:
    work: str
    lease: str | None  # None: unleased; else the holder (a task id or a bot)


@dataclass(frozen=True)
class World:
    records: tuple[Rec, ...]
    slots: tuple[Slot, ...]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    n_slots = draw(st.integers(1, 3))
    n = draw(st.integers(2, 5))
    records = tuple(
        Rec(
            slot=draw(st.integers(0, n_slots - 1)),
            kind=draw(st.sampled_from(["ship", "ship", "ship", "scout"])),
            report=draw(st.booleans()),
            endpoint=draw(st.sampled_from(["alive", "dead", "dead", "missing"])),
            epoch=draw(st.integers(1, 4)),
            names_lease=draw(st.booleans()),
        )
        for _ in range(n)
    )
    slots = tuple(
        Slot(
            work=draw(st.sampled_from(WORK)),
            lease=draw(st.sampled_from([None, "bot", *IDS[:n]])),
        )
        for _ in range(n_slots)
    )
    return World(records, slots)


def commit(slot: Path, name: str, text: str, msg: str) -> None:
    (slot / name).write_text(text)
    git(slot, "add", name)
    git(slot, "commit", "-q", "-m", msg)


def build(fleet: Fleet, world: World) -> list[Path]:
    slots = []
    for i, s in enumerate(world.slots):
        slot = fleet.slot(i + 1, leased=s.lease is not None, holder=s.lease or "")
        slots.append(slot)
        if s.work == "dirty":
            (slot / "notes.txt").write_text(f"slot {i + 1}\n")
        elif s.work in ("unpushed", "pushed", "squashed"):
            commit(slot, f"f{i}.txt", f"slot {i + 1}\n", f"feature of slot {i + 1}")
        if s.work == "pushed":
            git(slot, "push", "-q", "origin", f"HEAD:refs/heads/feature-{i}")
        elif s.work == "squashed":
            # The same change lands on main as another commit (a squash merge).
            (fleet.project / f"f{i}.txt").write_text(f"slot {i + 1}\n")
            git(fleet.project, "add", f"f{i}.txt")
            git(fleet.project, "commit", "-q", "-m", f"squash of slot {i + 1}")
            git(fleet.project, "push", "-q", "origin", "main")
    for task_id, r in zip(IDS, world.records, strict=False):
        extra = {"spawn_gen": f"s{r.epoch}00.1.{task_id}", "kind": r.kind}
        if r.names_lease:
            extra["treehouse_lease_holder"] = task_id
        fleet.task(task_id, slots[r.slot], r.endpoint, extra=extra)
        if r.kind == "scout" and r.report:
            (fleet.data / task_id).mkdir()
            (fleet.data / task_id / "report.md").write_text("findings\n")
    return slots


@settings(
    max_examples=8 * soak(),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=worlds())
def test_every_audit_row_is_the_one_task_dry_run(world: World) -> None:
    count("audit_examples")
    root = Path(tempfile.mkdtemp(prefix="fmaudit"))
    fleet = Fleet(root)
    try:
        slots = build(fleet, world)
        before = fleet.snapshot(*slots)
        code, doc = fleet.fm_json("teardown", "--dry-run")
        assert code == 0 and doc["exit_code"] == 0, doc
        assert isinstance(doc["orphans"], list)
        tasks = {str(r["task"]): r for r in doc["tasks"]}
        assert sorted(tasks) == sorted(IDS[: len(world.records)])
        for task_id, row in tasks.items():
            one_code, one = fleet.fm_json("teardown", task_id, "--dry-run")
            event(f"verdict: {one['verdict']}")
            assert (row["verdict"], row["exit_code"], row["reasons"]) == (
                one["verdict"],
                one_code,
                one["reasons"],
            ), (task_id, row, one)
        assert fleet.snapshot(*slots) == before
        assert not (fleet.data / "teardown-log.jsonl").exists()
    finally:
        fleet.close()
        shutil.rmtree(root, ignore_errors=True)
