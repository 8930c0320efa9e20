"""The whole pipeline as a model (spec §4-§7), against real tmux, git and processes.

Each example builds a fresh fleet: 2-4 task records over 1-3 pool slots (records share
slots), each endpoint alive, dead, missing, ambiguous or (another task only, through an
unsupported backend) unreadable; each slot leased by TASK, by another task, by a foreign or an
empty holder, or by nobody, sometimes not managed by the pool; dirty or unpushed work in a
slot; a stray agent in a slot; a launch order from `spawn_gen`, `started_at` and the records'
modification times. Then `fm teardown TASK --json` runs with random flags (plain, `--force`,
`--force --discard-live-owner=X`, `--discard-live-owner=X` alone), dry or real.

The model below restates the contract's rules from that data (who the live owners are, which
exit code each flag set gets) and the invariants are checked on the real outcome:

- the exit code is the JSON's `exit_code`, one of 0-5, and no traceback reaches stderr;
- a dry run changes nothing; a refusal changes nothing but one journal line (real runs);
- `--force` never lifts 4 or 5 unless the discard flag names the single live owner;
- a live other owner's tree and processes are never touched unless it is discarded by name;
  another slot's tree and processes never are;
- a stale verdict leaves the slot tree, its processes and the pool alone;
- after a real exit 0, TASK's record is gone and no other record changed;
- spec §7a: no process of another task's endpoint (but a discarded owner's in the slot), no tmux
  server, and nothing outside TASK's own slot and tasktmp is ever signalled.

The spec §7a evidence is drawn too: records nested inside a slot, another task's endpoint working
in TASK's slot, a tmux server started from inside a slot, a slot whose `.git` is a copy of
another slot's, TASK's tasktmp planted as a symlink into a slot, leases held by dead tasks.

Few examples (each costs seconds): `FM_SOAK` multiplies them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fleet import Fleet, Task, git, gone, tid, tree_hash
from tests.reliability.figures import count, soak

IDS = tuple(tid(name) for name in ("pm-a", "pm-b", "pm-c", "pm-d"))
TASK = IDS[0]  # the task torn down; the others are "other" tasks
LIVE = frozenset({"alive", "ambiguous", "unreadable"})
VERDICT_CODE = {
    "proceed": 0,
    "stale": 0,
    "failed": 1,
    "invalid": 2,
    "unlanded": 3,
    "live-owner": 4,
    "unsafe": 5,
}
# Interactive shells ignore SIGTERM: keep the grace short so examples stay fast.
FAST = {"FM_TERM_GRACE_SECS": "0.3", "FM_KILL_WAIT_SECS": "3"}
MTIME_BASE = 1_700_000_000
JOURNAL_KEYS = frozenset(
    ("time", "task", "flags", "verdict", "exit_code", "steps", "signalled", "discarded_ref")
)


# -- worlds ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    slot: int  # index into World.slots
    endpoint: str  # alive | dead | missing | ambiguous | unreadable (other tasks only)
    epoch: int | None  # spawn_gen's epoch, if the record carries one
    started: int | None  # rank of started_at, if the record carries one
    mtime: int  # rank of the record's modification time (equal ranks: equal mtimes)
    names_lease: bool  # the record carries treehouse_lease_holder=<its own id>
    nested: bool = False  # its worktree is `<slot>/nest`, a directory inside the slot
    cross: bool = False  # (another task) its window works in TASK's slot, not its own


@dataclass(frozen=True)
class Slot:
    managed: bool
    lease: str | None  # None: unleased; "": empty holder; else the holder
    work: str  # clean | dirty | unpushed
    stray: bool  # an agent process runs in the slot, in no task's endpoint
    tmux: bool = False  # a tmux server was started from inside the slot
    foreign: bool = False  # its .git is a copy of another worktree's (a `cp -a` of a slot)
    # The slot claim `.fm-slot-owner` (spec §10): None, a task id, "stranger" (a task with no
    # record anywhere), "bad" (cannot be parsed).
    claim: str | None = None


@dataclass(frozen=True)
class World:
    records: tuple[Rec, ...]  # records[i] is IDS[i]; records[0] is TASK
    slots: tuple[Slot, ...]
    bad_tmp: bool = False  # TASK's /tmp/fm-<id> is a symlink into another slot

    @property
    def ids(self) -> tuple[str, ...]:
        return IDS[: len(self.records)]

    @property
    def task(self) -> Rec:
        return self.records[0]

    @property
    def task_slot(self) -> Slot:
        return self.slots[self.task.slot]

    def others_on_slot(self) -> list[str]:
        """Other records claiming TASK's slot: on the same slot, or nested in it (spec §7a)."""
        return [
            t
            for t, r in zip(self.ids, self.records, strict=True)
            if t != TASK and r.slot == self.task.slot
        ]

    def by_id(self) -> dict[str, Rec]:
        return dict(zip(self.ids, self.records, strict=True))

    def pool_slot(self) -> Slot | None:
        """The pool's slot TASK's record names (a nested TASK names no pool slot at all)."""
        return None if self.task.nested else self.task_slot

    def lease_task(self) -> str | None:
        """The other task whose record holds the lease on TASK's slot (spec §7a)."""
        slot = self.pool_slot()
        if slot is None:
            return None
        if slot.managed and slot.lease not in (None, "", TASK) and slot.lease in self.ids:
            return slot.lease
        return None

    def cross_on_task_slot(self) -> list[str]:
        """Other tasks whose window works in TASK's slot although their record is elsewhere."""
        return [
            t for t, r in self.by_id().items() if t != TASK and r.cross and r.slot != self.task.slot
        ]


