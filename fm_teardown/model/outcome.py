"""The one result of `fm teardown TASK`, for a dry run, a refusal and a real run alike.

`act.run` returns an Outcome and prints nothing; `pipeline.one_task` journals it and
`report` renders it (pipx's `result.py` + `render_result`; the-loop's `CleanupOutcome`).
"""

from __future__ import annotations

from dataclasses import replace

from fm_teardown.model.errors import ExitCode, FmError, Lead, Verdict
from fm_teardown.model.landing import Reason
from fm_teardown.model.own_files import WorkPlaces
from fm_teardown.model.plan import Decision, Step, StepName, StepOutcome
from fm_teardown.model.reasons import NotSelectedReason
from fm_teardown.model.step_warnings import RunWarning
from fm_teardown.model.values import value

__all__ = ["WINDOW_KILL_SIGNAL", "Outcome", "Result", "Signal", "Skipped"]

# How `signals` names the hangup a window kill sends to its panes' processes, beside the
# `SIGTERM` and `SIGKILL` of the processes step (the journal and the JSON list them).
WINDOW_KILL_SIGNAL = "SIGHUP (window killed)"


@value
class Signal:
    """A process a step signalled: pid, start time, name and the signals sent."""

    pid: int
    start_time: float
    name: str
    signals: tuple[str, ...]


@value
class Outcome:
    task: str | None
    dry_run: bool
    verdict: Verdict
    exit_code: int
    reasons: tuple[Reason, ...]
    # None when the run ended before a decision (a bad request, TASK's own record unsafe).
    decision: Decision | None = None
    steps: tuple[Step, ...] = ()  # the plan (dry run, refusal) or the steps as they ran
    # The decision's (its words) and the run's (`step_warnings`: values report/ words).
    warnings: tuple[RunWarning, ...] = ()
    hints: tuple[str, ...] = ()
    signalled: tuple[Signal, ...] = ()  # by the processes step (firstmate's "reaping" line)
    # Hung up by the endpoint step's window kill (its panes' processes and foreground groups).
    hung_up: tuple[Signal, ...] = ()
    discarded_ref: str | None = None
    restore: str | None = None
    interrupted: bool = False
    acted: bool = False  # a real run that started acting (its steps are the steps as they ran)
    plan_id: str | None = None  # the plan token of the first decision (fingerprint.py)
    # A refusal: the first reason is followed, when shown, by what this run changed (nothing,
    # or the steps it had already done); `report/messages.py` (`reasons`) writes that tail.
    tail: bool = False
    gate: bool = False  # ended by the no-mistakes gate's refusal (FmError.gate)
    # How the first reason's line starts (`REFUSED: …` for a refusal); the reasons are kept
    # without it and `report/messages.py` (`reasons`) writes it.
    lead: Lead = Lead.PLAIN
    # Where fm's own files never go, as the run found the fleet; None: it ended before it
    # looked (its journal line is written only where that can be shown some other way).
    places: WorkPlaces | None = None

    @property
    def refused(self) -> bool:
        """A refusal (live owner, unsafe, unlanded, plan changed): its first reason is shown as the
        `REFUSED: …` line, said again by the first line of the human output."""
        return self.verdict in (
            Verdict.LIVE_OWNER,
            Verdict.UNSAFE,
            Verdict.UNLANDED,
            Verdict.PLAN_CHANGED,
        )

    @property
    def every_signalled(self) -> tuple[Signal, ...]:
        """Every process the run signalled, in any step, one entry per process: the window
        kill's hangup first, then the processes step's signals (what the journal lists)."""
        merged: dict[tuple[int, float], Signal] = {}
        for s in (*self.hung_up, *self.signalled):
            key = (s.pid, s.start_time)
            was = merged.get(key)
            merged[key] = s if was is None else replace(was, signals=was.signals + s.signals)
        return tuple(merged.values())

    @property
    def returned_slot(self) -> bool:
        """Did the run return its slot to the pool?"""
        return any(st.step == StepName.POOL and st.outcome == StepOutcome.DONE for st in self.steps)

    @property
    def completed(self) -> bool:
        return self.exit_code == ExitCode.OK and not self.dry_run and self.acted

    @staticmethod
    def of_decision(d: Decision, *, dry_run: bool) -> Outcome:
        """A dry run, or a real run refused while deciding: the decision, nothing done."""
        return Outcome(
            task=d.task,
            dry_run=dry_run,
            verdict=d.verdict,
            exit_code=d.exit_code,
            reasons=d.reasons,
            decision=d,
            steps=d.plan,
            warnings=d.warnings,
            hints=d.hints,
            tail=d.refused,
            lead=Lead.REFUSED if d.refused else Lead.PLAIN,
        )

    @staticmethod
    def of_error(task: str | None, err: FmError, *, dry_run: bool) -> Outcome:
        """Ended before a decision: one line and hints."""
        return Outcome(
            task=task,
            dry_run=dry_run,
            verdict=err.verdict,
            exit_code=int(err.exit_code),
            reasons=(err.note,),
            hints=err.hints,
            tail=err.unchanged,
            gate=err.gate,
            lead=err.lead,
        )


@value
class Skipped:
    """A batch's task the batch did not run, and why, as facts: interrupted before it, the
    batch stopped by the failure of task `failed`, or no longer what was selected at its turn
    (`not_selected`). `report/messages.py` words it (`skipped_reason`)."""

    task: str
    failed: str | None = None
    not_selected: NotSelectedReason | None = None

    @property
    def code(self) -> str:
        """Why it was not run, as a stable code (`docs/codes.md`)."""
        if self.not_selected is not None:
            return self.not_selected.code
        return "batch-stopped" if self.failed is not None else "batch-interrupted"


Result = Outcome | Skipped
