"""The decision: verdict, reasons, owners and the ordered plan (CONTRACT §5, §6). Pure.

`decide` reads only its arguments: no I/O, no clock, no randomness. The rules are applied in
the contract's order; the first that refuses ends the decision with an empty plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from fm_teardown.errors import Verdict
from fm_teardown.ownership import (
    Owner,
    current_owner,
    invalid_claimants,
    lease_is_tasks,
    lease_task,
    other_claimants,
    owners_of,
)
from fm_teardown.paths import is_ancestor_or_same
from fm_teardown.records import Fleet, Record
from fm_teardown.sparing import (
    Blocker,
    Spared,
    Why,
    blocking_the_return,
    never_signalled,
    to_signal,
)
from fm_teardown.world import Endpoint, EndpointState, Observation, PoolEntry, Proc


@dataclass(frozen=True)
class Flags:
    force: bool = False
    discard_live_owner: str | None = None
    dry_run: bool = False


class LandedLike(Protocol):
    """The facts rule 5 needs (fm_teardown.landed.LandedFacts)."""

    @property
    def landed(self) -> bool: ...
    @property
    def summary(self) -> str: ...
    @property
    def dirty(self) -> tuple[str, ...]: ...
    @property
    def unpushed(self) -> tuple[str, ...]: ...
    @property
    def notes(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Step:
    step: str  # endpoint | processes | save-discarded | pool | record
    target: str
    detail: str
    outcome: str = "planned"


@dataclass(frozen=True)
class PoolReturn:
    """`treehouse return --force [--if-lease-id ID] [--if-lease-holder H] <path>`."""

    path: str  # exactly as the pool's state file stores it
    lease_id: str | None
    lease_holder: str | None

    @property
    def argv(self) -> list[str]:
        argv = ["return", "--force"]
        if self.lease_id:
            argv += ["--if-lease-id", self.lease_id]
        if self.lease_holder is not None:
            argv += ["--if-lease-holder", self.lease_holder]
        return [*argv, self.path]


@dataclass(frozen=True)
class Decision:
    task: str
    verdict: Verdict
    reasons: tuple[str, ...]
    owners: tuple[Owner, ...] = ()
    plan: tuple[Step, ...] = ()
    hints: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    slot: str | None = None
    endpoint: EndpointState | None = None
    pool_return: PoolReturn | None = None
    discarded_owner: str | None = None
    save_discarded: bool = False
    # Whose work the save holds: TASK's own, or the discarded live owner's (§7a).
    save_as: str | None = None
    # True while rule 5 still has to be checked: the caller gathers TASK's landed facts (only
    # now, so that git never runs on a slot that is somebody else's) and decides again.
    landed_pending: bool = False
    end_processes: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def exit_code(self) -> int:
        return int(self.verdict.exit_code)


def _refuse(
    task: str, verdict: Verdict, reasons: list[str], hints: list[str], **kw: object
) -> Decision:
    return Decision(task, verdict, tuple(reasons), hints=tuple(hints), **kw)  # type: ignore[arg-type]


def _endpoint_step(record: Record, ep: Endpoint) -> Step:
    if ep.state == EndpointState.MISSING:
        detail = f"already gone ({ep.detail}); confirmed absent"
    else:
        detail = (
            f"kill window {', '.join(ep.window_ids) or record.window} ({ep.state}: {ep.detail})"
        )
    return Step("endpoint", record.target, detail)


def _record_step(record: Record) -> Step:
    parts = []
    if record.tasktmp:
        parts.append(f"remove {record.tasktmp}")
    parts.append(f"remove state/{record.task_id}.* sidecars, then {record.meta_path} last")
    return Step("record", record.meta_path, "; ".join(parts))


def _pool_return(entry: PoolEntry) -> PoolReturn:
    """Conditional on the lease seen: its id, and its holder when it has one (an empty holder
    is the only condition left for a lease without an id, e.g. a legacy lease)."""
    if not entry.leased:
        return PoolReturn(entry.path, None, None)
    holder = entry.lease_holder if entry.lease_holder or not entry.lease_id else None
    return PoolReturn(entry.path, entry.lease_id or None, holder)


def _procs_named(blocked: list[Blocker]) -> str:
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


def _signal_detail(
    task: str, obs: Observation, spared: dict[int, Why], slot_procs: tuple[Proc, ...]
) -> str:
    """What the processes step would signal now, every process by name and pid (§7a)."""
    tmp = obs.tasktmp.get(task)
    procs = {p.pid: p for p in (*slot_procs, *(tmp.procs if tmp else ()))}
    targets = to_signal(tuple(procs.values()), spared)
    kept = [p for p in procs.values() if p.pid in spared]
    text = (
        "end every process whose cwd is inside (SIGTERM, grace, SIGKILL; by pid and "
        "start time), then re-scan; "
    )
    if targets:
        text += f"now {len(targets)}: " + ", ".join(f"{p.name} ({p.pid})" for p in targets)
    else:
        text += "none there now"
    if kept:
        text += "; never signalled: " + ", ".join(
            f"{p.name} ({p.pid}, {spared[p.pid]})" for p in kept
        )
    return text


def decide(
    task: str,
    fleet: Fleet,
    obs: Observation,
    flags: Flags,
    landed: LandedLike | None = None,
) -> Decision:
    record = fleet.records[task]
    slot = obs.slot_of[task]
    ep = obs.endpoints[task]
    base: dict[str, object] = {"slot": slot, "endpoint": ep.state}
    reasons: list[str] = []
    warnings: list[str] = []

    # Rule 1: another record that cannot be validated might own this slot.
    blockers = invalid_claimants(task, fleet, obs)
    if blockers:
        lines = []
        for b in blockers:
            bad = fleet.invalid[b]
            claim = (
                "its slot cannot be told" if obs.invalid_slots[b] is None else "it names this slot"
            )
            lines.append(
                f"record {bad.meta_path} of task '{b}' is invalid ({bad.problem}) and {claim}: "
                "it might be a live owner"
            )
        return _refuse(
            task,
            Verdict.UNSAFE,
            [f"REFUSED: {lines[0]}; nothing was changed", *lines[1:]],
            ["fix or remove that record (it may belong to a live task), then re-run"],
            **base,
        )

    # Rule 1, environment: TASK's tasktmp must be a real directory of ours, never a link.
    tmp = obs.tasktmp.get(task)
    if tmp is not None and tmp.problem:
        return _refuse(
            task,
            Verdict.UNSAFE,
            [f"REFUSED: {tmp.problem}; nothing was changed"],
            [
                f"fm never follows or removes a tasktmp that is not its own directory: look "
                f"at it (ls -ld {tmp.path}), remove it if it is not needed, then re-run"
            ],
            **base,
        )
    if obs.env.state_dir_problem:
        return _refuse(
            task,
            Verdict.UNSAFE,
            [f"REFUSED: {obs.env.state_dir_problem}; nothing was changed"],
            ["run fm as the user that owns the state dir"],
            **base,
        )

    # Rule 2: never reset a tree the pool does not own.
    roots = {
        "the project checkout": obs.project_of[task],
        "/": "/",
        "$HOME": obs.env.home,
        "FM_HOME": obs.env.fm_home,
    }
    for label, root in roots.items():
        if root is not None and is_ancestor_or_same(slot, root):
            what = "is" if slot == root else "is an ancestor of"
            return _refuse(
                task,
                Verdict.UNSAFE,
                [f"REFUSED: slot {slot} {what} {label} ({root}); nothing was changed"],
                ["a slot must be a pool worktree; fix the record's worktree="],
                **base,
            )

    if ep.pids & obs.env.protected:
        return _refuse(
            task,
            Verdict.UNSAFE,
            [
                f"REFUSED: fm is running inside {task}'s own window {record.window}; "
                "nothing was changed"
            ],
            ["run the teardown from another window"],
            **base,
        )

    # Rule 3: another live owner.
    owners = owners_of(task, fleet, obs)
    live = [o for o in owners if o.live]
    base["owners"] = tuple(owners)
    discarded: str | None = None
    if live:
        wanted = flags.discard_live_owner
        if wanted is not None and flags.force and len(live) == 1 and live[0].id == wanted:
            discarded = wanted
            warnings.append(
                f"discarding live owner {wanted} as asked (--force --discard-live-owner): its "
                "processes in the slot will be ended and the slot returned"
            )
        else:
            names = ", ".join(o.id for o in live)
            lines = [
                f"REFUSED: slot {slot} is owned by another live task: {names}; nothing was changed"
            ]
            lines += [f"{o.id} ({o.kind}, endpoint {o.endpoint}): {o.why}" for o in live]
            hints = []
            if wanted is not None and not flags.force:
                hints.append("--discard-live-owner takes effect only together with --force")
            elif wanted is not None and len(live) > 1:
                hints.append(
                    f"more than one live owner ({names}): one flag cannot discard them all"
                )
            elif wanted is not None:
                hints.append(
                    f"--discard-live-owner={wanted} does not name the live owner ({names})"
                )
            elif flags.force:
                hints.append("--force does not lift this: it discards only this task's own work")
            hints.append(f"let {names} finish (or end it), then re-run")
            if len(live) == 1:
                hints.append(
                    f"to discard {live[0].id}'s live work in this slot: "
                    f"fm teardown {task} --force --discard-live-owner={live[0].id}"
                )
            return _refuse(task, Verdict.LIVE_OWNER, lines, hints, **base)
    elif flags.discard_live_owner is not None:
        warnings.append(
            f"--discard-live-owner={flags.discard_live_owner}: the slot has no live owner; "
            "the flag has no effect"
        )

    if ep.state == EndpointState.ALIVE:
        reasons.append(f"own endpoint is alive ({ep.detail}); a task's own pane never blocks")

    facts = obs.slots[slot]
    others = other_claimants(task, fleet, obs)
    entry = facts.pool.entry
    holder = (
        lease_task(entry, task, fleet)
        if entry is not None and not lease_is_tasks(entry, record)
        else None
    )
    if holder is not None and holder not in others:
        others = [*others, holder]  # a lease held by another task is that task's claim
    stale_others = [o for o in others if o != discarded]
    # Rule 4: other claimants, none live: whose slot is it now?
    if stale_others and discarded is None:
        cur = current_owner(task, fleet, obs, stale_others)
        if not cur.is_task:
            who = cur.owner or " / ".join(stale_others)
            warnings.append(
                f"slot {slot} is stale for {task}: it belongs to {who} ({cur.why}); "
                "the tree, its processes and the pool slot are left alone"
            )
            reasons.append(
                f"stale slot: {', '.join(stale_others)} also claim it, none is live; {cur.why}"
            )
            return Decision(
                task,
                Verdict.STALE,
                tuple(reasons),
                tuple(owners),
                (_endpoint_step(record, ep), _record_step(record)),
                warnings=tuple(warnings),
                slot=slot,
                endpoint=ep.state,
            )
        reasons.append(f"{', '.join(stale_others)} also claim the slot but none is live; {cur.why}")
        warnings.append(f"{', '.join(stale_others)}'s record(s) will name a returned slot")
    elif not others and not live:
        reasons.append(f"{task} is the only claimant of slot {slot}")

    plan: list[Step] = [_endpoint_step(record, ep)]
    pool_return: PoolReturn | None = None
    end_processes = False
    kind_checks = record.kind in ("scout", "secondmate")
    if not facts.exists:
        reasons.append(f"slot directory {slot} no longer exists: processes and pool steps skipped")
    else:
        # The pool must manage the slot before anything destructive (rule 1, environment).
        pool = facts.pool
        problem = None
        if obs.env.treehouse_bin is None:
            problem = "the pool's `treehouse` executable was not found (PATH or FM_TREEHOUSE_BIN)"
        elif obs.env.treehouse_problem:
            problem = obs.env.treehouse_problem
        elif pool.error:
            problem = f"the pool's state cannot be read: {pool.error}"
        elif pool.entry is None:
            problem = f"slot {slot} is not managed by the pool" + (
                f" (no entry in {pool.state_file})" if pool.state_file else " (no pool state file)"
            )
        elif pool.entry.destroying:
            problem = f"slot {slot} is being destroyed by the pool"
        elif facts.git_problem:
            # Git run there (rule 5, the save, the pool's reset) would act on another tree.
            problem = facts.git_problem
        if problem:
            return _refuse(
                task,
                Verdict.UNSAFE,
                [f"REFUSED: {problem}; nothing was changed"],
                [
                    "see whose tree it is (git -C <slot> rev-parse --git-dir --show-toplevel); "
                    "fix the record's worktree= or the slot by hand, then re-run"
                    if problem == facts.git_problem
                    else "return the slot by hand, or fix the pool, then re-run"
                ],
                **base,
            )
        assert pool.entry is not None
        entry = pool.entry
        spared = never_signalled(obs, task, discarded)
        recorded_lease = record.lease_id is not None or record.lease_holder is not None
        if not entry.leased and recorded_lease and discarded is None:
            reasons.append(
                "the pool shows no lease on the slot although the record names one: it was "
                "already returned; processes and pool steps skipped"
            )
        else:
            # The pool's return ends every process in the slot: what fm must never end may
            # not be there (a tmux server would take every window of the fleet with it).
            blocked = blocking_the_return(facts.procs, spared)
            if blocked:
                return _refuse(
                    task,
                    Verdict.UNSAFE,
                    [
                        f"REFUSED: {_procs_named(blocked)} work in slot {slot}, and the pool's "
                        "return ends every process there; fm never ends them; nothing was "
                        "changed"
                    ],
                    _blocked_hints(blocked),
                    **base,
                )
            end_processes = True
            # A lease that is not TASK's was a live owner above, so here the lease is TASK's
            # or the discarded owner's: the return is conditional on exactly what was seen.
            pool_return = _pool_return(entry)
            targets = slot + (f" and {record.tasktmp}" if record.tasktmp else "")
            plan.append(Step("processes", targets, _signal_detail(task, obs, spared, facts.procs)))

    tmp_exists = tmp is not None and tmp.exists
    if not end_processes and record.tasktmp and tmp_exists:
        # The slot is gone or already returned, but TASK's temp dir is about to be removed:
        # end what still runs in it first.
        spared = never_signalled(obs, task, discarded)
        plan.append(Step("processes", record.tasktmp, _signal_detail(task, obs, spared, ())))

    def proceed(**extra: object) -> Decision:
        return Decision(
            task,
            Verdict.PROCEED,
            tuple(reasons),
            tuple(owners),
            tuple(plan),
            warnings=tuple(warnings),
            slot=slot,
            endpoint=ep.state,
            **extra,  # type: ignore[arg-type]
        )

    # Rule 5: TASK's own work (a slot that no longer exists has nothing left to lose).
    needs_check = kind_checks or facts.exists
    save = False
    notes: list[str] = []
    if needs_check:
        if landed is None:
            return proceed(landed_pending=True)
        notes.extend(landed.notes)
        if landed.landed:
            reasons.append(f"own work: {landed.summary}")
        elif flags.force:
            save = record.kind == "ship" and facts.exists
            if discarded is not None and discarded in fleet.records:
                # The slot now holds the discarded live owner's work, not TASK's (§7a).
                warnings.append(
                    f"--force --discard-live-owner: discarding {discarded}'s unlanded work in "
                    f"the slot ({landed.summary})"
                )
            else:
                warnings.append(
                    f"--force: discarding {task}'s own unlanded work ({landed.summary})"
                )
        else:
            lines = [
                f"REFUSED: {task}'s own work is not landed: {landed.summary}; nothing was changed"
            ]
            lines += [f"uncommitted: {p}" for p in landed.dirty]
            lines += [f"unpushed: {c}" for c in landed.unpushed]
            lines += [f"could not tell: {n}" for n in landed.notes]
            return _refuse(
                task,
                Verdict.UNLANDED,
                lines,
                [
                    "land it: commit and push the branch, or merge its PR",
                    f"or discard it: fm teardown {task} --force "
                    f"(it is saved first under refs/fm/discarded/{task}/<time>)",
                ],
                **base,
            )
    save_as = discarded if discarded is not None and discarded in fleet.records else task
    if save:
        plan.append(
            Step(
                "save-discarded",
                f"refs/fm/discarded/{save_as}/<UTC timestamp>",
                f"commit {save_as}'s uncommitted and untracked files on HEAD in {record.project}",
            )
        )
    if pool_return is not None:
        plan.append(
            Step(
                "pool",
                pool_return.path,
                "treehouse " + " ".join(pool_return.argv) + "; verified in the pool's state",
            )
        )
    plan.append(_record_step(record))
    if discarded is not None and obs.slot_of.get(discarded) == slot:
        warnings.append(
            f"{discarded}'s record is kept and its window is not killed by name; "
            f"it now names a returned slot"
        )
    return proceed(
        pool_return=pool_return,
        discarded_owner=discarded,
        save_discarded=save,
        save_as=save_as if save else None,
        end_processes=end_processes,
        notes=tuple(notes),
    )
