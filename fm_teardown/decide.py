"""The decision: verdict, reasons, owners and the ordered plan (CONTRACT §5, §6, §7a). Pure.

`decide` reads only its arguments: no I/O, no clock, no randomness. It reads like CONTRACT §5:
each rule is a helper below, in the contract's order, returning a refusal or nothing; the
first refusal ends the decision with an empty plan.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from fm_teardown.errors import Verdict
from fm_teardown.ownership import (
    claimed_by_other,
    current_owner,
    invalid_claimants,
    lease_is_tasks,
    lease_task,
    live_of,
    other_claimants,
    owners_of,
)
from fm_teardown.paths import is_ancestor_or_same
from fm_teardown.plan import (
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
from fm_teardown.records import Fleet, Record
from fm_teardown.scaffold import SCAFFOLD_PATHS
from fm_teardown.sparing import (
    Blocker,
    NeverSignalled,
    blocking_the_return,
    never_signalled,
    to_signal,
)
from fm_teardown.values import value
from fm_teardown.world import (
    Endpoint,
    EndpointState,
    InventoryStatus,
    Observation,
    PoolEntry,
    Proc,
    SlotFacts,
    Spared,
)

__all__ = ["Decision", "Flags", "LandedLike", "PoolReturn", "Step", "decide"]


@value
class Refusal:
    verdict: Verdict
    reasons: tuple[str, ...]
    hints: tuple[str, ...]
    headline: str  # the one reason that matters


def _refusal(verdict: Verdict, lines: list[str], hints: list[str], headline: str) -> Refusal:
    return Refusal(verdict, tuple(lines), tuple(hints), headline)


@value
class Case:
    """What every rule reads: TASK, its record, slot and endpoint, and the world observed."""

    task: str
    record: Record
    fleet: Fleet
    obs: Observation
    flags: Flags
    slot: str
    endpoint: Endpoint
    facts: SlotFacts

    @staticmethod
    def of(task: str, fleet: Fleet, obs: Observation, flags: Flags) -> Case:
        slot = obs.slot_of[task]
        return Case(
            task, fleet.records[task], fleet, obs, flags, slot, obs.endpoints[task], obs.slots[slot]
        )


@dataclass
class Draft:
    """What a decision that goes on collects on its way through the rules."""

    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def decide(
    task: str,
    fleet: Fleet,
    obs: Observation,
    flags: Flags,
    landed: LandedLike | None = None,
) -> Decision:
    c = Case.of(task, fleet, obs, flags)
    draft = Draft()
    for name, why in fleet.strays:
        if name.endswith(".meta"):
            draft.warnings.append(f"{name} in the state dir: {why}; not counted as an owner")

    # Rule 1: an unsafe record or environment (TASK's own record was validated on loading).
    refusal = (
        invalid_claimant(c) or unreadable_claim(c) or unsafe_tasktmp(c) or unwritable_state_dir(c)
    )
    # Rule 2: never reset a tree the pool does not own; never kill the window fm runs in.
    refusal = refusal or protected_root(c) or inside_own_window(c)
    if refusal:
        return refuse(c, refusal)

    # Rule 3: another live owner (lifted only by --force --discard-live-owner=<that owner>).
    owners = owners_of(task, fleet, obs)
    refusal, discarded = live_owner(c, owners, draft)
    if refusal:
        return refuse(c, refusal, owners)
    if c.endpoint.state == EndpointState.ALIVE:
        draft.reasons.append(
            f"own endpoint is alive ({c.endpoint.detail}); a task's own pane never blocks"
        )

    # Rule 4: other owners, none live: a slot that is now someone else's is stale for TASK.
    stale = stale_slot(c, owners, discarded, draft)
    if stale is not None:
        return stale

    # The pool must be able to return the slot, and the slot must be a tree of its own.
    refusal = pool_not_ready(c) or foreign_git_dir(c)
    if refusal:
        return refuse(c, refusal, owners)
    spared = never_signalled(obs, task, discarded)
    returns_slot, skip = slot_will_be_returned(c, discarded, draft)
    refusal = never_signalled_in_slot(c, spared) if returns_slot else None
    if refusal:
        return refuse(c, refusal, owners)

    # Rule 5: TASK's own work (a slot that no longer exists has nothing left to lose).
    if not (c.record.kind in ("scout", "secondmate") or c.facts.exists):
        landed = None
    elif landed is None:
        return _proceed(c, draft, owners, (), landed_pending=True)
    refusal, save = unlanded(c, landed, discarded, draft)
    refusal = refusal or live_children(c, returns_slot, draft)
    if refusal:
        return refuse(c, refusal, owners)
    unsupported_duty(c, draft)

    pool_return = _pool_return(c.facts.pool.entry) if returns_slot else None
    save_as = discarded if discarded is not None and discarded in fleet.records else task
    branch = _branch(landed) if returns_slot and discarded is None else None
    claim = c.facts.claim
    own_claim = claim.path if returns_slot and claim is not None and claim.task == task else None
    plan = _plan(c, spared, returns_slot, pool_return, save_as if save else None, branch, own_claim)
    if discarded is not None and obs.slot_of.get(discarded) == c.slot:
        draft.warnings.append(
            f"{discarded}'s record is kept and its window is not killed by name; "
            f"it now names a returned slot"
        )
    return _proceed(
        c,
        draft,
        owners,
        plan,
        pool_return=pool_return,
        discarded_owner=discarded,
        save_discarded=save,
        save_as=save_as if save else None,
        end_processes=returns_slot,
        skip_reason=skip,
        notes=landed.notes if landed is not None else (),
        headline=_proceed_headline(c, landed, skip, discarded),
        branch=branch,
        own_claim=own_claim,
    )


# -- the rules, in contract order ---------------------------------------------------------------


def invalid_claimant(c: Case) -> Refusal | None:
    """Another record that cannot be validated might own this slot: fail closed (§3)."""
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
        [f"REFUSED: {lines[0]}; nothing was changed", *lines[1:]],
        [
            "fix that record with its task's owner (it may belong to a live task); an empty or "
            "half-written one: see `fm runbook unsafe` for how to tell it from a live task's"
        ],
        headline,
    )


def unreadable_claim(c: Case) -> Refusal | None:
    """A slot claim that exists but cannot be read or parsed: whose slot it is cannot be told
    (§10)."""
    claim = c.facts.claim
    if claim is None or claim.problem is None:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [f"REFUSED: the slot claim {claim.path} {claim.problem}; nothing was changed"],
        [
            f"the claim is written by spawn when the pool hands the slot on: look at it "
            f"(ls -l {claim.path}; cat {claim.path}), fix it only if you know whose slot it is, "
            "then re-run"
        ],
        f"the slot claim {claim.path} {claim.problem}",
    )


def unsafe_tasktmp(c: Case) -> Refusal | None:
    """TASK's tasktmp must be absent or a real directory of ours, never a link (§7a)."""
    tmp = c.obs.tasktmp.get(c.task)
    if tmp is None or not tmp.problem:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [f"REFUSED: {tmp.problem}; nothing was changed"],
        [
            f"fm never follows or removes a tasktmp that is not its own directory: look "
            f"at it (ls -ld {tmp.path}), remove it if it is not needed, then re-run"
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
        [f"REFUSED: {problem}; nothing was changed"],
        ["run fm as the user that owns the state dir"],
        problem,
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
                [f"REFUSED: slot {c.slot} {what} {label} ({root}); nothing was changed"],
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
        [
            f"REFUSED: fm is running inside {c.task}'s own window {c.record.window}; "
            "nothing was changed"
        ],
        ["run the teardown from another window"],
        f"fm is running inside {c.task}'s own window {c.record.window}",
    )


