"""The decision: verdict, reasons, owners and the ordered plan (spec §5, §6, §7a). Pure.

`decide` reads only its arguments: no I/O, no clock, no randomness. Each rule is a function
`(Case) -> Ruling` below, listed in order in `RULES` (rules 1 to 5 of docs/spec.md §5),
which `decide` walks. A rule says nothing (None), or one `Ruling`:

- `Refusal`: the decision ends with that verdict and an empty plan;
- `Stale`: the slot is someone else's now; the decision cleans only TASK's own window and record;
- `GoOn`: the decision goes on, with the reasons and warnings the rule adds;
- `NeedsLanded`: rule 5 is reached without TASK's landed facts: `decide` returns `Unfinished`,
  which nothing can act on; `decide_all` gathers the facts (git runs only now, on TASK's own
  slot) and decides again. The one-task run and the audit both go through it.

What several rules read (the owners, the discarded live owner, whether the slot is returned)
is worked out once, on first use, by `Case` (`decide/case.py`, with the rulings). The words of
the longer hints are in `decide/hints.py`; the decision and its ordered plan are built from the
ruling by `decide/plan_builder.py`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple, TypeVar, overload

from fm_teardown.decide import notes
from fm_teardown.decide.case import Case, GoOn, NeedsLanded, Refusal, Ruling, Stale
from fm_teardown.decide.census import doubts
from fm_teardown.decide.hints import (
    blocked_hints,
    inventory_hint,
    listed,
    live_owner_hints,
    unlanded_hints,
)
from fm_teardown.decide.nested_work import (
    forced_hint,
    nested_lines,
    nested_refusal,
    unfetched_lines,
)
from fm_teardown.decide.ownership import (
    claimed_by_other,
    current_owner,
    invalid_claimants,
    lease_is_tasks,
    live_of,
    other_claimants,
)
from fm_teardown.decide.plan_builder import proceed_decision, refusal_decision, stale_decision
from fm_teardown.decide.sparing import blocking_the_return
from fm_teardown.model import causes
from fm_teardown.model.errors import Verdict
from fm_teardown.model.landing import Reason, said
from fm_teardown.model.leases import lease_task
from fm_teardown.model.not_landed import UnlandedDiscarded
from fm_teardown.model.paths import is_ancestor_or_same
from fm_teardown.model.plan import Decision, DecisionWarning, LandedLike
from fm_teardown.model.records import Backend, Fleet, Record, RecordKind
from fm_teardown.model.request import Flags
from fm_teardown.model.values import value
from fm_teardown.model.world import EndpointState, InventoryStatus, Observation

__all__ = [
    "RULES",
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
class Unfinished:
    """Rules 1-4 let TASK go on and rule 5 needs TASK's landed facts. The caller gathers them
    (only now, so that git never runs on a slot that is somebody else's) and decides again
    (`decide_all`). Not a Decision: nothing can act on it."""

    task: str


def _refusal(
    verdict: Verdict, lines: list[causes.Cause], hints: list[str], headline: causes.Cause
) -> Refusal:
    return Refusal(verdict, tuple(lines), tuple(hints), headline)


Rule = Callable[[Case], Ruling]


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
    out = _walk(Case.of(task, fleet, obs, flags, landed), 0, (), ())
    return Unfinished(task) if isinstance(out, _Paused) else out


class _Paused(NamedTuple):
    """Where a walk stopped for TASK's landed facts: its case, the rule that asked, and the
    reasons and warnings said before it. The rules before that one read no landed facts, so
    deciding again with the facts resumes here rather than walking them twice."""

    case: Case
    at: int
    reasons: Sequence[Reason]
    warnings: Sequence[DecisionWarning]


def _walk(
    c: Case, start: int, reasons: Sequence[Reason], warnings: Sequence[DecisionWarning]
) -> Decision | _Paused:
    reasons, warnings = list(reasons), list(warnings)
    for at in range(start, len(RULES)):
        number, rule = RULES[at]
        ruling = rule(c)
        if ruling is None:  # what most rules say of most tasks
            continue
        if isinstance(ruling, Refusal):
            return refusal_decision(c, ruling, c.owners if number >= 3 else ())
        if isinstance(ruling, NeedsLanded):
            return _Paused(c, at, reasons, warnings)
        if isinstance(ruling, Stale):
            return stale_decision(
                c, [*reasons, *ruling.reasons], [*warnings, *ruling.warnings], ruling
            )
        if isinstance(ruling, GoOn):
            reasons, warnings = [*reasons, *ruling.reasons], [*warnings, *ruling.warnings]
    return proceed_decision(c, reasons, warnings)


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
    first = {task: _walk(Case.of(task, fleet, obs, flags), 0, (), ()) for task in tasks}
    pending = [fleet.records[t] for t, d in first.items() if isinstance(d, _Paused)]
    facts: Mapping[str, L] = gather(pending) if pending else {}
    decisions = {task: _resumed(d, facts) for task, d in first.items()}
    return decisions, facts


def _resumed(d: Decision | _Paused, facts: Mapping[str, LandedLike]) -> Decision:
    """A first walk's decision, or the walk resumed where it paused, with TASK's facts."""
    if isinstance(d, Decision):
        return d
    c = d.case.with_landed(facts[d.case.task])
    out = _walk(c, d.at, d.reasons, d.warnings)
    assert isinstance(out, Decision)  # with the facts given, no rule pauses
    return out


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
    record's) and name TASK's slot or one nested with it: said, never counted as owners.
    The others concern no task: the audit lists them once, among its loose ends."""
    if not c.fleet.stray_slots:
        return None
    slot = c.obs.slot_of[c.task]
    strays = [
        notes.stray_record(name, why)
        for name, why in c.fleet.strays
        if any(
            is_ancestor_or_same(s, slot) or is_ancestor_or_same(slot, s)
            for s in c.fleet.stray_slots.get(name, ())
        )
    ]
    return GoOn(warnings=tuple(strays)) if strays else None


def invalid_claimant(c: Case) -> Refusal | None:
    """Another record that cannot be validated might own this slot: fail closed (spec §3)."""
    blockers = invalid_claimants(c.task, c.fleet, c.obs)
    if not blockers:
        return None
    lines: list[causes.Cause] = []
    for b in blockers:
        bad = c.fleet.invalid[b]
        lines.append(
            causes.InvalidClaimant(
                bad.meta_path, b, bad.problem, c.obs.invalid_slots[b] is not None
            )
        )
    first = c.fleet.invalid[blockers[0]]
    headline = causes.InvalidClaimantsHeadline(
        os.path.basename(first.meta_path),
        first.problem,
        bool(c.obs.invalid_slots[blockers[0]]),
        len(blockers) - 1,
    )
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
    unreadable = causes.Observed(causes.ObservedKind.CLAIM, claim.problem, claim.path)
    return _refusal(
        Verdict.UNSAFE,
        [unreadable],
        [
            f"the claim is written by spawn when the pool hands the slot on: look at it "
            f"(ls -l {shlex.quote(claim.path)}; cat {shlex.quote(claim.path)}), fix it only "
            "if you know whose slot it is, then re-run"
        ],
        unreadable,
    )


def unsafe_tasktmp(c: Case) -> Refusal | None:
    """TASK's tasktmp must be absent or a real directory of ours, never a link (spec §7a)."""
    tmp = c.obs.tasktmp.get(c.task)
    if tmp is None or not tmp.problem:
        return None
    problem = causes.Observed(causes.ObservedKind.TASKTMP, tmp.problem)
    return _refusal(
        Verdict.UNSAFE,
        [problem],
        [
            f"fm never follows or removes a tasktmp that is not its own directory: look "
            f"at it (ls -ld {shlex.quote(tmp.path)}), remove it if it is not needed, then re-run"
        ],
        problem,
    )


def unwritable_state_dir(c: Case) -> Refusal | None:
    """The slot lock and the record's removal need the state dir: checked before acting."""
    if not c.obs.env.state_dir_problem:
        return None
    problem = causes.Observed(causes.ObservedKind.STATE_DIR, c.obs.env.state_dir_problem)
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
    if c.record.backend != Backend.TMUX or inventory.status != InventoryStatus.ERROR:
        return None
    error = inventory.error or "unknown error"
    doubt = inventory.doubt
    return _refusal(
        Verdict.UNSAFE,
        [causes.InventoryUnreadable(error, doubt=doubt)],
        [inventory_hint(error)],
        causes.InventoryUnreadable(error, headline=True, doubt=doubt),
    )


def unsure_census(c: Case) -> Refusal | None:
    """A process in TASK's slot runs under a tmux server whose panes cannot be listed: whose
    work it is cannot be told (spec §14.1)."""
    found = doubts(c.task, c.obs)
    if not found:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [causes.Observed(causes.ObservedKind.CENSUS, f) for f in found],
        [
            "see what runs there (tmux -S <socket> list-panes -a, ps -o pid,tty,args -p <pid>); "
            "re-run once that server answers, or once the process has left the slot"
        ],
        causes.Observed(causes.ObservedKind.CENSUS, found[0]),
    )


