"""What a real run warns about as it goes, as values: the step's facts, never a sentence.

A warning does not stop the run (a window `--force` went past, a branch or claim kept, the
attribution row not written, the window changed and the run decided again). `act` returns
these; `report/step_words.py` alone writes their words (`warning_text`), the same for people,
the JSON output and firstmate's drop-in. A decision's own warnings are the decide stage's
words (`str`) or, for work `--force` discards, `UnlandedDiscarded`: `RunWarning` is any.
"""

from __future__ import annotations

from fm_teardown.model.errors import Verdict
from fm_teardown.model.leaks import BrowserLeft, WorkersLeft
from fm_teardown.model.not_landed import UnlandedDiscarded
from fm_teardown.model.parked_run import RunUnasked
from fm_teardown.model.results import (
    AuthLeft,
    BranchResult,
    ClaimResult,
    EndpointResult,
    HooksResult,
)
from fm_teardown.model.values import value

__all__ = [
    "AttributionFailed",
    "BranchKept",
    "ClaimKept",
    "DecidedAgain",
    "DecisionChanged",
    "EndpointKept",
    "HooksUnknown",
    "LockRetried",
    "LockRetry",
    "RerunForNewDecision",
    "RouteLeft",
    "RunWarning",
    "SavedForOther",
    "StaleLockRemoved",
    "StepWarning",
]


@value
class EndpointKept:
    """`--force` went on though TASK's window was still there after the kill."""

    result: EndpointResult
    target: str


@value
class HooksUnknown:
    """Which hook files git tracks could not be told: every one was left."""

    result: HooksResult


@value
class BranchKept:
    """The branch step kept the branch for a reason worth saying."""

    result: BranchResult


@value
class ClaimKept:
    """The claim step kept or could not remove the slot claim."""

    result: ClaimResult


@value
class LockRetry:
    """`treehouse return` met a transient git lock: waiting `wait` seconds, then retry `n`
    of `of`."""

    wait: float
    n: int
    of: int


@value
class LockRetried:
    """The return succeeded on retry `n`: the lock had cleared."""

    n: int


@value
class StaleLockRemoved:
    """A git lock no process holds, old enough, was removed before the return went on."""

    lock: str
    why: str


@value
class RouteLeft:
    """A retired secondmate's route line could not be removed from the registry."""

    error: str
    task: str


@value
class SavedForOther:
    """The work `--force` saved is the discarded live owner's, not TASK's."""

    ref: str | None
    owner: str
    task: str


@value
class AttributionFailed:
    """The cost-attribution row could not be appended; the teardown went on."""

    task: str


@value
class DecidedAgain:
    """TASK's window changed between deciding and acting: the run decided again and sent or
    killed nothing more."""

    task: str
    before: Verdict
    now: Verdict


@value
class DecisionChanged:
    """The re-check under the slot lock decided otherwise: nothing more was changed."""

    before: Verdict
    now: Verdict


@value
class RerunForNewDecision:
    """The new decision would go ahead: the same command acts on it."""


StepWarning = (
    EndpointKept
    | HooksUnknown
    | BranchKept
    | ClaimKept
    | AuthLeft
    | LockRetry
    | LockRetried
    | StaleLockRemoved
    | RouteLeft
    | SavedForOther
    | AttributionFailed
    | DecidedAgain
    | DecisionChanged
    | RerunForNewDecision
    | BrowserLeft
    | WorkersLeft
    | RunUnasked
)
# A decision's warnings are the decide stage's words (or `UnlandedDiscarded`); a run's are values.
RunWarning = str | UnlandedDiscarded | StepWarning