def live_owner(c: Case, owners: Sequence[Owner], draft: Draft) -> tuple[Refusal | None, str | None]:
    """(the refusal, None), or (None, the live owner discarded by name), or (None, None)."""
    live = live_of(owners)
    wanted = c.flags.discard_live_owner
    if not live:
        if wanted is not None:
            draft.warnings.append(
                f"--discard-live-owner={wanted}: the slot has no live owner; the flag has no effect"
            )
        return None, None
    if wanted is not None and c.flags.force and len(live) == 1 and live[0].id == wanted:
        draft.warnings.append(
            f"discarding live owner {wanted} as asked (--force --discard-live-owner): its "
            "processes in the slot will be ended and the slot returned"
        )
        return None, wanted
    names = ", ".join(o.id for o in live)
    lines = [f"REFUSED: slot {c.slot} is owned by another live task: {names}; nothing was changed"]
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
            if live[0].id in c.fleet.records
            else ""
        )
        hints.append(
            f"last resort, destroys {live[0].id}'s live work in this slot (its processes there "
            f"are ended and the tree is reset{saved}): "
            f"fm teardown {c.task} --force --discard-live-owner={live[0].id}"
        )
    return _refusal(Verdict.LIVE_OWNER, lines, hints, _owners_headline(live)), None


