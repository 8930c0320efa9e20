"""The decision: verdict, reasons, owners and the ordered plan (spec §5, §6, §7a). Pure.

`decide` reads only its arguments: no I/O, no clock, no randomness. Each rule is a function
`(Case) -> Ruling` below, listed in order in `RULES` (rules 1 to 5 of docs/spec.md §5),
which `decide` walks. A rule says nothing (None), or one `Ruling`:

- `Refusal`: the decision ends with that verdict and an empty plan;
- `Stale`: the slot is someone else's now; the decision ends cleaning only TASK's own window
  and record;
- `GoOn`: the decision goes on, with the reasons and warnings the rule adds;
- `NeedsLanded`: rule 5 is reached without TASK's landed facts: `decide` returns `Unfinished`,
  which nothing can act on; `decide_all` gathers the facts (git runs only now, on TASK's own
  slot) and decides again. The one-task run and the audit both go through it.

What several rules read (the owners, the discarded live owner, whether the slot is returned)
is worked out once, on first use, by `Case`.
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from typing import TypeVar, overload

from fm_teardown.decide.census import Kind, doubts, kind_of, placement, where_of
from fm_teardown.decide.ownership import (
    claimed_by_other,
    current_owner,
    invalid_claimants,
    lease_is_tasks,
    live_of,
    other_claimants,
    owners_of,
)
from fm_teardown.decide.sparing import (
    Blocker,
    NeverSignalled,
    blocking_the_return,
    never_signalled,
    to_signal,
)
from fm_teardown.model.errors import Verdict
from fm_teardown.model.leases import lease_task, unconditional_only
from fm_teardown.model.messages import belongs_now, shell_where
from fm_teardown.model.paths import is_ancestor_or_same
from fm_teardown.model.plan import (
    BranchDelete,
    Decision,
    Flags,
    LandedLike,
    Owner,
    OwnerKind,
    PoolReturn,
    Step,
    StepName,
)
from fm_teardown.model.records import Fleet, Record
from fm_teardown.model.scaffold import SCAFFOLD_PATHS
from fm_teardown.model.values import value
from fm_teardown.model.world import (
    Endpoint,
    EndpointState,
    InventoryStatus,
    Observation,
    PoolEntry,
    Proc,
    SlotFacts,
    Spared,
)

__all__ = [
    "RULES",
    "SAVED_KINDS",
    "Case",
    "GoOn",
    "NeedsLanded",
    "Refusal",
    "Ruling",
    "Stale",
    "Unfinished",
    "decide",
    "decide_all",
    "decide_with_landed",
    "discarded_record_kept",
    "foreign_git_dir",
    "foreign_worktree_lock",
    "inside_own_window",
    "invalid_claimant",
    "live_children",
    "live_owner",
    "never_signalled_in_slot",
    "own_endpoint_alive",
    "pool_not_ready",
    "protected_root",
    "slot_not_returned",
    "stale_slot",
    "stray_records",
    "unlanded",
    "unreadable_claim",
    "unreadable_inventory",
    "unsafe_tasktmp",
    "unsupported_duty",
    "unsure_census",
    "unwritable_state_dir",
]


@value
class Refusal:
    """The decision ends here: this verdict, an empty plan."""

    verdict: Verdict
    reasons: tuple[str, ...]
    hints: tuple[str, ...]
    headline: str  # the one reason that matters


@value
class GoOn:
    """The decision goes on, and says why (reasons) or what to mind (warnings)."""

    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@value
class Stale:
    """The slot is someone else's now: the decision ends with only TASK's own endpoint and
    record cleaned (rule 4)."""

    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    owner: str  # whose slot it is now, as the headline names it


@value
class NeedsLanded:
    """Rule 5 is reached and TASK's landed facts were not given."""


# What a rule says: nothing (None: the decision goes on), or one of the above.
Ruling = Refusal | GoOn | Stale | NeedsLanded | None


@value
class Unfinished:
    """Rules 1-4 let TASK go on and rule 5 needs TASK's landed facts. The caller gathers them
    (only now, so that git never runs on a slot that is somebody else's) and decides again
    (`decide_all`). Not a Decision: nothing can act on it."""

    task: str


def _refusal(verdict: Verdict, lines: list[str], hints: list[str], headline: str) -> Refusal:
    return Refusal(verdict, tuple(lines), tuple(hints), headline)


