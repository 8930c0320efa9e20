"""The values a decision is made of: flags, steps, the pool return, the Decision itself.

Plain frozen values and the vocabulary they speak (step names and outcomes as StrEnums, which
serialise as their values), shared by `decide` (which makes them), `act` (which carries them
out) and `report` (which renders them).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from fm_teardown.model.errors import Verdict
from fm_teardown.model.landing import Proof, Reason
from fm_teardown.model.not_landed import NestedRepo, NotLandedWhy, UnlandedDiscarded
from fm_teardown.model.values import value
from fm_teardown.model.world import EndpointState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fm_teardown.model.own_files import WorkPlaces
    from fm_teardown.model.records import Fleet
    from fm_teardown.model.results import StepResult
    from fm_teardown.model.world import Observation

__all__ = [
    "BranchDelete",
    "Decision",
    "DecisionWarning",
    "Flags",
    "LandedLike",
    "Owner",
    "OwnerKind",
    "Planned",
    "PoolReturn",
    "Step",
    "StepName",
    "StepOutcome",
]


class OwnerKind(StrEnum):
    RECORD = "record"  # another task record claims the slot
    LEASE = "lease"  # a pool lease on the slot
    PROCESS = "process"  # an agent process of unknown task, `pid:<PID>`
    # A person's terminal no task holds (a shell, an editor, a REPL in someone's pane, an ssh
    # login), `pid:<PID>`: its processes in the slot, by pane or terminal (spec §15.4).
    TERMINAL = "terminal"


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


@value
class Flags:
    force: bool = False
    discard_live_owner: str | None = None
    dry_run: bool = False
    # The plan token the operator approved (`--expect-plan`): the first decision must give it.
    expect_plan: str | None = None
    no_journal: bool = False  # `--no-journal`: run without the journal (no intent, no result)


# A decision's warning: the decide stage's words, or a value report/ words.
DecisionWarning = str | UnlandedDiscarded


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
    """A step of the plan, or of a run. `detail` is the plan's description of it; once it ran
    (or was left out), `result` says what happened, as a value (`results`), and
    `report/step_words.py` alone turns the result into words."""

    step: StepName
    target: str
    detail: str
    outcome: StepOutcome = StepOutcome.PLANNED
    result: StepResult | None = None


@value
class PoolReturn:
    """`treehouse return [--force] [--if-lease-id ID] [--if-lease-holder H] <path>`.

    `force`: the pool's dirty prompt skipped (`--force`, the tree reset whatever it holds):
    under fm's `--force` (after its save), and for a scout's scratch slot and a secondmate's
    home (fm looks at the home again right before). Otherwise the return is unforced: the pool
    declines a tree that holds changes (`Aborted.`), and work that appeared after the decision
    is preserved, never reset."""

    path: str  # exactly as the pool's state file stores it
    lease_id: str | None
    lease_holder: str | None
    force: bool = True

    @property
    def argv(self) -> list[str]:
        argv = ["return", "--force"] if self.force else ["return"]
        if self.lease_id:
            argv += ["--if-lease-id", self.lease_id]
        if self.lease_holder is not None:
            argv += ["--if-lease-holder", self.lease_holder]
        return [*argv, self.path]


@value
class BranchDelete:
    """TASK's branch, deleted after the return only if it still names the commit seen."""

    name: str
    commit: str
    default: str | None  # the project's default branch: never deleted


@value
class Decision:
    task: str
    verdict: Verdict
    reasons: tuple[Reason, ...]
    owners: Sequence[Owner] = ()
    plan: tuple[Step, ...] = ()
    hints: tuple[str, ...] = ()
    warnings: tuple[DecisionWarning, ...] = ()
    slot: str | None = None
    endpoint: EndpointState | None = None
    pool_return: PoolReturn | None = None
    discarded_owner: str | None = None
    save_discarded: bool = False
    # Whose work the save holds: TASK's own, or the discarded live owner's (spec §7a).
    save_as: str | None = None
    end_processes: bool = False
    # Why the processes and pool steps do not touch the slot (a stale slot, a slot that is
    # gone or already returned), when they do not.
    skip_reason: str | None = None
    # What rule 5 could not tell (an inconclusive fetch, a gh failure, ...).
    notes: tuple[str, ...] = ()
    # The one reason that matters, in words an operator acts on (the audit's row, the first
    # line of the human output): who owns the slot, what would be lost, what is unsafe.
    headline: Reason = ""
    branch: BranchDelete | None = None  # the branch step's target (spec §10)
    own_claim: str | None = None  # TASK's own slot claim, removed after the return (spec §10)
    project: str | None = None  # the record's project (journalled: `fm restore` finds saves)
    pool: str | None = None  # the pool dir of the slot, if known (output shortens paths in it)
    stale_owner: str | None = None  # whose a stale slot is now (the first line names them)

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