def stale_slot(
    c: Case, owners: Sequence[Owner], discarded: str | None, draft: Draft
) -> Decision | None:
    """Other claimants, none live: whose slot is it now? If not TASK's (or it cannot be told),
    the slot is stale: only TASK's own endpoint and record are cleaned."""
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
        others = others.plus(claim.task)  # so is a slot claim naming another task (§10)
    stale_others = others if discarded is None else [o for o in others if o != discarded]
    if not stale_others or discarded is not None:
        if not others and not any(o.live for o in owners):
            draft.reasons.append(f"{c.task} is the only claimant of slot {c.slot}")
        return None
    cur = current_owner(c.task, c.fleet, c.obs, stale_others)
    names = _listed(stale_others)
    claim_s = "claims" if len(stale_others) == 1 else "claim"
    if cur.is_task:
        draft.reasons.append(f"{names} also {claim_s} the slot but none is live; {cur.why}")
        draft.warnings.append(f"{names}'s record(s) will name a returned slot")
        return None
    who = cur.owner or _listed(stale_others, " / ")
    draft.warnings.append(
        f"slot {c.slot} is stale for {c.task}: it belongs to {who} ({cur.why}); "
        "the tree, its processes and the pool slot are left alone"
    )
    draft.reasons.append(f"stale slot: {names} also {claim_s} it, none is live; {cur.why}")
    return Decision(
        c.task,
        Verdict.STALE,
        tuple(draft.reasons),
        owners,
        (_endpoint_step(c.record, c.endpoint), *_record_steps(c.record)),
        warnings=tuple(draft.warnings),
        slot=c.slot,
        endpoint=c.endpoint.state,
        skip_reason="stale slot: left to its current owner",
        project=c.record.project,
        pool=_pool_dir(c),
        headline=f"the slot belongs to {who} now: only {c.task}'s window and record are cleared",
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
    return _refusal(Verdict.UNSAFE, [f"REFUSED: {problem}; nothing was changed"], [hint], problem)


def foreign_git_dir(c: Case) -> Refusal | None:
    """Git run in a slot whose .git is not its own (rule 5, the save, the pool's reset) would
    act on another tree (§7a)."""
    if not c.facts.exists or not c.facts.git_problem:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [f"REFUSED: {c.facts.git_problem}; nothing was changed"],
        [
            "see whose tree it is (git -C <slot> rev-parse --git-dir --show-toplevel); "
            "copy out what the task needs, then fix the record's worktree= or the slot with "
            "the pool's owner, and re-run"
        ],
        c.facts.git_problem,
    )


def slot_will_be_returned(c: Case, discarded: str | None, draft: Draft) -> tuple[bool, str | None]:
    """(whether the plan ends the slot's processes and returns it, why not if not)."""
    if not c.facts.exists:
        reason = f"slot directory {c.slot} no longer exists: processes and pool steps skipped"
        draft.reasons.append(reason)
        return False, reason
    entry = c.facts.pool.entry
    assert entry is not None  # pool_not_ready refused otherwise
    recorded_lease = c.record.lease_id is not None or c.record.lease_holder is not None
    if not entry.leased and recorded_lease and discarded is None:
        reason = (
            "the pool shows no lease on the slot although the record names one: it was "
            "already returned; processes and pool steps skipped"
        )
        draft.reasons.append(reason)
        return False, reason
    return True, None


def never_signalled_in_slot(c: Case, spared: NeverSignalled) -> Refusal | None:
    """The pool's return ends every process in the slot: what fm must never end may not be
    there (a tmux server would take every window of the fleet with it)."""
    blocked = blocking_the_return(c.facts.procs, spared)
    if not blocked:
        return None
    return _refusal(
        Verdict.UNSAFE,
        [
            f"REFUSED: {_named(blocked)} work in slot {c.slot}, and the pool's return ends "
            "every process there; fm never ends them; nothing was changed"
        ],
        _blocked_hints(blocked),
        f"{_named(blocked)} work in this slot, and the pool's return would end them",
    )