@value
class Case:
    """What every rule reads: TASK, its record, slot and endpoint, the world observed, and
    (rule 5) TASK's landed facts when they were gathered. The properties below are worked out
    from these on first use (pure, each once per decision)."""

    task: str
    record: Record
    fleet: Fleet
    obs: Observation
    flags: Flags
    slot: str
    endpoint: Endpoint
    facts: SlotFacts
    landed: LandedLike | None = None

    @staticmethod
    def of(
        task: str, fleet: Fleet, obs: Observation, flags: Flags, landed: LandedLike | None = None
    ) -> Case:
        slot = obs.slot_of[task]
        return Case(
            task,
            fleet.records[task],
            fleet,
            obs,
            flags,
            slot,
            obs.endpoints[task],
            obs.slots[slot],
            landed,
        )

    @cached_property
    def owners(self) -> Sequence[Owner]:
        return owners_of(self.task, self.fleet, self.obs)

    @cached_property
    def discarded(self) -> str | None:
        """The one live owner that --force --discard-live-owner names, when it does."""
        live = live_of(self.owners)
        wanted = self.flags.discard_live_owner
        if wanted is not None and self.flags.force and len(live) == 1 and live[0].id == wanted:
            return wanted
        return None

    @cached_property
    def spared(self) -> NeverSignalled:
        return never_signalled(self.obs, self.task, self.discarded)

    @cached_property
    def not_returned(self) -> str | None:
        """Why the plan neither ends the slot's processes nor returns it (None: it does)."""
        if not self.facts.exists:
            return f"slot directory {self.slot} no longer exists: processes and pool steps skipped"
        entry = self.facts.pool.entry
        assert entry is not None  # pool_not_ready refused otherwise
        recorded_lease = self.record.lease_id is not None or self.record.lease_holder is not None
        if not entry.leased and recorded_lease and self.discarded is None:
            return (
                "the pool shows no lease on the slot although the record names one: it was "
                "already returned; processes and pool steps skipped"
            )
        return None

    @property
    def returns_slot(self) -> bool:
        return self.not_returned is None

    @property
    def work_to_check(self) -> bool:
        """Rule 5 applies: a slot that no longer exists has nothing left to lose (a scout's
        or secondmate's work is not in its slot)."""
        return self.record.kind in ("scout", "secondmate") or self.facts.exists

    @property
    def work(self) -> LandedLike | None:
        """TASK's landed facts, when rule 5 applies (None: it does not)."""
        return self.landed if self.work_to_check else None

    @property
    def force_saves(self) -> bool:
        """Whether a forced plan saves the slot's work before discarding it: a ship's slot,
        and a secondmate's home (its own work, its task records with it), when it exists. A
        scout's slot is not saved: its work is its report. A hint promises a save only then."""
        return self.record.kind in SAVED_KINDS and self.facts.exists

    @property
    def saves_work(self) -> bool:
        """--force discards unlanded work: saved first when `force_saves`."""
        work = self.work
        return work is not None and not work.landed and self.flags.force and self.force_saves


Rule = Callable[[Case], Ruling]

# The kinds whose slot `--force` saves before discarding it (`Case.force_saves`).
SAVED_KINDS = ("ship", "secondmate")


@overload
def decide(
    task: str, fleet: Fleet, obs: Observation, flags: Flags, landed: LandedLike
) -> Decision: ...
@overload
def decide(
    task: str, fleet: Fleet, obs: Observation, flags: Flags, landed: None = None
) -> Decision | Unfinished: ...
def decide(
    task: str,
    fleet: Fleet,
    obs: Observation,
    flags: Flags,
    landed: LandedLike | None = None,
) -> Decision | Unfinished:
    """Walk `RULES` in order: the first refusal (or stale slot) ends the decision; a rule
    that needs TASK's landed facts when they were not given ends it `Unfinished`; past the
    last rule, TASK's slot is TASK's to tear down and the plan is built."""
    c = Case.of(task, fleet, obs, flags, landed)
    reasons: list[str] = []
    warnings: list[str] = []
    for number, rule in RULES:
        ruling = rule(c)
        if isinstance(ruling, Refusal):
            return _refuse(c, ruling, c.owners if number >= 3 else ())
        if isinstance(ruling, NeedsLanded):
            return Unfinished(task)
        if isinstance(ruling, Stale):
            return _stale(c, [*reasons, *ruling.reasons], [*warnings, *ruling.warnings], ruling)
        if isinstance(ruling, GoOn):
            reasons += ruling.reasons
            warnings += ruling.warnings
    return _proceed(c, reasons, warnings)


# Rule 5's facts, of whatever richer type the caller gathers (the audit's `LandedFacts`).
L = TypeVar("L", bound=LandedLike)


def decide_all(
    tasks: Iterable[str],
    fleet: Fleet,
    obs: Observation,
    flags: Flags,
    gather: Callable[[Sequence[Record]], Mapping[str, L]],
) -> tuple[dict[str, Decision], Mapping[str, L]]:
    """The two-pass protocol for rule 5, once: decide every task; for those left
    `Unfinished`, gather the landed facts in one call (`gather`: the records that reached
    rule 5 -> their facts by task id) and decide them again. The decisions, and the facts
    gathered."""
    first = {task: decide(task, fleet, obs, flags) for task in tasks}
    pending = [fleet.records[t] for t, d in first.items() if isinstance(d, Unfinished)]
    facts: Mapping[str, L] = gather(pending) if pending else {}
    decisions = {
        task: d if isinstance(d, Decision) else decide(task, fleet, obs, flags, facts[task])
        for task, d in first.items()
    }
    return decisions, facts


def decide_with_landed(
    task: str,
    fleet: Fleet,
    obs: Observation,
    flags: Flags,
    gather: Callable[[Sequence[Record]], Mapping[str, L]],
) -> tuple[Decision, L | None]:
    """`decide_all` for one task: its decision, and its landed facts if rule 5 was reached."""
    decisions, facts = decide_all([task], fleet, obs, flags, gather)
    return decisions[task], facts.get(task)


# -- the rules, in contract order ---------------------------------------------------------------


def stray_records(c: Case) -> GoOn | None:
    """Files in the state dir that look like records but are not (a `.meta` that is not a
    record's): said, never counted as owners."""
    strays = [
        f"{name} in the state dir: {why}; not counted as an owner"
        for name, why in c.fleet.strays
        if name.endswith(".meta")
    ]
    return GoOn(warnings=tuple(strays)) if strays else None


