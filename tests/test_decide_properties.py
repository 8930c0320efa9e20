"""A model of the decision core (spec §4-§6), hammered with hypothesis.

A scenario is drawn as plain data: 2-6 records on a few slots (some shared), each endpoint in
one of the five states, a pool entry per slot (leased by TASK, another task, a bot, a
recovered lease, nobody; or unmanaged, corrupt, being destroyed), agent processes in slots
(attributed to a live pane or to nobody), invalid records, flags and the landed facts. The
model below restates the contract's rules from that data, independently of the code, and the
invariants of DESIGN-NOTES are checked on every decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fm_teardown.decide.rules import decide
from fm_teardown.model.errors import Verdict
from fm_teardown.model.plan import Decision
from fm_teardown.model.request import Flags
from fm_teardown.model.step_actions import EndProcesses, SaveWork
from fm_teardown.model.world import EndpointState
from fm_teardown.report.step_words import warning_text
from tests.reliability.figures import count, soak
from tests.test_decide import (
    FM_HOME,
    HOME,
    LANDED,
    POOL,
    PROJECT,
    TREEHOUSE,
    UNLANDED,
    Landed,
    World,
)

SLOTS = [f"{POOL}/1/proj", f"{POOL}/2/proj", f"{POOL}/10/proj"]
# Slots nested with slot 1: one inside it, one containing it (spec §7a: they claim each other).
NESTED = [f"{POOL}/1/proj/sub", f"{POOL}/1"]
ROOT_SLOTS = [PROJECT, "/src", HOME, "/home", FM_HOME, "/"]  # roots and their ancestors
IDS = ["t0", "t1", "t2", "t3", "t4", "t5"]
LIVE = {EndpointState.ALIVE, EndpointState.AMBIGUOUS, EndpointState.UNREADABLE}
RECOVERED = "recovered: state file was corrupt or truncated; verify before reuse"
ORDER = [
    "endpoint",
    "processes",
    "save-discarded",
    "hooks",
    "pool",
    "branch",
    "claim",
    "auth",
    "attribution",
    "record",
]
RECORD_STEPS = ["auth", "attribution", "record"]  # the record's duties go with it (spec §10)
TOUCHES_SLOT = {"processes", "save-discarded", "hooks", "pool", "branch", "claim"}


# -- scenarios -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    slot: str
    endpoint: EndpointState
    lease_id: str | None
    lease_holder: str | None
    epoch: int | None
    started_at: str | None
    mtime_ns: int
    kind: str


@dataclass(frozen=True)
class Pool:
    """The pool's view of one slot: `managed` (with or without a lease), `unmanaged`,
    `error` (the state file is corrupt)."""

    status: str
    leased: bool = False
    lease_id: str = ""
    holder: str = ""
    destroying: bool = False


@dataclass(frozen=True)
class Scenario:
    task: str
    records: dict[str, Rec]
    pools: dict[str, Pool]
    gone: frozenset[str]
    agents: tuple[tuple[int, str, str | None], ...]  # (pid, slot, task whose pane holds it)
    invalid: dict[str, tuple[str, ...] | None]
    treehouse_bin: str | None
    force: bool
    discard: str | None
    landed: Landed = field(default=LANDED)
    # spec §7a evidence: shells of (any) task's endpoint working in a slot, tmux servers started in
    # a slot, slots whose .git names another worktree's git dir, TASK's tasktmp a symlink.
    shells: tuple[tuple[int, str, str], ...] = ()  # (pid, slot, task whose pane holds it)
    tmux: tuple[str, ...] = ()  # slots with a tmux server in them
    foreign_git: frozenset[str] = frozenset()
    bad_tmp: bool = False
    # TASK's record names /tmp/fm-<id>: "none" (no tasktmp= line), "absent", "exists".
    tmp: str = "none"
    # spec §10: slot claims: slot -> (claimed task or None for an unreadable claim, the endpoint
    # of that task's record in ANOTHER home, or None when it has no record there).
    claims: tuple[tuple[str, str | None, EndpointState | None], ...] = ()

    def world(self) -> World:
        w = World(treehouse_bin=self.treehouse_bin)
        for tid, r in self.records.items():
            w.task(
                tid,
                r.slot,
                str(r.endpoint),
                mtime_ns=r.mtime_ns,
                lease_id=r.lease_id,
                lease_holder=r.lease_holder,
                spawn_gen=None if r.epoch is None else f"s{r.epoch}.{r.mtime_ns}.7",
                started_at=r.started_at,
                kind=r.kind,
                tasktmp=f"/tmp/fm-{tid}" if tid == self.task and self.tmp != "none" else None,
            )
        if self.tmp == "absent":
            w.tmp_absent.add(self.task)
        for slot, claimed, endpoint in self.claims:
            if claimed is None:
                w.claim(None, slot, problem="cannot be parsed")
            else:
                w.claim(claimed, slot, endpoint=str(endpoint) if endpoint else None)
        for slot, p in self.pools.items():
            if p.status == "managed":
                w.lease(
                    slot,
                    holder=p.holder,
                    lease_id=p.lease_id,
                    leased=p.leased,
                    destroying=p.destroying,
                )
            elif p.status == "unmanaged":
                w.unmanaged(slot)
            else:
                w.pool_error(slot)
        for slot in self.gone:
            w.gone(slot)
        for pid, slot, of in self.agents:
            w.agent(pid, slot, of=of)
        for pid, slot, of in self.shells:
            w.shell(pid, slot, of=of)
        for i, slot in enumerate(self.tmux):
            w.tmux_server(8000 + i, slot)
        for slot in self.foreign_git:
            w.foreign_git(slot)
        if self.bad_tmp:
            w.bad_tmp(self.task)
        for tid, slots_claimed in self.invalid.items():
            w.invalid(tid, slots_claimed)
        return w

    def decide(self, *, force: bool | None = None, discard: str | bool | None = False) -> Decision:
        """Decide for TASK; `force`/`discard` override the drawn flags when given."""
        fleet, obs = self.world().build()
        flags = Flags.given(
            force=self.force if force is None else force,
            discard_live_owner=self.discard if discard is False else discard,  # type: ignore[arg-type]
        )
        return decide(self.task, fleet, obs, flags, self.landed)


# Drawing goes through `one` and `pick`, plain integer draws over fixed option lists: building
# strategies per example (sampled_from of a fresh list) costs hypothesis more than the test.


def one(draw: st.DrawFn, options: Sequence[Any]) -> Any:
    """One of `options`; shrinks toward the first."""
    return options[draw(st.integers(0, len(options) - 1))]


def pick(draw: st.DrawFn, *choices: Sequence[Any]) -> tuple[Any, ...]:
    """One draw for several independent choices; shrinks toward the first option of each."""
    n = draw(st.integers(0, math.prod(len(c) for c in choices) - 1))
    out = []
    for options in choices:
        n, i = divmod(n, len(options))
        out.append(options[i])
    return tuple(out)


HOLDERS = ["", "ci-bot", RECOVERED, *IDS]
# Every state, but not-live ones more often, so that stale and proceed verdicts are common.
ENDPOINTS = [*EndpointState, *[EndpointState.DEAD, EndpointState.MISSING] * 3]
NOT_LIVE = [EndpointState.DEAD, EndpointState.MISSING]
CROWDED = [*EndpointState, EndpointState.ALIVE]
# Mostly two shared pool slots; sometimes a sibling with a prefix name (`10` vs `1`), a slot
# nested with slot 1, or a root.
POOL_SLOTS = SLOTS[:2] * 20 + SLOTS[2:] * 6 + NESTED * 3
CLAIMS: list[tuple[str, ...] | None] = [None, *((s,) for s in SLOTS), (SLOTS[2],)]
RARELY = [False] * 9 + [True]


def draw_pool(draw: st.DrawFn) -> Pool:
    """The pool's view of a slot: mostly managed (leased or not, by anyone), else broken."""
    if one(draw, RARELY):
        return Pool(one(draw, ["unmanaged", "error"]))
    leased, lease_id, holder, destroying = pick(
        draw, [False, True], ["", "L0", "L1"], HOLDERS, RARELY
    )
    return Pool("managed", leased, lease_id, holder, destroying)


