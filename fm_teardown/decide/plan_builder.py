"""The plan: a ruling turned into the `Decision` and its ordered steps (spec §5, §7a). Pure.

A refusal has an empty plan; a stale slot cleans only TASK's own window and record; past every
rule the plan is built in the order the steps run (the order and why: `act/steps.py`), one
builder per step (`PROCEED_STEPS`, `STALE_STEPS`), each `Step` with what it acts on, its
action (what it will do, as a value: `model/step_actions.py`, e.g. the pool's return
conditional on the lease seen) and what it would do now in words; then the steps a run
reports though the plan leaves them out, and the headline that says why.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from fm_teardown.decide.case import Case, Refusal, Stale
from fm_teardown.decide.census import Kind, kind_of, placement, where_of
from fm_teardown.decide.hints import shell_where
from fm_teardown.decide.sparing import NeverSignalled, to_signal
from fm_teardown.model.causes import StaleHeadline
from fm_teardown.model.errors import Verdict
from fm_teardown.model.landing import Reason, said
from fm_teardown.model.leases import unconditional_only
from fm_teardown.model.plan import (
    Decision,
    DecisionWarning,
    LandedLike,
    LeftOut,
    Owner,
    Step,
    StepName,
    Where,
)
from fm_teardown.model.records import RecordKind
from fm_teardown.model.scaffold import SCAFFOLD_PATHS
from fm_teardown.model.step_actions import (
    AbortParkedRun,
    BranchDelete,
    EndProcesses,
    PoolReturn,
    RemoveClaim,
    RemoveHooks,
    SaveWork,
)
from fm_teardown.model.world import EndpointState, PoolEntry, Proc

__all__ = [
    "PROCEED_STEPS",
    "SAID_WHEN_LEFT_OUT",
    "STALE_STEPS",
    "proceed_decision",
    "refusal_decision",
    "stale_decision",
]


def _pool_dir(c: Case) -> str | None:
    state_file = c.facts.pool.state_file
    return os.path.dirname(state_file) if state_file else None


def _where(c: Case) -> Where:
    return Where(c.slot, c.endpoint.state, c.record.project, _pool_dir(c))


def refusal_decision(c: Case, refusal: Refusal, owners: Sequence[Owner] = ()) -> Decision:
    """A refusal: its verdict and reasons, an empty plan."""
    return Decision(
        c.task,
        refusal.verdict,
        refusal.reasons,
        owners,
        hints=refusal.hints,
        where=_where(c),
        headline=refusal.headline,
    )


def stale_decision(
    c: Case, reasons: list[Reason], warnings: list[DecisionWarning], stale: Stale
) -> Decision:
    """A stale slot: only TASK's own endpoint and record are cleaned."""
    plan = _plan(c, STALE_STEPS)
    return Decision(
        c.task,
        Verdict.STALE,
        tuple(reasons),
        c.owners,
        plan,
        warnings=tuple(warnings),
        where=_where(c),
        headline=StaleHeadline(stale.owner, c.task),
        left_out=_left_out(c, plan, "stale slot: left to its current owner"),
    )


def proceed_decision(c: Case, reasons: list[Reason], warnings: list[DecisionWarning]) -> Decision:
    """Past every rule: TASK's slot is TASK's to tear down."""
    discarded, landed = c.discarded, c.work
    plan = _plan(c, PROCEED_STEPS)
    return Decision(
        c.task,
        Verdict.PROCEED,
        tuple(reasons),
        c.owners,
        plan,
        warnings=tuple(warnings),
        where=_where(c),
        notes=landed.notes if landed is not None else (),
        headline=_proceed_headline(c, landed, c.not_returned, discarded),
        left_out=_left_out(c, plan, c.not_returned),
        discarded_owner=discarded,
    )


# The steps a real run reports whether or not the plan has them: what it did to the slot.
SAID_WHEN_LEFT_OUT = (StepName.PROCESSES, StepName.POOL)


def _left_out(c: Case, plan: tuple[Step, ...], why: str | None) -> tuple[LeftOut, ...]:
    """The steps of `SAID_WHEN_LEFT_OUT` the plan does not have (a slot the plan leaves as it
    is: `why`): a real run reports them skipped, and why."""
    if c.slot is None:
        return ()  # nothing is acted on
    planned = {s.step for s in plan}
    return tuple(LeftOut(n, c.slot, why) for n in SAID_WHEN_LEFT_OUT if n not in planned)


def _plan(c: Case, builders: Sequence[Builder]) -> tuple[Step, ...]:
    """The steps in the order they run (the order and why: `act/steps.py`), each from its
    builder: a step the case does not call for is left out."""
    return tuple(step for build in builders if (step := build(c)) is not None)


# -- each step's plan: what it acts on, what it would do now (its action), in words -------------


def _parked_run(c: Case) -> Step | None:
    """A ship task's own no-mistakes run parked at a gate, aborted first (spec §15.5b): when
    the slot is returned and `no-mistakes` is on PATH. Deciding runs no `no-mistakes`: the
    plan says what the step looks for."""
    binary = c.obs.env.no_mistakes_bin
    if not c.returns_slot or c.record.kind != RecordKind.SHIP or binary is None:
        return None
    assert c.slot is not None
    return Step(
        StepName.PARKED_RUN,
        c.slot,
        f"ask {binary} for the run in the slot (no-mistakes axi status); if it is "
        f"{c.task}'s (its branch and head the slot's) and parked at a gate, abort it "
        "(no-mistakes axi abort --run <id>) and read it back stopped, or stop here",
        action=AbortParkedRun(c.slot, binary),
    )