def invalid_claimant(c: Case) -> Refusal | None:
    """Another record that cannot be validated might own this slot: fail closed (spec §3)."""
    blockers = invalid_claimants(c.task, c.fleet, c.obs)
    if not blockers:
        return None
    lines = []
    for b in blockers:
        bad = c.fleet.invalid[b]
        claim = (
            "its slot cannot be told" if c.obs.invalid_slots[b] is None else "it names this slot"
        )
        lines.append(
            f"record {bad.meta_path} of task '{b}' is invalid ({bad.problem}) and {claim}: "
            "it might be a live owner"
        )
    first = c.fleet.invalid[blockers[0]]
    claim = "names this slot" if c.obs.invalid_slots[blockers[0]] else "names no slot fm can tell"
    headline = (
        f"record {os.path.basename(first.meta_path)} is invalid ({first.problem}) and {claim}"
    )
    if len(blockers) > 1:
        headline += f" (and {len(blockers) - 1} more invalid records)"
    return _refusal(
        Verdict.UNSAFE,
        lines,
        [
            "fix that record with its task's owner (it may belong to a live task); an empty or "
            "half-written one: see `fm runbook unsafe` for how to tell it from a live task's"
        ],
        headline,
    )


def unreadable_claim(c: Case) -> Refusal | None:
    """A slot claim that exists but cannot be read or parsed: whose slot it is cannot be told
    (spec §10)."""
    claim = c.facts.claim
    if claim is None or claim.problem is None:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [f"the slot claim {claim.path} {claim.problem}"],
        [
            f"the claim is written by spawn when the pool hands the slot on: look at it "
            f"(ls -l {shlex.quote(claim.path)}; cat {shlex.quote(claim.path)}), fix it only "
            "if you know whose slot it is, then re-run"
        ],
        f"the slot claim {claim.path} {claim.problem}",
    )


def unsafe_tasktmp(c: Case) -> Refusal | None:
    """TASK's tasktmp must be absent or a real directory of ours, never a link (spec §7a)."""
    tmp = c.obs.tasktmp.get(c.task)
    if tmp is None or not tmp.problem:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [tmp.problem],
        [
            f"fm never follows or removes a tasktmp that is not its own directory: look "
            f"at it (ls -ld {shlex.quote(tmp.path)}), remove it if it is not needed, then re-run"
        ],
        tmp.problem,
    )


def unwritable_state_dir(c: Case) -> Refusal | None:
    """The slot lock and the record's removal need the state dir: checked before acting."""
    problem = c.obs.env.state_dir_problem
    if not problem:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [problem],
        ["run fm as the user that owns the state dir"],
        problem,
    )


def unreadable_inventory(c: Case) -> Refusal | None:
    """TASK's own endpoint cannot be confirmed gone when the tmux inventory cannot be read (a
    socket that does not exist, no server on the named socket, tmux too slow): the real run
    could only fail at its endpoint step, so the dry run and the real run both refuse here,
    alike (spec §14.3)."""
    inventory = c.obs.inventory
    if c.record.backend != "tmux" or inventory.status != InventoryStatus.ERROR:
        return None
    error = inventory.error or "unknown error"
    return _refusal(
        Verdict.UNSAFE,
        [f"the tmux inventory could not be read: {error}"],
        [
            f"point fm at the fleet's tmux server: set FM_TMUX_SOCKET (the socket path) or "
            f"FM_TMUX_SOCKET_NAME (as for tmux -L); what fm found: {error}; then re-run",
        ],
        # Not the task's id: in the audit every row says the same, and it is said once.
        f"the tmux inventory could not be read, so the task's own window cannot be confirmed "
        f"gone: {error}",
    )


def unsure_census(c: Case) -> Refusal | None:
    """A process in TASK's slot runs under a tmux server whose panes cannot be listed: whose
    work it is cannot be told (spec §14.1)."""
    found = doubts(c.task, c.obs)
    if not found:
        return None
    return _refusal(
        Verdict.UNSAFE,
        list(found),
        [
            "see what runs there (tmux -S <socket> list-panes -a, ps -o pid,tty,args -p <pid>); "
            "re-run once that server answers, or once the process has left the slot"
        ],
        found[0],
    )


def protected_root(c: Case) -> Refusal | None:
    """The slot is the project checkout, `/`, $HOME, FM_HOME, or an ancestor of one. A
    secondmate as firstmate records it names its home as worktree and project alike: the
    home is its slot, not a checkout of some other project's."""
    project = c.obs.project_of[c.task]
    standard_secondmate = c.record.kind == "secondmate" and project == c.slot
    roots = {
        "the project checkout": None if standard_secondmate else project,
        "/": "/",
        "$HOME": c.obs.env.home,
        "FM_HOME": c.obs.env.fm_home,
    }
    for label, root in roots.items():
        if root is not None and is_ancestor_or_same(c.slot, root):
            what = "is" if c.slot == root else "is an ancestor of"
            return _refusal(
                Verdict.UNSAFE,
                [f"slot {c.slot} {what} {label} ({root})"],
                ["a slot must be a pool worktree; fix the record's worktree="],
                f"the slot {what} {label} ({root}): it is not a pool worktree",
            )
    return None


def inside_own_window(c: Case) -> Refusal | None:
    """Killing the window fm runs in would kill the teardown halfway."""
    if not c.endpoint.pids & c.obs.env.protected:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [f"fm is running inside {c.task}'s own window {c.record.window}"],
        ["run the teardown from another window"],
        f"fm is running inside {c.task}'s own window {c.record.window}",
    )


