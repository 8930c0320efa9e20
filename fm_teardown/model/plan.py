"""The values a decision is made of: steps, where TASK is, the Decision itself.

Plain frozen values and the vocabulary they speak (step names and outcomes as StrEnums, which
serialise as their values), shared by `decide` (which makes them), `act` (which carries them
out) and `report` (which renders them). What each step will do is its action
(`step_actions.py`: the pool's return, the branch delete, ...), carried by its `Step`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, TypeVar

from fm_teardown.model.causes import StaleHeadline
from fm_teardown.model.errors import Verdict
from fm_teardown.model.landing import Proof, Reason
from fm_teardown.model.not_landed import NestedRepo, NotLandedWhy, UnlandedDiscarded
from fm_teardown.model.notes import Note
from fm_teardown.model.step_actions import PoolReturn, StepAction
from fm_teardown.model.values import value
from fm_teardown.model.world import EndpointState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fm_teardown.model.own_files import WorkPlaces
    from fm_teardown.model.records import Fleet
    from fm_teardown.model.results import StepResult
    from fm_teardown.model.world import Observation

__all__ = [
    "Decision",
    "DecisionWarning",
    "LandedLike",
    "LeftOut",
    "Owner",
    "OwnerKind",
    "Planned",
    "Step",
    "StepName",
    "StepOutcome",
    "Where",
]


class OwnerKind(StrEnum):
    RECORD = "record"  # another task record claims the slot
    LEASE = "lease"  # a pool lease on the slot
    PROCESS = "process"  # an agent process of unknown task, `pid:<PID>`
    # A person's terminal no task holds (a shell, an editor, a REPL in someone's pane, an ssh
    # login), `pid:<PID>`: its processes in the slot, by pane or terminal (spec §15.4).
    TERMINAL = "terminal"

    @property
    def code(self) -> str:
        """The owner's stable code in `--json` (`docs/codes.md`)."""
        return _OWNER_CODES[self]


_OWNER_CODES = {
    OwnerKind.RECORD: "record-claim",
    OwnerKind.LEASE: "pool-lease",
    OwnerKind.PROCESS: "unattributed-agent",
    OwnerKind.TERMINAL: "live-terminal",
}


@value
class Owner:
    """One owner of a slot, as `ownership.owners_of` finds it."""

    id: str
    kind: OwnerKind
    endpoint: EndpointState
    live: bool
    slot: str
    why: str


class StepName(StrEnum):
    ENDPOINT = "endpoint"
    PROCESSES = "processes"
    SAVE_DISCARDED = "save-discarded"
    HOOKS = "hooks"  # the fleet's hook files, before the return (spec §10)
    POOL = "pool"
    BRANCH = "branch"  # TASK's branch, after a verified return (spec §10)
    CLAIM = "claim"  # TASK's own slot claim, after a verified return (spec §10)
    AUTH = "auth"  # the grok/kimi hook auth entries (spec §10)
    ATTRIBUTION = "attribution"  # the cost-attribution row (spec §10)
    RECORD = "record"
    # With the record's duties, noted only when there was something to end (spec §15.5):
    BROWSER = "browser"  # TASK's headless browser stack (its chrome-devtools-axi session)
    REMOTE_JOBS = "remote-jobs"  # remote-job workers whose code root is gone
    # A ship task's own no-mistakes run parked at a gate, aborted before its window goes
    # (spec §15.5b): planned only when `no-mistakes` is on PATH.
    PARKED_RUN = "parked-run"


class StepOutcome(StrEnum):
    PLANNED = "planned"  # a dry run, or a step not reached yet
    DONE = "done"
    ABSENT = "absent"  # nothing was there to act on
    SKIPPED = "skipped"
    FAILED = "failed"


# A decision's warning: the decide stage's words with their code, or a value report/ words.
DecisionWarning = Note | UnlandedDiscarded


class LandedLike(Protocol):
    """The facts rule 5 needs (fm_teardown.model.landing.LandedFacts)."""

    @property
    def landed(self) -> bool: ...
    @property
    def summary(self) -> NotLandedWhy | None: ...
    @property
    def proof(self) -> Proof | None: ...
    @property
    def dirty(self) -> tuple[str, ...]: ...
    @property
    def unpushed(self) -> tuple[str, ...]: ...
    @property
    def notes(self) -> tuple[str, ...]: ...
    @property
    def untracked(self) -> tuple[str, ...]: ...
    @property
    def head(self) -> str | None: ...
    @property
    def branch(self) -> str | None: ...
    @property
    def default_branch(self) -> str | None: ...
    @property
    def unfetched(self) -> tuple[str, ...]: ...
    @property
    def nested(self) -> tuple[NestedRepo, ...]: ...


