"""The one result of `fm teardown TASK`, for a dry run, a refusal and a real run alike.

`act.run` returns an Outcome and prints nothing; `pipeline.one_task` journals it and
`report` renders it (pipx's `result.py` + `render_result`; the-loop's `CleanupOutcome`).
"""

from __future__ import annotations

from dataclasses import field, replace

from fm_teardown.model.errors import ExitCode, FmError, Lead, Verdict
from fm_teardown.model.landing import Reason
from fm_teardown.model.own_files import WorkPlaces
from fm_teardown.model.plan import Decision, Step, StepName, StepOutcome
from fm_teardown.model.reasons import NotSelectedReason
from fm_teardown.model.results import SaveResult, SaveWhat, Signal, signals_of
from fm_teardown.model.step_warnings import RunWarning
from fm_teardown.model.values import value

__all__ = ["Framing", "Outcome", "Result", "Skipped"]


@value
class Framing:
    """How an outcome's first reason is shown: how its line starts (`REFUSED: …` for a
    refusal, the gate's `error: …`, or plain: `lead`), and whether what the run changed
    follows it (`tail`: nothing, or the steps it had already done). The reasons are kept
    without either; `report/messages.py` (`reasons`) writes both."""

    lead: Lead = Lead.PLAIN
    tail: bool = False


@value
class Outcome:
    """The one result of a teardown. What each step did is its step's result (the processes
    it signalled, the save it made, ...), never a field of the outcome's: the properties
    below read them from `steps`."""

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
    plan_id: str | None = None  # the plan token of the first decision (fingerprint.py)
    # Where fm's own files never go, as the run found the fleet; None: it ended before it
    # looked (its journal line is written only where that can be shown some other way).
    places: WorkPlaces | None = None
    framing: Framing = field(default_factory=Framing)

    @property
    def lead(self) -> Lead:
        return self.framing.lead

    @property
    def tail(self) -> bool:
        return self.framing.tail

    @property
    def gate(self) -> bool:
        """Ended by the no-mistakes gate's refusal (`FmError.gate`): the one `error:` lead."""
        return self.framing.lead == Lead.ERROR

    @property
    def interrupted(self) -> bool:
        """Stopped by SIGINT or SIGTERM (exit 130), while deciding or at a step boundary."""
        return self.exit_code == ExitCode.INTERRUPTED

    @property
    def acted(self) -> bool:
        """A real run that started acting: its steps are the steps as they ran, each with its
        result (a plan's steps have none)."""
        return not self.dry_run and any(s.result is not None for s in self.steps)

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
    def signalled(self) -> tuple[Signal, ...]:
        """The processes step's signals (firstmate's "reaping" line)."""
        return tuple(
            sig for s in self.steps if s.step == StepName.PROCESSES for sig in signals_of(s.result)
        )

    @property
    def every_signalled(self) -> tuple[Signal, ...]:
        """Every process the run signalled, in any step, one entry per process, in the order
        the steps ran: the window kill's hangup first, then the processes step's signals
        (what the journal lists)."""
        merged: dict[tuple[int, float], Signal] = {}
        for sig in (sig for s in self.steps for sig in signals_of(s.result)):
            key = (sig.pid, sig.start_time)
            was = merged.get(key)
            merged[key] = sig if was is None else replace(was, signals=was.signals + sig.signals)
        return tuple(merged.values())

    @property
    def saved(self) -> SaveResult | None:
        """The save `--force` made of the work it discards, if it made one."""
        for s in self.steps:
            if isinstance(s.result, SaveResult) and s.result.what == SaveWhat.SAVED:
                return s.result
        return None

    @property
    def discarded_ref(self) -> str | None:
        saved = self.saved
        return saved.ref if saved is not None else None

    @property
    def restore(self) -> str | None:
        """The command that brings the saved work back."""
        saved = self.saved
        return saved.restore if saved is not None else None

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
            framing=Framing(Lead.REFUSED if d.refused else Lead.PLAIN, d.refused),
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
            framing=Framing(err.lead, err.unchanged),
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