@st.composite
def scenarios(draw: st.DrawFn, mode: str = "any") -> Scenario:
    """Random fleets. `quiet`: nothing on TASK's slot is live, no invalid record, no root as a
    slot; that is where rules 4 (launch order) and 5 (landed) decide, so aim there often.
    `crowded`: most records on TASK's slot, often live; where rule 3 and its flags decide."""
    quiet, crowded = mode == "quiet", mode == "crowded"
    ids = IDS[: draw(st.integers(2, 6))]
    task = one(draw, ids)
    records: dict[str, Rec] = {}
    for tid in [task, *(t for t in ids if t != task)]:  # TASK first: the others may join it
        if crowded and tid != task and one(draw, [True, True, False]):
            slot, endpoint = records[task].slot, one(draw, CROWDED)
        else:
            slot = one(draw, POOL_SLOTS if quiet else POOL_SLOTS + ROOT_SLOTS * 2)
            endpoint = one(draw, NOT_LIVE if quiet and tid != task else ENDPOINTS)
        lease_id, lease_holder, epoch, started_at, mtime_ns, kind = pick(
            draw,
            [None, None, "L0", "L1"],
            [None, None, tid, "ci-bot"],
            [None, 100, 200],
            [None, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00+00:00"],
            [0, 1, 2],
            ["ship", "ship", "ship", "scout"],
        )
        records[tid] = Rec(
            slot=slot,
            endpoint=endpoint,
            lease_id=lease_id,
            lease_holder=lease_holder,
            epoch=epoch,
            started_at=started_at,
            mtime_ns=mtime_ns,
            kind=kind,
        )
    records = {t: records[t] for t in ids}
    used = sorted({r.slot for r in records.values()})
    pool_of = {slot: draw_pool(draw) for slot in used}
    own = records[task]
    if quiet:  # the lease on TASK's slot, if any, is TASK's
        pool_of[own.slot] = Pool(
            "managed",
            leased=one(draw, [False, True]),
            lease_id=own.lease_id or "",
            holder=task if own.lease_id is None else one(draw, ["", task, "x"]),
            destroying=one(draw, RARELY),
        )
    gone = frozenset(s for s in used if draw(st.integers(0, 4)) == 0)
    # Agents in slots: in a live task's pane tree, or (not quiet) in nobody's.
    alive = [t for t, r in records.items() if r.endpoint == EndpointState.ALIVE]
    holders_of_agents = alive if quiet else [None, *alive]
    agents = tuple(
        (9000 + i, one(draw, used), one(draw, holders_of_agents))
        for i in range(draw(st.integers(0, 3)) if holders_of_agents else 0)
    )
    invalid = {
        f"bad{i}": one(draw, CLAIMS) for i in range(0 if quiet else one(draw, [0] * 6 + [1, 2]))
    }
    # spec §7a: shells of any task's endpoint working in some slot (quiet: only TASK's own, and
    # those of tasks on other slots), tmux servers in slots, foreign git dirs, a bad tasktmp.
    shell_owners = [task] if quiet else ids
    shells = tuple(
        (7000 + i, one(draw, used), one(draw, shell_owners))
        for i in range(one(draw, [0, 0, 0, 1, 2]))
    )
    tmux = tuple(s for s in used if one(draw, RARELY))
    foreign_git = frozenset(s for s in used if one(draw, RARELY))
    bad_tmp = one(draw, RARELY)
    foreign_states = NOT_LIVE if quiet else list(EndpointState)
    sc = Scenario(
        task=task,
        records=records,
        pools=pool_of,
        gone=gone,
        agents=agents,
        invalid=invalid,
        treehouse_bin=None if one(draw, RARELY) else TREEHOUSE,
        force=one(draw, [False, True]),
        discard=None,
        landed=one(draw, [LANDED, UNLANDED]),
        shells=shells,
        tmux=tmux,
        foreign_git=foreign_git,
        bad_tmp=bad_tmp,
        tmp=one(draw, ["none", "absent", "exists"]),
        claims=tuple(
            (slot, claimed, None if claimed in ids else one(draw, [None, *foreign_states]))
            for slot in used
            if one(draw, [False, False, True])
            for claimed in [one(draw, [*ids, *ids, "elsewhere", *([] if quiet else [None])])]
        ),
    )
    # --discard-live-owner: often one of the slot's live owners (as the model sees them),
    # else any owner-like id of the fleet, junk, or nothing.
    candidates = [
        *ids,
        *(f"lease:{p.holder or p.lease_id}" for p in pool_of.values() if p.leased),
        *(f"pid:{pid}" for pid, _, _ in agents),
        "lease:nobody",
        "pid:1",
        "junk",
        "",
    ]
    live = sorted(model_live_owners(sc)) or candidates
    among = one(draw, [None, live, live, candidates])
    return replace(sc, discard=None if among is None else one(draw, among))


# -- the model: the contract's rules restated on the scenario --------------------------------


def lease_is_tasks(sc: Scenario) -> bool:
    rec, pool = sc.records[sc.task], sc.pools[sc.records[sc.task].slot]
    if pool.status != "managed" or not pool.leased:
        return False
    if rec.lease_id:
        return pool.lease_id == rec.lease_id
    return pool.holder != "" and pool.holder in (rec.lease_holder, sc.task)


def within(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def other_claimants(sc: Scenario) -> list[str]:
    """Records on TASK's slot, or on one nested with it (inside it, or containing it)."""
    slot = sc.records[sc.task].slot
    return [
        t
        for t, r in sc.records.items()
        if t != sc.task and (within(r.slot, slot) or within(slot, r.slot))
    ]


def lease_task(sc: Scenario) -> str | None:
    """The other task whose record holds the lease on TASK's slot (spec §7a), if any."""
    pool = sc.pools[sc.records[sc.task].slot]
    if pool.status != "managed" or not pool.leased or lease_is_tasks(sc):
        return None
    if pool.holder and pool.holder != sc.task and pool.holder in sc.records:
        return pool.holder
    matches = [
        t
        for t, r in sc.records.items()
        if t != sc.task
        and (
            (pool.lease_id and r.lease_id == pool.lease_id)
            or (pool.holder and not r.lease_id and r.lease_holder == pool.holder)
        )
    ]
    return matches[0] if len(matches) == 1 else None


def task_claim(sc: Scenario) -> tuple[bool, str | None, EndpointState | None] | None:
    """TASK's slot claim as (readable, the task it names, its foreign endpoint), or None."""
    slot = sc.records[sc.task].slot
    if slot in sc.gone:
        return None  # a slot that is gone has no claim to read
    for s, claimed, endpoint in sc.claims:
        if s == slot:
            return (claimed is not None, claimed, endpoint)
    return None


def claim_other(sc: Scenario) -> tuple[str, bool] | None:
    """(the other task the claim names, whether it is live), or None."""
    c = task_claim(sc)
    if c is None or not c[0] or c[1] == sc.task:
        return None
    claimed, endpoint = c[1], c[2]
    assert claimed is not None
    if claimed in sc.records:
        return claimed, sc.records[claimed].endpoint in LIVE
    return claimed, endpoint is not None and endpoint in LIVE


def model_live_owners(sc: Scenario) -> set[str]:
    slot = sc.records[sc.task].slot
    others = other_claimants(sc)
    live = {t for t in others if sc.records[t].endpoint in LIVE}
    pool = sc.pools[slot]
    if pool.status == "managed" and pool.leased and not lease_is_tasks(sc):
        holder = lease_task(sc)
        if holder is not None:
            if sc.records[holder].endpoint in LIVE:
                live.add(holder)  # a lease held by another task is that task's claim
        else:
            live.add(f"lease:{pool.holder or pool.lease_id}")
    # Another task's live endpoint working in the slot (agents sit in `<slot>/src`).
    for _, s, of in sc.agents:
        if (
            of not in (None, sc.task)
            and within(s + "/src", slot)
            and sc.records[of].endpoint in LIVE
        ):
            live.add(of)
    for _, s, of in sc.shells:
        if of != sc.task and within(s, slot) and sc.records[of].endpoint in LIVE:
            live.add(of)
    if others:
        live |= {
            f"pid:{pid}" for pid, s, of in sc.agents if within(s + "/src", slot) and of is None
        }
    other = claim_other(sc)
    if other is not None and other[1]:
        live.add(other[0])  # the slot was reassigned to a task that is live (spec §10)
    return live


def unsafe_before_owners(sc: Scenario) -> bool:
    """Rules 1 and 2: an invalid record that might claim the slot; a root as the slot; TASK's
    tasktmp not its own directory."""
    slot = sc.records[sc.task].slot
    if sc.bad_tmp:
        return True
    c = task_claim(sc)
    if c is not None and not c[0]:
        return True  # an unreadable slot claim
    if any(claimed is None or slot in claimed for claimed in sc.invalid.values()):
        return True
    roots = [PROJECT, "/", HOME, FM_HOME]
    return any(root == slot or slot == "/" or root.startswith(slot + "/") for root in roots)


def newer(a: Rec, b: Rec) -> bool | None:
    """Is `a` a more recent launch than `b` (None: cannot be told)?"""
    if a.epoch is not None and b.epoch is not None and a.epoch != b.epoch:
        return a.epoch > b.epoch
    starts = {"2026-01-01T00:00:00Z": 1, "2026-01-02T00:00:00+00:00": 2}
    sa, sb = starts.get(a.started_at or ""), starts.get(b.started_at or "")
    if sa is not None and sb is not None and sa != sb:
        return sa > sb
    if a.mtime_ns != b.mtime_ns:
        return a.mtime_ns > b.mtime_ns
    return None


def blocked(sc: Scenario, discarded: str | None) -> bool:
    """What fm never ends and the pool's reset would end works in the slot: a tmux server."""
    slot = sc.records[sc.task].slot
    return any(within(s, slot) for s in sc.tmux)


def model_verdict(sc: Scenario) -> Verdict:
    rec = sc.records[sc.task]
    slot = rec.slot
    if unsafe_before_owners(sc):
        return Verdict.UNSAFE
    live = model_live_owners(sc)
    discarded = None
    if live:
        if not (sc.force and len(live) == 1 and sc.discard in live):
            return Verdict.LIVE_OWNER
        discarded = sc.discard
    others = other_claimants(sc)
    holder = lease_task(sc)
    if holder is not None and holder not in others:
        others.append(holder)
    other = claim_other(sc)
    if other is not None and other[0] not in others:
        others.append(other[0])
    others = [o for o in others if o != discarded]
    c = task_claim(sc)
    own_claim = c is not None and c[1] == sc.task
    # Whose is it? A claim or a lease naming another task: not TASK's; else TASK's lease or
    # claim; else the launch order (only records have one).
    if other is not None or (holder is not None and not lease_is_tasks(sc)):
        current = True
    elif lease_is_tasks(sc) or own_claim:
        current = False
    else:
        current = not all(
            newer(rec, sc.records[o]) is True for o in others if o in sc.records
        ) or any(o not in sc.records for o in others)
    if others and discarded is None and current:
        return Verdict.STALE
    exists = slot not in sc.gone
    pool = sc.pools[slot]
    if exists and (
        sc.treehouse_bin is None
        or pool.status != "managed"
        or pool.destroying
        or slot in sc.foreign_git
    ):
        return Verdict.UNSAFE
    if model_returns_slot(sc) and blocked(sc, discarded):
        return Verdict.UNSAFE
    needs_check = exists or rec.kind != "ship"
    if needs_check and not sc.landed.landed and not sc.force:
        return Verdict.UNLANDED
    return Verdict.PROCEED


def model_returns_slot(sc: Scenario) -> bool:
    """A proceed plan returns the slot to the pool, unless the slot is gone or the pool shows
    TASK's recorded lease already returned (a previous run did it)."""
    rec, pool = sc.records[sc.task], sc.pools[sc.records[sc.task].slot]
    if rec.slot in sc.gone:
        return False
    recorded = rec.lease_id is not None or rec.lease_holder is not None
    discarded = bool(model_live_owners(sc))
    return pool.leased or not recorded or discarded


# -- properties --------------------------------------------------------------------------------


def step_names(d: Decision) -> list[str]:
    return [s.step for s in d.plan]


def live_ids(d: Decision) -> set[str]:
    return {o.id for o in d.owners if o.live}


def check_verdict_follows_the_model(sc: Scenario, d: Decision) -> None:
    assert d.verdict == model_verdict(sc)
    assert d.exit_code == int(d.verdict.exit_code)
    if d.verdict != Verdict.UNSAFE or not unsafe_before_owners(sc):
        assert live_ids(d) == model_live_owners(sc)


def check_a_refusal_plans_nothing(sc: Scenario, d: Decision) -> None:
    if d.verdict in (Verdict.UNLANDED, Verdict.LIVE_OWNER, Verdict.UNSAFE):
        assert d.plan == ()
        assert d.pool_return is None
        assert d.action(EndProcesses) is None
        assert d.action(SaveWork) is None
        assert d.discarded_owner is None


def check_a_live_owners_slot_is_touched_only_with_the_matching_discard(
    sc: Scenario, d: Decision
) -> None:
    live = model_live_owners(sc)
    touches = bool(TOUCHES_SLOT & set(step_names(d))) or d.pool_return is not None
    if live and (touches or d.verdict in (Verdict.PROCEED, Verdict.STALE)):
        assert sc.force
        assert len(live) == 1
        assert sc.discard in live
        assert d.discarded_owner == sc.discard


def check_force_never_lifts_4_or_5(sc: Scenario) -> None:
    plain = sc.decide(force=False, discard=None)
    forced = sc.decide(force=True, discard=None)
    if plain.verdict in (Verdict.LIVE_OWNER, Verdict.UNSAFE):
        assert forced.verdict == plain.verdict
    # whatever discard was drawn: --force does not lift a 5
    if sc.decide(force=False).verdict == Verdict.UNSAFE:
        assert sc.decide(force=True).verdict == Verdict.UNSAFE
    # and the discard flag without --force lifts nothing
    if plain.verdict == Verdict.LIVE_OWNER:
        assert sc.decide(force=False).verdict == Verdict.LIVE_OWNER


def check_stale_plans_touch_only_endpoint_and_record(sc: Scenario, d: Decision) -> None:
    if d.verdict == Verdict.STALE:
        assert step_names(d) == ["endpoint", *RECORD_STEPS]
        assert d.pool_return is None
        assert d.action(EndProcesses) is None
        assert d.discarded_owner is None
        assert any(sc.task in warning_text(w) and "stale" in warning_text(w) for w in d.warnings)


def check_proceed_plans_are_ordered_and_end_with_the_record(sc: Scenario, d: Decision) -> None:
    if d.verdict != Verdict.PROCEED:
        return
    names = step_names(d)
    assert names[0] == "endpoint"
    assert names[-1] == "record"
    assert names == sorted(names, key=ORDER.index)
    assert len(names) == len(set(names))
    assert ("pool" in names) == (d.pool_return is not None) == model_returns_slot(sc)
    # The processes step runs on the slot when the plan returns it; else still on TASK's
    # tasktmp when it exists, because the record step is about to remove it.
    ends = d.action(EndProcesses)
    ends_slot = ends is not None and ends.slot is not None
    assert ends_slot == model_returns_slot(sc)
    assert ("processes" in names) == (ends_slot or sc.tmp == "exists")
    if "pool" in names:  # the pool's return never meets processes we did not try to end
        assert "processes" in names
    assert ("hooks" in names) == ("pool" in names)  # hook files go only from a returned slot
    if sc.records[sc.task].slot in sc.gone:  # a slot that no longer exists: spec §5
        tmp = ["processes"] if sc.tmp == "exists" else []
        assert names == ["endpoint", *tmp, *RECORD_STEPS]
    if "save-discarded" in names:
        assert sc.force and not sc.landed.landed
    if sc.landed.landed:
        assert "save-discarded" not in names
    if d.pool_return is not None:
        pool = sc.pools[sc.records[sc.task].slot]
        argv = d.pool_return.argv
        # Forced only under --force (and for a scout's or secondmate's slot).
        forced = sc.force or sc.records[sc.task].kind in ("scout", "secondmate")
        force = ["--force"] if forced else []
        assert argv[: 1 + len(force)] == ["return", *force]
        assert argv[-1] == sc.records[sc.task].slot
        if pool.leased:
            assert ("--if-lease-id" in argv) == bool(pool.lease_id)
            # The holder is a condition when there is one, or when it is the only one left.
            if pool.holder or not pool.lease_id:
                assert argv[argv.index("--if-lease-holder") + 1] == pool.holder
            else:
                assert "--if-lease-holder" not in argv
        else:
            assert argv == ["return", *force, sc.records[sc.task].slot]


def check_decide_is_deterministic(sc: Scenario) -> None:
    fleet, obs = sc.world().build()
    flags = Flags.given(force=sc.force, discard_live_owner=sc.discard)
    first = decide(sc.task, fleet, obs, flags, sc.landed)
    assert decide(sc.task, fleet, obs, flags, sc.landed) == first
    assert sc.decide() == first  # a fresh build of the same world: the same decision


def check_discarded_owner_only_with_force_and_the_exact_single_live_owner(
    sc: Scenario, d: Decision
) -> None:
    if d.discarded_owner is not None:
        assert sc.force
        assert d.discarded_owner == sc.discard
        assert live_ids(d) == {sc.discard}
        assert d.verdict == Verdict.PROCEED
    if not sc.force:
        assert d.discarded_owner is None


def check_landed_facts_matter_only_for_the_landed_verdict(sc: Scenario) -> None:
    """Rule 5 comes last: swapping landed for unlanded changes only proceed <-> unlanded."""
    a = replace(sc, landed=LANDED).decide()
    b = replace(sc, landed=UNLANDED).decide()
    if a.verdict != Verdict.PROCEED:
        assert b.verdict == a.verdict
    else:
        assert b.verdict in (Verdict.PROCEED, Verdict.UNLANDED)
        assert b.verdict == Verdict.PROCEED or not sc.force


# -- the tests: one drawn scenario, every invariant ------------------------------------------


@settings(max_examples=300 * soak(), deadline=None)
@given(scenarios())
def test_one_decision_follows_the_model_and_its_invariants(sc: Scenario) -> None:
    count("examples")
    d = sc.decide()
    check_verdict_follows_the_model(sc, d)
    check_a_refusal_plans_nothing(sc, d)
    check_a_live_owners_slot_is_touched_only_with_the_matching_discard(sc, d)
    check_stale_plans_touch_only_endpoint_and_record(sc, d)
    check_proceed_plans_are_ordered_and_end_with_the_record(sc, d)
    check_discarded_owner_only_with_force_and_the_exact_single_live_owner(sc, d)


@settings(max_examples=300 * soak(), deadline=None)
@given(scenarios())
def test_decisions_relate_across_flags_and_inputs(sc: Scenario) -> None:
    count("examples")
    check_force_never_lifts_4_or_5(sc)
    check_decide_is_deterministic(sc)
    check_landed_facts_matter_only_for_the_landed_verdict(sc)


@settings(max_examples=300 * soak(), deadline=None)
@given(scenarios("quiet"))
def test_quiet_slots_follow_the_model_of_rules_4_and_5(sc: Scenario) -> None:
    count("examples")
    assert not model_live_owners(sc)
    d = sc.decide()
    check_verdict_follows_the_model(sc, d)
    check_a_refusal_plans_nothing(sc, d)
    check_stale_plans_touch_only_endpoint_and_record(sc, d)
    check_proceed_plans_are_ordered_and_end_with_the_record(sc, d)
    check_discarded_owner_only_with_force_and_the_exact_single_live_owner(sc, d)
    check_force_never_lifts_4_or_5(sc)
    check_landed_facts_matter_only_for_the_landed_verdict(sc)


@settings(max_examples=300 * soak(), deadline=None)
@given(scenarios("crowded"))
def test_crowded_slots_follow_the_model_of_rule_3_and_its_flags(sc: Scenario) -> None:
    count("examples")
    d = sc.decide()
    check_verdict_follows_the_model(sc, d)
    check_a_refusal_plans_nothing(sc, d)
    check_a_live_owners_slot_is_touched_only_with_the_matching_discard(sc, d)
    check_discarded_owner_only_with_force_and_the_exact_single_live_owner(sc, d)
    check_force_never_lifts_4_or_5(sc)
