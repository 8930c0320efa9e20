"""The decision core (spec §5 rules 1-5, §6), as a table over synthetic observations.

`World` builds a fleet and an `Observation` directly (no tmux, no /proc, no files): records
on slots, endpoint states, pool leases, agent processes in slots, invalid records. A few tests
at the end go through `observe.assemble` with real directories and a real pool state file.
"""

from __future__ import annotations

import builtins
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from unittest import mock

import pytest

from fm_teardown.decide.rules import Unfinished, decide
from fm_teardown.model.errors import ExitCode, Verdict
from fm_teardown.model.landing import LandedRung, Proof, ProofLine
from fm_teardown.model.not_landed import NestedRepo, NotLandedWhy, OwnWork
from fm_teardown.model.paths import is_within
from fm_teardown.model.plan import Decision
from fm_teardown.model.records import Fleet, InvalidRecord, Record, RecordKind, load_fleet
from fm_teardown.model.request import Flags
from fm_teardown.model.settings import Settings
from fm_teardown.model.step_actions import (
    BranchDelete,
    EndProcesses,
    PoolReturn,
    SaveWork,
)
from fm_teardown.model.world import (
    Endpoint,
    EndpointState,
    Environment,
    InventoryStatus,
    Observation,
    Pane,
    PoolEntry,
    PoolView,
    Proc,
    ProcessTable,
    ProcStat,
    SlotClaim,
    SlotFacts,
    TaskTmp,
    TmuxInventory,
)
from fm_teardown.observe.observation import assemble, ready
from fm_teardown.report import messages
from fm_teardown.report.step_words import warning_text

HOME = "/home/op"
FM_HOME = "/home/op/fleet"
PROJECT = "/src/proj"
POOL = "/pool/proj-abc"
S1 = f"{POOL}/1/proj"
S2 = f"{POOL}/2/proj"
TREEHOUSE = "/usr/local/bin/treehouse"
STANDIN = str(Path(__file__).resolve().parent.parent / "fm_teardown" / "standin" / "treehouse")
STATE_FILE = f"{POOL}/treehouse-state.json"


# -- landed facts (rule 5) -----------------------------------------------------------------


ON_MAIN = Proof(LandedRung.REACHABLE, "origin/main", merged=True)


@dataclass(frozen=True)
class Landed:
    landed: bool = True
    summary: NotLandedWhy | None = None
    dirty: tuple[str, ...] = ()
    unpushed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    head: str | None = None
    branch: str | None = None
    default_branch: str | None = None
    untracked: tuple[str, ...] = ()
    proof: Proof | None = ON_MAIN  # the judge gives one when landed (test_landed_judge.py)
    unfetched: tuple[str, ...] = ()
    nested: tuple[NestedRepo, ...] = ()


LANDED = Landed()
UNLANDED = Landed(False, OwnWork(1, ("a.txt",), 0, 1), ("a.txt",), ("abc123 wip",), proof=None)


# -- the world builder ---------------------------------------------------------------------


@dataclass
class World:
    """A synthetic fleet and what was observed of it; every method returns the world."""

    home: str | None = HOME
    fm_home: str = FM_HOME
    treehouse_bin: str | None = TREEHOUSE
    records: dict[str, Record] = field(default_factory=dict)
    states: dict[str, EndpointState] = field(default_factory=dict)
    endpoint_pids: dict[str, set[int]] = field(default_factory=dict)
    bad: dict[str, InvalidRecord] = field(default_factory=dict)
    pools: dict[str, PoolView] = field(default_factory=dict)
    agents: dict[str, list[Proc]] = field(default_factory=dict)
    others: dict[str, list[Proc]] = field(default_factory=dict)
    gone_slots: set[str] = field(default_factory=set)
    git_problems: dict[str, str] = field(default_factory=dict)
    tmp_problems: dict[str, str] = field(default_factory=dict)
    tmp_absent: set[str] = field(default_factory=set)  # tasks whose /tmp/fm-<id> is not there
    claims: dict[str, SlotClaim] = field(default_factory=dict)  # slot -> its .fm-slot-owner
    no_mistakes_bin: str | None = None  # the operator's no-mistakes on PATH

    def task(
        self,
        task_id: str,
        slot: str = S1,
        endpoint: str = "dead",
        *,
        project: str = PROJECT,
        mtime_ns: int = 0,
        lease_id: str | None = None,
        lease_holder: str | None = None,
        spawn_gen: str | None = None,
        started_at: str | None = None,
        kind: str = "ship",
        tasktmp: str | None = None,
        home: str | None = None,
    ) -> World:
        self.records[task_id] = Record(
            task_id=task_id,
            meta_path=f"{FM_HOME}/state/{task_id}.meta",
            mtime_ns=mtime_ns,
            window=f"firstmate:fm-{task_id}",
            session="firstmate",
            worktree=slot,
            project=project,
            kind=RecordKind(kind),
            tasktmp=tasktmp,
            home=home,
            lease_id=lease_id,
            lease_holder=lease_holder,
            spawn_gen=spawn_gen,
            started_at=started_at,
        )
        self.states[task_id] = EndpointState(endpoint)
        self.endpoint_pids.setdefault(task_id, set())
        return self

    def lease(
        self,
        slot: str = S1,
        *,
        holder: str = "",
        lease_id: str = "",
        leased: bool = True,
        stored: str | None = None,
        destroying: bool = False,
    ) -> World:
        """The pool's entry for `slot` (`stored`: the path as the state file spells it)."""
        entry = PoolEntry(
            name=slot.rsplit("/", 2)[-2],
            path=stored or slot,
            canonical=slot,
            leased=leased,
            lease_id=lease_id,
            lease_holder=holder,
            destroying=destroying,
        )
        self.pools[slot] = PoolView(STATE_FILE, entry)
        return self

    def unmanaged(self, slot: str = S1, *, state_file: str | None = STATE_FILE) -> World:
        self.pools[slot] = PoolView(state_file, None)
        return self

    def pool_error(self, slot: str = S1) -> World:
        self.pools[slot] = PoolView(STATE_FILE, None, f"{STATE_FILE} is not valid JSON")
        return self

    def agent(self, pid: int, slot: str = S1, *, of: str | None = None) -> World:
        """An agent process whose cwd is in `slot`; `of`: the task whose pane tree holds it."""
        self.agents.setdefault(slot, []).append(
            Proc(pid, 1, "claude", "claude", slot + "/src", ProcStat(1000.0 + pid))
        )
        if of is not None:
            self.endpoint_pids[of].add(pid)
        return self

    def worker(self, pid: int, slot: str = S1) -> World:
        """A non-agent process whose cwd is in `slot`."""
        self.others.setdefault(slot, []).append(Proc(pid, 1, "sleep", "sleep", slot, ProcStat(1.0)))
        return self

    def shell(self, pid: int, slot: str = S1, *, of: str) -> World:
        """A shell of task `of`'s endpoint whose cwd is in `slot`."""
        self.others.setdefault(slot, []).append(Proc(pid, 1, "bash", "bash", slot, ProcStat(2.0)))
        self.endpoint_pids[of].add(pid)
        return self

    def tmux_server(self, pid: int, slot: str = S1) -> World:
        """A tmux server started from inside `slot` (it keeps that cwd)."""
        self.others.setdefault(slot, []).append(
            Proc(pid, 1, "tmux: server", "tmux", slot, ProcStat(3.0))
        )
        return self

    def foreign_git(self, slot: str = S1) -> World:
        """The slot's `.git` names another worktree's git dir (a `cp -a` of a live slot)."""
        self.git_problems[slot] = f"slot {slot}: .git names another worktree's git dir"
        return self

    def claim(
        self,
        task_id: str | None,
        slot: str = S1,
        *,
        home: str = FM_HOME,
        endpoint: str | None = None,
        problem: str | None = None,
    ) -> World:
        """The slot claim naming `task_id` (and its home); `endpoint`: that task's endpoint
        state from its record in another home; `problem`: the claim cannot be read."""
        self.claims[slot] = SlotClaim(
            f"{slot.rsplit('/', 1)[0]}/.fm-slot-owner",
            None if problem else task_id,
            home,
            problem,
            EndpointState(endpoint) if endpoint else None,
        )
        return self

    def bad_tmp(self, task_id: str) -> World:
        """TASK's /tmp/fm-<id> is a symlink planted by someone."""
        self.tmp_problems[task_id] = f"tasktmp /tmp/fm-{task_id} is a symlink (to /)"
        return self

    def invalid(self, task_id: str, claimed: tuple[str, ...] | None) -> World:
        self.bad[task_id] = InvalidRecord(
            task_id, f"{FM_HOME}/state/{task_id}.meta", "is not a regular file", claimed
        )
        return self

    def gone(self, slot: str = S1) -> World:
        self.gone_slots.add(slot)
        return self

    def build(self) -> tuple[Fleet, Observation]:
        fleet = Fleet(dict(self.records), dict(self.bad))
        endpoints = {
            t: Endpoint(
                state,
                f"synthetic {state}",
                () if state == EndpointState.MISSING else (f"@{i}",),
                frozenset(self.endpoint_pids[t]),
            )
            for i, (t, state) in enumerate(self.states.items())
        }
        # Processes are in every slot that contains their cwd (slots may be nested).
        all_agents = [p for ps in self.agents.values() for p in ps]
        all_procs = all_agents + [p for ps in self.others.values() for p in ps]
        slots = {}
        for r in self.records.values():
            s = r.worktree
            slots[s] = SlotFacts(
                canonical=s,
                exists=s not in self.gone_slots,
                pool=self.pools.get(s) or PoolView(STATE_FILE, _entry(s)),
                agents=tuple(p for p in all_agents if is_within(p.cwd or "", s)),
                procs=tuple(p for p in all_procs if is_within(p.cwd or "", s)),
                git_problem=self.git_problems.get(s),
                claim=self.claims.get(s) if s not in self.gone_slots else None,
            )
        tasktmp = {
            t: TaskTmp(f"/tmp/fm-{t}", t not in self.tmp_absent, self.tmp_problems.get(t))
            for t, r in self.records.items()
            if r.tasktmp or t in self.tmp_problems
        }
        obs = Observation(
            inventory=TmuxInventory(InventoryStatus.OK),
            processes=ProcessTable({p.pid: p for p in all_procs}),
            env=Environment(
                self.home, self.fm_home, self.treehouse_bin, no_mistakes_bin=self.no_mistakes_bin
            ),
            slot_of={t: r.worktree for t, r in self.records.items()},
            endpoints=endpoints,
            slots=slots,
            invalid_slots={t: b.claimed for t, b in self.bad.items()},
            project_of={t: r.project for t, r in self.records.items()},
            tasktmp=tasktmp,
        )
        return fleet, obs

    def decide(
        self,
        task: str,
        *,
        force: bool = False,
        discard: str | None = None,
        landed: Landed | None = LANDED,
    ) -> Decision:
        fleet, obs = self.build()
        d = decide(task, fleet, obs, Flags.given(force=force, discard_live_owner=discard), landed)
        assert isinstance(d, Decision), d  # not Unfinished: rule 5's facts are given
        return d