@dataclass(frozen=True)
class Flagset:
    mode: str  # plain | force | force-discard | discard
    pick: int  # which candidate the discard flag names (see discard_candidates)
    dry_run: bool


@st.composite
def worlds(draw: st.DrawFn) -> World:
    n_slots = draw(st.integers(1, 3))
    n = draw(st.integers(2, 4))
    # Half the worlds are quiet (no live endpoint, foreign lease or stray agent besides
    # TASK's own), so that the stale, unlanded, unsafe and proceed verdicts get their share.
    quiet = draw(st.booleans())
    records = []
    rarely = [False] * 7 + [True]
    for i in range(n):
        states = ["alive", "dead", "missing", "ambiguous"]
        if i and quiet:
            states = ["dead", "missing"]
        elif i:
            states += ["dead", "missing", "unreadable"]
        endpoint = draw(st.sampled_from(states))
        records.append(
            Rec(
                slot=draw(st.integers(0, n_slots - 1)),
                endpoint=endpoint,
                epoch=draw(st.sampled_from([None, 100, 200, 300])),
                started=draw(st.sampled_from([None, None, 1, 2])),
                mtime=draw(st.integers(1, 3)),
                names_lease=draw(st.booleans()),
                nested=draw(st.sampled_from(rarely)),
                # Only a window can work elsewhere (an unreadable backend has none here).
                cross=i > 0
                and endpoint in ("alive", "dead", "ambiguous")
                and draw(st.sampled_from(rarely * 2 if quiet else rarely)),
            )
        )
    # Quiet worlds may hold a lease by a dead task: it is that task's claim (spec §7a), not live.
    leases = [None, TASK, *IDS[1:]] if quiet else [None, TASK, "", "bot", *IDS[1:]]
    slots = tuple(
        Slot(
            managed=draw(st.sampled_from([True, True, True, True, True, False])),
            lease=draw(st.sampled_from(leases)),
            work=draw(st.sampled_from(["clean", "clean", "dirty", "unpushed"])),
            stray=not quiet and draw(st.sampled_from([False, False, True])),
            tmux=draw(st.sampled_from(rarely)),
            foreign=draw(st.sampled_from(rarely)),
            claim=draw(st.sampled_from([None] * 6 + [*IDS[:n], "stranger", "bad"])),
        )
        for _ in range(n_slots)
    )
    return World(tuple(records), slots, bad_tmp=draw(st.sampled_from(rarely)))


