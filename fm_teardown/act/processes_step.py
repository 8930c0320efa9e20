"""Steps 3 and 4 (the order and why: `act/steps.py`): nothing may run in the slot or TASK's
temp dir when it is saved and reset (`step_processes`), and then, with --force, the work
about to be discarded is saved (`step_save`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from enum import Enum, auto

from fm_teardown.act import arrivals
from fm_teardown.act.run_state import Run, StepFailed, proc_refs, signals
from fm_teardown.adapters import interrupts, processes, tmux
from fm_teardown.decide.census import Kind, Member, census, kind_of, placement
from fm_teardown.decide.sparing import NeverSignalled, never_signalled
from fm_teardown.model.errors import FmError
from fm_teardown.model.paths import is_within, tmp_root_of
from fm_teardown.model.plan import Step, StepName
from fm_teardown.model.process_kind import ProcessClass, classify_proc, terminal_of
from fm_teardown.model.records import Record
from fm_teardown.model.results import (
    Arrived,
    ProcessesResult,
    ProcessesWhat,
    RecheckAt,
    SaveResult,
    SaveWhat,
)
from fm_teardown.model.step_actions import EndProcesses, SaveWork
from fm_teardown.model.world import InventoryStatus, Observation, Placement, Proc, Spared, Terminal

__all__ = ["LATER_PASSES", "act", "act_save", "step_processes", "step_save"]


# How many more passes end what TASK's processes left behind as they were ended: a SIGTERM
# handler's child, which itself may leave one. Bounded, so that something that keeps starting
# processes there fails the step instead of holding it.
LATER_PASSES = 2


def act(run: Run, step: Step) -> None:
    """The processes step of the plan: right before its first signal the world is looked at
    again (`arrivals`), and that look is the step's first scan."""
    ends = step.action
    assert isinstance(ends, EndProcesses), step
    where = ends.slot or run.record.tasktmp or run.decided.decision.slot or ""
    look = arrivals.look_again(run, RecheckAt.PROCESSES, StepName.PROCESSES, where)
    if not step_processes(run, run.record, ends, first=look.planned.observation):
        arrivals.quiet(run, look)  # nothing signalled: the pool's return may go on from it


def step_processes(
    run: Run, record: Record, ends: EndProcesses, first: Observation | None = None
) -> bool:
    """End every process whose cwd is in the slot (when `ends.slot` is given) or in tasktmp
    that is TASK's to end, judged afresh from each scan (`_Ending.judge`): every process found
    is classified (the census) before anything is signalled. Only TASK's own are signalled:
    its endpoint, anything that is no one's (no agent, no terminal, in no pane), and what the
    decision saw and meant to end (TASK's leftover agent when TASK is the slot's only
    claimant, the discarded live owner's). What fm never signals is spared (spec §7a).
    Anything else (an agent, a terminal or another task's endpoint the decision did not see, a
    process whose place cannot be told) is someone's new work: found by the first scan, it
    stops the step before any signal (`Arrived`); found later, nothing more is signalled and
    the step fails.

    `first`: the observation the step's re-check was just made from (`arrivals.look_again`),
    taken as its first scan. True when something was signalled.

    A process that started there during the step is ended on a later pass (at most
    `LATER_PASSES`) only when it is TASK's leftover beyond doubt: no agent, no controlling
    terminal, in no pane (an endpoint's or anyone's), never signalled for no other reason, and
    TASK the slot's only claimant in the decision (`ends.sole_claimant`). Anything else that
    started there fails the step, as someone's new work might."""
    roots = _roots(run, record, ends.slot)
    if not roots:
        run.note(
            StepName.PROCESSES,
            record.tasktmp or "-",
            ProcessesResult(ProcessesWhat.NOTHING_TO_END),
        )
        return False
    e = _Ending(run, record.task_id, ends, roots)
    targets, stops, present = e.scan(first)
    if stops:
        # Someone's work the decision did not see: nothing is signalled.
        raise run.fail(
            StepName.PROCESSES,
            e.target,
            Arrived(RecheckAt.PROCESSES, tuple(str(m) for m in e.someones)),
        )
    if not targets:
        run.note(StepName.PROCESSES, e.target, ProcessesResult(ProcessesWhat.NONE_THERE))
        return False
    e.end_all(targets, present)
    return True


def _roots(run: Run, record: Record, slot: str | None) -> list[str]:
    """Where the step looks: the slot (when it ends the slot's processes) and TASK's temp dir
    when it exists, judged again with lstat right before (never through a link)."""
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
    return roots


class _Judged(Enum):
    SIGNAL = auto()  # TASK's to end
    SPARE = auto()  # never signalled (tmux, another task's endpoint, fm), seen by the decision
    STOP = auto()  # someone's work: nothing more is signalled