def live_owner(c: Case) -> Refusal | GoOn | None:
    """Rule 3: another live owner refuses, unless --force --discard-live-owner names it (the
    only live owner): then it is discarded (`Case.discarded`)."""
    live = live_of(c.owners)
    wanted = c.flags.discard_live_owner
    if not live:
        if wanted is not None:
            return GoOn(
                warnings=(
                    f"--discard-live-owner={wanted}: the slot has no live owner; the flag has "
                    "no effect",
                )
            )
        return None
    if c.discarded is not None:
        return GoOn(
            warnings=(
                f"discarding live owner {wanted} as asked (--force --discard-live-owner): its "
                "processes in the slot will be ended and the slot returned",
            )
        )
    names = ", ".join(o.id for o in live)
    lines = [f"slot {c.slot} is owned by another live task: {names}"]
    lines += [f"{o.id} ({o.kind}, endpoint {o.endpoint}): {o.why}" for o in live]
    hints = []
    inventory = c.obs.inventory
    blind = inventory.status == InventoryStatus.ERROR
    if blind:
        # An owner may only look live because fm cannot see the tmux server: fix that first,
        # never discard someone on a view that is known to be blind.
        hints.append(
            f"the tmux inventory could not be read ({inventory.error or 'unknown error'}): "
            "point fm at the fleet's tmux server (FM_TMUX_SOCKET or FM_TMUX_SOCKET_NAME), "
            "then re-run"
        )
    if wanted is not None and not c.flags.force:
        hints.append("--discard-live-owner takes effect only together with --force")
    elif wanted is not None and len(live) > 1:
        hints.append(f"more than one live owner ({names}): one flag cannot discard them all")
    elif wanted is not None:
        hints.append(f"--discard-live-owner={wanted} does not name the live owner ({names})")
    elif c.flags.force:
        hints.append("--force does not lift this: it discards only this task's own work")
    hints.append(f"let {names} finish (or end it), then re-run")
    if len(live) == 1 and not blind:
        saved = (
            f"; its uncommitted work is saved first under refs/fm/discarded/{live[0].id}/<time>"
            if live[0].id in c.fleet.records and c.force_saves
            else "; nothing of it is saved first"
        )
        hints.append(
            f"last resort, destroys {live[0].id}'s live work in this slot (its processes there "
            f"are ended and the tree is reset{saved}): "
            f"fm teardown {c.task} --force --discard-live-owner={live[0].id}"
        )
    return _refusal(Verdict.LIVE_OWNER, lines, hints, _owners_headline(live))


def own_endpoint_alive(c: Case) -> GoOn | None:
    """TASK's own live endpoint is what the teardown ends: it never blocks."""
    if c.endpoint.state != EndpointState.ALIVE:
        return None
    return GoOn(
        reasons=(f"own endpoint is alive ({c.endpoint.detail}); a task's own pane never blocks",)
    )


def stale_slot(c: Case) -> Stale | GoOn | None:
    """Rule 4: other claimants, none live: whose slot is it now? If not TASK's (or it cannot
    be told), the slot is stale: only TASK's own endpoint and record are cleaned."""
    discarded = c.discarded
    others = other_claimants(c.task, c.fleet, c.obs)
    entry = c.facts.pool.entry
    holder = (
        lease_task(entry, c.task, c.fleet)
        if entry is not None and not lease_is_tasks(entry, c.record)
        else None
    )
    if holder is not None and holder not in others:
        others = others.plus(holder)  # a lease held by another task is that task's claim
    claim = claimed_by_other(c.task, c.obs)
    if claim is not None and claim.task is not None and claim.task not in others:
        others = others.plus(claim.task)  # so is a slot claim naming another task (spec §10)
    stale_others = others if discarded is None else [o for o in others if o != discarded]
    if not stale_others or discarded is not None:
        if not others and not any(o.live for o in c.owners):
            return GoOn(reasons=(f"{c.task} is the only claimant of slot {c.slot}",))
        return None
    cur = current_owner(c.task, c.fleet, c.obs, stale_others)
    names = _listed(stale_others)
    claim_s = "claims" if len(stale_others) == 1 else "claim"
    if cur.is_task:
        return GoOn(
            reasons=(f"{names} also {claim_s} the slot but none is live; {cur.why}",),
            warnings=(f"{names}'s record(s) will name a returned slot",),
        )
    who = cur.owner or _listed(stale_others, " / ")
    return Stale(
        reasons=(f"stale slot: {names} also {claim_s} it, none is live; {cur.why}",),
        warnings=(
            f"slot {c.slot} is stale for {c.task}: it belongs to {who} ({cur.why}); "
            "the tree, its processes and the pool slot are left alone",
        ),
        owner=who,
    )


def pool_not_ready(c: Case) -> Refusal | None:
    """The pool must manage the slot, and be runnable, before anything destructive."""
    if not c.facts.exists:
        return None
    pool = c.facts.pool
    problem = None
    # Each hint says what `fm runbook unsafe` says for its cause; none returns the slot by
    # hand (the runbook forbids it: fm's re-run makes the return conditional on the lease).
    if c.obs.env.treehouse_bin is None:
        problem = "the pool's `treehouse` executable was not found (PATH or FM_TREEHOUSE_BIN)"
        hint = "put treehouse on PATH, or export FM_TREEHOUSE_BIN=/path/to/treehouse, then re-run"
    elif c.obs.env.treehouse_problem:
        problem = c.obs.env.treehouse_problem
        hint = "point FM_TREEHOUSE_BIN (or PATH) at a working treehouse executable, then re-run"
    elif pool.error:
        problem = f"the pool's state cannot be read: {pool.error}"
        hint = (
            "repairing the pool's state file is the pool's job (never edit it while a treehouse "
            "command runs); re-run once it reads"
        )
    elif pool.entry is None:
        problem = f"slot {c.slot} is not managed by the pool" + (
            f" (no entry in {pool.state_file})" if pool.state_file else " (no pool state file)"
        )
        hint = (
            "check the record's worktree= against the pool's state file; a worktree outside "
            "the pool: once its work is safe and nothing runs there, git worktree remove it, "
            "then re-run"
        )
    elif pool.entry.destroying:
        problem = f"slot {c.slot} is being destroyed by the pool"
        hint = "wait until the pool is done, then re-run"
    if problem is None:
        return None
    return _refusal(Verdict.UNSAFE, [problem], [hint], problem)


