"""What a real run warns about as it goes, as values: the step's facts, never a sentence.

A warning does not stop the run (a window `--force` went past, a branch or claim kept, the
attribution row not written, the window changed and the run decided again). `act` returns
these; `report/step_words.py` alone writes their words (`warning_text`), the same for people,
the JSON output and firstmate's drop-in. A decision's own warnings are the decide stage's
words (`Note`) or, for work `--force` discards, `UnlandedDiscarded`: `RunWarning` is any.

Every warning has its stable `code` (kebab-case, never changed once given), which `--json`
gives beside its words (`docs/codes.md`); `warning_code` reads it, and mypy checks there that
every kind of warning has one.
"""

from __future__ import annotations

from typing import ClassVar

from fm_teardown.model.errors import Verdict
from fm_teardown.model.leaks import BrowserLeft, WorkersLeft
from fm_teardown.model.not_landed import UnlandedDiscarded
from fm_teardown.model.notes import Note
from fm_teardown.model.parked_run import RunUnasked
from fm_teardown.model.results import (
    AuthLeft,
    BranchResult,
    BranchWhat,
    ClaimResult,
    ClaimWhat,
    EndpointResult,
    HooksResult,
)
from fm_teardown.model.values import value

__all__ = [
    "BRANCH_KEPT_CODES",
    "CLAIM_KEPT_CODES",
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
    "warning_code",
]


@value
class EndpointKept:
    """`--force` went on though TASK's window was still there after the kill."""

    code: ClassVar[str] = "window-kept-forced"

    result: EndpointResult
    target: str


@value
class HooksUnknown:
    """Which hook files git tracks could not be told: every one was left."""

    code: ClassVar[str] = "hooks-untracked-unknown"

    result: HooksResult


@value
class BranchKept:
    """The branch step kept the branch for a reason worth saying."""

    result: BranchResult

    @property
    def code(self) -> str:
        return BRANCH_KEPT_CODES.get(self.result.what, "branch-kept")


@value
class ClaimKept:
    """The claim step kept or could not remove the slot claim."""

    result: ClaimResult

    @property
    def code(self) -> str:
        return CLAIM_KEPT_CODES.get(self.result.what, "claim-kept")


@value
class LockRetry:
    """`treehouse return` met a transient git lock: waiting `wait` seconds, then retry `n`
    of `of`."""

    code: ClassVar[str] = "git-lock-retry"

    wait: float
    n: int
    of: int


@value
class LockRetried:
    """The return succeeded on retry `n`: the lock had cleared."""

    code: ClassVar[str] = "git-lock-cleared"

    n: int


@value
class StaleLockRemoved:
    """A git lock no process holds, old enough, was removed before the return went on."""

    code: ClassVar[str] = "stale-git-lock-removed"

    lock: str
    why: str


@value
class RouteLeft:
    """A retired secondmate's route line could not be removed from the registry."""

    code: ClassVar[str] = "route-left"

    error: str
    task: str


@value
class SavedForOther:
    """The work `--force` saved is the discarded live owner's, not TASK's."""

    code: ClassVar[str] = "saved-for-discarded-owner"

    ref: str | None
    owner: str
    task: str


@value
class AttributionFailed:
    """The cost-attribution row could not be appended; the teardown went on."""

    code: ClassVar[str] = "attribution-failed"

    task: str


@value
class DecidedAgain:
    """TASK's window changed between deciding and acting: the run decided again and sent or
    killed nothing more."""

    code: ClassVar[str] = "window-changed-decided-again"

    task: str
    before: Verdict
    now: Verdict


@value
class DecisionChanged:
    """The re-check under the slot lock decided otherwise: nothing more was changed."""

    code: ClassVar[str] = "decision-changed"

    before: Verdict
    now: Verdict


@value
class RerunForNewDecision:
    """The new decision would go ahead: the same command acts on it."""

    code: ClassVar[str] = "rerun-for-new-decision"


# Why the branch step kept the branch, by its code: each result that warns (`BranchResult.warns`).
BRANCH_KEPT_CODES = {
    BranchWhat.UNLISTED: "branch-kept-worktrees-unlisted",
    BranchWhat.NO_GIT_DIR: "branch-kept-no-git-dir",
    BranchWhat.KEPT_IN_USE: "branch-kept-in-use",
    BranchWhat.KEPT_MOVED: "branch-kept-moved",
}
# Why the claim step kept the slot claim, by its code: each result that warns (`.warns`).
CLAIM_KEPT_CODES = {
    ClaimWhat.KEPT_UNSAFE: "claim-kept-unsafe",
    ClaimWhat.FAILED: "claim-remove-failed",
}

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
# A decision's warnings are the decide stage's words with their code (`Note`), or
# `UnlandedDiscarded`; a run's are values.
RunWarning = Note | UnlandedDiscarded | StepWarning


def warning_code(w: RunWarning) -> str:
    """A warning's stable code (mypy checks here that every kind of warning has one)."""
    return w.code