class _Ending:
    """One processes step under way: where it looks, what the decision saw there, and what
    its scans found (the terminals, TASK's possible leftovers, the group leaders, someone's
    work) and its signals sent (`log`)."""

    def __init__(self, run: Run, task: str, ends: EndProcesses, roots: list[str]) -> None:
        self.run, self.task, self.ends, self.roots = run, task, ends, roots
        self.target = " and ".join(roots)
        # What the decision saw in the slot, by pid and start time: its kind then.
        self.decided: Mapping[tuple[int, float], Kind] = {
            (m.proc.pid, m.proc.start_time): m.kind for m in census(task, run.decided.observation)
        }
        self.terminals: dict[int, Terminal] = {}
        # The processes seen that TASK's own left behind, by pid and start time (`_leftover`).
        self.leftovers: set[tuple[int, float]] = set()
        self.leaders: set[int] = set()
        self.someones: list[Member] = []  # the first scan's someone's work, as the census names it
        self.log: dict[int, processes.Signalled] = {}

    def fail(self, result: ProcessesResult) -> StepFailed:
        """The step fails, its result saying every signal it had sent."""
        return self.run.fail(
            StepName.PROCESSES, self.target, replace(result, signals=signals(self.log))
        )

    def end(self, procs: list[Proc]) -> None:
        """SIGTERM, grace, SIGKILL, by pid and start time; an interrupt stops the step."""
        s = self.run.settings
        processes.terminate(procs, s.term_grace, s.kill_wait, self.log)
        if interrupts.requested():
            raise self.fail(ProcessesResult(ProcessesWhat.INTERRUPTED))

    def inside(self, obs: Observation) -> list[Proc]:
        """The live processes working in the slot and tasktmp, as the observation places them:
        by directory where a path cannot tell (another mount namespace, a bind mount), so
        one in a container working in the slot is found and one whose path only reads like
        the slot's is not. The paths alone when the observation does not place TASK's slot."""
        slot = self.ends.slot
        canonical = obs.slot_of.get(self.task)
        facts = obs.slots.get(canonical) if slot and canonical == slot else None
        if slot and facts is None:
            return [
                p
                for p in obs.processes.procs.values()
                if p.cwd and not p.zombie and any(is_within(p.cwd, r) for r in self.roots)
            ]
        tmp = obs.tasktmp.get(self.task)
        found = {p.pid: p for p in (*(facts.procs if facts else ()), *(tmp.procs if tmp else ()))}
        return [p for p in found.values() if not p.zombie]

    def scan(
        self, obs: Observation | None = None
    ) -> tuple[list[Proc], list[Proc], set[tuple[int, float]]]:
        """The processes to end now, those that are someone's work (`judge`: found, the step
        stops), and every live process seen inside (spared ones too). The shells among them
        that no task's endpoint holds are someone's terminals: noted (`terminals`) so that the
        result says which terminal each was; those that may be TASK's leftovers are noted in
        `leftovers`."""
        if obs is None:
            table = processes.scan()
            inventory = tmux.list_panes(self.run.settings)
        else:
            table, inventory = obs.processes, obs.inventory
        if table.error:
            raise self.fail(ProcessesResult(ProcessesWhat.SCAN_FAILED, error=table.error))
        if inventory.status == InventoryStatus.ERROR:
            # Which processes belong to other endpoints cannot be told: end nothing.
            raise self.fail(ProcessesResult(ProcessesWhat.TMUX_UNREADABLE, error=inventory.error))
        if obs is None:
            obs = self.run.seams.observe(self.run.fleet, inventory, table, self.run.remembered)
        spared = never_signalled(obs, self.task, self.ends.discarded)
        seen = self.inside(obs)
        ending: list[Proc] = []
        stops: list[Proc] = []
        for p in seen:
            judged = self.judge(obs, p, spared)
            if judged is _Judged.SIGNAL:
                ending.append(p)
            elif judged is _Judged.STOP:
                stops.append(p)
                place = placement(obs, p)
                self.someones.append(Member(p, kind_of(self.task, place), place))
        # Which lead a process group, read before they are signalled (a gone one leads
        # none): said as the whole group reaped once nothing of that group is left. Once
        # the step is done, everything a scan found to end was ended.
        self.leaders.update(p.pid for p in ending if processes.leads_group(p.pid))
        for p in (*ending, *stops):
            t = terminal_of(p, obs.endpoint_owner, inventory)
            if t is not None:
                self.terminals.setdefault(p.pid, t)
            if self.ends.sole_claimant and _leftover(obs, self.task, p):
                self.leftovers.add((p.pid, p.start_time))
        return ending, stops, {(p.pid, p.start_time) for p in seen}

    def judge(self, obs: Observation, p: Proc, spared: NeverSignalled) -> _Judged:
        """What the step does with a process it found inside: classified first (the census,
        `decide/census.py`), compared with what the decision saw (`decided`)."""
        why = spared.get(p.pid)
        seen = self.decided.get((p.pid, p.start_time))
        if why is not None:
            came = seen is None and why.kind in (
                Spared.OTHER_ENDPOINT,
                Spared.TMUX,
                Spared.TMUX_SERVER,
            )
            return _Judged.STOP if came else _Judged.SPARE
        place = placement(obs, p)
        if place.doubt is not None:
            return _Judged.STOP
        kind = kind_of(self.task, place)
        if kind == Kind.OTHER and classify_proc(p) == ProcessClass.UNSURE:
            return _Judged.STOP  # whether it runs an agent cannot be told: doubt
        discarded = _discarded(obs, p, place, self.ends.discarded)
        if kind in (Kind.OWN, Kind.OTHER) or seen == Kind.OWN or discarded:
            return _Judged.SIGNAL
        if seen == kind and (kind != Kind.AGENT_NO_PANE or self.ends.sole_claimant):
            return _Judged.SIGNAL  # the decision saw it as it is, and meant to end it
        return _Judged.STOP

    def end_all(self, targets: list[Proc], present: set[tuple[int, float]]) -> None:
        """End what the first scan found to end, then what is left of it: another task's
        endpoint spared at first whose window has gone since, and, on the later passes, what
        they left behind; done when nothing of it is left, else the step fails."""
        self.end(targets)
        left, stops, _ = self.scan()
        signalled = {p.pid for p in targets}
        # Spared at the first scan only as another task's endpoint, whose window has gone since
        # (its own teardown ran meanwhile): a dead endpoint's shell (a live one would have made
        # its task a live owner), in the slot from the start, which the return would end anyway.
        released = [p for p in left if p.pid not in signalled and (p.pid, p.start_time) in present]
        if released and not stops:
            self.end(released)
            targets = targets + released
            signalled |= {p.pid for p in released}
            left, stops, _ = self.scan()
        later: list[Proc] = []
        for _ in range(LATER_PASSES):
            # Only when everything left started during the step and is TASK's leftover: a
            # survivor of SIGKILL, or anything that might be someone's, fails the step untouched.
            if stops or not left or not self.all_leftovers(left, signalled, present):
                break
            self.end(left)
            later += left
            signalled |= {p.pid for p in left}
            left, stops, _ = self.scan()
        if left or stops:
            raise self.fail(
                ProcessesResult(
                    ProcessesWhat.LEFT_RUNNING,
                    survivors=proc_refs(p for p in left if p.pid in signalled),
                    newcomers=proc_refs(
                        (p for p in (*left, *stops) if p.pid not in signalled), self.terminals
                    ),
                    later=proc_refs(later),
                )
            )
        # Ended is gone: an orphan's zombie still answers `kill -0` until init reaps it.
        processes.wait_reaped(targets + later)
        ended = proc_refs(targets + later, self.terminals)
        groups = tuple(sorted(g for g in self.leaders if processes.group_gone(g)))
        self.run.note(
            StepName.PROCESSES,
            self.target,
            ProcessesResult(
                ProcessesWhat.ENDED,
                ended,
                later=proc_refs(later),
                groups=groups,
                signals=signals(self.log),
            ),
        )

    def all_leftovers(
        self, left: list[Proc], signalled: set[int], present: set[tuple[int, float]]
    ) -> bool:
        """Everything left started during the step (not signalled, not there at the first
        scan) and is TASK's leftover beyond doubt."""
        return not any(
            p.pid in signalled
            or (p.pid, p.start_time) in present
            or (p.pid, p.start_time) not in self.leftovers
            for p in left
        )