def protected_root(c: Case) -> Refusal | None:
    """The slot is the project checkout, `/`, $HOME, FM_HOME, or an ancestor of one. A
    secondmate as firstmate records it names its home as worktree and project alike: the
    home is its slot, not a checkout of some other project's."""
    project = c.obs.project_of[c.task]
    standard_secondmate = c.record.kind == RecordKind.SECONDMATE and project == c.slot
    roots = {
        "the project checkout": None if standard_secondmate else project,
        "/": "/",
        "$HOME": c.obs.env.home,
        "FM_HOME": c.obs.env.fm_home,
    }
    for label, root in roots.items():
        if root is not None and is_ancestor_or_same(c.slot, root):
            return _refusal(
                Verdict.UNSAFE,
                [causes.ProtectedRoot(c.slot, c.slot == root, label, root)],
                ["a slot must be a pool worktree; fix the record's worktree="],
                causes.ProtectedRoot(c.slot, c.slot == root, label, root, headline=True),
            )
    return None


def inside_own_window(c: Case) -> Refusal | None:
    """Killing the window fm runs in would kill the teardown halfway."""
    if not c.endpoint.pids & c.obs.env.protected:
        return None
    inside = causes.InsideOwnWindow(c.task, c.record.window)
    return _refusal(Verdict.UNSAFE, [inside], ["run the teardown from another window"], inside)