flagsets = st.builds(
    Flagset,
    mode=st.sampled_from(["plain", "force", "force-discard", "force-discard", "discard"]),
    pick=st.integers(0, 7),
    dry_run=st.booleans(),
)


# -- the model (the contract restated) ----------------------------------------------------


@dataclass
class Built:
    """What building a world on a real fleet produced."""

    slots: list[Path]
    pids: dict[str, list[int]]  # task id -> its endpoint's pids
    strays: dict[int, int] = field(default_factory=dict)  # slot index -> stray agent's pid
    servers: list[int] = field(default_factory=list)  # tmux servers' pids (never signalled)
    tmp_link: Path | None = None  # TASK's tasktmp planted as a symlink


def claim_of(world: World) -> str | None:
    """The slot claim TASK's slot has (a nested TASK's slot has none of its own)."""
    return None if world.task.nested else world.task_slot.claim


def live_owners(world: World, built: Built) -> set[str]:
    """spec §4, §7a, §10: the live owners of TASK's slot, by id."""
    by_id = world.by_id()
    owners = {t for t in world.others_on_slot() if by_id[t].endpoint in LIVE}
    claim = claim_of(world)
    if claim in by_id and claim != TASK and by_id[claim].endpoint in LIVE:
        owners.add(claim)  # the slot was reassigned to a live task
    # Another task's live endpoint working in TASK's slot owns it (spec §7a).
    owners |= {t for t in world.cross_on_task_slot() if by_id[t].endpoint in LIVE}
    slot = world.task_slot
    # A lease is TASK's when its holder is TASK's id (the record names no lease id). A lease
    # held by another task is that task's claim, live when its endpoint is (spec §7a); any other
    # lease is a live owner `lease:<holder or lease id>`.
    pool_slot = world.pool_slot()
    if pool_slot is not None and pool_slot.managed and slot.lease not in (None, TASK):
        if slot.lease in world.ids:
            if by_id[slot.lease].endpoint in LIVE:
                owners.add(slot.lease)
        elif slot.lease:
            owners.add(f"lease:{slot.lease}")
        else:
            owners.add(f"lease:{world.task.slot + 1:032x}")
    # A stray agent works at the slot's root: inside TASK's slot unless TASK's is nested.
    if world.others_on_slot() and slot.stray and not world.task.nested:
        owners.add(f"pid:{built.strays[world.task.slot]}")
    return owners


def newer(a: Rec, b: Rec) -> bool | None:
    """Is `a` a more recent launch than `b`? By the first of spawn_gen's epoch, started_at and
    the record's mtime that both carry and that differ; None: it cannot be told."""
    if a.epoch is not None and b.epoch is not None and a.epoch != b.epoch:
        return a.epoch > b.epoch
    if a.started is not None and b.started is not None and a.started != b.started:
        return a.started > b.started
    if a.mtime != b.mtime:
        return a.mtime > b.mtime
    return None


def task_is_current(world: World) -> bool:
    """spec §5 rule 4, §7a: TASK's lease; a lease held by another (not live) task makes
    the slot that task's; else TASK is a more recent launch than every other claimant."""
    claim = claim_of(world)
    if claim not in (None, TASK, "bad"):
        return False  # the claim says the slot was handed on
    slot = world.pool_slot()
    if world.lease_task() is not None:
        return False
    if slot is not None and slot.managed and slot.lease == TASK:
        return True
    if claim == TASK:
        return True
    by_id = world.by_id()
    return all(newer(world.task, by_id[o]) is True for o in world.others_on_slot())


def returns_slot(world: World, discarded: bool) -> bool:
    """The plan ends the slot's processes and returns it, unless the pool shows TASK's recorded
    lease already returned (an earlier run did it)."""
    slot = world.task_slot
    return discarded or not (world.task.names_lease and slot.lease is None)