def _discarded(obs: Observation, p: Proc, place: Placement, discarded: str | None) -> bool:
    """The live owner `--discard-live-owner` names: its endpoint's, or the process `pid:N`
    and what runs under it."""
    if discarded is None:
        return False
    if place.endpoint == discarded:
        return True
    if not discarded.startswith("pid:"):
        return False
    procs = obs.processes.procs
    at: Proc | None = p
    hops = 0
    while at is not None and hops < 64:  # a bounded walk up the ancestry
        if f"pid:{at.pid}" == discarded:
            return True
        at = procs.get(at.ppid) if at.ppid > 0 else None
        hops += 1
    return False


def _leftover(obs: Observation, task: str, proc: Proc) -> bool:
    """What TASK's processes may have left behind as they were ended: no agent, no controlling
    terminal, in no pane of any tmux server (an endpoint's or anyone's), and where it runs told
    beyond doubt (`census.kind_of`'s plain `other`)."""
    place = placement(obs, proc)
    return (
        place.doubt is None
        and kind_of(task, place) == Kind.OTHER
        and classify_proc(proc) != ProcessClass.UNSURE
    )


def act_save(run: Run, step: Step) -> None:
    """The save-discarded step of the plan (`--force`): after the processes, before the
    reset."""
    save = step.action
    assert isinstance(save, SaveWork), step
    step_save(run, run.record, save.owner)


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
            ref=saved.ref,
        ),
    )