def live_owner(c: Case) -> Refusal | GoOn | None:
    """Rule 3: another live owner refuses, unless --force --discard-live-owner names it (the
    only live owner): then it is discarded (`Case.discarded`)."""
    live = live_of(c.owners)
    wanted = c.flags.discard_live_owner
    if not live:
        if wanted is not None:
            return GoOn(warnings=(notes.discard_unused(wanted),))
        return None
    if c.discarded is not None:
        return GoOn(warnings=(notes.discarding(wanted),))
    owners = tuple(causes.LiveOwner(o.id, o.kind, o.endpoint, o.why) for o in live)
    lines: list[causes.Cause] = [causes.SlotOwned(c.slot, tuple(o.id for o in live)), *owners]
    hints = live_owner_hints(c, live)
    return _refusal(Verdict.LIVE_OWNER, lines, hints, causes.LiveOwners(owners))


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
    names = listed(stale_others)
    also = causes.Listed.of(stale_others)
    if cur.is_task:
        return GoOn(
            reasons=(causes.AlsoClaimed(also, cur.why, stale=False),),
            warnings=(notes.records_name_returned_slot(names),),
        )
    who = cur.owner or listed(stale_others, " / ")
    return Stale(
        reasons=(causes.AlsoClaimed(also, cur.why, stale=True),),
        warnings=(notes.stale_slot_left(c.slot, c.task, who, cur.why),),
        owner=who,
    )