def expected(world: World, owners: set[str], force: bool, discard: str | None) -> set[str]:
    """The verdicts the contract allows for these flags (one, except where it is silent)."""
    if world.bad_tmp or claim_of(world) == "bad":
        return {"unsafe"}  # a tasktmp that is a link, an unreadable claim: before anything
    discarded = False
    if owners:
        if not (force and discard is not None and owners == {discard}):
            return {"live-owner"}
        discarded = True
    allowed = set()
    claim = claim_of(world)
    claimed = (
        world.others_on_slot() or world.lease_task() is not None or claim not in (None, TASK, "bad")
    )
    if claimed and not task_is_current(world):
        if not discarded:
            return {"stale"}
        # The contract does not say whether rule 4 still applies once the single live owner
        # is discarded and other (non-live) records remain: either reading is accepted.
        allowed.add("stale")
    slot = world.task_slot
    # A nested TASK slot is no pool slot (and has no .git of its own); a foreign .git names
    # another tree; a tmux server in the slot would be ended by the pool's return (spec §7a).
    if not slot.managed or world.task.nested or slot.foreign:
        return allowed | {"unsafe"}
    if slot.tmux and returns_slot(world, discarded):
        return allowed | {"unsafe"}
    if slot.work != "clean" and not force:
        return allowed | {"unlanded"}
    return allowed | {"proceed"}


def discard_candidates(world: World, owners: set[str]) -> list[str]:
    """The live owners first (so that a single one is often named), then near misses: other
    task ids, TASK itself, the lease id where the holder is not empty, junk."""
    near = [*world.ids, f"lease:{world.task.slot + 1:032x}", "lease:nobody", "pid:1"]
    return [*sorted(owners), *(c for c in near if c not in owners)]


def flag_args(fs: Flagset, discard: str) -> tuple[bool, str | None, list[str]]:
    force = fs.mode in ("force", "force-discard")
    wanted = discard if fs.mode in ("force-discard", "discard") else None
    args = (["--force"] if force else []) + ([f"--discard-live-owner={wanted}"] if wanted else [])
    return force, wanted, args


# -- building a world on a real fleet ---------------------------------------------------------


def commit(slot: Path, name: str, text: str, msg: str) -> None:
    (slot / name).write_text(text)
    git(slot, "add", name)
    git(slot, "commit", "-q", "-m", msg)