def foreign_git_dir(c: Case) -> Refusal | None:
    """Git run in a slot whose .git is not its own (rule 5, the save, the pool's reset) would
    act on another tree (spec §7a)."""
    if not c.facts.exists or not c.facts.git_problem:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [c.facts.git_problem],
        [
            f"see whose tree it is (git -C {shlex.quote(c.slot)} rev-parse --git-dir "
            "--show-toplevel); copy out what the task needs, then fix the record's "
            "worktree= or the slot with the pool's owner, and re-run"
        ],
        c.facts.git_problem,
    )


def foreign_worktree_lock(c: Case) -> Refusal | None:
    """A `git worktree lock` on the slot is another tool's claim (the pool never locks its
    slots): refused, whatever the flags, and the lock is never removed by fm; the hint is the
    command that removes it, for whoever knows that tool is done."""
    if not c.facts.exists or c.facts.lock is None:
        return None
    reason = f"reason: {c.facts.lock!r}" if c.facts.lock else "no reason given"
    project = c.obs.project_of.get(c.task, c.record.project)
    return _refusal(
        Verdict.UNSAFE,
        [
            f"slot {c.slot} is locked by another tool (git worktree lock, {reason}): "
            "that tool still claims the tree, and fm never removes its lock"
        ],
        [
            "let that tool finish (its lock says which), then re-run",
            "only if that tool is done with the tree, remove its lock and re-run: "
            f"git -C {shlex.quote(project)} worktree unlock {shlex.quote(c.slot)}",
        ],
        f"slot locked by another tool (git worktree lock, {reason})",
    )


def slot_not_returned(c: Case) -> GoOn | None:
    """A slot that is gone, or that the pool already took back, is neither emptied of its
    processes nor returned (`Case.not_returned`)."""
    return GoOn(reasons=(c.not_returned,)) if c.not_returned is not None else None


def never_signalled_in_slot(c: Case) -> Refusal | None:
    """The pool's return ends every process in the slot: what fm must never end may not be
    there (a tmux server would take every window of the fleet with it)."""
    if not c.returns_slot:
        return None
    blocked = blocking_the_return(c.facts.procs, c.spared)
    if not blocked:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [
            f"{_named(blocked)} work in slot {c.slot}, and the pool's return ends "
            "every process there; fm never ends them"
        ],
        _blocked_hints(blocked),
        f"{_named(blocked)} work in this slot, and the pool's return would end them",
    )


def unlanded(c: Case) -> Refusal | GoOn | NeedsLanded | None:
    """Rule 5: TASK's own work must be landed, or --force discards it (`Case.saves_work`: a
    ship's is saved first)."""
    if not c.work_to_check:
        return None  # nothing left to check: the slot is gone
    landed = c.landed
    if landed is None:
        return NeedsLanded()
    if landed.landed:
        return GoOn(reasons=(f"own work: {landed.summary}",))
    if c.flags.force:
        discarded = c.discarded
        if discarded is not None and discarded in c.fleet.records:
            # The slot now holds the discarded live owner's work, not TASK's (spec §7a).
            return GoOn(
                warnings=(
                    f"--force --discard-live-owner: discarding {discarded}'s unlanded work "
                    f"in the slot ({landed.summary})",
                )
            )
        return GoOn(
            warnings=(f"--force: discarding {c.task}'s own unlanded work ({landed.summary})",)
        )
    lines = [f"{c.task}'s own work is not landed: {landed.summary}"]
    untracked = set(landed.untracked)
    lines += [f"{'untracked' if p in untracked else 'uncommitted'}: {p}" for p in landed.dirty]
    lines += [f"unpushed: {u}" for u in landed.unpushed]
    lines += [f"could not tell: {n}" for n in landed.notes]
    if c.record.kind == "scout":
        # The report's full path is in the reasons above (the data dir may be anywhere).
        land = (
            "land it: the scout's work product is its report (its path is above): have it written"
        )
    elif c.record.kind == "secondmate":
        land = _secondmate_landing(c, landed)
    elif landed.branch:
        land = f"land it: commit and push the branch {landed.branch}, or merge its PR"
    elif landed.head:
        land = (
            "land it: HEAD is detached, so put the work on a branch first "
            f"(git -C {shlex.quote(c.slot)} switch -c <name>), then commit and push it, or "
            "merge its PR"
        )
    else:
        land = "land it: commit and push it, or merge its PR"
    # The promise matches the forced plan: a save step only where it has one (spec §14.7).
    kept = (
        f"it is saved first under refs/fm/discarded/{c.task}/<time>; `fm restore {c.task}` "
        "brings it back"
        if c.force_saves
        else "nothing is saved first: it is lost"
    )
    return _refusal(
        Verdict.UNLANDED,
        lines,
        [land, f"or, last, discard it: fm teardown {c.task} --force ({kept})"],
        f"{c.task}'s own work would be lost: {landed.summary}",
    )