def unlanded(
    c: Case, landed: LandedLike | None, discarded: str | None, draft: Draft
) -> tuple[Refusal | None, bool]:
    """Rule 5: (the refusal, False), or (None, whether --force saves the work first)."""
    if landed is None:
        return None, False  # nothing left to check: the slot is gone
    if landed.landed:
        draft.reasons.append(f"own work: {landed.summary}")
        return None, False
    if c.flags.force:
        if discarded is not None and discarded in c.fleet.records:
            # The slot now holds the discarded live owner's work, not TASK's (§7a).
            draft.warnings.append(
                f"--force --discard-live-owner: discarding {discarded}'s unlanded work in "
                f"the slot ({landed.summary})"
            )
        else:
            draft.warnings.append(
                f"--force: discarding {c.task}'s own unlanded work ({landed.summary})"
            )
        return None, c.record.kind == "ship" and c.facts.exists
    lines = [f"REFUSED: {c.task}'s own work is not landed: {landed.summary}; nothing was changed"]
    untracked = set(landed.untracked)
    lines += [f"{'untracked' if p in untracked else 'uncommitted'}: {p}" for p in landed.dirty]
    lines += [f"unpushed: {u}" for u in landed.unpushed]
    lines += [f"could not tell: {n}" for n in landed.notes]
    if c.record.kind == "scout":
        land = f"land it: the scout's work product is data/{c.task}/report.md: have it written"
    elif c.record.kind == "secondmate":
        land = "land it: let its child tasks finish, or tear them down first"
    elif landed.branch:
        land = f"land it: commit and push the branch {landed.branch}, or merge its PR"
    elif landed.head:
        land = (
            "land it: HEAD is detached, so put the work on a branch first "
            "(git -C <slot> switch -c <name>), then commit and push it, or merge its PR"
        )
    else:
        land = "land it: commit and push it, or merge its PR"
    return _refusal(
        Verdict.UNLANDED,
        lines,
        [
            land,
            f"or, last, discard it: fm teardown {c.task} --force (it is saved first under "
            f"refs/fm/discarded/{c.task}/<time>; `fm restore {c.task}` brings it back)",
        ],
        f"{c.task}'s own work would be lost: {landed.summary}",
    ), False


def live_children(c: Case, returns_slot: bool, draft: Draft) -> Refusal | None:
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
                f"REFUSED: secondmate {c.task}'s home has a live task: {names}; "
                "nothing was changed",
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
    if kids and returns_slot:
        draft.warnings.append(
            f"--force: the records in {c.task}'s home ({', '.join(kids)}) go with the home; "
            "their slots are left as they are (`fm teardown --dry-run` lists orphans)"
        )
    return None


def unsupported_duty(c: Case, draft: Draft) -> None:
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
        draft.warnings.append(
            f"{c.task} is a secondmate whose home {home} is not its slot: fm does not remove "
            "a secondmate home (firstmate's script did); remove it by hand once nothing uses it"
        )


# -- building the decision ----------------------------------------------------------------------


def _pool_dir(c: Case) -> str | None:
    state_file = c.facts.pool.state_file
    return os.path.dirname(state_file) if state_file else None


def refuse(c: Case, refusal: Refusal, owners: Sequence[Owner] = ()) -> Decision:
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


def _proceed(
    c: Case,
    draft: Draft,
    owners: Sequence[Owner],
    plan: tuple[Step, ...],
    *,
    landed_pending: bool = False,
    pool_return: PoolReturn | None = None,
    discarded_owner: str | None = None,
    save_discarded: bool = False,
    save_as: str | None = None,
    end_processes: bool = False,
    skip_reason: str | None = None,
    notes: tuple[str, ...] = (),
    headline: str = "",
    branch: BranchDelete | None = None,
    own_claim: str | None = None,
) -> Decision:
    return Decision(
        c.task,
        Verdict.PROCEED,
        tuple(draft.reasons),
        owners,
        plan,
        warnings=tuple(draft.warnings),
        slot=c.slot,
        endpoint=c.endpoint.state,
        pool_return=pool_return,
        discarded_owner=discarded_owner,
        save_discarded=save_discarded,
        save_as=save_as,
        landed_pending=landed_pending,
        end_processes=end_processes,
        skip_reason=skip_reason,
        notes=notes,
        headline=headline,
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
        plan.append(
            Step(
                StepName.SAVE_DISCARDED,
                f"refs/fm/discarded/{save_as}/<UTC timestamp>",
                f"commit {save_as}'s uncommitted and untracked files on HEAD in {c.record.project}",
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
        plan.append(
            Step(
                StepName.POOL,
                pool_return.path,
                "treehouse " + " ".join(pool_return.argv) + "; verified in the pool's state",
            )
        )
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
            parts.append(f"{o.id} (an agent of no task's endpoint) is working in this slot")
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
    if landed is not None:
        return f"--force: {c.task}'s own unlanded work is saved, then discarded"
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
    someone's terminal cd'd into the slot (perhaps the operator's own): say so before it ends."""
    from fm_teardown.endpoint import ProcessClass, classify

    if classify(p.name, p.argv0) == ProcessClass.SHELL and p.pid not in c.obs.endpoint_owner:
        return (
            f"{p.name} ({p.pid}, a shell in a terminal, no task's: cd out of the slot to keep it)"
        )
    return f"{p.name} ({p.pid})"


def _signal_detail(c: Case, spared: NeverSignalled, slot_procs: tuple[Proc, ...]) -> str:
    """What the processes step would signal now, every process by name and pid (§7a)."""
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