def build(fleet: Fleet, world: World) -> Built:
    slots = []
    for i, s in enumerate(world.slots):
        slots.append(
            fleet.slot(i + 1, leased=s.lease is not None, holder=s.lease or "", managed=s.managed)
        )
        if s.work == "dirty":
            (slots[i] / "notes.txt").write_text(f"work in slot {i + 1}\n")
        elif s.work == "unpushed":
            commit(slots[i], "feature.txt", f"slot {i + 1}\n", f"feature in slot {i + 1}")
        (slots[i] / "nest").mkdir()  # empty: git does not see it
    for s, path in zip(world.slots, slots, strict=True):
        if s.claim == "bad":
            (path.parent / ".fm-slot-owner").write_text("owner=?\n")
        elif s.claim is not None:
            (path.parent / ".fm-slot-owner").write_text(f"task={s.claim}\nhome={fleet.fm_home}\n")
    spare = fleet.slot(9, managed=False)  # a worktree whose .git a foreign slot copies
    for s, path in zip(world.slots, slots, strict=True):
        if s.foreign:
            shutil.copy(spare / ".git", path / ".git")
    built = Built(slots, {})
    task_slot = slots[world.task.slot] / ("nest" if world.task.nested else "")
    for i, (t, r) in enumerate(zip(world.ids, world.records, strict=True)):
        extra = {}
        if r.endpoint == "unreadable":
            extra["backend"] = "herdr"
        if r.epoch is not None:
            extra["spawn_gen"] = f"s{r.epoch}.{4000 + i}.r{i}"
        if r.started is not None:
            extra["started_at"] = f"2026-11-0{r.started}T12:00:00Z"
        if r.names_lease:
            extra["treehouse_lease_holder"] = t
        state = "missing" if r.endpoint == "unreadable" else r.endpoint
        worktree = slots[r.slot] / "nest" if r.nested else slots[r.slot]
        fleet.record(t, worktree, extra=extra)
        pane_cwd = task_slot if r.cross and r.slot != world.task.slot else worktree
        pids = fleet.endpoint(t, pane_cwd, state)
        fleet.tracked.update(pids)
        task = Task(t, worktree, fleet.state / f"{t}.meta", f"firstmate:fm-{t}", pids)
        built.pids[t] = task.pids
        ns = (MTIME_BASE + 100 * r.mtime) * 10**9
        os.utime(task.meta, ns=(ns, ns))
    for i, s in enumerate(world.slots):
        if s.stray:
            built.strays[i] = fleet.agent_in(slots[i]).pid
        if s.tmux:
            built.servers.append(fleet.tmux_server_in(slots[i]).server_pid())
    built.servers.append(fleet.tmux.server_pid())
    if world.bad_tmp:
        # Planted in world-writable /tmp: a link into another slot (the attack of spec §7a).
        target = slots[(world.task.slot + 1) % len(slots)]
        built.tmp_link = fleet.claim_tasktmp(TASK)  # removed when the fleet closes
        built.tmp_link.symlink_to(target)
    return built


# -- observing what changed -------------------------------------------------------------------


def journal(fleet: Fleet) -> list[dict[str, Any]]:
    return fleet.journal()


def pool_entries(fleet: Fleet) -> dict[str, dict[str, Any]]:
    path = fleet.pool / "treehouse-state.json"
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    return {str(e["path"]): e for e in doc["worktrees"] or []}


def lease(entry: dict[str, Any] | None) -> tuple[object, ...] | None:
    """What a pool entry says about its lease (the pool omits an empty holder when it writes
    its state file, so entries are compared by meaning, not by keys)."""
    if entry is None:
        return None
    return (entry.get("leased", False), entry.get("lease_id", ""), entry.get("lease_holder", ""))


def refs(fleet: Fleet) -> str:
    return git(fleet.project, "for-each-ref", "--format=%(refname) %(objectname)")


@dataclass
class Before:
    snapshot: dict[str, Any]
    records: dict[str, bytes]
    trees: dict[str, str]  # slot path -> tree hash
    pool: dict[str, dict[str, Any]]
    refs: str


def observe(fleet: Fleet, world: World, built: Built) -> Before:
    return Before(
        fleet.snapshot(*built.slots),
        {t: (fleet.state / f"{t}.meta").read_bytes() for t in world.ids},
        {str(s): tree_hash(s) for s in built.slots},
        pool_entries(fleet),
        refs(fleet),
    )


def run(fleet: Fleet, *args: str) -> tuple[int, dict[str, Any]]:
    r = fleet.fm("teardown", TASK, *args, "--json", env=fleet.env(**FAST))
    where = f"fm teardown {TASK} {' '.join(args)}"
    assert "Traceback" not in r.stderr, (where, r.stderr)
    try:
        doc = json.loads(r.stdout)
    except ValueError as exc:
        raise AssertionError(f"{where}: not one JSON object: {r.stdout!r} / {r.stderr!r}") from exc
    assert r.returncode in (0, 1, 2, 3, 4, 5), (where, r.returncode, r.stderr)
    assert r.returncode == doc["exit_code"], (where, r.returncode, doc)
    assert VERDICT_CODE[str(doc["verdict"])] == r.returncode, (where, doc)
    return r.returncode, doc


def live_ids(doc: dict[str, Any]) -> set[str]:
    return {str(o["id"]) for o in doc["owners"] if o["live"]}


