"""A ship task's own no-mistakes run parked at a gate, as values (spec §15.5b).

A ship task's no-mistakes pipeline run can be parked at a gate (awaiting approval, a fix
review, an agent) when the task is torn down: with the worker gone, nothing will ever answer
it, and the run holds a fleet slot for good. So before anything of TASK's is destroyed, the
teardown asks the operator's `no-mistakes` (`axi status`, in the slot) for the active or most
recent run, and aborts it when it is TASK's own and parked, then reads it back stopped.

`adapters/no_mistakes.py` runs the CLI and reads its answers into `Asked`;
`decide/parked_run.py` says whose run it is and whether it is parked (`Attribution`) and
whether an abort was confirmed (`Confirmation`); `act/parked_run_step.py` returns a
`ParkedRunResult`; `report/parked_run_words.py` words them. Pure values: nothing here reads
the world.
"""

from __future__ import annotations

from enum import Enum, auto
from typing import ClassVar

from fm_teardown.model.plan import StepOutcome
from fm_teardown.model.values import value

__all__ = [
    "PARKED_STATUSES",
    "TERMINAL_OUTCOMES",
    "Asked",
    "Attribution",
    "CodeIdentity",
    "Confirmation",
    "ParkedRunResult",
    "ParkedRunWhat",
    "RunStatus",
    "RunUnasked",
]

# A run whose status is one of these waits at a gate for someone to answer it.
PARKED_STATUSES = ("awaiting_approval", "fix_review")
# A run whose outcome is one of these is over: an abort is confirmed by reading one back.
TERMINAL_OUTCOMES = ("cancelled", "failed", "passed", "checks-passed")


@value
class RunStatus:
    """What `no-mistakes axi status` said of a run, read as firstmate reads it: for each key
    the first line that starts with it (after any indentation), its value's quotes stripped;
    "" when no line has the key."""

    id: str = ""
    branch: str = ""
    head: str = ""
    outcome: str = ""
    status: str = ""
    awaiting_agent: bool = False  # an `awaiting_agent:` line
    gate: bool = False  # a `gate:` line


@value
class Asked:
    """One `no-mistakes axi …` call as the adapter read it. `answered`: it ran and exited 0.
    `status`: its output's fields; `said`: its output, trimmed (what the not-found check
    compares); `problem`: why it did not answer (it could not be run, timed out, or exited
    non-zero: then with its first line). `status` is None when it said nothing that names a
    key."""

    answered: bool
    status: RunStatus | None = None
    said: str = ""
    problem: str = ""


@value
class CodeIdentity:
    """The slot's code identity against a run's head, as git reads it in the slot: the slot's
    HEAD, the commit the run's head names there (None: it names none, or is no commit id),
    and whether that commit descends from HEAD (the pipeline's own fix commits advanced the
    run past HEAD on the same history)."""

    local: str | None
    run: str | None
    descends: bool = False

    @property
    def matches(self) -> bool:
        """The run is of this code: its head is HEAD, or a descendant of it. A run whose head
        is behind HEAD (work advanced outside the run) or on another history is not."""
        if self.local is None or self.run is None:
            return False
        return self.run == self.local or self.descends


class Attribution(Enum):
    """Whose the run `axi status` names is, and whether it waits at a gate."""

    NO_RUN = auto()  # no run named (nothing said, or no id)
    NO_BRANCH = auto()  # the slot is on no branch: no run can be told to be TASK's
    OTHER_BRANCH = auto()  # the run is of another branch
    OTHER_CODE = auto()  # the run's head is not the slot's code (behind, diverged, unknown)
    CONCLUDED = auto()  # TASK's run, with an outcome already
    UNDER_WAY = auto()  # TASK's run, an autonomous step under way (no-mistakes drives it)
    PARKED = auto()  # TASK's run, parked at a gate: aborted before the worker goes


class Confirmation(Enum):
    """How an abort was read back as stopped."""

    TERMINAL = auto()  # `axi status --run <id>` names the run with a terminal outcome
    NOT_FOUND = auto()  # the CLI's exact `error: "run \"<id>\" not found"`


class ParkedRunWhat(Enum):
    IN_SLOT = auto()  # the `no-mistakes` found on PATH lies in the slot: never run
    UNANSWERED = auto()  # `axi status` did not answer: no run looked at (the teardown goes on)
    NOT_PARKED = auto()  # no run of TASK's parked at a gate (`attribution` says why)
    ABORTED = auto()  # TASK's parked run aborted, and read back stopped
    # TASK's parked run: the abort was sent, but the run was not read back stopped: the
    # teardown stops there, before anything of TASK's is touched (exit 1).
    UNCONFIRMED = auto()


_OUTCOME = {
    ParkedRunWhat.IN_SLOT: StepOutcome.SKIPPED,
    ParkedRunWhat.UNANSWERED: StepOutcome.SKIPPED,
    ParkedRunWhat.NOT_PARKED: StepOutcome.ABSENT,
    ParkedRunWhat.ABORTED: StepOutcome.DONE,
    ParkedRunWhat.UNCONFIRMED: StepOutcome.FAILED,
}


@value
class ParkedRunResult:
    """What the parked-run step did. `binary`: the `no-mistakes` it ran (or would have);
    `attribution`: whose the run named is (NOT_PARKED, and the parked ones); `run_id`,
    `branch`, `status`, `head`: the run as `axi status` named it; `confirmed`: how the abort
    was read back (ABORTED), with `ended_as`, the terminal outcome read (for a CONCLUDED run,
    the outcome it had); for UNCONFIRMED what
    was read back instead (`after`), and for UNANSWERED why the CLI did not answer
    (`problem`); `abort_problem`: why `axi abort` itself did not answer (only said: its
    confirmation decides)."""

    what: ParkedRunWhat
    binary: str = ""
    attribution: Attribution | None = None
    run_id: str = ""
    branch: str = ""
    status: str = ""
    head: str = ""
    confirmed: Confirmation | None = None
    ended_as: str = ""
    after: Asked | None = None
    problem: str = ""
    abort_problem: str = ""

    @property
    def outcome(self) -> StepOutcome:
        return _OUTCOME[self.what]

    @property
    def aborted(self) -> bool:
        """The abort was sent (confirmed or not)."""
        return self.what in (ParkedRunWhat.ABORTED, ParkedRunWhat.UNCONFIRMED)


@value
class RunUnasked:
    """A warning: TASK's no-mistakes run could not be looked at (the CLI did not answer, or
    lies in the slot), so a parked one, if any, was not aborted; the teardown went on."""

    code: ClassVar[str] = "no-mistakes-run-unasked"  # as a warning (`docs/codes.md`)

    task: str
    slot: str
    result: ParkedRunResult