def _secondmate_landing(c: Case, landed: LandedLike) -> str:
    """How a secondmate's work lands: its home's own work committed and pushed, its task
    records' tasks finished (or torn down from the home)."""
    prefix = f"{c.task}/"
    kids = any(k.startswith(prefix) for k in c.fleet.children)
    todo = []
    if landed.dirty or landed.unpushed:
        todo.append(f"commit and push the work in its home {c.slot}, or copy it out")
    if kids:
        todo.append("let its child tasks finish, or tear them down first")
    return "land it: " + ("; ".join(todo) or "see the reasons above")


def live_children(c: Case) -> Refusal | GoOn | None:
    """A secondmate torn down with --force: its home's task records go with the home (the
    return resets it). A child whose endpoint is live is still working: fm does not strand
    it, not even with --force. The others' records are named as going."""
    if c.record.kind != "secondmate" or not c.flags.force:
        return None
    prefix = f"{c.task}/"
    kids = sorted(
        k for k in c.fleet.children if k.startswith(prefix) and "/" not in k[len(prefix) :]
    )
    live = [k for k in kids if k in c.fleet.records and c.obs.endpoints[k].state.live]
    if live:
        names = ", ".join(live)
        return _refusal(
            Verdict.LIVE_OWNER,
            [
                f"secondmate {c.task}'s home has a live task: {names}",
                *(
                    f"{k}: endpoint {c.obs.endpoints[k].state}: {c.obs.endpoints[k].detail}"
                    for k in live
                ),
            ],
            [
                "--force discards the secondmate's home, not its live tasks: let them finish "
                "(or tear them down from the secondmate's home), then re-run"
            ],
            f"secondmate {c.task}'s home has a live task: {names}",
        )
    if kids and c.returns_slot:
        saved = (
            f", saved first with the home under refs/fm/discarded/{c.task}/<time>"
            if c.saves_work
            else ""
        )
        return GoOn(
            warnings=(
                f"--force: the records in {c.task}'s home ({', '.join(kids)}) go with the "
                f"home{saved}; their slots are left as they are (`fm teardown --dry-run` lists "
                "orphans)",
            )
        )
    return None


def unsupported_duty(c: Case) -> GoOn | None:
    """A duty of firstmate's script that fm does not carry: removing a secondmate's home that
    is not its slot. The teardown itself is complete without it (the slot is returned, the
    record cleared) and refusing would strand the record, so it goes on, saying plainly what
    is left to do by hand (docs/firstmate.md)."""
    home = c.record.home
    same = home is None or os.path.normpath(home) in (
        os.path.normpath(c.record.worktree),
        c.slot,
    )
    if c.record.kind == "secondmate" and not same:
        return GoOn(
            warnings=(
                f"{c.task} is a secondmate whose home {home} is not its slot: fm does not "
                "remove a secondmate home (firstmate's script did); remove it by hand once "
                "nothing uses it",
            )
        )
    return None


def discarded_record_kept(c: Case) -> GoOn | None:
    """The discarded live owner's record stays: it names a slot that is returned."""
    if c.discarded is None or c.obs.slot_of.get(c.discarded) != c.slot:
        return None
    return GoOn(
        warnings=(
            f"{c.discarded}'s record is kept and its window is not killed by name; "
            f"it now names a returned slot",
        )
    )


# The rules in order, each with the contract rule it belongs to. `decide` walks them; a
# refusal from rule 3 on names the slot's owners.
RULES: tuple[tuple[int, Rule], ...] = (
    # Rule 1: an unsafe record or environment (TASK's own record was validated on loading).
    (1, stray_records),
    (1, invalid_claimant),
    (1, unreadable_claim),
    (1, unsafe_tasktmp),
    (1, unwritable_state_dir),
    (1, unreadable_inventory),
    (1, unsure_census),
    # Rule 2: never reset a tree the pool does not own; never kill the window fm runs in.
    (2, protected_root),
    (2, inside_own_window),
    # Rule 3: another live owner (lifted only by --force --discard-live-owner=<that owner>).
    (3, live_owner),
    (3, own_endpoint_alive),
    # Another tool's claim on the tree (a `git worktree lock`): never lifted by fm.
    (3, foreign_worktree_lock),
    # Rule 4: other owners, none live: a slot that is now someone else's is stale for TASK.
    (4, stale_slot),
    # The pool must be able to return the slot, and the slot must be a tree of its own; what
    # the return would end must be fm's to end.
    (4, pool_not_ready),
    (4, foreign_git_dir),
    (4, slot_not_returned),
    (4, never_signalled_in_slot),
    # Rule 5: TASK's own work.
    (5, unlanded),
    (5, live_children),
    (5, unsupported_duty),
    (5, discarded_record_kept),
)


# -- building the decision ----------------------------------------------------------------------


def _pool_dir(c: Case) -> str | None:
    state_file = c.facts.pool.state_file
    return os.path.dirname(state_file) if state_file else None


def _refuse(c: Case, refusal: Refusal, owners: Sequence[Owner] = ()) -> Decision:
    """A refusal: its verdict and reasons, an empty plan."""
    return Decision(
        c.task,
        refusal.verdict,
        refusal.reasons,
        owners,
        hints=refusal.hints,
        slot=c.slot,
        endpoint=c.endpoint.state,
        headline=refusal.headline,
        project=c.record.project,
        pool=_pool_dir(c),
    )


