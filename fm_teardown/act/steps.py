"""Acting on a plan (spec §5 "Then act", §7a, §10): the steps, in the one order they run.

`run` carries out a decided plan and returns an `Outcome`; it prints, journals and renders
nothing. Each step records a typed result (`results`: what happened, and so its outcome:
done, absent, skipped, failed), never a sentence; a failed step stops the
run before the next destructive step, keeps the record and exits 1, so that running the same
command again finishes the job. Just before the first step that touches the slot, the slot
lock is taken and the world is observed and decided again (through the `replan` seam): if the
decision changed, nothing more is done and the new verdict is reported. Just before each
destructive call the world is checked again (the window, the pool's lease).

The order, and why (written here only; docs/architecture.md points here):
0. intent: the journal gets the run's intent (task, plan token, steps) before anything is
   destroyed; a journal that cannot take it refuses the run (unless --no-journal);
1. endpoint: TASK's own window first, whatever the slot: its agent must stop writing before
   the slot is judged again, and it is TASK's, so it never needs the slot lock. Right before
   the quit keys and again right before the kill, the window must be the one the decision
   saw (same server, panes, pane processes and foreground processes: `window_identity`),
   else nothing more is typed or killed and the run decides again (`EndpointChanged`). Its
   agent is first asked to quit with its own harness's keys (`graceful`; none while
   `synchronize-panes` is on); then only the window ids seen when deciding are killed;
2. (lock, re-observe, re-decide): under the slot's flock, rule 5 included: late writes
   count, new claimants are seen; a changed decision stops the run;
3. processes: nothing may run in the slot when it is saved and reset; tmux, other endpoints
   and fm's own ancestry are never signalled;
4. save-discarded (--force): after the processes are ended, so nothing writes to it any more;
   before the pool's reset destroys it;
5. hooks (spec §10): the fleet's hook files leave the slot before the return, so the next
   task in it never fires turn-end signals for a dead one;
6. pool: the pool's state is read again right before `treehouse return` (conditional on the
   lease seen), then the return is verified in the state file; an unleased slot the pool
   would reuse as it is is not returned at all (spec §13.7);
7. branch, claim (spec §10, duties.py): only after a verified return (or a slot the pool
   reuses as it is): TASK's branch by compare-and-swap, TASK's own slot claim;
8. auth, attribution: the hook auth entries TASK's token files name, one cost row, whenever
   the record goes;
9. record: tasktmp, the sidecars, the meta last, so that a crash anywhere before leaves the
   record, and the same command re-checks ownership from scratch and finishes the job.
A stale slot runs intent, endpoint, auth, attribution and record only: the tree is someone
else's.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from fm_teardown.act import faults, gitlock, graceful
from fm_teardown.act.lock import slot_lock
from fm_teardown.adapters import interrupts, pool, processes, tmux
from fm_teardown.adapters.interrupts import Interrupted
from fm_teardown.decide.sparing import never_signalled
from fm_teardown.model import messages
from fm_teardown.model import sidecars as _sidecars
from fm_teardown.model.errors import ExitCode, FmError, Lead, Verdict
from fm_teardown.model.leases import lease_name, lease_task, unconditional_only
from fm_teardown.model.outcome import Outcome, Signal
from fm_teardown.model.paths import canonical, is_within
from fm_teardown.model.plan import Decision, Flags, LandedLike, Planned, Step, StepName, StepOutcome
from fm_teardown.model.records import Fleet, Record, RecordProblem, parse_record, read_meta
from fm_teardown.model.results import (
    AttributionResult,
    AttributionWhat,
    BranchResult,
    BranchWhat,
    EndpointResult,
    EndpointWhat,
    HooksWhat,
    NotNeeded,
    NotRun,
    NotRunCause,
    PoolResult,
    PoolWhat,
    ProcessesResult,
    ProcessesWhat,
    ProcRef,
    RecordGone,
    RecordResult,
    RecordWhat,
    SaveResult,
    SaveWhat,
    StepResult,
    Terminal,
)
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.model.world import (
    Endpoint,
    InventoryStatus,
    Observation,
    Pane,
    Proc,
    ProcessTable,
    TmuxInventory,
)
from fm_teardown.observe import window_identity
from fm_teardown.observe.endpoint import terminal_of
from fm_teardown.observe.tasktmp import task_tmp, tmp_root_of

__all__ = [
    "KEPT_SIDECARS",
    "EndpointChanged",
    "Run",
    "Seams",
    "StepFailed",
    "boundary",
    "changed",
    "outcome",
    "run",
    "sidecars",
    "step_attribution",
    "step_auth",
    "step_branch",
    "step_claim",
    "step_endpoint",
    "step_hooks",
    "step_pool",
    "step_processes",
    "step_record",
    "step_save",
]


@value
class Seams:
    """What acting needs from the other stages, as plain callables (the-loop's `cleanup.py`).

    - `replan(remembered)`: load, observe and decide again (under the slot lock, no fetch);
      `remembered` are TASK's own endpoint processes from the snapshot taken before its window
      was killed, still TASK's at the re-check;
    - `observe(fleet, inventory, table)`: an observation from fresh scans, for judging which
      processes are never signalled;
    - `landed(record)`: rule 5's facts again, after a stale git lock was removed;
    - `intent(decision)`: journal what is about to be done, before the first destructive
      step; returns why it could not (the run then refuses, changing nothing), or None.
    """

    replan: Callable[[tuple[Proc, ...]], Planned]
    observe: Callable[[Fleet, TmuxInventory, ProcessTable], Observation]
    landed: Callable[[Record], LandedLike]
    intent: Callable[[Decision], str | None] = lambda _decision: None


class StepFailed(Exception):
    def __init__(self, step: Step) -> None:
        super().__init__(str(step.step))
        self.step = step


@dataclass
class Run:
    settings: Settings
    flags: Flags
    task: str
    fleet: Fleet
    seams: Seams
    steps: list[Step] = field(default_factory=list)
    signalled: dict[int, processes.Signalled] = field(default_factory=dict)
    # Hung up by the window kill of the endpoint step (the journal lists them too).
    hung_up: dict[int, processes.Signalled] = field(default_factory=dict)
    discarded_ref: str | None = None
    restore: str | None = None
    saved_for: str | None = None
    warnings: list[str] = field(default_factory=list)
    # The pool step was skipped because the pool hands the slot out as it is: the slot is
    # back in the pool's hands, as after a verified return.
    pool_reuses: bool = False

    def note(self, step: StepName, target: str, result: StepResult) -> Step:
        """A step that ran (done, or nothing there to act on) or was left out (skipped): its
        outcome is its result's."""
        s = Step(step, target, "", result.outcome, result)
        self.steps.append(s)
        return s

    def fail(self, step: StepName, target: str, result: StepResult) -> StepFailed:
        assert result.outcome == StepOutcome.FAILED, result
        return StepFailed(Step(step, target, "", StepOutcome.FAILED, result))


def boundary(name: str) -> None:
    faults.at(name)
    if interrupts.requested():
        raise Interrupted(name)


# -- the run ------------------------------------------------------------------------------------


def run(settings: Settings, planned: Planned, flags: Flags, seams: Seams) -> Outcome:
    d = planned.decision
    r = Run(settings, flags, d.task, planned.fleet, seams)
    record = planned.fleet.records[d.task]
    if d.verdict not in (Verdict.PROCEED, Verdict.STALE) or d.slot is None:
        return Outcome.of_decision(d, dry_run=False)
    decided_endpoint = planned.observation.endpoints[d.task]
    unjournalled = seams.intent(d)
    if unjournalled is not None:
        reason = f"{unjournalled}: a real run journals its intent before it changes anything"
        refused = replace(
            d,
            verdict=Verdict.UNSAFE,
            reasons=(reason,),
            headline=unjournalled,
            hints=("make the data dir's journal writable, or run without it: --no-journal",),
        )
        return Outcome.of_decision(refused, dry_run=False)
    try:
        with interrupts.while_acting():
            boundary("before-endpoint")
            snapshot = step_endpoint(r, record, decided_endpoint, planned.observation.env.protected)
            boundary("after-endpoint")
            with slot_lock(settings.state_dir, d.slot, settings.lock_timeout):
                boundary("before-recheck")
                again = seams.replan(tuple(snapshot))
                d2 = again.decision
                if _key(d2) != _key(d):
                    return changed(r, d, d2)
                # Report the endpoint as it was before this run ended it.
                d, record = replace(d2, endpoint=d.endpoint), again.fleet.records[d.task]
                r.fleet = again.fleet
                assert d.slot is not None
                if d.end_processes:
                    step_processes(r, record, d.slot, d.discarded_owner)
                elif any(s.step == StepName.PROCESSES for s in d.plan):
                    step_processes(r, record, None, d.discarded_owner)
                else:
                    r.note(StepName.PROCESSES, d.slot, NotNeeded(d.skip_reason))
                boundary("after-processes")
                if d.save_discarded:
                    step_save(r, record, d.save_as or d.task)
                    boundary("after-save")
                if any(s.step == StepName.HOOKS for s in d.plan):
                    step_hooks(r, d.slot)
                if d.pool_return is not None:
                    step_pool(r, record, d)
                else:
                    r.note(StepName.POOL, d.slot, NotNeeded(d.skip_reason))
                boundary("after-pool")
                if d.branch is not None:
                    step_branch(r, record, d)
                if d.own_claim is not None:
                    step_claim(r, d.own_claim, d.task)
                step_record(r, record)
                faults.at("after-record")
    except EndpointChanged as exc:
        r.steps.append(exc.step)
        return _decided_again(r, d)
    except Interrupted:
        r.steps.extend(_left(d, r, NotRunCause.INTERRUPTED))
        return outcome(r, d, Verdict.FAILED, interrupted=True)
    except StepFailed as exc:
        r.steps.append(exc.step)
        interrupted = interrupts.requested()
        cause = NotRunCause.INTERRUPTED if interrupted else NotRunCause.EARLIER_FAILED
        r.steps.extend(_left(d, r, cause))
        return outcome(r, d, Verdict.FAILED, interrupted=interrupted)
    except FmError as err:
        r.steps.extend(_left(d, r, NotRunCause.REFUSED))
        refused = replace(d, verdict=err.verdict, reasons=(err.message,), hints=err.hints)
        if refused.refused:
            # Shown with what the run had done by then. A refusal of the pool's (a new
            # lease) adds nothing when nothing was done; a record refused at the re-check
            # says that nothing was changed.
            return outcome(r, refused, err.verdict, tail=err.unchanged or _ran(r))
        r.warnings.append(err.message)
        return outcome(r, d, Verdict.FAILED)
    return outcome(r, d, d.verdict)


def _key(d: Decision) -> tuple[Any, ...]:
    """What must not change between deciding and acting (the endpoint state may: it is ours)."""
    live = tuple(sorted(o.id for o in d.owners if o.live))
    return (
        d.verdict,
        d.slot,
        live,
        d.pool_return,
        d.discarded_owner,
        d.save_discarded,
        tuple(s.step for s in d.plan),
    )


def _left(d: Decision, r: Run, cause: NotRunCause) -> list[Step]:
    done = {s.step for s in r.steps}
    return [
        replace(s, outcome=StepOutcome.SKIPPED, result=NotRun(cause))
        for s in d.plan
        if s.step not in done
    ]


def _ran(r: Run) -> bool:
    return any(s.outcome == StepOutcome.DONE for s in r.steps)


def changed(r: Run, before: Decision, after: Decision) -> Outcome:
    r.warnings.append(
        f"the decision changed while acting (was {before.verdict}, now {after.verdict}): "
        "nothing more was changed"
    )
    if after.verdict in (Verdict.PROCEED, Verdict.STALE):
        r.warnings.append("re-run the same command to act on the new decision")
        return outcome(r, after, Verdict.FAILED)
    return outcome(r, after, after.verdict)


# -- the steps ----------------------------------------------------------------------------------


class EndpointChanged(Exception):
    """TASK's window is not the one the decision saw (a pane joined or respawned, another
    process at its keyboard, another tmux server): the endpoint step stopped before typing or
    killing anything more, and the run decides again."""

    def __init__(self, step: Step) -> None:
        super().__init__(str(step.step))
        self.step = step


def step_endpoint(
    run: Run, record: Record, decided: Endpoint, protected: frozenset[int]
) -> list[Proc]:
    """Kill TASK's window by id after snapshotting its panes' process trees; confirm it is gone.

    Only the window ids seen when deciding are killed (in whatever session they are now: a
    moved window is still TASK's). Right before the quit keys and again right before the
    kill, the window is checked to be the one the decision saw (`window_identity.drift`: the
    same server, by pid and start time; no pane joined; each pane's process and foreground
    process the same): otherwise nothing more is typed or killed and the run decides again
    (`EndpointChanged`). A window of that name that appeared since (a relaunch's) is never
    killed (spec §7a). Returns the snapshot, so that survivors of the kill (SIGHUP ignored)
    are remembered as TASK's own."""
    s = run.settings
    target = record.target
    inv = tmux.list_panes(s)
    window = record.window
    if inv.status == InventoryStatus.NO_SERVER:
        run.note(StepName.ENDPOINT, target, EndpointResult(EndpointWhat.NO_SERVER))
        return []
    if inv.status != InventoryStatus.OK:
        raise run.fail(
            StepName.ENDPOINT,
            target,
            EndpointResult(EndpointWhat.INVENTORY_UNREADABLE, error=inv.error),
        )
    named = [
        p for p in inv.panes if p.session == record.session and p.window_name == record.window_name
    ]
    newcomers = sorted({p.window_id for p in named if p.window_id not in decided.window_ids})
    if newcomers:
        raise run.fail(
            StepName.ENDPOINT,
            target,
            EndpointResult(EndpointWhat.NEW_WINDOW, tuple(newcomers), window),
        )
    table = processes.scan()
    _same_window(record, decided, inv, table, graceful.Farewell())
    panes = _decided_panes(inv, decided, record)
    if not panes:
        run.note(StepName.ENDPOINT, target, EndpointResult(EndpointWhat.NO_WINDOW, window=window))
        return []
    snapshot = [
        proc
        for pane in panes
        for proc in table.tree(pane.pane_pid)
        if proc.pid not in protected and not proc.zombie
    ]
    window_ids = tuple(sorted({p.window_id for p in panes}))
    # Before any signal (the kill's SIGHUP included): ask TASK's own agent to leave.
    farewell = graceful.ask_to_quit(s, panes, table)
    said = _endpoint_said(EndpointWhat.KILLED, window_ids, window, farewell)
    before, now = inv, table
    if farewell.asked:
        # Right before the kill, after the grace: the same window still (an agent leaving
        # is expected). Without keys sent, the check above was right before it already.
        before = tmux.list_panes(s)
        if before.status == InventoryStatus.ERROR:
            raise run.fail(
                StepName.ENDPOINT,
                target,
                replace(said, what=EndpointWhat.INVENTORY_UNREADABLE, error=before.error),
            )
        now = processes.scan()
        _same_window(record, decided, before, now, farewell)
    for wid in window_ids:
        hung_up = graceful.hung_up(_panes_of(before, wid), now)
        if tmux.kill_window(s, wid).returncode != 0:
            continue
        for proc in hung_up:
            # The kill hangs up their terminal: signalled by this run as much as by a kill.
            entry = run.hung_up.setdefault(
                proc.pid, processes.Signalled(proc.pid, proc.start_time, proc.name)
            )
            entry.signals.append(messages.HANGUP_SIGNAL)
    after = tmux.list_panes(s)
    if after.status == InventoryStatus.NO_SERVER:
        still: list[str] = []
    elif after.status != InventoryStatus.OK:
        raise run.fail(
            StepName.ENDPOINT,
            target,
            EndpointResult(EndpointWhat.UNCONFIRMED, window_ids, window, after.error),
        )
    else:
        still = sorted({p.window_id for p in after.panes if p.window_id in window_ids})
    if still:
        if not run.flags.force:
            raise run.fail(
                StepName.ENDPOINT,
                target,
                EndpointResult(EndpointWhat.STILL_PRESENT, tuple(still), window),
            )
        forced = replace(said, what=EndpointWhat.STILL_PRESENT_FORCED, windows=tuple(still))
        run.warnings.append(messages.endpoint_warning(forced, target))
        run.note(StepName.ENDPOINT, target, forced)
        return snapshot
    run.note(StepName.ENDPOINT, target, said)
    return snapshot


def _decided_again(r: Run, d: Decision) -> Outcome:
    """TASK's window changed under the endpoint step: decide again (under the slot lock, as
    the re-check does) and report that decision; nothing more was typed or killed."""
    assert d.slot is not None
    with slot_lock(r.settings.state_dir, d.slot, r.settings.lock_timeout):
        after = r.seams.replan(()).decision
    r.warnings.append(
        messages.endpoint_changed_warning(d.task, before=d.verdict, now=after.verdict)
    )
    if after.verdict in (Verdict.PROCEED, Verdict.STALE):
        r.warnings.append(messages.RERUN_FOR_NEW_DECISION)
        return outcome(r, after, Verdict.FAILED)
    return outcome(r, after, after.verdict)


def _panes_of(inv: TmuxInventory, window_id: str) -> list[Pane]:
    return [p for p in inv.panes if p.window_id == window_id]


def _decided_panes(inv: TmuxInventory, decided: Endpoint, record: Record) -> list[Pane]:
    """The panes of the windows decided on, still under the record's window name."""
    return [
        p
        for p in inv.panes
        if p.window_id in decided.window_ids and p.window_name == record.window_name
    ]


def _endpoint_said(
    what: EndpointWhat, window_ids: tuple[str, ...], window: str, farewell: graceful.Farewell
) -> EndpointResult:
    return EndpointResult(
        what,
        window_ids,
        window,
        asked=farewell.asked,
        left=_refs(farewell.left),
        stayed=_refs(farewell.stayed),
        grace=round(farewell.waited, 1),
        synchronized=farewell.synchronized,
    )


def _same_window(
    record: Record,
    decided: Endpoint,
    inv: TmuxInventory,
    table: ProcessTable,
    farewell: graceful.Farewell,
) -> None:
    """Stop (`EndpointChanged`) when the decided windows are not the ones the decision saw."""
    drift = window_identity.drift(decided, inv, table)
    if drift:
        said = _endpoint_said(EndpointWhat.CHANGED, decided.window_ids, record.window, farewell)
        said = replace(said, drift=drift)
        raise EndpointChanged(Step(StepName.ENDPOINT, record.target, "", said.outcome, said))


def step_processes(run: Run, record: Record, slot: str | None, discarded: str | None) -> None:
    """End every process whose cwd is in the slot (when `slot` is given) or in tasktmp, except
    what is never signalled (spec §7a), judged afresh from each scan."""
    roots = [slot] if slot else []
    if record.tasktmp:
        tmp = task_tmp(record.tasktmp)
        if tmp.problem:
            raise run.fail(
                StepName.PROCESSES,
                record.tasktmp,
                ProcessesResult(ProcessesWhat.TMP_UNSAFE, error=tmp.problem),
            )
        if tmp.exists:
            roots.append(tmp_root_of(tmp))  # the directory itself, never through a link
    if not roots:
        run.note(
            StepName.PROCESSES,
            record.tasktmp or "-",
            ProcessesResult(ProcessesWhat.NOTHING_TO_END),
        )
        return
    target = " and ".join(roots)

    def inside(proc: Proc) -> bool:
        return bool(proc.cwd) and any(is_within(proc.cwd or "", r) for r in roots)

    terminals: dict[int, Terminal] = {}

    def scan() -> tuple[list[Proc], set[tuple[int, float]]]:
        """The processes to end now, and every live process seen inside (spared ones too).
        The shells among them that no task's endpoint holds are someone's terminals: noted
        (`terminals`) so that the result says which terminal each was."""
        table = processes.scan()
        if table.error:
            raise run.fail(
                StepName.PROCESSES,
                target,
                ProcessesResult(ProcessesWhat.SCAN_FAILED, error=table.error),
            )
        inventory = tmux.list_panes(run.settings)
        if inventory.status == InventoryStatus.ERROR:
            # Which processes belong to other endpoints cannot be told: end nothing.
            raise run.fail(
                StepName.PROCESSES,
                target,
                ProcessesResult(ProcessesWhat.TMUX_UNREADABLE, error=inventory.error),
            )
        obs = run.seams.observe(run.fleet, inventory, table)
        spared = never_signalled(obs, record.task_id, discarded)
        seen = [p for p in table.procs.values() if inside(p) and not p.zombie]
        ending = [p for p in seen if p.pid not in spared]
        for p in ending:
            t = terminal_of(p, obs.endpoint_owner, inventory)
            if t is not None:
                terminals.setdefault(p.pid, t)
        return ending, {(p.pid, p.start_time) for p in seen}

    targets, present = scan()
    if not targets:
        run.note(StepName.PROCESSES, target, ProcessesResult(ProcessesWhat.NONE_THERE))
        return
    processes.terminate(targets, run.settings.term_grace, run.settings.kill_wait, run.signalled)
    if interrupts.requested():
        raise run.fail(StepName.PROCESSES, target, ProcessesResult(ProcessesWhat.INTERRUPTED))
    left, _ = scan()
    signalled = {p.pid for p in targets}
    # Spared at the first scan only as another task's endpoint, whose window has gone since
    # (its own teardown ran meanwhile): a dead endpoint's shell (a live one would have made
    # its task a live owner), in the slot from the start, which the return would end anyway.
    released = [p for p in left if p.pid not in signalled and (p.pid, p.start_time) in present]
    if released:
        processes.terminate(
            released, run.settings.term_grace, run.settings.kill_wait, run.signalled
        )
        targets = targets + released
        signalled |= {p.pid for p in released}
        if interrupts.requested():
            raise run.fail(StepName.PROCESSES, target, ProcessesResult(ProcessesWhat.INTERRUPTED))
        left, _ = scan()
    if left:
        raise run.fail(
            StepName.PROCESSES,
            target,
            ProcessesResult(
                ProcessesWhat.LEFT_RUNNING,
                survivors=_refs(p for p in left if p.pid in signalled),
                newcomers=_refs(p for p in left if p.pid not in signalled),
            ),
        )
    ended = _refs(targets, terminals)
    run.note(StepName.PROCESSES, target, ProcessesResult(ProcessesWhat.ENDED, ended))


def _refs(
    procs: Iterable[Proc], terminals: Mapping[int, Terminal] | None = None
) -> tuple[ProcRef, ...]:
    return tuple(ProcRef(p.name, p.pid, (terminals or {}).get(p.pid)) for p in procs)


def step_save(run: Run, record: Record, owner: str) -> None:
    """Save the slot's unlanded work before it is discarded: TASK's own, or the discarded live
    owner's (`owner`), under `refs/fm/discarded/<owner>/<time>`."""
    from fm_teardown.act.discard import save_discarded

    try:
        saved = save_discarded(record, datetime.now(UTC), owner)
    except FmError as err:
        raise run.fail(
            StepName.SAVE_DISCARDED, record.project, SaveResult(SaveWhat.FAILED, error=err.message)
        ) from None
    run.discarded_ref = saved.ref
    run.restore = saved.restore
    run.saved_for = owner
    run.note(
        StepName.SAVE_DISCARDED,
        saved.ref,
        SaveResult(
            SaveWhat.SAVED,
            owner,
            saved.commit,
            saved.checkout or record.project,
            saved.restore,
            records=saved.records,
        ),
    )


def _check_pool_before_return(run: Run, record: Record, d: Decision) -> None:
    """Right before `treehouse return`: the pool's state file read again and the slot path
    resolved again (spec §7a). A lease that is not TASK's stops the run (4, naming it); a path that
    no longer resolves to the decided slot stops it too (1)."""
    pr = d.pool_return
    assert pr is not None and d.slot is not None
    if canonical(record.worktree) != d.slot or canonical(pr.path) != d.slot:
        raise run.fail(
            StepName.POOL,
            pr.path,
            PoolResult(PoolWhat.PATH_MOVED, slot=d.slot, now=canonical(pr.path)),
        )
    view = pool.fresh_view(record.worktree, d.slot)
    entry = view.entry
    if view.error or entry is None:
        raise run.fail(StepName.POOL, pr.path, PoolResult(PoolWhat.STATE_CHANGED, error=view.error))
    if entry.destroying:
        raise run.fail(StepName.POOL, pr.path, PoolResult(PoolWhat.DESTROYING))
    seen = (pr.lease_id, pr.lease_holder)
    if not entry.leased and (pr.lease_id or pr.lease_holder is not None):
        return  # returned meanwhile: the conditional return will say so
    if entry.leased and seen == (None, None):
        owner = lease_task(entry, record.task_id, run.fleet) or lease_name(entry)
        _refused_at_pool(pr.path, owner, "took a lease on the slot since deciding")
    if entry.leased and pr.lease_id and entry.lease_id != pr.lease_id:
        owner = lease_task(entry, record.task_id, run.fleet) or lease_name(entry)
        _refused_at_pool(pr.path, owner, "holds a new lease on the slot since deciding")
    if entry.owner_pid > 0 and not entry.leased:
        proc = processes.scan().procs.get(entry.owner_pid)
        if proc is not None and abs(proc.start_time * 1000 - entry.owner_started_at) < 1000:
            _refused_at_pool(pr.path, f"pid:{proc.pid}", "reserved the slot (an interactive get)")


def _refused_at_pool(path: str, owner: str, what: str) -> None:
    raise FmError(
        Verdict.LIVE_OWNER,
        f"{owner} {what}: slot {path} is owned by another live task: {owner}",
        (f"let {owner} finish, then re-run",),
        lead=Lead.REFUSED,
    )


def step_pool(run: Run, record: Record, d: Decision) -> None:
    pr = d.pool_return
    assert pr is not None and d.slot is not None
    s = run.settings
    bin_ = s.treehouse_bin
    if bin_ is None:
        raise run.fail(StepName.POOL, pr.path, PoolResult(PoolWhat.NO_TREEHOUSE))
    project = canonical(record.project)
    cwd = (
        project
        if os.path.isdir(project) and not is_within(project, d.slot)
        else str(s.state_dir if s.state_dir.is_dir() else "/")
    )
    _check_pool_before_return(run, record, d)
    if _pool_reuses_as_is(run, record, d):
        return
    result = pool.run_return(bin_, pr.argv, cwd, s.treehouse_timeout)
    retries = 0
    while result.git_lock_held:
        if retries < s.lock_retries:
            retries += 1
            # The script's words, which firstmate's operators (and its tests) look for.
            run.warnings.append(
                f"treehouse return failed with a transient git lock; waiting "
                f"{s.lock_retry_wait:g}s and retrying ({retries}/{s.lock_retries})"
            )
            interrupts.sleep(s.lock_retry_wait)
            result = pool.run_return(bin_, pr.argv, cwd, s.treehouse_timeout)
            if result.returncode == 0:
                run.warnings.append(f"treehouse return succeeded on retry {retries}; lock cleared")
            continue
        lock = gitlock.index_lock_path(d.slot)
        if lock is None or not os.path.lexists(lock):
            break
        verdict = gitlock.remove_if_provably_stale(lock, d.slot, s.stale_lock_age)
        if not verdict.stale:
            raise run.fail(
                StepName.POOL,
                pr.path,
                PoolResult(
                    PoolWhat.LOCK_PERSISTED,
                    lock=lock,
                    retries=retries,
                    wait=s.lock_retry_wait,
                    error=verdict.reason,
                ),
            )
        run.warnings.append(f"removed provably-stale git lock {lock} ({verdict.reason})")
        _recheck_landed(run, record)
        result = pool.run_return(bin_, pr.argv, cwd, s.treehouse_timeout)
        break
    view = pool.fresh_view(record.worktree, d.slot)
    last = result.last_line
    entry = view.entry
    said = PoolResult(PoolWhat.RETURNED, command="treehouse " + " ".join(pr.argv))
    if entry is None:
        raise run.fail(
            StepName.POOL, pr.path, replace(said, what=PoolWhat.NOT_IN_STATE, error=last)
        )
    if result.returncode == 0 and not result.aborted and not entry.leased:
        run.note(StepName.POOL, pr.path, said)
        return
    if (
        result.returncode == 0
        and not result.aborted
        and pr.lease_id
        and entry.leased
        and entry.lease_id != pr.lease_id
    ):
        run.note(StepName.POOL, pr.path, replace(said, what=PoolWhat.RETURNED_RELEASED))
        return
    if result.not_leased and (pr.lease_id or pr.lease_holder is not None):
        run.note(StepName.POOL, pr.path, replace(said, what=PoolWhat.ALREADY_RETURNED))
        return
    # treehouse's own words: its exit 0 after "Aborted." (it would have prompted), or its
    # last line.
    why = "exit 0 with 'Aborted.'" if result.aborted else (last or "no output")
    raise run.fail(StepName.POOL, pr.path, replace(said, what=PoolWhat.NOT_RETURNED, error=why))


def _pool_reuses_as_is(run: Run, record: Record, d: Decision) -> bool:
    """A record without lease facts on a slot the pool shows unleased: the return could only
    be unconditional, and it would clear a lease granted between the re-read and the call.
    When the slot is clean and its HEAD merged into the pool's reset target, the pool's next
    `get` resets and hands it out by itself, so fm does not call the return at all."""
    pr = d.pool_return
    assert pr is not None and d.slot is not None
    slot = d.slot
    if not unconditional_only(record, pr, lambda: pool.fresh_view(record.worktree, slot).entry):
        return False
    why_not = pool.reusable_as_is(slot)
    if why_not is not None:
        return False
    run.pool_reuses = True
    run.note(StepName.POOL, pr.path, PoolResult(PoolWhat.REUSED_AS_IS))
    return True


def _recheck_landed(run: Run, record: Record) -> None:
    """After removing a stale lock, the safety checks run again before the return."""
    if run.flags.force or record.kind == "scout":
        return  # a scout's work is its report, not its slot
    facts = run.seams.landed(record)
    if not facts.landed:
        raise run.fail(
            StepName.POOL,
            record.worktree,
            PoolResult(PoolWhat.UNLANDED_AFTER_LOCK, error=facts.summary),
        )


def _remove(path: str) -> None:
    """Remove a file, a symlink (never its target) or a directory tree (links not followed)."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


# Sidecars that another tool completes after the teardown: never swept (spec §10).
KEPT_SIDECARS = _sidecars.KEPT_SIDECARS


def sidecars(task_id: str, listing: list[str]) -> list[str]:
    """TASK's `state/<id>.<suffix>` files the sweep removes, judged from this one directory
    listing (spec §7a, §14.7): only the sidecar names firstmate writes, never a `.meta`
    (TASK's own goes last, separately), never a file of a longer task id (`<id>.x.meta` in
    the listing makes every `<id>.x.*` that task's), never a kept sidecar. Any other
    `<id>.*` file (`<id>.meta.bak`, an editor's copy) is kept (`model/sidecars.py`)."""
    return list(_sidecars.split(task_id, listing).swept)


def step_hooks(run: Run, slot: str) -> None:
    """The fleet's hook files, before the return: the next task's slot must not fire turn-end
    signals for a dead task. A failure only warns."""
    from fm_teardown.act.duties import remove_hooks

    result = remove_hooks(slot)
    if result.what == HooksWhat.UNTRACKED_UNKNOWN:
        run.warnings.append(messages.hooks_warning(result))
    run.note(StepName.HOOKS, slot, result)


def step_branch(run: Run, record: Record, d: Decision) -> None:
    """TASK's branch, after a verified return, by compare-and-swap on the commit seen when
    deciding. A failure only warns."""
    from fm_teardown.act.duties import delete_branch

    b = d.branch
    assert b is not None
    target = f"refs/heads/{b.name}"
    returned = (StepOutcome.DONE, StepOutcome.ABSENT)
    if not run.pool_reuses and not any(
        s.step == StepName.POOL and s.outcome in returned for s in run.steps
    ):
        run.note(StepName.BRANCH, target, BranchResult(BranchWhat.NOT_RETURNED, b.name, b.commit))
        return
    result = delete_branch(record.project, b.name, b.commit, b.default, d.slot)
    if result.warns:
        run.warnings.append(messages.branch_warning(result))
    run.note(StepName.BRANCH, target, result)


def step_claim(run: Run, path: str, task: str) -> None:
    """TASK's own slot claim, after a verified return (another task's is never touched)."""
    from fm_teardown.act.duties import remove_own_claim

    result = remove_own_claim(path, task)
    if result.warns:
        run.warnings.append(messages.claim_warning(result))
    run.note(StepName.CLAIM, path, result)


def step_auth(run: Run, record: Record) -> None:
    """The grok and kimi hook auth entries named by TASK's token files (proceed and stale)."""
    from fm_teardown.act.duties import remove_auth_entries

    s = run.settings
    state_dir = os.path.dirname(record.meta_path)
    found = remove_auth_entries(state_dir, record.task_id, s.home, s.grok_home)
    run.warnings.extend(f"auth: {w}" for w in found.warnings)
    target = f"state/{record.task_id}.grok-turnend-token, .kimi-turnend-token"
    run.note(StepName.AUTH, target, found)


def step_attribution(run: Run, record: Record) -> None:
    """One cost-attribution row, exactly as firstmate writes it. A failure only warns."""
    import time

    from fm_teardown.act.duties import DutyWarning, append_attribution

    s = run.settings
    target = str(s.data_dir / "cost-attribution.tsv")
    try:
        result = append_attribution(
            str(s.data_dir), record, time.time(), s.attribution_lock_attempts
        )
    except (DutyWarning, OSError) as exc:
        run.warnings.append(messages.attribution_warning(record.task_id))
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        result = AttributionResult(AttributionWhat.FAILED, record.task_id, error=why)
    run.note(StepName.ATTRIBUTION, target, result)


def step_record(run: Run, record: Record) -> None:
    """The record goes last: checked unchanged, then its duties (hook auth entries, the
    cost-attribution row), then tasktmp, the `state/<id>.*` sidecars, and the meta last."""
    try:
        text, mtime = read_meta(record.meta_path)
        now = parse_record(record.task_id, record.meta_path, text, mtime)
    except FileNotFoundError:
        for duty in (StepName.AUTH, StepName.ATTRIBUTION):
            run.note(duty, "-", RecordGone())
        run.note(StepName.RECORD, record.meta_path, RecordResult(RecordWhat.ALREADY_GONE))
        return
    except RecordProblem as exc:
        raise run.fail(
            StepName.RECORD, record.meta_path, RecordResult(RecordWhat.CHANGED, error=exc.problem)
        ) from None
    if now != record:
        raise run.fail(StepName.RECORD, record.meta_path, RecordResult(RecordWhat.REWRITTEN))
    step_auth(run, record)
    step_attribution(run, record)
    route = _remove_route(run, record) if record.kind == "secondmate" else None
    removed = []
    try:
        if record.tasktmp and record.tasktmp == f"/tmp/fm-{record.task_id}":
            tmp = task_tmp(record.tasktmp)
            if tmp.problem:
                raise run.fail(
                    StepName.RECORD,
                    record.meta_path,
                    RecordResult(RecordWhat.TMP_UNSAFE, error=tmp.problem),
                )
            if tmp.exists:
                _remove(record.tasktmp)
                removed.append(record.tasktmp)
        state_dir = os.path.dirname(record.meta_path)
        listed = _sidecars.split(record.task_id, os.listdir(state_dir))
        for name in listed.swept:
            _remove(os.path.join(state_dir, name))
            removed.append(name)
            faults.at("in-sweep")
        faults.at("before-meta")
        os.unlink(record.meta_path)
    except OSError as exc:
        raise run.fail(
            StepName.RECORD,
            record.meta_path,
            RecordResult(RecordWhat.REMOVE_FAILED, path=str(exc.filename), error=exc.strerror),
        ) from None
    done = RecordResult(
        RecordWhat.REMOVED,
        (*removed, os.path.basename(record.meta_path)),
        record.meta_path,
        route=route,
        kept=listed.foreign,
    )
    run.note(StepName.RECORD, record.meta_path, done)


def _remove_route(run: Run, record: Record) -> str | None:
    """A retired secondmate's route line leaves `data/secondmates.md` before its record
    goes, so firstmate never routes work to it again. A failure only warns."""
    from fm_teardown.act.registry import RegistryWarning, remove_route

    s = run.settings
    try:
        return remove_route(str(s.data_dir), str(s.state_dir), record.task_id)
    except RegistryWarning as exc:
        run.warnings.append(
            f"{exc}; remove the line '- {record.task_id} ...' from the registry by hand"
        )
        return None


# -- the outcome --------------------------------------------------------------------------------


def outcome(
    r: Run, d: Decision, verdict: Verdict, *, interrupted: bool = False, tail: bool | None = None
) -> Outcome:
    """The run's Outcome. `tail`: whether the reasons are shown with what the run changed
    (by default: a refusal the decision made)."""
    code = int(ExitCode.INTERRUPTED) if interrupted else int(verdict.exit_code)
    warnings = [*d.warnings, *r.warnings]
    if r.saved_for and r.saved_for != d.task:
        warnings.append(
            f"the work saved under {r.discarded_ref} is {r.saved_for}'s (the discarded live "
            f"owner's), not {d.task}'s"
        )
    hints = d.hints
    if code == 0 and r.saved_for and r.saved_for != d.task:
        hints = (
            *hints,
            f"{r.saved_for}'s record now names a returned slot: clear it with "
            f"fm teardown {r.saved_for}",
        )
    return Outcome(
        task=d.task,
        dry_run=False,
        verdict=verdict,
        exit_code=code,
        reasons=d.reasons,
        decision=d,
        steps=tuple(r.steps),
        warnings=tuple(warnings),
        hints=hints,
        signalled=tuple(
            Signal(s.pid, s.start_time, s.name, tuple(s.signals)) for s in r.signalled.values()
        ),
        hung_up=tuple(
            Signal(s.pid, s.start_time, s.name, tuple(s.signals)) for s in r.hung_up.values()
        ),
        discarded_ref=r.discarded_ref,
        restore=r.restore,
        interrupted=interrupted,
        acted=True,
        tail=(verdict == d.verdict and d.refused) if tail is None else tail,
        lead=Lead.REFUSED if verdict == d.verdict and d.refused else Lead.PLAIN,
    )
