"""Why a task's own work is not landed (or not merged), as values: the facts the judge
(`decide/landed.py`) and the secondmate home's check (`observe/home.py`) found, no words.
`report/cause_words.py` alone words them (`not_landed_text`), so a refusal, a `--force`
warning, a `--landed` selection and a pool step say the same line from the same value.

What git or the OS said is carried as it was given (`error`); paths and commits as shown.
Each why has its stable `code` (`docs/codes.md`): a refusal for unlanded work, a `--landed`
selection and a `--force` warning give the code of the why they carry.
"""

from __future__ import annotations

from enum import Enum
from typing import ClassVar

from fm_teardown.model.values import value

__all__ = [
    "AndAlso",
    "BranchNotLanded",
    "HomeInFlight",
    "HomeOwnWork",
    "HomeProblem",
    "HomeProblemKind",
    "HomeRecordsUnknown",
    "NestedRepo",
    "NoHead",
    "NotLandedWhy",
    "NotMerged",
    "OwnWork",
    "RemoteUnknown",
    "ScoutMissing",
    "ScoutUnknown",
    "SlotUninspected",
    "SlotUninspectedKind",
    "UnlandedDiscarded",
    "Unpushed",
]


@value
class ScoutUnknown:
    """Whether a scout's report exists cannot be told."""

    code: ClassVar[str] = "scout-report-unknown"

    report: str
    error: str


@value
class ScoutMissing:
    code: ClassVar[str] = "scout-report-missing"

    report: str


@value
class HomeRecordsUnknown:
    """Whether a secondmate home has task records cannot be told."""

    code: ClassVar[str] = "home-records-unknown"

    home: str
    error: str


@value
class HomeInFlight:
    """A secondmate home still has task records: the first `named`, and `more` others."""

    code: ClassVar[str] = "home-in-flight"

    home: str
    named: tuple[str, ...]
    more: int = 0


class SlotUninspectedKind(Enum):
    STATUS_FAILED = "status-failed"  # `git status` failed
    NOT_A_DIRECTORY = "not-a-directory"
    UNREADABLE = "unreadable"

    @property
    def code(self) -> str:
        return f"slot-{self.value}"  # slot-status-failed, slot-not-a-directory, slot-unreadable


@value
class SlotUninspected:
    kind: SlotUninspectedKind
    path: str = ""
    error: str = ""

    @property
    def code(self) -> str:
        return self.kind.code


@value
class NoHead:
    """HEAD names no commit: whether the work landed cannot be told."""

    code: ClassVar[str] = "no-head"


@value
class RemoteUnknown:
    """Whether HEAD's commits are on a remote cannot be told."""

    code: ClassVar[str] = "remote-unknown"


@value
class OwnWork:
    """Uncommitted paths (`total`, the first `named`, `untracked` of them not tracked) and
    `commits` on no remote-tracking branch."""

    total: int
    named: tuple[str, ...]  # at most 3
    untracked: int = 0
    commits: int = 0

    @property
    def code(self) -> str:
        return "uncommitted-changes" if self.total else "unpushed-commits"


@value
class Unpushed:
    """`count` commits on no remote-tracking branch and in none of `compared` (the default
    branches, or none), nor in the merged `pr`; `incomplete`: the notes say what was not told."""

    code: ClassVar[str] = "unpushed-commits"

    count: int
    compared: tuple[str, ...]
    pr: str | None = None
    incomplete: bool = False


@value
class NotMerged:
    """Landed (pushed) but in none of `targets`, the default branches that count as merged."""

    code: ClassVar[str] = "pushed-not-merged"

    targets: tuple[str, ...]


class HomeProblemKind(Enum):
    UNREADABLE = "unreadable"
    NOT_A_DIRECTORY = "not-a-directory"
    GIT_FAILED = "git-failed"  # `git status` or `git log` failed there

    @property
    def code(self) -> str:
        return f"home-{self.value}"  # home-unreadable, home-not-a-directory, home-git-failed


@value
class HomeProblem:
    """A secondmate's home cannot be inspected."""

    kind: HomeProblemKind
    home: str
    error: str = ""  # the OS's words (UNREADABLE)

    @property
    def code(self) -> str:
        return self.kind.code


@value
class HomeOwnWork:
    code: ClassVar[str] = "home-own-work"

    home: str
    work: OwnWork


@value
class AndAlso:
    """Two whys: the secondmate home's own, then its task records'."""

    first: NotLandedWhy
    then: NotLandedWhy | None

    @property
    def code(self) -> str:
        return self.first.code


@value
class NestedRepo:
    """A repository nested in the slot (an untracked directory with its own `.git`): its
    path as the slot's `git status` names it (`vendor/lib/`), its uncommitted paths (`total`,
    the first `named`, as paths of the slot) and its commits on none of its own
    remote-tracking branches (`commits`); `error`: why it could not be inspected (then the
    counts are not told). Its work is the slot's: it is not landed."""

    path: str
    total: int = 0
    named: tuple[str, ...] = ()  # at most 3
    commits: int = 0
    error: str = ""


@value
class BranchNotLanded:
    """The task's branch (`fm/<id>`) holds commits beyond the slot's HEAD, and they are not
    landed (`why`: the judge's words for them)."""

    code: ClassVar[str] = "branch-beyond-head"

    branch: str
    why: NotLandedWhy | None


NotLandedWhy = (
    ScoutUnknown
    | ScoutMissing
    | HomeRecordsUnknown
    | HomeInFlight
    | SlotUninspected
    | NoHead
    | RemoteUnknown
    | OwnWork
    | Unpushed
    | NotMerged
    | HomeProblem
    | HomeOwnWork
    | AndAlso
    | BranchNotLanded
)


@value
class UnlandedDiscarded:
    """A decision's warning: `--force` discards `task`'s unlanded work (`why`); `live_owner`:
    the discarded live owner's, in TASK's slot (`--discard-live-owner`)."""

    task: str
    why: NotLandedWhy | None
    live_owner: bool = False

    @property
    def code(self) -> str:
        return "discarding-live-owners-work" if self.live_owner else "discarding-unlanded-work"
