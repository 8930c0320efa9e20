"""What one run carries from step to step (`Run`), what it gets from the other stages
(`Seams`), and how a step stops it (`StepFailed`, `EndpointChanged`, `boundary`).

Shared by `act/steps.py`, which runs the steps in order, and the step modules; it imports
none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from fm_teardown.act import faults
from fm_teardown.adapters import interrupts, processes
from fm_teardown.adapters.interrupts import Interrupted
from fm_teardown.model.causes import OwnFileBlocked
from fm_teardown.model.plan import Decision, LandedLike, Planned, Step, StepName, StepOutcome
from fm_teardown.model.reasons import NotSelectedReason
from fm_teardown.model.records import Fleet, Record
from fm_teardown.model.request import Flags
from fm_teardown.model.results import (
    Drift,
    ProcRef,
    RecheckAt,
    Signal,
    StepResult,
)
from fm_teardown.model.settings import Settings
from fm_teardown.model.step_warnings import RunWarning
from fm_teardown.model.values import value
from fm_teardown.model.world import (
    BranchUse,
    Endpoint,
    Observation,
    Proc,
    ProcessTable,
    TaskTmp,
    Terminal,
    TmuxInventory,
)

__all__ = [
    "DecidedOtherwise",
    "EndpointChanged",
    "Rechecked",
    "Run",
    "Seams",
    "StepFailed",
    "boundary",
    "proc_refs",
    "signals",
]


@value
class Rechecked:
    """The world looked at again (`Seams.recheck`): the fresh decision, with the observation
    it was made from, and for a batch's task the reason it is no longer selected (None: it
    still is, or no batch)."""

    planned: Planned
    not_selected: NotSelectedReason | None = None


@value
class Seams:
    """What acting needs from the other stages, as plain callables (the-loop's `cleanup.py`).

    - `recheck(at, remembered, landed)`: load, observe and decide again, and for a batch's
      task re-apply its selection (`Rechecked`). `remembered` are TASK's own endpoint
      processes from the snapshot taken before its window was killed, still TASK's. Under
      the slot lock (`RecheckAt.LOCKED`) rule 5's facts are gathered again (git, no fetch);
      right before a later destructive call they are `landed`, the last decision's (one
      process scan and one tmux listing, no git: late writes are the pool step's to catch);
    - `observe(fleet, inventory, table, remembered)`: an observation from fresh scans, for
      classifying the processes a scan of the processes step finds;
    - `landed(record)`: rule 5's facts again, after a stale git lock was removed;
    - `window_drift(decided, inventory, table)`: how TASK's decided windows now differ from
      what the decision saw (asked right before the quit keys and right before the kill);
    - `tasktmp(path)`: TASK's `/tmp/fm-<id>` judged again with lstat (right before the
      processes step takes it as a root, and right before the record step removes it);
    - `branch_held(common, ref)`: the worktree whose git operation holds a branch, read
      right before the branch step deletes it, or None;
    - `claim_names(path, task)`: does the slot claim still name TASK, re-read right before
      the claim step removes it;
    - `intent(decision)`: journal what is about to be done, before the first destructive
      step; returns why it could not (the run then refuses, changing nothing), or None.
    """

    recheck: Callable[[RecheckAt, tuple[Proc, ...], LandedLike | None], Rechecked]
    observe: Callable[[Fleet, TmuxInventory, ProcessTable, tuple[Proc, ...]], Observation]
    landed: Callable[[Record], LandedLike]
    window_drift: Callable[[Endpoint, TmuxInventory, ProcessTable], tuple[Drift, ...]]
    tasktmp: Callable[[str], TaskTmp]
    branch_held: Callable[[str, str], tuple[str, BranchUse] | None]
    claim_names: Callable[[str, str], bool]
    intent: Callable[[Decision], OwnFileBlocked | None] = lambda _decision: None


class StepFailed(Exception):
    def __init__(self, step: Step) -> None:
        super().__init__(str(step.step))
        self.step = step


@dataclass
class Run:
    """One run's state, from step to step: the steps so far and the warnings, the decision
    acted on (with what it saw) and TASK's remembered endpoint. What a step did (the processes
    it signalled, the save it made) is its step's result, in `steps`."""

    settings: Settings
    flags: Flags
    task: str
    fleet: Fleet
    seams: Seams
    # The decision acted on, as made with what it saw: the first one until the re-check under
    # the slot lock, then that one, with which every later look at the world is compared
    # (`act/arrivals.py`).
    decided: Planned
    steps: list[Step] = field(default_factory=list)
    warnings: list[RunWarning] = field(default_factory=list)
    # TASK's own endpoint processes from the snapshot taken before its window was killed:
    # still TASK's whenever the world is looked at again.
    remembered: tuple[Proc, ...] = ()
    # The last look at the world (`act/arrivals.py`) when nothing was done since it (the
    # processes step found nothing to signal): when it was taken, the test pauses by then,
    # and the look. It is the look right before the pool's return too, while it is fresh.
    quiet: tuple[float, int, Rechecked] | None = None

    @property
    def record(self) -> Record:
        """TASK's record, as the decision acted on read it."""
        return self.fleet.records[self.task]

    def ran(self, step: StepName) -> Step | None:
        """The step of that name as it ran, if it did."""
        return next((s for s in self.steps if s.step == step), None)

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


class DecidedOtherwise(Exception):
    """Looked at again right before a destructive call, the world is decided otherwise: a
    refusal now (a lease or a lock another took since, ...). Nothing more is done; the run
    reports that decision, as the re-check under the slot lock does."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(str(decision.verdict))
        self.decision = decision


class EndpointChanged(Exception):
    """TASK's window is not the one the decision saw (a pane joined or respawned, another
    process at its keyboard, another tmux server): the endpoint step stopped before typing or
    killing anything more, and the run decides again."""

    def __init__(self, step: Step) -> None:
        super().__init__(str(step.step))
        self.step = step


def signals(log: Mapping[int, processes.Signalled]) -> tuple[Signal, ...]:
    """What a step signalled, as its result keeps it: each process once, in the order first
    signalled."""
    return tuple(Signal(s.pid, s.start_time, s.name, tuple(s.signals)) for s in log.values())


def proc_refs(
    procs: Iterable[Proc], terminals: Mapping[int, Terminal] | None = None
) -> tuple[ProcRef, ...]:
    return tuple(ProcRef(p.name, p.pid, (terminals or {}).get(p.pid)) for p in procs)