def _stale(c: Case, reasons: list[str], warnings: list[str], stale: Stale) -> Decision:
    """A stale slot: only TASK's own endpoint and record are cleaned."""
    return Decision(
        c.task,
        Verdict.STALE,
        tuple(reasons),
        c.owners,
        (_endpoint_step(c.record, c.endpoint), *_record_steps(c.record)),
        warnings=tuple(warnings),
        slot=c.slot,
        endpoint=c.endpoint.state,
        skip_reason="stale slot: left to its current owner",
        project=c.record.project,
        pool=_pool_dir(c),
        headline=f"{belongs_now(stale.owner)}: only {c.task}'s window and record are cleared",
        stale_owner=stale.owner,
    )


def _proceed(c: Case, reasons: list[str], warnings: list[str]) -> Decision:
    """Past every rule: TASK's slot is TASK's to tear down."""
    discarded, returns_slot, landed = c.discarded, c.returns_slot, c.work
    pool_return = _pool_return(c.facts.pool.entry) if returns_slot else None
    save_as = (
        (discarded if discarded is not None and discarded in c.fleet.records else c.task)
        if c.saves_work
        else None
    )
    branch = _branch(landed) if returns_slot and discarded is None else None
    claim = c.facts.claim
    own_claim = claim.path if returns_slot and claim is not None and claim.task == c.task else None
    return Decision(
        c.task,
        Verdict.PROCEED,
        tuple(reasons),
        c.owners,
        _plan(c, c.spared, returns_slot, pool_return, save_as, branch, own_claim),
        warnings=tuple(warnings),
        slot=c.slot,
        endpoint=c.endpoint.state,
        pool_return=pool_return,
        discarded_owner=discarded,
        save_discarded=c.saves_work,
        save_as=save_as,
        end_processes=returns_slot,
        skip_reason=c.not_returned,
        notes=landed.notes if landed is not None else (),
        headline=_proceed_headline(c, landed, c.not_returned, discarded),
        branch=branch,
        own_claim=own_claim,
        project=c.record.project,
        pool=_pool_dir(c),
    )


def _plan(
    c: Case,
    spared: NeverSignalled,
    returns_slot: bool,
    pool_return: PoolReturn | None,
    save_as: str | None,
    branch: BranchDelete | None,
    own_claim: str | None,
) -> tuple[Step, ...]:
    """The steps in the order they run (act.py says why): endpoint, processes, save, hooks,
    pool, branch, claim, then the record's duties and the record last."""
    plan = [_endpoint_step(c.record, c.endpoint)]
    tmp = c.obs.tasktmp.get(c.task)
    if returns_slot:
        targets = c.slot + (f" and {c.record.tasktmp}" if c.record.tasktmp else "")
        plan.append(Step(StepName.PROCESSES, targets, _signal_detail(c, spared, c.facts.procs)))
    elif c.record.tasktmp and tmp is not None and tmp.exists:
        # The slot is gone or already returned, but TASK's temp dir is about to be removed:
        # end what still runs in it first.
        plan.append(Step(StepName.PROCESSES, c.record.tasktmp, _signal_detail(c, spared, ())))
    if save_as is not None:
        records = (
            " and the task records of its home's state/ (their bytes)"
            if c.record.kind == "secondmate"
            else ""
        )
        plan.append(
            Step(
                StepName.SAVE_DISCARDED,
                f"refs/fm/discarded/{save_as}/<UTC timestamp>",
                f"commit {save_as}'s uncommitted and untracked files{records} on HEAD in "
                f"{c.record.project}",
            )
        )
    if returns_slot:
        plan.append(
            Step(
                StepName.HOOKS,
                c.slot,
                "remove the fleet's hook files git does not track: " + ", ".join(SCAFFOLD_PATHS),
            )
        )
    if pool_return is not None:
        say = "treehouse " + " ".join(pool_return.argv) + "; verified in the pool's state"
        if unconditional_only(c.record, pool_return, lambda: c.facts.pool.entry):
            # The real run decides this under the slot lock, from a fresh look at the pool
            # and the slot: the plan says both outcomes rather than one that may not happen.
            say += (
                "; or no call at all if the slot is still unleased, clean and its HEAD merged "
                "then (the pool's next get reuses it as it is)"
            )
        plan.append(Step(StepName.POOL, pool_return.path, say))
    if branch is not None:
        plan.append(
            Step(
                StepName.BRANCH,
                f"refs/heads/{branch.name}",
                f"delete it if it still names {branch.commit[:12]} and is checked out nowhere "
                "else (a failure only warns)",
            )
        )
    if own_claim is not None:
        plan.append(Step(StepName.CLAIM, own_claim, f"remove {c.task}'s own slot claim"))
    plan.extend(_record_steps(c.record))
    return tuple(plan)


def _branch(landed: LandedLike | None) -> BranchDelete | None:
    """The branch the slot had checked out when deciding, at the commit seen then."""
    if landed is None or landed.branch is None or landed.head is None:
        return None
    return BranchDelete(landed.branch, landed.head, landed.default_branch)


def _endpoint_step(record: Record, ep: Endpoint) -> Step:
    if ep.state == EndpointState.MISSING:
        detail = f"already gone ({ep.detail}): nothing to kill"
    else:
        detail = (
            f"kill window {', '.join(ep.window_ids) or record.window} ({ep.state}: {ep.detail})"
        )
    return Step(StepName.ENDPOINT, record.target, detail)


