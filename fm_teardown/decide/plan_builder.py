"""The plan: a ruling turned into the `Decision` and its ordered steps (spec §5, §7a). Pure.

A refusal has an empty plan; a stale slot cleans only TASK's own window and record; past every
rule the plan is built in the order the steps run (the order and why: `act/steps.py`), each
`Step` with what it acts on and what it would do now, the pool's return conditional on the
lease seen (`PoolReturn`), and the headline that says why.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from fm_teardown.decide.case import Case, Refusal, Stale
from fm_teardown.decide.census import Kind, kind_of, placement, where_of
from fm_teardown.decide.hints import shell_where
from fm_teardown.decide.sparing import NeverSignalled, to_signal
from fm_teardown.model.causes import StaleHeadline
from fm_teardown.model.errors import Verdict
from fm_teardown.model.landing import Reason, said
from fm_teardown.model.leases import unconditional_only
from fm_teardown.model.plan import (
    BranchDelete,
    Decision,
    DecisionWarning,
    LandedLike,
    Owner,
    PoolReturn,
    Step,
    StepName,
)
from fm_teardown.model.records import Record, RecordKind
from fm_teardown.model.scaffold import SCAFFOLD_PATHS
from fm_teardown.model.world import Endpoint, EndpointState, PoolEntry, Proc

__all__ = ["proceed_decision", "refusal_decision", "stale_decision"]


def _pool_dir(c: Case) -> str | None:
    state_file = c.facts.pool.state_file
    return os.path.dirname(state_file) if state_file else None


def refusal_decision(c: Case, refusal: Refusal, owners: Sequence[Owner] = ()) -> Decision:
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


def stale_decision(
    c: Case, reasons: list[Reason], warnings: list[DecisionWarning], stale: Stale
) -> Decision:
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
        headline=StaleHeadline(stale.owner, c.task),
        stale_owner=stale.owner,
    )


def proceed_decision(c: Case, reasons: list[Reason], warnings: list[DecisionWarning]) -> Decision:
    """Past every rule: TASK's slot is TASK's to tear down."""
    discarded, returns_slot, landed = c.discarded, c.returns_slot, c.work
    # Forced under --force (after its save), and where the slot is not the task's work as a
    # ship's is: a scout's scratch, a secondmate's home (looked at again right before).
    forced = c.flags.force or c.record.kind in (RecordKind.SCOUT, RecordKind.SECONDMATE)
    pool_return = _pool_return(c.facts.pool.entry, forced) if returns_slot else None
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
            if c.record.kind == RecordKind.SECONDMATE
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
    # TASK's browser stack and the remote-job sweep run with the record's duties (spec
    # §15.5); what runs is known only then, so the plan says what they look for.
    parts = [
        f"end {record.task_id}'s browser stack (its chrome-devtools-axi session) and "
        "remote-job workers of a pruned code root, if any run (best effort)"
    ]
    if record.tasktmp:
        parts.append(f"remove {record.tasktmp}")
    if record.kind == RecordKind.SECONDMATE:
        parts.append(f"remove its route '- {record.task_id} ...' from data/secondmates.md")
    parts.append(f"remove state/{record.task_id}.* sidecars, then {record.meta_path} last")
    return (
        Step(
            StepName.AUTH,
            f"state/{record.task_id}.grok-turnend-token, .kimi-turnend-token, .agy-turnend-token",
            "remove the grok, kimi and agy hook auth entries the token files name, if any",
        ),
        Step(
            StepName.ATTRIBUTION,
            "data/cost-attribution.tsv",
            f"append {record.task_id}'s cost-attribution row (a failure only warns)",
        ),
        Step(StepName.RECORD, record.meta_path, "; ".join(parts)),
    )


def _pool_return(entry: PoolEntry | None, forced: bool = True) -> PoolReturn:
    """Conditional on the lease seen: its id, and its holder when it has one (an empty holder
    is the only condition left for a lease without an id, e.g. a legacy lease). A lease that is
    not TASK's was a live owner, so here it is TASK's or the discarded owner's."""
    assert entry is not None
    if not entry.leased:
        return PoolReturn(entry.path, None, None, forced)
    holder = entry.lease_holder if entry.lease_holder or not entry.lease_id else None
    return PoolReturn(entry.path, entry.lease_id or None, holder, forced)


def _proceed_headline(
    c: Case, landed: LandedLike | None, skip: str | None, discarded: str | None
) -> Reason:
    if discarded is not None:
        return f"discarding the live owner {discarded} as asked; the slot is returned"
    if skip is not None:
        return skip
    if landed is not None and landed.landed:
        before = f"the slot is {c.task}'s and its work is landed ("
        return said(before, landed.proof, "", ")")
    if landed is not None and c.saves_work:
        return f"--force: {c.task}'s own unlanded work is saved, then discarded"
    if landed is not None:
        return f"--force: {c.task}'s own unlanded work is discarded (nothing is saved)"
    return f"the slot is {c.task}'s"


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
