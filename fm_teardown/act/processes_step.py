"""Steps 3 and 4 (the order and why: `act/steps.py`): nothing may run in the slot or TASK's
temp dir when it is saved and reset (`step_processes`), and then, with --force, the work
about to be discarded is saved (`step_save`)."""

from __future__ import annotations

from datetime import UTC, datetime

from fm_teardown.act.run_state import Run, proc_refs
from fm_teardown.adapters import interrupts, processes, tmux
from fm_teardown.decide.census import Kind, kind_of, placement
from fm_teardown.decide.sparing import never_signalled
from fm_teardown.model.errors import FmError
from fm_teardown.model.paths import is_within, tmp_root_of
from fm_teardown.model.plan import StepName
from fm_teardown.model.process_kind import terminal_of
from fm_teardown.model.records import Record
from fm_teardown.model.results import ProcessesResult, ProcessesWhat, SaveResult, SaveWhat, Terminal
from fm_teardown.model.world import InventoryStatus, Observation, Proc

__all__ = ["LATER_PASSES", "step_processes", "step_save"]


# How many more passes end what TASK's processes left behind as they were ended: a SIGTERM
# handler's child, which itself may leave one. Bounded, so that something that keeps starting
# processes there fails the step instead of holding it.
LATER_PASSES = 2


def step_processes(
    run: Run,
    record: Record,
    slot: str | None,
    discarded: str | None,
    *,
    sole_claimant: bool = False,
) -> None:
    """End every process whose cwd is in the slot (when `slot` is given) or in tasktmp, except
    what is never signalled (spec §7a), judged afresh from each scan.

    A process that started there during the step is ended on a later pass (at most
    `LATER_PASSES`) only when it is TASK's leftover beyond doubt: no agent, no controlling
    terminal, in no pane (an endpoint's or anyone's), never signalled for no other reason, and
    TASK the slot's only claimant in the decision (`sole_claimant`). Anything else that
    started there fails the step, as someone's new work might."""
    roots = [slot] if slot else []
    if record.tasktmp:
        tmp = run.seams.tasktmp(record.tasktmp)
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
    # The processes seen that TASK's own left behind, by pid and start time (`_leftover`).
    leftovers: set[tuple[int, float]] = set()
    leaders: set[int] = set()

    def scan() -> tuple[list[Proc], set[tuple[int, float]]]:
        """The processes to end now, and every live process seen inside (spared ones too).
        The shells among them that no task's endpoint holds are someone's terminals: noted
        (`terminals`) so that the result says which terminal each was; those that may be
        TASK's leftovers are noted in `leftovers`."""
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
        # Which lead a process group, read before they are signalled (a gone one leads
        # none): said as the whole group reaped once nothing of that group is left. Once
        # the step is done, everything a scan found to end was ended.
        leaders.update(p.pid for p in ending if processes.leads_group(p.pid))
        for p in ending:
            t = terminal_of(p, obs.endpoint_owner, inventory)
            if t is not None:
                terminals.setdefault(p.pid, t)
            if sole_claimant and _leftover(obs, record.task_id, p):
                leftovers.add((p.pid, p.start_time))
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
    later: list[Proc] = []
    for _ in range(LATER_PASSES):
        # Only when everything left started during the step and is TASK's leftover: a
        # survivor of SIGKILL, or anything that might be someone's, fails the step untouched.
        if not left or any(
            p.pid in signalled
            or (p.pid, p.start_time) in present
            or (p.pid, p.start_time) not in leftovers
            for p in left
        ):
            break
        processes.terminate(left, run.settings.term_grace, run.settings.kill_wait, run.signalled)
        later += left
        signalled |= {p.pid for p in left}
        if interrupts.requested():
            raise run.fail(StepName.PROCESSES, target, ProcessesResult(ProcessesWhat.INTERRUPTED))
        left, _ = scan()
    if left:
        raise run.fail(
            StepName.PROCESSES,
            target,
            ProcessesResult(
                ProcessesWhat.LEFT_RUNNING,
                survivors=proc_refs(p for p in left if p.pid in signalled),
                newcomers=proc_refs(p for p in left if p.pid not in signalled),
                later=proc_refs(later),
            ),
        )
    # Ended is gone: an orphan's zombie still answers `kill -0` until init reaps it.
    processes.wait_reaped(targets + later)
    ended = proc_refs(targets + later, terminals)
    groups = tuple(sorted(g for g in leaders if processes.group_gone(g)))
    run.note(
        StepName.PROCESSES,
        target,
        ProcessesResult(ProcessesWhat.ENDED, ended, later=proc_refs(later), groups=groups),
    )


def _leftover(obs: Observation, task: str, proc: Proc) -> bool:
    """What TASK's processes may have left behind as they were ended: no agent, no controlling
    terminal, in no pane of any tmux server (an endpoint's or anyone's), and where it runs told
    beyond doubt (`census.kind_of`'s plain `other`)."""
    place = placement(obs, proc)
    return place.doubt is None and kind_of(task, place) == Kind.OTHER


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