@value
class Step:
    """A step of the plan, or of a run. `detail` is the plan's description of it and `action`
    what it will do, as a value (`step_actions`; None for a step that acts from the record and
    the observation alone). Once it ran (or was left out), `result` says what happened, as a
    value (`results`), and `report/step_words.py` alone turns the result into words: a plan's
    steps have no result, a run's always have one."""

    step: StepName
    target: str
    detail: str
    outcome: StepOutcome = StepOutcome.PLANNED
    result: StepResult | None = None
    action: StepAction | None = None


@value
class LeftOut:
    """A step the plan leaves out that a real run still reports, skipped, and why: the
    processes and pool steps of a slot the plan leaves as it is (a stale slot, a slot that is
    gone or already returned). `why` None: the plan simply has no such step."""

    step: StepName
    target: str
    why: str | None = None


@value
class Where:
    """Where TASK is, as the decision saw it (the `task · slot · endpoint` line): its slot
    (canonical), the state of its endpoint, the record's project (journalled: `fm restore`
    finds the saves there) and the pool dir of its slot (output shortens paths in it)."""

    slot: str | None = None
    endpoint: EndpointState | None = None
    project: str | None = None
    pool: str | None = None


_A = TypeVar("_A", bound="StepAction")


@value
class Decision:
    """What the decide stage says of a task: the verdict and why, who owns the slot, where
    TASK is, and the plan (its steps in the order they run, each with what it will do). What a
    step will do is its step's `action`, never a field of the decision's: `action(kind)` finds
    it (the pool's return: `pool_return`)."""

    task: str
    verdict: Verdict
    reasons: tuple[Reason, ...]
    owners: Sequence[Owner] = ()
    plan: tuple[Step, ...] = ()
    hints: tuple[str, ...] = ()
    warnings: tuple[DecisionWarning, ...] = ()
    where: Where = field(default_factory=Where)
    # What rule 5 could not tell (an inconclusive fetch, a gh failure, ...).
    notes: tuple[str, ...] = ()
    # The one reason that matters, in words an operator acts on (the audit's row, the first
    # line of the human output): who owns the slot, what would be lost, what is unsafe.
    headline: Reason = ""
    # The steps a real run reports skipped though the plan leaves them out, and why.
    left_out: tuple[LeftOut, ...] = ()
    # The live owner `--force --discard-live-owner` names, discarded by this plan (spec §7a).
    discarded_owner: str | None = None

    def action(self, kind: type[_A]) -> _A | None:
        """What the plan's step of that kind will do (`EndProcesses`, `PoolReturn`, ...), or
        None when no step of the plan has one."""
        for s in self.plan:
            if isinstance(s.action, kind):
                return s.action
        return None

    @property
    def pool_return(self) -> PoolReturn | None:
        """The pool's return the plan makes, conditional on the lease seen (the plan token's
        `lease`)."""
        return self.action(PoolReturn)

    # Where TASK is, read as every stage reads it (`d.slot`); the facts live in `where`.
    @property
    def slot(self) -> str | None:
        return self.where.slot

    @property
    def endpoint(self) -> EndpointState | None:
        return self.where.endpoint

    @property
    def project(self) -> str | None:
        return self.where.project

    @property
    def pool(self) -> str | None:
        return self.where.pool

    @property
    def stale_owner(self) -> str | None:
        """Whose a stale slot is now (the first line of a cleared run names them): its
        headline's."""
        return self.headline.owner if isinstance(self.headline, StaleHeadline) else None

    @property
    def exit_code(self) -> int:
        return int(self.verdict.exit_code)

    @property
    def refused(self) -> bool:
        """A refusal: nothing is done, and its first reason is shown with what the run
        changed (`report/messages.py`, `reasons`)."""
        return self.verdict in (
            Verdict.LIVE_OWNER,
            Verdict.UNSAFE,
            Verdict.UNLANDED,
            Verdict.PLAN_CHANGED,
        )


@value
class Planned:
    """A decision with the fleet and the observation it was made from."""

    decision: Decision
    fleet: Fleet
    observation: Observation
    landed: LandedLike | None = None  # rule 5's facts, when the decision reached rule 5
    # The plan token's fields in words (fingerprint.words: what a refusal shows as
    # `before → now`), and the token.
    plan_inputs: Mapping[str, str] | None = None
    plan_id: str | None = None
    # Where fm's own files never go, as this look at the fleet found it (`model/own_files.py`).
    places: WorkPlaces | None = None