def pool_not_ready(c: Case) -> Refusal | None:
    """The pool must manage the slot, and be runnable, before anything destructive."""
    if not c.facts.exists:
        return None
    pool = c.facts.pool
    problem: causes.PoolProblem | None = None
    detail = ""
    # Each hint says what `fm runbook unsafe` says for its cause; none returns the slot by
    # hand (the runbook forbids it: fm's re-run makes the return conditional on the lease).
    if c.obs.env.treehouse_bin is None:
        problem = causes.PoolProblem.NO_TREEHOUSE
        hint = "put treehouse on PATH, or export FM_TREEHOUSE_BIN=/path/to/treehouse, then re-run"
    elif c.obs.env.treehouse_problem:
        problem, detail = causes.PoolProblem.TREEHOUSE_BROKEN, c.obs.env.treehouse_problem
        hint = "point FM_TREEHOUSE_BIN (or PATH) at a working treehouse executable, then re-run"
    elif pool.error:
        problem, detail = causes.PoolProblem.STATE_UNREADABLE, pool.error
        hint = (
            "repairing the pool's state file is the pool's job (never edit it while a treehouse "
            "command runs); re-run once it reads"
        )
    elif pool.entry is None:
        problem, detail = causes.PoolProblem.NOT_MANAGED, pool.state_file or ""
        hint = (
            "check the record's worktree= against the pool's state file; a worktree outside "
            "the pool: once its work is safe and nothing runs there, git worktree remove it, "
            "then re-run"
        )
    elif pool.entry.destroying:
        problem = causes.PoolProblem.DESTROYING
        hint = "wait until the pool is done, then re-run"
    if problem is None:
        return None
    said = causes.PoolNotReady(problem, c.slot, detail)
    return _refusal(Verdict.UNSAFE, [said], [hint], said)


def foreign_git_dir(c: Case) -> Refusal | None:
    """Git run in a slot whose .git is not its own (rule 5, the save, the pool's reset) would
    act on another tree (spec §7a)."""
    if not c.facts.exists or not c.facts.git_problem:
        return None
    problem = causes.Observed(causes.ObservedKind.GIT_DIR, c.facts.git_problem)
    return _refusal(
        Verdict.UNSAFE,
        [problem],
        [
            f"see whose tree it is (git -C {shlex.quote(c.slot)} rev-parse --git-dir "
            "--show-toplevel); copy out what the task needs, then fix the record's "
            "worktree= or the slot with the pool's owner, and re-run"
        ],
        problem,
    )


def foreign_worktree_lock(c: Case) -> Refusal | None:
    """A `git worktree lock` on the slot, or on a worktree nested inside it (§15.4a), is another
    tool's claim (the pool never locks its slots): refused, whatever the flags; fm never removes
    it; the hint is the command that does, for whoever knows that tool is done."""
    if not c.facts.exists or (c.facts.lock is None and not c.facts.nested_locks):
        return None
    project = c.obs.project_of.get(c.task, c.record.project)
    # A nested worktree's lock claims the slot too: the reset and the signals would reach it.
    locks = [(None, c.facts.lock)] if c.facts.lock is not None else c.facts.nested_locks
    locked, reason = locks[0]
    return _refusal(
        Verdict.UNSAFE,
        [causes.ForeignLock(c.slot, r, nested=p) for p, r in locks],
        [
            "let that tool finish (its lock says which), then re-run",
            "only if that tool is done with the tree, remove its lock and re-run: "
            f"git -C {shlex.quote(project)} worktree unlock {shlex.quote(locked or c.slot)}",
        ],
        causes.ForeignLock(c.slot, reason, headline=True, nested=locked),
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
        [causes.BlockedReturn(tuple(map(str, blocked)), c.slot)],
        blocked_hints(blocked),
        causes.BlockedReturn(tuple(map(str, blocked)), c.slot, headline=True),
    )