def _endpoint(c: Case) -> Step:
    ep, record = c.endpoint, c.record
    if ep.state == EndpointState.MISSING:
        detail = f"already gone ({ep.detail}): nothing to kill"
    else:
        detail = (
            f"kill window {', '.join(ep.window_ids) or record.window} ({ep.state}: {ep.detail})"
        )
    return Step(StepName.ENDPOINT, record.target, detail)


def _processes(c: Case) -> Step | None:
    """Every process in the slot when the plan returns it; else still those in TASK's temp
    dir when it exists: the record step is about to remove it."""
    tmp = c.obs.tasktmp.get(c.task)
    ends = EndProcesses(None, c.discarded, sole_claimant=not c.owners)
    if c.returns_slot:
        assert c.slot is not None
        targets = c.slot + (f" and {c.record.tasktmp}" if c.record.tasktmp else "")
        detail = _signal_detail(c, c.spared, c.facts.procs)
        return Step(StepName.PROCESSES, targets, detail, action=replace(ends, slot=c.slot))
    if c.record.tasktmp and tmp is not None and tmp.exists:
        detail = _signal_detail(c, c.spared, ())
        return Step(StepName.PROCESSES, c.record.tasktmp, detail, action=ends)
    return None


def _save(c: Case) -> Step | None:
    """--force saves the work it discards: TASK's own, or the discarded live owner's."""
    if not c.saves_work:
        return None
    discarded = c.discarded
    owner = discarded if discarded is not None and discarded in c.fleet.records else c.task
    records = (
        " and the task records of its home's state/ (their bytes)"
        if c.record.kind == RecordKind.SECONDMATE
        else ""
    )
    return Step(
        StepName.SAVE_DISCARDED,
        f"refs/fm/discarded/{owner}/<UTC timestamp>",
        f"commit {owner}'s uncommitted and untracked files{records} on HEAD in {c.record.project}",
        action=SaveWork(owner),
    )


def _hooks(c: Case) -> Step | None:
    if not c.returns_slot:
        return None
    assert c.slot is not None
    return Step(
        StepName.HOOKS,
        c.slot,
        "remove the fleet's hook files git does not track: " + ", ".join(SCAFFOLD_PATHS),
        action=RemoveHooks(c.slot),
    )


def _pool(c: Case) -> Step | None:
    if not c.returns_slot:
        return None
    # Forced under --force (after its save), and where the slot is not the task's work as a
    # ship's is: a scout's scratch, a secondmate's home (looked at again right before).
    forced = c.flags.force or c.record.kind in (RecordKind.SCOUT, RecordKind.SECONDMATE)
    pool_return = _pool_return(c.facts.pool.entry, forced)
    say = "treehouse " + " ".join(pool_return.argv) + "; verified in the pool's state"
    if unconditional_only(c.record, pool_return, lambda: c.facts.pool.entry):
        # The real run decides this under the slot lock, from a fresh look at the pool
        # and the slot: the plan says both outcomes rather than one that may not happen.
        say += (
            "; or no call at all if the slot is still unleased, clean and its HEAD merged "
            "then (the pool's next get reuses it as it is)"
        )
    return Step(StepName.POOL, pool_return.path, say, action=pool_return)


def _branch(c: Case) -> Step | None:
    """The branch the slot had checked out when deciding, at the commit seen then (never
    when a live owner is discarded: the branch may be theirs)."""
    landed = c.work
    if not c.returns_slot or c.discarded is not None or landed is None:
        return None
    if landed.branch is None or landed.head is None:
        return None
    branch = BranchDelete(landed.branch, landed.head, landed.default_branch)
    return Step(
        StepName.BRANCH,
        f"refs/heads/{branch.name}",
        f"delete it if it still names {branch.commit[:12]} and is checked out nowhere "
        "else (a failure only warns)",
        action=branch,
    )


def _claim(c: Case) -> Step | None:
    claim = c.facts.claim
    if not c.returns_slot or claim is None or claim.task != c.task:
        return None
    return Step(
        StepName.CLAIM,
        claim.path,
        f"remove {c.task}'s own slot claim",
        action=RemoveClaim(claim.path),
    )


def _auth(c: Case) -> Step:
    """Whenever the record goes (proceed and stale alike): the hook auth entries, the
    cost-attribution row, then the record itself, the meta last."""
    task = c.record.task_id
    return Step(
        StepName.AUTH,
        f"state/{task}.grok-turnend-token, .kimi-turnend-token, .agy-turnend-token",
        "remove the grok, kimi and agy hook auth entries the token files name, if any",
    )


def _attribution(c: Case) -> Step:
    return Step(
        StepName.ATTRIBUTION,
        "data/cost-attribution.tsv",
        f"append {c.record.task_id}'s cost-attribution row (a failure only warns)",
    )


def _record(c: Case) -> Step:
    record = c.record
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
    return Step(StepName.RECORD, record.meta_path, "; ".join(parts))


Builder = Callable[[Case], Step | None]

# Each step's builder, in the order the steps run: `act/steps.py`'s table, where the order and
# why are written (tests/test_step_table.py holds the two in the same order). A new step adds
# its builder here, where it runs.
PROCEED_STEPS: tuple[Builder, ...] = (
    _parked_run,
    _endpoint,
    _processes,
    _save,
    _hooks,
    _pool,
    _branch,
    _claim,
    _auth,
    _attribution,
    _record,
)
# A stale slot is left to its owner: only TASK's window and record (with its duties) go.
STALE_STEPS: tuple[Builder, ...] = (_endpoint, _auth, _attribution, _record)


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