def assert_unchanged(fleet: Fleet, before: Before, built: Built, what: str) -> None:
    assert fleet.snapshot(*built.slots) == before.snapshot, what
    assert fleet.treehouse_calls() == [], what
    assert refs(fleet) == before.refs, what


def dry(
    fleet: Fleet, before: Before, built: Built, args: list[str], allowed: set[str]
) -> tuple[int, dict[str, Any]]:
    """A dry run: its verdict is one the model allows, and it changes nothing at all."""
    code, doc = run(fleet, "--dry-run", *args)
    assert doc["verdict"] in allowed, (args, allowed, doc)
    assert_unchanged(fleet, before, built, f"dry run {args} changed something")
    assert journal(fleet) == [], f"dry run {args} wrote a journal line"
    return code, doc


# -- the property -----------------------------------------------------------------------------


def check(fleet: Fleet, world: World, fs: Flagset) -> None:
    built = build(fleet, world)
    before = observe(fleet, world, built)
    owners = live_owners(world, built)
    cands = discard_candidates(world, owners)
    discard = cands[fs.pick % len(cands)]
    force, wanted, args = flag_args(fs, discard)
    single = len(owners) == 1 and wanted in owners

    # The plain dry run, and the forced one (with the same discard flag, if any).
    p_code, p_doc = dry(fleet, before, built, [], expected(world, owners, False, None))
    if not world.bad_tmp and claim_of(world) != "bad":  # refused before the owners are seen
        assert live_ids(p_doc) == owners, (owners, p_doc)
    f_args = ["--force"] + ([f"--discard-live-owner={wanted}"] if wanted else [])
    f_code, f_doc = dry(fleet, before, built, f_args, expected(world, owners, True, wanted))
    if p_code in (4, 5) and not single:
        assert f_code == p_code, ("--force lifted a refusal", p_doc, f_doc)
    if p_code == 5:
        assert f_code == 5, ("--force lifted exit 5", p_doc, f_doc)

    # The example's own flags, dry (reused when already run).
    allowed = expected(world, owners, force, wanted)
    if fs.mode == "plain":
        d_code, d_doc = p_code, p_doc
    elif force:
        d_code, d_doc = f_code, f_doc
    else:
        d_code, d_doc = dry(fleet, before, built, args, allowed)
    event(f"plain dry run: {p_doc['verdict']}")
    if fs.dry_run:
        event(f"{fs.mode} dry run: {d_doc['verdict']}")
        return

    code, doc = run(fleet, *args)
    event(f"{fs.mode} real run: {doc['verdict']}")
    assert doc["verdict"] in allowed, (args, allowed, doc)
    assert (code, doc["verdict"]) == (d_code, d_doc["verdict"]), ("dry != real", d_doc, doc)
    lines = journal(fleet)
    assert len(lines) == 1, lines
    assert (lines[0]["task"], lines[0]["exit_code"]) == (TASK, code), lines
    assert set(lines[0]) >= JOURNAL_KEYS, lines
    assert lines[0]["verdict"] == doc["verdict"], (lines, doc)

    task_slot = built.slots[world.task.slot]
    others = [t for t in world.ids if t != TASK]
    discarded = force and single and code == 0
    # spec §7a: fm never signals a tmux server, another task's endpoint (but the discarded owner's
    # in the slot), or anything outside TASK's slot and tasktmp.
    sent = {int(x["pid"]) for x in lines[0]["signalled"]}
    assert not sent & set(built.servers), ("a tmux server was signalled", lines[0])
    assert not any(gone(p) for p in built.servers), "a tmux server ended"
    for t in others:
        if discarded and t == wanted:
            continue
        assert not sent & set(built.pids[t]), (f"{t}'s endpoint was signalled", lines[0])
    for i, pid in built.strays.items():
        if built.slots[i] != task_slot:
            assert pid not in sent, f"the stray agent of slot {i + 1} was signalled"
    if built.tmp_link is not None:
        assert built.tmp_link.is_symlink(), "the planted tasktmp link was removed"
    for s, path in zip(world.slots, built.slots, strict=True):
        if s.claim not in (None, TASK):
            assert (path.parent / ".fm-slot-owner").exists(), "another task's claim was touched"
    # Other records are never changed, whatever the outcome.
    for t in others:
        assert (fleet.state / f"{t}.meta").read_bytes() == before.records[t], t
    # Another slot's tree, pool entry and processes are never touched.
    for i, path in enumerate(built.slots):
        if path == task_slot:
            continue
        assert tree_hash(path) == before.trees[str(path)], f"slot {i + 1} changed"
        now = pool_entries(fleet).get(str(path))
        assert lease(now) == lease(before.pool.get(str(path))), (path, now)
        if i in built.strays:
            assert not gone(built.strays[i]), f"stray agent in slot {i + 1} ended"
    for t, r in zip(world.ids, world.records, strict=True):
        # A dead endpoint working in TASK's slot is only shells: fm spares them (checked
        # above), the pool's return ends them like any process in the slot; so it does the
        # processes of the live owner discarded by name (spec §7a).
        in_task_slot = r.cross and (r.endpoint not in LIVE or (discarded and t == wanted))
        if t != TASK and r.slot != world.task.slot and not in_task_slot:
            assert not any(gone(p) for p in built.pids[t]), f"{t}'s processes ended"
    # A live other owner is never touched unless it was discarded by name with --force.
    for o in owners:
        if discarded and o == wanted:
            continue
        assert tree_hash(task_slot) == before.trees[str(task_slot)], f"live owner {o}'s tree"
        pids = built.pids.get(o, [])
        if o.startswith("pid:"):
            pids = [int(o[4:])]
        assert not any(gone(p) for p in pids), f"live owner {o}'s processes ended"

    if code in (2, 3, 4, 5):
        assert_unchanged(fleet, before, built, f"refusal {code} changed something")
        return
    assert code == 0, doc
    assert not (fleet.state / f"{TASK}.meta").exists(), "TASK's record is still there"
    assert f"firstmate:fm-{TASK}" not in fleet.tmux.windows()
    if doc["verdict"] == "stale":
        assert tree_hash(task_slot) == before.trees[str(task_slot)], "stale: tree changed"
        assert fleet.treehouse_calls() == [], "stale: the pool was called"
        assert pool_entries(fleet) == before.pool, "stale: the pool changed"
        spared = set(before.snapshot["live"]) - set(built.pids[TASK])
        ended = sorted(p for p in spared if gone(p))
        assert not ended, f"stale: processes ended: {ended}"
    else:
        assert "leased" not in pool_entries(fleet)[str(task_slot)], "proceed: still leased"
        if discarded and wanted in world.ids:
            warnings = doc.get("warnings", [])
            assert any(wanted in w for w in warnings), ("no word on the kept record", doc)
        # Discarding a live task saves its work, under its own name (spec §7a).
        owner = wanted if discarded and wanted in world.ids else TASK
        saved = git(
            fleet.project, "for-each-ref", "--format=%(refname)", f"refs/fm/discarded/{owner}"
        )
        if force and world.task_slot.work != "clean":
            # Unlanded work discarded by --force is saved first, and the journal names it.
            assert saved and lines[0]["discarded_ref"] == saved, (saved, lines)
        else:
            assert saved == "" and lines[0]["discarded_ref"] is None, (saved, lines)


@settings(
    max_examples=12 * soak(),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=worlds(), fs=flagsets)
def test_pipeline_model(world: World, fs: Flagset) -> None:
    count("pipeline_examples")
    root = Path(tempfile.mkdtemp(prefix="fmpipe"))
    fleet = Fleet(root)
    try:
        check(fleet, world, fs)
    finally:
        fleet.close()
        shutil.rmtree(root, ignore_errors=True)