def unlanded(c: Case) -> Refusal | GoOn | NeedsLanded | None:
    """Rule 5: TASK's own work must be landed, or --force discards it (`Case.saves_work`: a
    ship's is saved first)."""
    if not c.work_to_check:
        return None  # nothing left to check: the slot is gone
    landed = c.landed
    if landed is None:
        return NeedsLanded()
    unfetched = unfetched_lines(landed, dry_run=c.flags.dry_run)
    if landed.landed:
        return GoOn(reasons=(said("own work: ", landed.proof, ""), *unfetched))
    if c.flags.force and landed.nested:
        return _refusal(Verdict.UNSAFE, *nested_refusal(c.task, landed))
    if c.flags.force:
        discarded = c.discarded
        if discarded is not None and discarded in c.fleet.records:
            # The slot now holds the discarded live owner's work, not TASK's (spec §7a).
            return GoOn(warnings=(UnlandedDiscarded(discarded, landed.summary, True),))
        return GoOn(warnings=(UnlandedDiscarded(c.task, landed.summary),))
    lines: list[causes.Cause] = [causes.NotLanded(c.task, landed.summary)]
    untracked = set(landed.untracked)
    lines += [
        causes.AtRisk(
            causes.AtRiskKind.UNTRACKED if p in untracked else causes.AtRiskKind.UNCOMMITTED, p
        )
        for p in landed.dirty
    ]
    lines += nested_lines(landed)
    lines += [causes.AtRisk(causes.AtRiskKind.UNPUSHED, u) for u in landed.unpushed]
    lines += [causes.AtRisk(causes.AtRiskKind.UNKNOWN, n) for n in landed.notes]
    lines += unfetched
    return _refusal(
        Verdict.UNLANDED,
        lines,
        forced_hint(c.task, landed, unlanded_hints(c, landed)),
        causes.NotLanded(c.task, landed.summary, lost=True),
    )


def live_children(c: Case) -> Refusal | GoOn | None:
    """A secondmate torn down with --force: its home's task records go with the home (the
    return resets it). A child whose endpoint is live is still working: fm does not strand
    it, not even with --force. The others' records are named as going."""
    if c.record.kind != RecordKind.SECONDMATE or not c.flags.force:
        return None
    prefix = f"{c.task}/"
    kids = sorted(
        k for k in c.fleet.children if k.startswith(prefix) and "/" not in k[len(prefix) :]
    )
    live = [k for k in kids if k in c.fleet.records and c.obs.endpoints[k].state.live]
    if live:
        return _refusal(
            Verdict.LIVE_OWNER,
            [
                causes.LiveChildren(c.task, tuple(live)),
                *(
                    causes.ChildEndpoint(k, c.obs.endpoints[k].state, c.obs.endpoints[k].detail)
                    for k in live
                ),
            ],
            [
                "--force discards the secondmate's home, not its live tasks: let them finish "
                "(or tear them down from the secondmate's home), then re-run"
            ],
            causes.LiveChildren(c.task, tuple(live)),
        )
    if kids and c.returns_slot:
        saved = (
            f", saved first with the home under refs/fm/discarded/{c.task}/<time>"
            if c.saves_work
            else ""
        )
        return GoOn(warnings=(notes.home_records_go(c.task, kids, saved),))
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
    if c.record.kind == RecordKind.SECONDMATE and not same:
        return GoOn(warnings=(notes.home_not_removed(c.task, home),))
    return None


def discarded_record_kept(c: Case) -> GoOn | None:
    """The discarded live owner's record stays: it names a slot that is returned."""
    if c.discarded is None or c.obs.slot_of.get(c.discarded) != c.slot:
        return None
    return GoOn(warnings=(notes.discarded_record_kept(c.discarded),))


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