def _record_steps(record: Record) -> tuple[Step, ...]:
    """Whenever the record goes (proceed and stale alike): the hook auth entries, the
    cost-attribution row, then the record itself, the meta last."""
    parts = []
    if record.tasktmp:
        parts.append(f"remove {record.tasktmp}")
    if record.kind == "secondmate":
        parts.append(f"remove its route '- {record.task_id} ...' from data/secondmates.md")
    parts.append(f"remove state/{record.task_id}.* sidecars, then {record.meta_path} last")
    return (
        Step(
            StepName.AUTH,
            f"state/{record.task_id}.grok-turnend-token, .kimi-turnend-token",
            "remove the grok and kimi hook auth entries the token files name, if any",
        ),
        Step(
            StepName.ATTRIBUTION,
            "data/cost-attribution.tsv",
            f"append {record.task_id}'s cost-attribution row (a failure only warns)",
        ),
        Step(StepName.RECORD, record.meta_path, "; ".join(parts)),
    )


def _pool_return(entry: PoolEntry | None) -> PoolReturn:
    """Conditional on the lease seen: its id, and its holder when it has one (an empty holder
    is the only condition left for a lease without an id, e.g. a legacy lease). A lease that is
    not TASK's was a live owner, so here it is TASK's or the discarded owner's."""
    assert entry is not None
    if not entry.leased:
        return PoolReturn(entry.path, None, None)
    holder = entry.lease_holder if entry.lease_holder or not entry.lease_id else None
    return PoolReturn(entry.path, entry.lease_id or None, holder)


# Task ids named in one reason: a slot shared by thousands of records must not make every
# one of their reasons name all the others (the audit would grow as their square).
_LISTED = 10


def _listed(ids: Sequence[str], sep: str = ", ") -> str:
    if len(ids) <= _LISTED:
        return sep.join(ids)
    return f"{sep.join(itertools.islice(ids, _LISTED))} and {len(ids) - _LISTED} more"


def _owners_headline(live: list[Owner]) -> str:
    """`bravo is working in this slot`; `lease:ci-bot holds the pool lease on this slot`."""
    parts = []
    for o in live:
        if o.kind == OwnerKind.LEASE and o.id.startswith("lease:"):
            parts.append(f"{o.id} holds the pool lease on this slot")
        elif o.kind == OwnerKind.PROCESS:
            # Its why says where it runs (`tmux pane other:scratch (%4) on <socket>`).
            parts.append(f"{o.id} is working in this slot: {o.why}")
        else:
            parts.append(f"{o.id} is working in this slot")
    return "; ".join(parts)


def _proceed_headline(
    c: Case, landed: LandedLike | None, skip: str | None, discarded: str | None
) -> str:
    if discarded is not None:
        return f"discarding the live owner {discarded} as asked; the slot is returned"
    if skip is not None:
        return skip
    if landed is not None and landed.landed:
        return f"the slot is {c.task}'s and its work is landed ({landed.summary})"
    if landed is not None and c.saves_work:
        return f"--force: {c.task}'s own unlanded work is saved, then discarded"
    if landed is not None:
        return f"--force: {c.task}'s own unlanded work is discarded (nothing is saved)"
    return f"the slot is {c.task}'s"


def _named(blocked: list[Blocker]) -> str:
    return ", ".join(str(b) for b in blocked)


def _blocked_hints(blocked: list[Blocker]) -> list[str]:
    hints = []
    if any(b.why.kind in (Spared.TMUX_SERVER, Spared.TMUX) for b in blocked):
        hints.append(
            "a tmux server keeps the directory it was started in: detach, end that server "
            "when its windows may go (tmux kill-server), and start it again from outside the "
            "pool (cd ~ && tmux); then re-run"
        )
    return hints


def _target(c: Case, p: Proc) -> str:
    """A process to be signalled, by name and pid; a shell that no task's endpoint holds is
    someone's terminal cd'd into the slot (perhaps the operator's own): say so, and which
    terminal, before it ends."""
    from fm_teardown.model.process_kind import terminal_of

    t = terminal_of(p, c.obs.endpoint_owner, c.obs.inventory)
    if t is not None:
        where = shell_where(t)
        return f"{p.name} ({p.pid}, {where}, no task's: cd out of the slot to keep it)"
    place = placement(c.obs, p)
    kind = kind_of(c.task, place)
    if kind == Kind.AGENT_NO_PANE:
        # The slot's only claimant's leftover agent (spec §14.1): the plan says what it is.
        return f"{p.name} ({p.pid}) [{Kind.AGENT_NO_PANE}, left in {c.task}'s slot]"
    if kind == Kind.TERMINAL:
        # Not a shell, but someone's terminal all the same (a program run from a pane).
        return f"{p.name} ({p.pid}) [{Kind.TERMINAL}, {where_of(place)}]"
    return f"{p.name} ({p.pid})"


def _signal_detail(c: Case, spared: NeverSignalled, slot_procs: tuple[Proc, ...]) -> str:
    """What the processes step would signal now, every process by name and pid (spec §7a)."""
    tmp = c.obs.tasktmp.get(c.task)
    procs = {p.pid: p for p in (*slot_procs, *(tmp.procs if tmp else ()))}
    targets = to_signal(tuple(procs.values()), spared)
    kept = [p for p in procs.values() if p.pid in spared]
    text = (
        "end every process whose cwd is inside (SIGTERM, grace, SIGKILL; by pid and "
        "start time), then re-scan; "
    )
    if targets:
        text += f"now {len(targets)}: " + ", ".join(_target(c, p) for p in targets)
    else:
        text += "none there now"
    if kept:
        text += "; never signalled: " + ", ".join(
            f"{p.name} ({p.pid}, {spared[p.pid]})" for p in kept
        )
    return text