def _entry(slot: str) -> PoolEntry:
    """A managed, unleased pool entry (the default for every slot)."""
    return PoolEntry(slot.rsplit("/", 2)[-2], slot, slot, False, "", "")


def steps(d: Decision) -> list[str]:
    return [s.step for s in d.plan]


def live_owners(d: Decision) -> list[str]:
    return sorted(o.id for o in d.owners if o.live)


def text(d: Decision) -> str:
    return "\n".join(
        [*map(messages.said_text, d.reasons), *map(warning_text, d.warnings), *d.hints]
    )


# The record's duties (hook auth entries, attribution row) go with it, proceed and stale alike.
RECORD = ["auth", "attribution", "record"]
FULL = ["endpoint", "processes", "hooks", "pool", *RECORD]
STALE = ["endpoint", *RECORD]
EMPTY: list[str] = []


# -- the table -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    world: Callable[[], World]
    verdict: Verdict
    steps: list[str]
    owners: list[str] = field(default_factory=list)  # the live owners reported
    task: str = "a"
    force: bool = False
    discard: str | None = None
    landed: Landed = LANDED
    mentions: tuple[str, ...] = ()  # words the reasons/warnings/hints must contain


CASES: dict[str, Case] = {
    # -- sole claimant -------------------------------------------------------------------
    "sole-claimant-dead": Case(lambda: World().task("a"), Verdict.PROCEED, FULL),
    "sole-claimant-missing": Case(
        lambda: World().task("a", endpoint="missing"), Verdict.PROCEED, FULL
    ),
    "own-endpoint-alive": Case(lambda: World().task("a", endpoint="alive"), Verdict.PROCEED, FULL),
    "own-endpoint-ambiguous": Case(
        lambda: World().task("a", endpoint="ambiguous"), Verdict.PROCEED, FULL
    ),
    "own-endpoint-unreadable": Case(
        lambda: World().task("a", endpoint="unreadable"), Verdict.PROCEED, FULL
    ),
    "other-task-on-other-slot-alive": Case(
        lambda: World().task("a").task("b", S2, "alive"), Verdict.PROCEED, FULL
    ),
    "own-agent-in-own-pane": Case(
        lambda: World().task("a", endpoint="alive").agent(11, of="a"), Verdict.PROCEED, FULL
    ),
    # -- rule 3: another live record -------------------------------------------------------
    "other-alive": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
        mentions=("b", "--discard-live-owner=b"),
    ),
    "other-ambiguous": Case(
        lambda: World().task("a").task("b", endpoint="ambiguous"), Verdict.LIVE_OWNER, EMPTY, ["b"]
    ),
    "other-unreadable": Case(
        lambda: World().task("a").task("b", endpoint="unreadable"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    "other-alive-while-own-alive": Case(
        lambda: World().task("a", endpoint="alive").task("b", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    "two-others-alive": Case(
        lambda: World().task("a").task("b", endpoint="alive").task("c", endpoint="ambiguous"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b", "c"],
        mentions=("b", "c"),
    ),
    "other-alive-and-other-dead": Case(
        lambda: World().task("a").task("b", endpoint="alive").task("c"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    # -- rule 3: the flags ---------------------------------------------------------------
    "force-alone-does-not-lift-4": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
        force=True,
    ),
    "force-discard-exact-owner": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.PROCEED,
        FULL,
        ["b"],
        force=True,
        discard="b",
        mentions=("b",),
    ),
    "force-discard-mismatch": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
        force=True,
        discard="c",
    ),
    "force-discard-prefix-is-a-mismatch": Case(
        lambda: World().task("a").task("bb", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["bb"],
        force=True,
        discard="b",
    ),
    "force-discard-empty-is-a-mismatch": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
        force=True,
        discard="",
    ),
    "discard-without-force": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
        discard="b",
        mentions=("--force",),
    ),
    "discard-one-of-two-live": Case(
        lambda: World().task("a").task("b", endpoint="alive").task("c", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b", "c"],
        force=True,
        discard="b",
    ),
    "discard-with-no-live-owner-is-harmless": Case(
        lambda: World().task("a"), Verdict.PROCEED, FULL, force=True, discard="b"
    ),
    "discard-lease-owner": Case(
        lambda: World().task("a").lease(holder="ci-bot", lease_id="L9"),
        Verdict.PROCEED,
        FULL,
        ["lease:ci-bot"],
        force=True,
        discard="lease:ci-bot",
    ),
    "discard-pid-owner": Case(
        lambda: World().task("a").task("b").agent(4242),
        Verdict.PROCEED,
        FULL,
        ["pid:4242"],
        force=True,
        discard="pid:4242",
    ),
    # -- rule 3: leases --------------------------------------------------------------------
    "lease-held-by-non-task": Case(
        lambda: World().task("a").lease(holder="ci-bot", lease_id="L9"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["lease:ci-bot"],
    ),
    "lease-empty-holder-named-by-id": Case(
        lambda: World().task("a").lease(holder="", lease_id="L9"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["lease:L9"],
    ),
    "lease-recovered": Case(
        lambda: World().task("a").lease(holder="recovered: state file was corrupt"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["lease:recovered: state file was corrupt"],
    ),
    "lease-recovered-even-if-record-names-holder": Case(
        lambda: (
            World()
            .task("a", lease_id="L1", lease_holder="a")
            .lease(holder="recovered: state file was corrupt")
        ),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["lease:recovered: state file was corrupt"],
    ),
    # spec §7a: a lease held by another task is that task's claim; its liveness is its endpoint's,
    # and when it is not live the pool says the slot is its: stale for TASK.
    "lease-holder-is-other-task-on-same-slot": Case(
        lambda: World().task("a").task("b", endpoint="dead").lease(holder="b", lease_id="L2"),
        Verdict.STALE,
        STALE,
        mentions=("b",),
    ),
    "lease-holder-is-other-task-elsewhere": Case(
        lambda: World().task("a").task("b", S2, "missing").lease(holder="b", lease_id="L2"),
        Verdict.STALE,
        STALE,
        mentions=("b",),
    ),
    "lease-held-by-dead-task-beats-launch-order": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s900.1.x")
            .task("b", endpoint="dead", spawn_gen="s100.1.x")
            .lease(holder="b", lease_id="L2")
        ),
        Verdict.STALE,
        STALE,
        mentions=("lease", "b"),
    ),
    "lease-id-is-other-tasks-record": Case(
        lambda: World().task("a").task("b", S2, "alive", lease_id="L2").lease(lease_id="L2"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    "lease-holder-names-no-record": Case(
        lambda: World().task("a").lease(holder="ci-bot", lease_id="L2"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["lease:ci-bot"],
    ),
    "lease-holder-is-other-task-and-it-is-alive": Case(
        lambda: World().task("a").task("b", endpoint="alive").lease(holder="b"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    "lease-by-id-mismatch-although-holder-is-task": Case(
        lambda: World().task("a", lease_id="L1").lease(holder="a", lease_id="L2"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["lease:a"],
    ),
    "lease-is-tasks-by-id": Case(
        lambda: (
            World()
            .task("a", lease_id="L1", lease_holder="x")
            .lease(holder="someone", lease_id="L1")
        ),
        Verdict.PROCEED,
        FULL,
    ),
    "lease-is-tasks-by-recorded-holder": Case(
        lambda: World().task("a", lease_holder="fm-a").lease(holder="fm-a", lease_id="L1"),
        Verdict.PROCEED,
        FULL,
    ),
    "lease-is-tasks-by-task-id": Case(
        lambda: World().task("a").lease(holder="a", lease_id="L1"), Verdict.PROCEED, FULL
    ),
    "lease-other-holder-when-record-names-holder": Case(
        lambda: World().task("a", lease_holder="fm-a").lease(holder="fm-b"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["lease:fm-b"],
    ),
    # -- rule 3: unattributed agent processes -------------------------------------------------
    "agent-unattributed-with-other-claimant": Case(
        lambda: World().task("a").task("b", endpoint="dead").agent(4242),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["pid:4242"],
    ),
    "agent-unattributed-sole-claimant": Case(
        lambda: World().task("a").agent(4242), Verdict.PROCEED, FULL
    ),
    "agent-unattributed-sole-claimant-with-lease": Case(
        lambda: World().task("a", lease_id="L1").lease(holder="a", lease_id="L1").agent(4242),
        Verdict.PROCEED,
        FULL,
    ),
    "agent-in-own-tree-with-other-claimant": Case(
        lambda: (
            World()
            .task("a", endpoint="alive", spawn_gen="s200.1.1")
            .task("b", spawn_gen="s100.1.1")
            .agent(11, of="a")
        ),
        Verdict.PROCEED,
        FULL,
    ),
    # spec §7a: another task's live endpoint working in the slot owns it.
    "agent-in-tree-of-task-elsewhere": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s200.1.1")
            .task("b", spawn_gen="s100.1.1")
            .task("c", S2, "alive")
            .agent(11, of="c")
        ),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["c"],
    ),
    # -- spec §7a: nested slots claim each other -------------------------------------------------
    "nested-live-slot-inside": Case(
        lambda: World().task("a").task("b", S1 + "/sub", "alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    "nested-live-slot-containing": Case(
        lambda: World().task("a").task("b", f"{POOL}/1", "ambiguous"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    "nested-dead-older-slot-inside-proceeds": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s200.1.1")
            .task("b", S1 + "/sub", "dead", spawn_gen="s100.1.1")
        ),
        Verdict.PROCEED,
        FULL,
    ),
    "nested-dead-newer-slot-inside-is-stale": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s100.1.1")
            .task("b", S1 + "/sub", "missing", spawn_gen="s200.1.1")
        ),
        Verdict.STALE,
        STALE,
        mentions=("b",),
    ),
    "nested-live-agent-in-inner-slot": Case(
        lambda: (
            World()
            .task("a")
            .task("b", S1 + "/sub", "alive", spawn_gen="s1.1.1")
            .agent(21, S1 + "/sub", of="b")
        ),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    # -- spec §7a: what fm never signals may not be in a slot the pool will reset ------------------
    "tmux-server-in-slot-refuses": Case(
        lambda: World().task("a").tmux_server(31),
        Verdict.UNSAFE,
        EMPTY,
        mentions=("tmux server", "31", "outside the pool"),
    ),
    "tmux-server-in-stale-slot-is-left-alone": Case(
        lambda: (
            World().task("a", spawn_gen="s100.1.1").task("b", spawn_gen="s200.1.1").tmux_server(31)
        ),
        Verdict.STALE,
        STALE,
    ),
    "dead-endpoint-shell-of-other-task-in-slot-is-spared-not-an-owner": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s200.1.1")
            .task("b", spawn_gen="s100.1.1", endpoint="dead")
            .shell(41, of="b")
        ),
        Verdict.PROCEED,
        FULL,
    ),
    "live-endpoint-process-of-task-elsewhere-owns-the-slot": Case(
        lambda: World().task("a").task("c", S2, "ambiguous").shell(42, of="c"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["c"],
    ),
    "discarded-owners-own-processes-do-not-block": Case(
        lambda: World().task("a").task("b", endpoint="alive").shell(43, of="b").agent(44, of="b"),
        Verdict.PROCEED,
        ["endpoint", "processes", "save-discarded", "hooks", "pool", *RECORD],
        ["b"],
        force=True,
        discard="b",
        landed=UNLANDED,
        mentions=("b's unlanded work",),
    ),
    # -- spec §7a: the slot's git dir must be its own ----------------------------------------------
    "foreign-git-dir-refuses": Case(
        lambda: World().task("a").foreign_git(),
        Verdict.UNSAFE,
        EMPTY,
        mentions=("another worktree",),
    ),
    "foreign-git-dir-force-still-refuses": Case(
        lambda: World().task("a").foreign_git(),
        Verdict.UNSAFE,
        EMPTY,
        force=True,
        landed=UNLANDED,
    ),
    "foreign-git-dir-on-stale-slot-is-left-alone": Case(
        lambda: (
            World().task("a", spawn_gen="s100.1.1").task("b", spawn_gen="s200.1.1").foreign_git()
        ),
        Verdict.STALE,
        STALE,
    ),
    # -- spec §7a: tasktmp on disk -----------------------------------------------------------------
    "symlinked-tasktmp-refuses": Case(
        lambda: World().task("a", tasktmp="/tmp/fm-a").bad_tmp("a"),
        Verdict.UNSAFE,
        EMPTY,
        mentions=("/tmp/fm-a", "symlink"),
    ),
    "symlinked-tasktmp-refuses-a-stale-slot-too": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s100.1.1", tasktmp="/tmp/fm-a")
            .task("b", spawn_gen="s200.1.1")
            .bad_tmp("a")
        ),
        Verdict.UNSAFE,
        EMPTY,
    ),
    # -- spec §10: the slot claim ------------------------------------------------------------------
    "claim-names-live-task-here": Case(
        lambda: World().task("a").task("b", S2, "alive").claim("b"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
    ),
    "claim-names-live-task-of-another-home": Case(
        lambda: World().task("a").claim("x", home="/other", endpoint="ambiguous"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["x"],
    ),
    "claim-names-task-with-no-record-is-stale-reassigned": Case(
        lambda: World().task("a").lease(holder="a", lease_id="L1").claim("x", home="/other"),
        Verdict.STALE,
        STALE,
        mentions=("reassigned", "x", "/other"),
    ),
    "claim-names-dead-task-stale-even-with-force": Case(
        lambda: World().task("a").task("b", S2, "dead").claim("b"),
        Verdict.STALE,
        STALE,
        force=True,
        landed=UNLANDED,
        mentions=("reassigned", "b"),
    ),
    "claim-unreadable-refuses": Case(
        lambda: World().task("a").claim(None, problem="is a symlink"),
        Verdict.UNSAFE,
        EMPTY,
        mentions=(".fm-slot-owner", "symlink"),
    ),
    "own-claim-beats-launch-order": Case(
        lambda: World().task("a", spawn_gen="s100.1.1").task("b", spawn_gen="s900.1.1").claim("a"),
        Verdict.PROCEED,
        ["endpoint", "processes", "hooks", "pool", "claim", *RECORD],
    ),
    "own-claim-but-another-tasks-lease-is-stale": Case(
        lambda: World().task("a").task("b", S2, "dead").lease(holder="b", lease_id="L2").claim("a"),
        Verdict.STALE,
        STALE,
    ),
    # -- spec §10: what fm does not carry from firstmate's script ----------------------------------
    "secondmate-home-elsewhere-proceeds-saying-it-stays": Case(
        lambda: World().task("a", kind="secondmate", home="/home/op/sm-home"),
        Verdict.PROCEED,
        FULL,
        mentions=("does not remove a secondmate home", "/home/op/sm-home"),
    ),
    "secondmate-home-elsewhere-with-children-is-still-unlanded-first": Case(
        lambda: World().task("a", kind="secondmate", home="/home/op/sm-home"),
        Verdict.UNLANDED,
        EMPTY,
        landed=UNLANDED,
    ),
    "secondmate-home-is-its-slot-proceeds": Case(
        lambda: World().task("a", kind="secondmate", home=S1),
        Verdict.PROCEED,
        FULL,
    ),
    # -- rule 1: invalid other records ----------------------------------------------------
    "invalid-other-claims-slot": Case(
        lambda: World().task("a").invalid("bad", (S1,)),
        Verdict.UNSAFE,
        EMPTY,
        mentions=("bad",),
    ),
    "invalid-other-unknown-slot": Case(
        lambda: World().task("a").invalid("bad", None),
        Verdict.UNSAFE,
        EMPTY,
        mentions=("bad",),
    ),
    "invalid-other-claims-two-slots-one-ours": Case(
        lambda: World().task("a").invalid("bad", (S2, S1)), Verdict.UNSAFE, EMPTY
    ),
    "invalid-other-on-other-slot": Case(
        lambda: World().task("a").invalid("bad", (S2,)), Verdict.PROCEED, FULL
    ),
    "invalid-beats-live-owner": Case(
        lambda: World().task("a").task("b", endpoint="alive").invalid("bad", None),
        Verdict.UNSAFE,
        EMPTY,
    ),
    # -- rule 2: roots the pool does not own --------------------------------------------------
    "slot-is-project": Case(lambda: World().task("a", PROJECT), Verdict.UNSAFE, EMPTY),
    "slot-is-ancestor-of-project": Case(
        lambda: World().task("a", "/src", project=PROJECT), Verdict.UNSAFE, EMPTY
    ),
    "slot-is-root": Case(lambda: World().task("a", "/"), Verdict.UNSAFE, EMPTY),
    "slot-is-home": Case(lambda: World().task("a", HOME), Verdict.UNSAFE, EMPTY),
    "slot-is-ancestor-of-home": Case(lambda: World().task("a", "/home"), Verdict.UNSAFE, EMPTY),
    "slot-is-fm-home": Case(lambda: World().task("a", FM_HOME), Verdict.UNSAFE, EMPTY),
    "slot-is-ancestor-of-fm-home": Case(
        lambda: World(home="/root", fm_home="/srv/fleet").task("a", "/srv"),
        Verdict.UNSAFE,
        EMPTY,
    ),
    "slot-inside-home-is-fine": Case(
        lambda: World().task("a", f"{HOME}/pool/1/proj"), Verdict.PROCEED, FULL
    ),
    "slot-inside-project-is-fine": Case(
        lambda: World().task("a", f"{PROJECT}/.treehouse/1/proj"), Verdict.PROCEED, FULL
    ),
    "slot-prefix-of-project-by-string-only": Case(
        lambda: World().task("a", "/src/pro", project=PROJECT), Verdict.PROCEED, FULL
    ),
    "slot-is-project-even-if-missing": Case(
        lambda: World().task("a", PROJECT).gone(PROJECT), Verdict.UNSAFE, EMPTY
    ),
    "slot-is-home-with-live-owner": Case(
        lambda: World().task("a", HOME).task("b", HOME, "alive"), Verdict.UNSAFE, EMPTY
    ),
    "no-home-known": Case(lambda: World(home=None).task("a"), Verdict.PROCEED, FULL),
    # -- rule 4: stale ------------------------------------------------------------------------
    "stale-other-newer-spawn-gen": Case(
        lambda: World().task("a", spawn_gen="s100.1.1").task("b", spawn_gen="s200.1.1"),
        Verdict.STALE,
        STALE,
        mentions=("b", "stale"),
    ),
    "stale-other-missing-newer-started-at": Case(
        lambda: (
            World()
            .task("a", started_at="2026-01-01T00:00:00Z")
            .task("b", endpoint="missing", started_at="2026-01-02T00:00:00Z")
        ),
        Verdict.STALE,
        STALE,
        mentions=("b",),
    ),
    "stale-other-newer-mtime": Case(
        lambda: World().task("a", mtime_ns=1).task("b", mtime_ns=2),
        Verdict.STALE,
        STALE,
        mentions=("b",),
    ),
    "stale-spawn-gen-beats-started-at": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s100.9.9", started_at="2026-02-01T00:00:00Z", mtime_ns=9)
            .task("b", spawn_gen="s200.1.1", started_at="2026-01-01T00:00:00Z", mtime_ns=1)
        ),
        Verdict.STALE,
        STALE,
    ),
    "stale-equal-spawn-gen-then-started-at": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s100.1.1", started_at="2026-01-01T00:00:00Z", mtime_ns=9)
            .task("b", spawn_gen="s100.2.2", started_at="2026-01-02T00:00:00Z", mtime_ns=1)
        ),
        Verdict.STALE,
        STALE,
    ),
    "stale-spawn-gen-on-one-only-falls-to-started-at": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s999.1.1", started_at="2026-01-01T00:00:00Z")
            .task("b", started_at="2026-01-02T00:00:00Z")
        ),
        Verdict.STALE,
        STALE,
    ),
    "stale-started-at-with-offsets-compared-as-instants": Case(
        lambda: (
            World()
            .task("a", started_at="2026-01-01T10:00:00+00:00", mtime_ns=9)
            .task("b", started_at="2026-01-01T11:30:00+01:00", mtime_ns=1)
        ),
        Verdict.STALE,
        STALE,
    ),
    "stale-equal-launch-cannot-be-told": Case(
        lambda: (
            World()
            .task("a", spawn_gen="s100.1.1", started_at="2026-01-01T00:00:00Z", mtime_ns=5)
            .task("b", spawn_gen="s100.2.2", started_at="2026-01-01T00:00:00Z", mtime_ns=5)
        ),
        Verdict.STALE,
        STALE,
        mentions=("b",),
    ),
    "stale-nothing-to-compare": Case(
        lambda: World().task("a").task("b"), Verdict.STALE, STALE, mentions=("b",)
    ),
    "stale-even-if-not-landed": Case(
        lambda: World().task("a", mtime_ns=1).task("b", mtime_ns=2),
        Verdict.STALE,
        STALE,
        landed=UNLANDED,
    ),
    "stale-with-force-still-stale": Case(
        lambda: World().task("a", mtime_ns=1).task("b", mtime_ns=2),
        Verdict.STALE,
        STALE,
        force=True,
    ),
    "stale-with-corrupt-pool": Case(
        lambda: World().task("a", mtime_ns=1).task("b", mtime_ns=2).pool_error(),
        Verdict.STALE,
        STALE,
    ),
    "stale-without-treehouse": Case(
        lambda: World(treehouse_bin=None).task("a", mtime_ns=1).task("b", mtime_ns=2),
        Verdict.STALE,
        STALE,
    ),
    "stale-with-unmanaged-slot": Case(
        lambda: World().task("a", mtime_ns=1).task("b", mtime_ns=2).unmanaged(),
        Verdict.STALE,
        STALE,
    ),
    "stale-newest-of-three": Case(
        lambda: World().task("a", mtime_ns=2).task("b", mtime_ns=1).task("c", mtime_ns=3),
        Verdict.STALE,
        STALE,
        mentions=("c",),
    ),
    "task-newer-spawn-gen": Case(
        lambda: World().task("a", spawn_gen="s200.1.1").task("b", spawn_gen="s100.1.1"),
        Verdict.PROCEED,
        FULL,
    ),
    "task-newer-mtime": Case(
        lambda: World().task("a", mtime_ns=2).task("b", endpoint="missing", mtime_ns=1),
        Verdict.PROCEED,
        FULL,
    ),
    "task-newest-of-three": Case(
        lambda: World().task("a", mtime_ns=3).task("b", mtime_ns=1).task("c", mtime_ns=2),
        Verdict.PROCEED,
        FULL,
    ),
    "task-holds-lease-although-other-newer": Case(
        lambda: (
            World()
            .task("a", lease_id="L1", spawn_gen="s100.1.1")
            .task("b", spawn_gen="s200.1.1")
            .lease(holder="a", lease_id="L1")
        ),
        Verdict.PROCEED,
        FULL,
    ),
    "task-holds-lease-by-holder-although-equal-launch": Case(
        lambda: World().task("a").task("b").lease(holder="a"), Verdict.PROCEED, FULL
    ),
    # -- the slot and the pool -------------------------------------------------------------------
    "slot-missing": Case(lambda: World().task("a").gone(), Verdict.PROCEED, STALE),
    "slot-missing-no-pool-needed": Case(
        lambda: World(treehouse_bin=None).task("a").gone().unmanaged(state_file=None),
        Verdict.PROCEED,
        STALE,
    ),
    "slot-missing-corrupt-pool": Case(
        lambda: World().task("a").gone().pool_error(), Verdict.PROCEED, STALE
    ),
    "slot-not-managed": Case(lambda: World().task("a").unmanaged(), Verdict.UNSAFE, EMPTY),
    "slot-no-pool-state-file": Case(
        lambda: World().task("a").unmanaged(state_file=None), Verdict.UNSAFE, EMPTY
    ),
    "no-treehouse-bin": Case(lambda: World(treehouse_bin=None).task("a"), Verdict.UNSAFE, EMPTY),
    "corrupt-pool-state": Case(lambda: World().task("a").pool_error(), Verdict.UNSAFE, EMPTY),
    "slot-being-destroyed": Case(
        lambda: World().task("a").lease(leased=False, destroying=True), Verdict.UNSAFE, EMPTY
    ),
    "pool-unsafe-beats-unlanded": Case(
        lambda: World().task("a").unmanaged(), Verdict.UNSAFE, EMPTY, landed=UNLANDED
    ),
    # -- rule 5: landed -------------------------------------------------------------------------
    "unlanded": Case(
        lambda: World().task("a"),
        Verdict.UNLANDED,
        EMPTY,
        landed=UNLANDED,
        mentions=("a.txt", "abc123", "--force"),
    ),
    "unlanded-force-saves-first": Case(
        lambda: World().task("a"),
        Verdict.PROCEED,
        ["endpoint", "processes", "save-discarded", "hooks", "pool", *RECORD],
        force=True,
        landed=UNLANDED,
    ),
    "unlanded-own-endpoint-alive": Case(
        lambda: World().task("a", endpoint="alive"), Verdict.UNLANDED, EMPTY, landed=UNLANDED
    ),
    "unlanded-scout-force-no-save": Case(
        lambda: World().task("a", kind="scout"), Verdict.PROCEED, FULL, force=True, landed=UNLANDED
    ),
    "unlanded-secondmate": Case(
        lambda: World().task("a", kind="secondmate"), Verdict.UNLANDED, EMPTY, landed=UNLANDED
    ),
    "unlanded-scout-missing-slot": Case(
        lambda: World().task("a", kind="scout").gone(), Verdict.UNLANDED, EMPTY, landed=UNLANDED
    ),
    "live-owner-beats-unlanded": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
        landed=UNLANDED,
    ),
    "discard-without-force-and-unlanded-is-4": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.LIVE_OWNER,
        EMPTY,
        ["b"],
        discard="b",
        landed=UNLANDED,
    ),
    "discard-live-owner-with-force-and-unlanded": Case(
        lambda: World().task("a").task("b", endpoint="alive"),
        Verdict.PROCEED,
        ["endpoint", "processes", "save-discarded", "hooks", "pool", *RECORD],
        ["b"],
        force=True,
        discard="b",
        landed=UNLANDED,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_decide_table(name: str) -> None:
    case = CASES[name]
    d = case.world().decide(case.task, force=case.force, discard=case.discard, landed=case.landed)
    assert d.verdict == case.verdict, text(d)
    assert d.exit_code == int(case.verdict.exit_code)
    assert steps(d) == case.steps, text(d)
    if d.verdict in (Verdict.LIVE_OWNER, Verdict.PROCEED, Verdict.STALE, Verdict.UNLANDED):
        assert live_owners(d) == sorted(case.owners)
    if d.verdict in (Verdict.UNLANDED, Verdict.LIVE_OWNER, Verdict.UNSAFE):
        assert d.plan == ()
        assert d.pool_return is None
        assert d.discarded_owner is None
        assert d.action(EndProcesses) is None
        assert messages.refused_reasons(d.reasons, d.refused)[0].startswith("REFUSED")
    if d.verdict == Verdict.LIVE_OWNER:
        for owner in case.owners:
            assert owner in messages.said_text(d.reasons[0])
    for word in case.mentions:
        assert word in text(d), f"{word!r} not in {text(d)!r}"


# -- details the table does not show ---------------------------------------------------------


def test_exit_codes_of_every_verdict() -> None:
    assert {v: int(v.exit_code) for v in Verdict} == {
        Verdict.PROCEED: 0,
        Verdict.STALE: 0,
        Verdict.ALREADY: 0,
        Verdict.FAILED: 1,
        Verdict.INVALID: 2,
        Verdict.UNLANDED: 3,
        Verdict.LIVE_OWNER: 4,
        Verdict.UNSAFE: 5,
        Verdict.PLAN_CHANGED: 5,  # 4 when the plan now has a live owner: errors.plan_changed_exit
    }
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5, 130]  # 130: interrupted (spec §7a)
    assert {str(v) for v in Verdict} == {
        "proceed",
        "stale",
        "already-torn-down",
        "unlanded",
        "live-owner",
        "unsafe",
        "invalid",
        "failed",
        "plan-changed",
    }


def test_plan_targets_for_sole_claimant() -> None:
    d = World().task("a", tasktmp="/tmp/fm-a").decide("a")
    endpoint, processes, hooks, pool, auth, attribution, record = d.plan
    assert hooks.target == S1 and ".claude/settings.local.json" in hooks.detail
    assert "grok-turnend-token" in auth.target
    assert attribution.target == "data/cost-attribution.tsv"
    assert endpoint.target == "=firstmate:=fm-a"
    assert processes.target.startswith(S1)
    assert "/tmp/fm-a" in processes.target
    assert pool.target == S1
    assert record.target == f"{FM_HOME}/state/a.meta"
    assert "/tmp/fm-a" in record.detail
    assert all(s.outcome == "planned" for s in d.plan)
    ends = d.action(EndProcesses)
    assert ends is not None and ends.slot == S1


def test_pool_return_unleased_slot_is_unconditional() -> None:
    d = World().task("a").decide("a")
    assert d.pool_return is not None
    assert d.pool_return.argv == ["return", S1]


def test_pool_return_is_forced_only_under_force_or_for_scratch_slots() -> None:
    """Without --force the return is unforced (the pool declines a tree holding changes, so
    late work is preserved); --force, a scout's scratch slot and a secondmate's home force."""
    assert World().task("a").decide("a", force=True).pool_return == PoolReturn(
        S1, None, None, force=True
    )
    scout = World().task("a", kind="scout").decide("a")
    assert scout.pool_return is not None and scout.pool_return.argv[:2] == ["return", "--force"]


def test_pool_return_is_conditional_on_lease_id_and_holder() -> None:
    d = World().task("a", lease_id="L1").lease(holder="fm-a", lease_id="L1").decide("a")
    assert d.pool_return is not None
    assert d.pool_return.argv == [
        "return",
        "--if-lease-id",
        "L1",
        "--if-lease-holder",
        "fm-a",
        S1,
    ]


def test_pool_return_of_a_lease_without_id_is_conditional_on_holder() -> None:
    d = World().task("a").lease(holder="a").decide("a")
    assert d.pool_return is not None
    assert d.pool_return.argv == ["return", "--if-lease-holder", "a", S1]


def test_pool_return_uses_the_exact_stored_path() -> None:
    stored = "/alias/proj-abc/1/proj/"
    d = World().task("a", lease_id="L1").lease(lease_id="L1", holder="a", stored=stored).decide("a")
    assert d.pool_return is not None
    assert d.pool_return.path == stored
    assert d.pool_return.argv[-1] == stored
    assert [s.target for s in d.plan if s.step == "pool"] == [stored]


def test_recorded_lease_already_returned_is_not_returned_again() -> None:
    """The record names a lease, the pool shows the slot unleased: a previous run returned it
    (docs/pool.md §3: "is not leased" after our own success means already returned)."""
    d = World().task("a", lease_id="L1").lease(leased=False).decide("a")
    assert d.verdict == Verdict.PROCEED
    assert d.pool_return is None
    assert "pool" not in steps(d)
    assert steps(d)[0] == "endpoint"
    assert steps(d)[-1] == "record"


def test_discarded_lease_owner_return_is_conditional_on_that_lease() -> None:
    d = (
        World()
        .task("a")
        .lease(holder="ci-bot", lease_id="L9")
        .decide("a", force=True, discard="lease:ci-bot")
    )
    assert d.discarded_owner == "lease:ci-bot"
    assert d.pool_return is not None
    assert d.pool_return.argv == [
        "return",
        "--force",
        "--if-lease-id",
        "L9",
        "--if-lease-holder",
        "ci-bot",
        S1,
    ]


def test_discarded_record_owner_is_noted_and_its_window_is_not_planned() -> None:
    d = World().task("a").task("b", endpoint="alive").decide("a", force=True, discard="b")
    assert d.verdict == Verdict.PROCEED
    assert d.discarded_owner == "b"
    assert "returned slot" in text(d)
    assert [s.target for s in d.plan if s.step == "endpoint"] == ["=firstmate:=fm-a"]
    assert "fm-b" not in " ".join(s.target for s in d.plan)


def test_live_owner_hint_names_how_to_proceed() -> None:
    d = World().task("a").task("b", endpoint="alive").decide("a")
    assert any("fm teardown a --force --discard-live-owner=b" in h for h in d.hints)


def test_live_owner_report_kinds() -> None:
    d = (
        World()
        .task("a")
        .task("b", endpoint="alive")
        .task("c")
        .agent(7)
        .lease(holder="x")
        .decide("a")
    )
    kinds = {o.id: (o.kind, str(o.endpoint), o.live) for o in d.owners}
    assert kinds == {
        "b": ("record", "alive", True),
        "c": ("record", "dead", False),
        "lease:x": ("lease", "alive", True),
        "pid:7": ("process", "alive", True),
    }
    assert all(o.slot == S1 for o in d.owners)


def test_stale_warning_names_the_current_owner() -> None:
    d = World().task("a", mtime_ns=1).task("b", mtime_ns=3).task("c", mtime_ns=2).decide("a")
    assert d.verdict == Verdict.STALE
    assert any("belongs to b" in warning_text(w) for w in d.warnings), d.warnings
    assert d.pool_return is None
    assert d.action(EndProcesses) is None
    assert d.action(SaveWork) is None


def test_proceed_with_dead_others_warns_their_records_name_a_returned_slot() -> None:
    d = World().task("a", mtime_ns=2).task("b", mtime_ns=1).decide("a")
    assert d.verdict == Verdict.PROCEED
    assert any("b" in warning_text(w) and "returned slot" in warning_text(w) for w in d.warnings)


def test_unlanded_force_is_saved_and_says_so() -> None:
    d = World().task("a").decide("a", force=True, landed=UNLANDED)
    assert d.action(SaveWork) == SaveWork("a")
    assert any("refs/fm/discarded/a/" in s.target for s in d.plan)
    assert any("--force" in warning_text(w) for w in d.warnings)


NESTED = Landed(
    False,
    OwnWork(1, ("vendor/lib/",), 1),
    ("vendor/lib/",),
    untracked=("vendor/lib/",),
    proof=None,
    nested=(NestedRepo("vendor/lib/", 1, ("vendor/lib/fix.py",)),),
)


def test_force_refuses_while_repositories_are_nested_in_the_slot() -> None:
    """Its save would keep a nested repository as a commit id only: nothing to restore."""
    d = World().task("a").decide("a", force=True, landed=NESTED)
    assert (d.verdict, d.exit_code) == (Verdict.UNSAFE, 5)
    assert d.action(SaveWork) is None and d.plan == ()
    said = text(d)
    assert messages.said_text(d.headline) == (
        "a's slot holds nested repositories (vendor/lib/): --force cannot save them with "
        "their history"
    )
    assert (
        "nested repository: vendor/lib/ (uncommitted changes in 1 path (vendor/lib/fix.py))" in said
    )
    refused = World().task("a").decide("a", landed=NESTED)
    assert refused.verdict == Verdict.UNLANDED
    assert "nested repository: vendor/lib/" in text(refused)
    assert not any("saved first" in h for h in refused.hints), "no save is promised"
    assert any("--force cannot save the nested repositories" in h for h in refused.hints)


def test_a_dry_run_says_when_its_verdict_rests_on_refs_it_did_not_fetch() -> None:
    fleet, obs = World().task("a").build()
    landed = Landed(unfetched=("origin/main",))
    note = (
        "not fetched: a dry run uses origin/main as last fetched; the real run fetches first "
        "(with prune) and may decide otherwise"
    )
    dry = decide("a", fleet, obs, Flags.given(dry_run=True), landed)
    assert note in text(dry)
    real = decide("a", fleet, obs, Flags(), landed)
    assert "not fetched" not in text(real)
    unlanded = Landed(
        False,
        OwnWork(0, (), commits=1),
        (),
        ("abc1234 wip",),
        proof=None,
        unfetched=("origin/main",),
    )
    assert note in text(decide("a", fleet, obs, Flags.given(dry_run=True), unlanded))


def test_the_proof_of_landing_stays_a_value_until_report_words_it() -> None:
    """The judge's proof goes into the decision as it is (which rung, against what); the
    words of the rung are report/'s alone."""
    proven = Landed(proof=ON_MAIN)
    d = World().task("a").decide("a", landed=proven)
    assert d.verdict == Verdict.PROCEED
    own = [r for r in d.reasons if isinstance(r, ProofLine)]
    assert own == [ProofLine("own work: ", ON_MAIN)]
    assert d.headline == ProofLine("the slot is a's and its work is landed (", ON_MAIN, ")")
    words = "reachable: HEAD is in origin/main"
    assert f"own work: {words}" in text(d).splitlines()
    assert messages.said_text(d.headline) == f"the slot is a's and its work is landed ({words})"


def test_unfinished_without_landed_facts() -> None:
    """Rule 5 is asked for only once rules 1-4 let TASK go on (git runs on TASK's slot only)."""
    fleet, obs = World().task("a").build()
    assert decide("a", fleet, obs, Flags()) == Unfinished("a")
    d = World().task("a").task("b", endpoint="alive").decide("a", landed=None)
    assert d.verdict == Verdict.LIVE_OWNER
    d = World().task("a", mtime_ns=1).task("b", mtime_ns=2).decide("a", landed=None)
    assert d.verdict == Verdict.STALE


def test_decide_is_deterministic() -> None:
    world = World().task("a").task("b", endpoint="alive").lease(holder="x").agent(9)
    fleet, obs = world.build()
    flags = Flags.given(force=True, discard_live_owner="b")
    assert decide("a", fleet, obs, flags, LANDED) == decide("a", fleet, obs, flags, LANDED)


# -- through observe.assemble: real directories and a real pool state file --------------------


def pid(n: int) -> int:
    """A fake pid above any real pid_max, so it never is the test run's own (protected) pid."""
    return 5_000_000 + n


class RealWorld:
    """Records in a real state dir, slots as real dirs `<pool>/<N>/proj` with the pool's
    `treehouse-state.json`; tmux panes and processes are fed in as plain values."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self.state = self.root / "fleet" / "state"
        self.state.mkdir(parents=True)
        self.project = self.root / "project"
        self.project.mkdir()
        self.pool = self.root / "pool" / "proj-abc"
        self.entries: list[dict[str, Any]] = []
        self.panes: list[Pane] = []
        self.procs: dict[int, Proc] = {}
        self.children: dict[int, list[int]] = {}
        self.inventory_status = InventoryStatus.OK

    def slot(self, n: int, *, create: bool = True, **lease: object) -> Path:
        path = self.pool / str(n) / "proj"
        if create:
            self.worktree(path, n)
        self.entries.append({"name": str(n), "path": str(path), **lease})
        self.write_pool()
        return path

    def worktree(self, path: Path, n: int) -> None:
        """A linked worktree's git layout, as `git worktree add` leaves it (files only)."""
        path.mkdir(parents=True, exist_ok=True)
        gitdir = self.project / ".git" / "worktrees" / f"proj{n}"
        gitdir.mkdir(parents=True, exist_ok=True)
        (gitdir / "gitdir").write_text(f"{path}/.git\n")
        (path / ".git").write_text(f"gitdir: {gitdir}\n")

    def write_pool(self, text: str | None = None) -> None:
        self.pool.mkdir(parents=True, exist_ok=True)
        (self.pool / "treehouse-state.json").write_text(
            text if text is not None else json.dumps({"worktrees": self.entries})
        )

    def record(self, task_id: str, slot: Path | str, *extra: str) -> None:
        lines = [f"window=firstmate:fm-{task_id}", f"worktree={slot}", f"project={self.project}"]
        (self.state / f"{task_id}.meta").write_text("\n".join([*lines, *extra]) + "\n")

    def proc(self, pid: int, name: str, cwd: Path | str, parent: int = 1) -> None:
        self.procs[pid] = Proc(pid, parent, name, name, str(cwd), ProcStat(float(pid)))
        self.children.setdefault(parent, []).append(pid)

    def pane(self, task_id: str, pane_pid: int, cwd: Path, *programs: tuple[int, str]) -> None:
        """Task's window with a shell at `pane_pid` running `programs` (pid, name)."""
        n = len(self.panes)
        self.panes.append(Pane("firstmate", f"fm-{task_id}", f"@{n}", f"%{n}", pane_pid, False))
        self.proc(pane_pid, "bash", cwd)
        for pid, name in programs:
            self.proc(pid, name, cwd, parent=pane_pid)

    def settings(self, treehouse_bin: str | None = STANDIN) -> Settings:
        fm_home = self.root / "fleet"
        return Settings(
            fm_home=fm_home,
            state_dir=self.state,
            data_dir=fm_home / "data",
            home=str(self.root / "home"),
            tmux_socket_path=None,
            tmux_socket_name=None,
            treehouse_bin=treehouse_bin,
        )

    def decide(self, task: str, **kw: object) -> Decision:
        fleet = load_fleet(self.state)
        inventory = TmuxInventory(self.inventory_status, tuple(self.panes))
        table = ProcessTable(
            dict(self.procs), children={k: tuple(v) for k, v in self.children.items()}
        )
        obs = ready(assemble(self.settings(), fleet, inventory, table), fleet, [task])
        landed: Any = kw.pop("landed", LANDED)
        with no_io():  # observe worked out everything decide reads: it reads values only
            d = decide(task, fleet, obs, Flags.given(**kw), landed)  # type: ignore[arg-type]
        assert isinstance(d, Decision), d
        return d


@contextmanager
def no_io() -> Iterator[None]:
    """Any stat, open, directory listing or subprocess inside fails the test."""

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError(f"I/O while deciding: {args!r}")

    with ExitStack() as stack:
        for target, name in [
            (os, "stat"),
            (os, "lstat"),
            (os, "open"),
            (os, "scandir"),
            (os, "listdir"),
            (os, "readlink"),
            (builtins, "open"),
            (subprocess, "Popen"),
        ]:
            stack.enter_context(mock.patch.object(target, name, refuse))
        yield


@pytest.fixture
def real(tmp_path: Path) -> RealWorld:
    return RealWorld(tmp_path)


def test_assembled_sole_claimant_with_own_agent_proceeds(real: RealWorld) -> None:
    s1 = real.slot(1, leased=True, lease_id="L1", lease_holder="a")
    real.record("a", s1, "treehouse_lease=L1")
    real.pane("a", pid(100), s1, (pid(101), "claude"))
    d = real.decide("a")
    assert (d.verdict, steps(d), d.endpoint) == (Verdict.PROCEED, FULL, EndpointState.ALIVE)
    assert d.pool_return is not None
    assert d.pool_return.argv == [
        "return",
        "--if-lease-id",
        "L1",
        "--if-lease-holder",
        "a",
        str(s1),
    ]


def test_assembled_other_live_record_through_a_symlinked_alias(real: RealWorld) -> None:
    s1 = real.slot(1)
    alias = real.root / "alias"
    alias.symlink_to(real.pool)
    real.record("a", s1)
    real.record("b", f"{alias}/1/proj/")
    real.pane("b", pid(200), s1, (pid(201), "codex"))
    d = real.decide("a")
    assert d.verdict == Verdict.LIVE_OWNER
    assert live_owners(d) == ["b"]
    assert d.plan == ()


def test_assembled_pool_return_uses_the_stored_alias_path(real: RealWorld) -> None:
    s1 = real.pool / "1" / "proj"
    real.worktree(s1, 1)
    alias = real.root / "alias"
    alias.symlink_to(real.pool)
    stored = f"{alias}/1/proj"
    real.entries.append({"name": "1", "path": stored, "leased": True, "lease_holder": "a"})
    real.write_pool()
    real.record("a", s1)
    d = real.decide("a")
    assert d.verdict == Verdict.PROCEED
    assert d.pool_return is not None
    assert d.pool_return.argv[-1] == stored


def test_assembled_unattributed_agent_with_other_claimant(real: RealWorld) -> None:
    s1 = real.slot(1)
    real.record("a", s1, "spawn_gen=s200.1.1")
    real.record("b", s1, "spawn_gen=s100.1.1")
    real.pane("b", pid(200), s1)  # b's pane: only a shell, so b is dead
    real.proc(pid(300), "claude", s1 / "sub")  # an orphaned agent, in nobody's pane tree
    d = real.decide("a")
    assert d.verdict == Verdict.LIVE_OWNER
    assert live_owners(d) == [f"pid:{pid(300)}"]


def test_assembled_unattributed_agent_sole_claimant_is_a_leftover(real: RealWorld) -> None:
    s1 = real.slot(1)
    real.record("a", s1)
    real.proc(pid(300), "claude", s1)
    d = real.decide("a")
    assert (d.verdict, steps(d)) == (Verdict.PROCEED, FULL)
    assert f"claude ({pid(300)})" in d.plan[1].detail


def test_assembled_agent_in_sibling_slot_with_prefix_name_is_not_ours(real: RealWorld) -> None:
    s1 = real.slot(1)
    s10 = real.slot(10)
    real.record("a", s1, "spawn_gen=s200.1.1")
    real.record("b", s1, "spawn_gen=s100.1.1")
    real.proc(pid(300), "claude", s10)
    d = real.decide("a")
    assert (d.verdict, steps(d)) == (Verdict.PROCEED, FULL)


def test_assembled_stale_slot(real: RealWorld) -> None:
    s1 = real.slot(1)
    real.record("a", s1, "started_at=2026-01-01T00:00:00Z")
    real.record("b", s1, "started_at=2026-01-02T00:00:00Z")
    d = real.decide("a")
    assert (d.verdict, steps(d)) == (Verdict.STALE, STALE)


@pytest.mark.parametrize(
    "pool_text",
    ["{not json", "", '{"worktrees": [{"name": "1"}]}', '{"worktrees": [{"path": "rel/1"}]}'],
)
def test_assembled_corrupt_pool_state_is_unsafe(real: RealWorld, pool_text: str) -> None:
    s1 = real.slot(1)
    real.write_pool(pool_text)
    real.record("a", s1)
    d = real.decide("a")
    assert (d.verdict, d.plan) == (Verdict.UNSAFE, ())


def test_assembled_slot_not_in_pool_state_is_unsafe(real: RealWorld) -> None:
    s1 = real.slot(1)
    s2 = real.pool / "2" / "proj"
    s2.mkdir(parents=True)
    real.record("a", s2)
    assert s1.exists()
    d = real.decide("a")
    assert (d.verdict, d.plan) == (Verdict.UNSAFE, ())


def test_assembled_slot_without_pool_state_file_is_unsafe(real: RealWorld) -> None:
    s1 = real.root / "elsewhere" / "1" / "proj"
    s1.mkdir(parents=True)
    real.record("a", s1)
    d = real.decide("a")
    assert (d.verdict, d.plan) == (Verdict.UNSAFE, ())


def test_assembled_missing_slot_dir_cleans_endpoint_and_record(real: RealWorld) -> None:
    s1 = real.slot(1, create=False)
    real.record("a", s1)
    real.pane("a", pid(100), real.root)
    d = real.decide("a")
    assert (d.verdict, steps(d)) == (Verdict.PROCEED, STALE)
    assert d.pool_return is None


def test_assembled_no_tmux_server_means_missing_endpoints(real: RealWorld) -> None:
    s1 = real.slot(1)
    real.record("a", s1)
    real.record("b", s1)
    real.inventory_status = InventoryStatus.NO_SERVER
    d = real.decide("a")
    assert d.verdict == Verdict.STALE  # b is not live, and b was written last or as a tie


def test_assembled_unreadable_tmux_refuses_before_anything(real: RealWorld) -> None:
    """An unreadable inventory: TASK's own window cannot be confirmed gone, and every other
    claimant would look live; the decision refuses (5) on the inventory itself (spec §14.3)."""
    s1 = real.slot(1)
    real.record("a", s1)
    real.record("b", s1)
    real.inventory_status = InventoryStatus.ERROR
    d = real.decide("a")
    assert (d.verdict, d.plan) == (Verdict.UNSAFE, ())
    assert "FM_TMUX_SOCKET" in d.hints[0]


def test_assembled_invalid_other_claiming_the_slot_is_unsafe(real: RealWorld) -> None:
    s1 = real.slot(1)
    real.record("a", s1)
    (real.state / "b.meta").write_text(f"window=firstmate:fm-zzz\nworktree={s1}/\n")
    d = real.decide("a")
    assert (d.verdict, d.plan) == (Verdict.UNSAFE, ())
    assert "b" in messages.said_text(d.reasons[0])


def test_assembled_other_record_with_unsupported_backend_is_a_live_owner(
    real: RealWorld,
) -> None:
    s1 = real.slot(1)
    real.record("a", s1)
    real.record("b", s1, "backend=herdr", "endpoint_task_id=b")
    d = real.decide("a")
    assert d.verdict == Verdict.LIVE_OWNER
    assert [(o.id, str(o.endpoint), o.live) for o in d.owners] == [("b", "unreadable", True)]
    d = real.decide("a", force=True, discard_live_owner="b")
    assert d.verdict == Verdict.PROCEED


def test_assembled_other_record_with_unsupported_backend_elsewhere_is_no_owner(
    real: RealWorld,
) -> None:
    s1 = real.slot(1)
    s2 = real.slot(2)
    real.record("a", s1)
    real.record("b", s2, "backend=herdr")
    d = real.decide("a")
    assert (d.verdict, steps(d)) == (Verdict.PROCEED, FULL)


def test_the_processes_step_lists_every_target_and_what_it_spares() -> None:
    """spec §7a: a dry run lists every process the processes step would signal, by pid and name,
    and never lists a tmux process or another task's endpoint among them."""
    w = World().task("a", spawn_gen="s200.1.1").task("b", spawn_gen="s100.1.1")
    for pid in range(50, 58):
        w.worker(pid)
    d = w.shell(41, of="b").agent(60, of="a").decide("a")
    [detail] = [s.detail for s in d.plan if s.step == "processes"]
    targets, spared = detail.split("; never signalled: ")
    assert all(f"sleep ({pid})" in targets for pid in range(50, 58)) and "claude (60)" in targets
    assert "(41)" not in targets and spared == "bash (41, b's endpoint)"


def test_discarding_a_live_task_saves_its_work_under_its_own_name() -> None:
    """spec §7a: what is saved before the return is the discarded owner's work, named for it."""
    w = World().task("a").task("b", endpoint="alive")
    d = w.decide("a", force=True, discard="b", landed=UNLANDED)
    assert (d.verdict, d.action(SaveWork)) == (Verdict.PROCEED, SaveWork("b"))
    [save] = [s for s in d.plan if s.step == "save-discarded"]
    assert save.target == "refs/fm/discarded/b/<UTC timestamp>"
    d = World().task("a").decide("a", force=True, landed=UNLANDED)
    assert (d.action(SaveWork), [s.target for s in d.plan if s.step == "save-discarded"]) == (
        SaveWork("a"),
        ["refs/fm/discarded/a/<UTC timestamp>"],
    )


def test_the_branch_seen_when_deciding_is_deleted_after_the_return() -> None:
    """spec §10: TASK's branch is in the plan, after the pool, with the commit seen; never when a
    live owner is discarded (the slot's branch is then that owner's)."""
    facts = Landed(head="c" * 40, branch="fm/a", default_branch="main")
    d = World().task("a").decide("a", landed=facts)
    assert steps(d) == ["endpoint", "processes", "hooks", "pool", "branch", *RECORD]
    branch = d.action(BranchDelete)
    assert branch is not None and (branch.name, branch.commit) == ("fm/a", "c" * 40)
    d = (
        World()
        .task("a")
        .task("b", endpoint="alive")
        .decide("a", force=True, discard="b", landed=facts)
    )
    assert d.verdict == Verdict.PROCEED and d.action(BranchDelete) is None


def test_the_dry_run_names_a_shell_no_task_holds_as_a_shell_in_a_terminal() -> None:
    """A shell on no terminal and in no pane (a script's) cd'd into the slot is ended with the
    slot's processes: the plan says which process that is before it happens; a task's own
    shell is not named so. (On a terminal it is a person's: see the next test.)"""
    world = World().task("a").worker(71).shell(72, of="a")
    world.others.setdefault(S1, []).append(Proc(73, 1, "zsh", "zsh", S1 + "/src", ProcStat(3.0)))
    d = world.decide("a")
    processes = next(s for s in d.plan if s.step == "processes")
    assert "zsh (73, a shell in a terminal, no task's" in processes.detail, processes.detail
    assert "sleep (71)" in processes.detail
    assert "bash (72, a shell" not in processes.detail


def test_a_terminal_no_task_holds_is_a_live_owner() -> None:
    """spec §15.4: a process on a controlling terminal in no task's endpoint (an operator's
    shell, an ssh login) is a person: a single teardown refuses (4), naming it `pid:<PID>`
    with its terminal; only --force --discard-live-owner=pid:<PID> lifts it."""
    world = World().task("a").worker(71).shell(72, of="a")
    world.others.setdefault(S1, []).append(
        Proc(73, 1, "zsh", "zsh", S1 + "/src", ProcStat(3.0, tty="/dev/pts/9"))
    )
    world.others[S1].append(
        Proc(74, 73, "vim", "vim", S1 + "/src", ProcStat(4.0, tty="/dev/pts/9"))
    )
    d = world.decide("a")
    assert d.verdict == Verdict.LIVE_OWNER
    [owner] = [o for o in d.owners if o.live]
    assert (owner.id, owner.kind) == ("pid:73", "terminal")
    assert "zsh (73), vim (74)" in owner.why and "/dev/pts/9" in owner.why
    assert not world.decide("a", force=True).plan  # --force alone does not lift it
    d = world.decide("a", force=True, discard="pid:73")
    assert d.verdict == Verdict.PROCEED
    processes = next(s for s in d.plan if s.step == "processes")
    assert "zsh (73" in processes.detail and "vim (74" in processes.detail


def test_records_sharing_one_slot_are_decided_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """k records on one slot: what they share is worked out once, no launch order is compared
    pair by pair, and no reason names every other record (the audit would grow as k^2)."""
    from fm_teardown.decide import ownership

    k = 300
    world = World()
    for i in range(k):
        world.task(
            f"r{i:03d}", spawn_gen=f"s{1000 + i}.1.a", endpoint="alive" if i == 7 else "dead"
        )
    fleet, obs = world.build()
    groups: list[object] = []
    compared: list[object] = []
    real_group, real_newer = ownership.SlotGroup.__init__, ownership.newer_launch

    def counting_group(self: ownership.SlotGroup, *a: Any) -> None:
        groups.append(self)
        real_group(self, *a)

    def counting_newer(*a: Any) -> Any:
        compared.append(a)
        return real_newer(*a)

    monkeypatch.setattr(ownership.SlotGroup, "__init__", counting_group)
    monkeypatch.setattr(ownership, "newer_launch", counting_newer)
    decisions = {t: decide(t, fleet, obs, Flags.given(dry_run=True), LANDED) for t in fleet.records}
    assert len(groups) == 1 and compared == []
    # The one live task: the others are dead, and the newest launch (r299) holds the slot.
    assert decisions["r007"].verdict == Verdict.STALE and "belongs to r299" in text(
        decisions["r007"]
    )
    for t, d in decisions.items():
        assert [o.id for o in d.owners] == [o for o in sorted(fleet.records) if o != t]
        if t != "r007":
            assert d.verdict == Verdict.LIVE_OWNER and live_owners(d) == ["r007"]
    # Without the live one, every other record is stale and its reasons stay short.
    world.states["r007"] = EndpointState.DEAD
    fleet, obs = world.build()
    d = decide("r000", fleet, obs, Flags.given(dry_run=True), LANDED)
    assert d.verdict == Verdict.STALE and "belongs to r299" in text(d)
    assert f"and {k - 1 - 10} more" in text(d) and "r250" not in text(d)


def test_the_rules_are_one_table_of_functions_of_the_case_in_rule_order() -> None:
    """A maintainer finds each rule by name in `decide.RULES`, in the order they apply."""
    import inspect

    from fm_teardown.decide import rules as decide_module

    numbers = [n for n, _ in decide_module.RULES]
    assert numbers == sorted(numbers) and set(numbers) == {1, 2, 3, 4, 5}
    names = [rule.__name__ for _, rule in decide_module.RULES]
    for name in ("live_owner", "stale_slot", "never_signalled_in_slot", "unlanded"):
        assert name in names
    for _, rule in decide_module.RULES:
        assert list(inspect.signature(rule).parameters) == ["c"], rule.__name__
