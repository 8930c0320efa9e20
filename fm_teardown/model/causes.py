"""Why a decision refuses (or leaves a slot stale), as values: each cause the facts its words
need, no words. `report/cause_words.py` alone words them (`cause_text`), at the moment a
decision's reasons and headline are shown, so changing a message never changes what fm does.

Each cause has its stable `code` (kebab-case, never changed once given): `--json` gives it
beside the words, `docs/codes.md` says what each means and where its runbook is
(tests/test_codes.py keeps every cause coded and documented).

What an observation reports in its own words (a tasktmp that is a link, a state dir fm cannot
write, a slot claim it cannot read, a `.git` that is not the slot's own) stays those words:
`Observed` carries them with the kind of problem they are.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from fm_teardown.model.errors import ErrorCode
from fm_teardown.model.not_landed import NestedRepo, NotLandedWhy
from fm_teardown.model.values import value
from fm_teardown.model.world import EndpointState, InventoryDoubt

if TYPE_CHECKING:  # plan.py imports this module (through landing.py)
    from fm_teardown.model.plan import OwnerKind

__all__ = [
    "INVENTORY_DOUBT_CODES",
    "LISTED",
    "AlsoClaimed",
    "AtRisk",
    "AtRiskKind",
    "BlockedReturn",
    "Cause",
    "ChildEndpoint",
    "FieldChanged",
    "ForeignLock",
    "InsideOwnWindow",
    "InvalidClaimant",
    "InvalidClaimantsHeadline",
    "InventoryUnreadable",
    "Listed",
    "LiveChildren",
    "LiveOwner",
    "LiveOwners",
    "NestedUnsaved",
    "NestedWork",
    "NeverApproved",
    "NoFieldNamed",
    "NotFetched",
    "NotLanded",
    "Observed",
    "ObservedKind",
    "OtherLaunch",
    "OthersAtWork",
    "OwnFile",
    "OwnFileBlocked",
    "PlanChanged",
    "PlanTokens",
    "PoolNotReady",
    "PoolProblem",
    "ProtectedRoot",
    "RecordRefused",
    "SlotOwned",
    "StaleHeadline",
    "code_of",
]

# Task ids named in one reason: a slot shared by thousands of records must not make every
# one of their reasons name all the others (the audit would grow as their square).
LISTED = 10


@value
class Listed:
    """Task ids as a reason names them: the first `LISTED` and how many more."""

    ids: tuple[str, ...]
    more: int = 0

    @staticmethod
    def of(ids: Sequence[str]) -> Listed:
        return Listed(tuple(itertools.islice(ids, LISTED)), max(0, len(ids) - LISTED))


# -- a live owner ---------------------------------------------------------------------------


@value
class SlotOwned:
    """TASK's slot is owned by other live tasks (the first reason of a live-owner refusal)."""

    code: ClassVar[str] = "slot-owned"

    slot: str
    owners: tuple[str, ...]


@value
class LiveOwner:
    """One live owner of the slot and how it is live: its kind (`OwnerKind`'s value), its
    endpoint's state, and why it owns the slot (the ownership's words)."""

    id: str
    kind: OwnerKind
    endpoint: EndpointState
    why: str

    @property
    def code(self) -> str:
        return self.kind.code


@value
class LiveOwners:
    """The headline of a live-owner refusal: who works in the slot."""

    code: ClassVar[str] = "live-owner"

    owners: tuple[LiveOwner, ...]


@value
class OthersAtWork:
    """`--landed --include-live` refuses a task whose own endpoint is alive when someone else
    works in its slot too (another task's endpoint, an agent, a person's terminal): mass
    cleanup never ends another's work (spec §15.4). Who works there is said beside it."""

    code: ClassVar[str] = "others-at-work"


@value
class LiveChildren:
    """A secondmate's home holds task records whose endpoints are live."""

    code: ClassVar[str] = "secondmate-home-live"

    task: str
    live: tuple[str, ...]


@value
class ChildEndpoint:
    """One live child of a secondmate and its endpoint."""

    code: ClassVar[str] = "secondmate-child-live"

    task: str
    state: EndpointState
    detail: str


# -- unlanded work --------------------------------------------------------------------------


@value
class NotLanded:
    """TASK's own work is not landed (`lost`: as the headline says it, what would be lost);
    `summary` is the judge's why."""

    task: str
    summary: NotLandedWhy | None
    lost: bool = False

    @property
    def code(self) -> str:
        """Why it is not landed, as the judge's why is coded."""
        return "not-landed" if self.summary is None else self.summary.code


class AtRiskKind(StrEnum):
    UNCOMMITTED = "uncommitted"
    UNTRACKED = "untracked"
    UNPUSHED = "unpushed"
    UNKNOWN = "could not tell"  # what rule 5 could not tell

    @property
    def code(self) -> str:
        return _AT_RISK[self]


_AT_RISK = {
    AtRiskKind.UNCOMMITTED: "at-risk-uncommitted",
    AtRiskKind.UNTRACKED: "at-risk-untracked",
    AtRiskKind.UNPUSHED: "at-risk-unpushed",
    AtRiskKind.UNKNOWN: "at-risk-unknown",
}


@value
class AtRisk:
    """One path, commit or doubt of the work that would be lost."""

    kind: AtRiskKind
    what: str

    @property
    def code(self) -> str:
        return self.kind.code


@value
class NestedWork:
    """A repository nested in TASK's slot, and the work it holds."""

    code: ClassVar[str] = "nested-repository"

    repo: NestedRepo


@value
class NestedUnsaved:
    """`--force` cannot save the repositories nested in TASK's slot (`paths`, the first of
    them; `more` others) with their history: its save would keep only a commit id."""

    code: ClassVar[str] = "nested-repository-unsaved"

    task: str
    paths: tuple[str, ...]
    more: int = 0


@value
class NotFetched:
    """A dry run's verdict rests on remote-tracking refs it did not fetch (`refs`, as shown):
    the real run fetches first, with prune, and may decide otherwise."""

    code: ClassVar[str] = "not-fetched"

    refs: tuple[str, ...]


# -- a stale slot ---------------------------------------------------------------------------


@value
class AlsoClaimed:
    """Other tasks claim TASK's slot, none live; `why`: whose it is now, in ownership's
    words. `stale`: the slot is theirs now (else it is TASK's)."""

    others: Listed
    why: str
    stale: bool

    @property
    def code(self) -> str:
        return "stale-claimants" if self.stale else "also-claimed"


@value
class StaleHeadline:
    """A stale slot's headline: whose it is now, and that only TASK's window and record go."""

    code: ClassVar[str] = "stale-slot"

    owner: str
    task: str


# -- unsafe ---------------------------------------------------------------------------------


@value
class InvalidClaimant:
    """Another record that cannot be validated might own TASK's slot."""

    code: ClassVar[str] = "invalid-claimant"

    meta_path: str
    task: str
    problem: str
    slot_known: bool  # whether the slot it names can be told


@value
class InvalidClaimantsHeadline:
    code: ClassVar[str] = "invalid-claimants"

    meta_name: str
    problem: str
    names_slot: bool
    more: int  # how many more invalid records


class ObservedKind(StrEnum):
    CLAIM = "claim"  # the slot claim cannot be read
    TASKTMP = "tasktmp"  # TASK's tasktmp is not fm's own directory
    STATE_DIR = "state-dir"  # the state dir cannot be written
    CENSUS = "census"  # where a process in the slot runs cannot be told
    GIT_DIR = "git-dir"  # the slot's .git is not its own

    @property
    def code(self) -> str:
        return _OBSERVED[self]


_OBSERVED = {
    ObservedKind.CLAIM: "claim-unreadable",
    ObservedKind.TASKTMP: "tasktmp-not-own",
    ObservedKind.STATE_DIR: "state-dir-unwritable",
    ObservedKind.CENSUS: "census-unsure",
    ObservedKind.GIT_DIR: "git-dir-not-own",
}


@value
class Observed:
    """An unsafe fact the observation said in its own words."""

    kind: ObservedKind
    problem: str
    path: str = ""  # the slot claim's path (CLAIM)

    @property
    def code(self) -> str:
        return self.kind.code


@value
class InventoryUnreadable:
    error: str
    headline: bool = False
    # Why a tmux server that answered is no inventory fm may read; None: no answer at all.
    doubt: InventoryDoubt | None = None

    @property
    def code(self) -> str:
        return "tmux-unreadable" if self.doubt is None else INVENTORY_DOUBT_CODES[self.doubt]


# Why a tmux server that answered is no inventory fm may read, by its code.
INVENTORY_DOUBT_CODES = {
    InventoryDoubt.FLEET_ELSEWHERE: "tmux-fleet-elsewhere",
    InventoryDoubt.SERVER_UNLISTED: "tmux-server-unlisted",
    InventoryDoubt.VANTAGE: "tmux-vantage",
}


@value
class ProtectedRoot:
    """The slot is (or is an ancestor of) a root fm never resets."""

    code: ClassVar[str] = "protected-root"

    slot: str
    same: bool  # the slot is the root itself
    label: str
    root: str
    headline: bool = False


@value
class InsideOwnWindow:
    code: ClassVar[str] = "inside-own-window"

    task: str
    window: str


class PoolProblem(StrEnum):
    NO_TREEHOUSE = "no-treehouse"
    TREEHOUSE_BROKEN = "treehouse-broken"  # `detail`: what is wrong with it
    STATE_UNREADABLE = "state-unreadable"  # `detail`: the error
    NOT_MANAGED = "not-managed"  # `detail`: the pool's state file ("" if there is none)
    DESTROYING = "destroying"

    @property
    def code(self) -> str:
        return f"pool-{self.value}"  # pool-no-treehouse, pool-not-managed, ...


@value
class PoolNotReady:
    problem: PoolProblem
    slot: str
    detail: str = ""

    @property
    def code(self) -> str:
        return self.problem.code


@value
class ForeignLock:
    """Another tool's `git worktree lock` on the slot; `reason`: the lock's ("" if none).
    `nested`: the locked worktree when it is one nested inside the slot (None: the slot)."""

    slot: str
    reason: str
    headline: bool = False
    nested: str | None = None

    @property
    def code(self) -> str:
        return "worktree-locked" if self.nested is None else "nested-worktree-locked"


@value
class BlockedReturn:
    """What fm never ends works in the slot the pool's return would empty."""

    code: ClassVar[str] = "return-would-end-unsignalled"

    blockers: tuple[str, ...]  # each by what it is, its name and pid
    slot: str
    headline: bool = False


@value
class RecordRefused:
    """TASK's own record is unsafe or invalid; `own`: as a headline says it (`its record …`)."""

    meta_path: str
    problem: str
    own: bool = False
    code: ErrorCode = ErrorCode.RECORD_INVALID  # the record's problem's (`RecordProblem`)


# -- a plan that changed since it was approved (--expect-plan) --------------------------------


@value
class PlanChanged:
    """The headline: the fields (`fingerprint.FIELDS` names) two tokens differ in."""

    code: ClassVar[str] = "plan-changed"

    fields: tuple[str, ...]


@value
class NeverApproved:
    """No --expect-plan token names TASK (a --landed selection); `now`: its plan's token."""

    code: ClassVar[str] = "plan-never-approved"

    task: str
    now: str


@value
class FieldChanged:
    """One field's approved words (None: not found from the token) and its words now, each
    item on a line of its own (`fingerprint.words`)."""

    code: ClassVar[str] = "plan-field-changed"

    field: str
    before: str | None
    now: str


@value
class NoFieldNamed:
    """The tokens differ, but no field's tag does."""

    code: ClassVar[str] = "plan-field-unnamed"


@value
class PlanTokens:
    code: ClassVar[str] = "plan-tokens"

    approved: str
    now: str


# -- what a real run writes before it changes anything, and the launch it tears down ---------


class OwnFile(StrEnum):
    JOURNAL = "journal"  # its intent line, journalled before the first destructive step
    SLOT_LOCK = "slot-lock"  # the slot's lock file in the state dir

    @property
    def code(self) -> str:
        return "journal-unwritable" if self is OwnFile.JOURNAL else "slot-lock-inside-work"


@value
class OwnFileBlocked:
    """One of fm's own files that a real run writes before it changes anything cannot be
    written where it is: `problem`, in its writer's own words (a link, a directory, not
    writable, inside a slot or a task's temp dir). The run refuses, and its dry run says so."""

    file: OwnFile
    path: str
    problem: str

    @property
    def code(self) -> str:
        return self.file.code


@value
class OtherLaunch:
    """A teardown of TASK ended partway (its intent journalled, no result) and was of another
    launch than the one TASK's record names now: `changed` holds (field, then, now)."""

    code: ClassVar[str] = "unfinished-other-launch"

    task: str
    started: str
    changed: tuple[tuple[str, str, str], ...]


Cause = (
    SlotOwned
    | LiveOwner
    | LiveOwners
    | OthersAtWork
    | LiveChildren
    | ChildEndpoint
    | NotLanded
    | AtRisk
    | AlsoClaimed
    | StaleHeadline
    | InvalidClaimant
    | InvalidClaimantsHeadline
    | Observed
    | InventoryUnreadable
    | ProtectedRoot
    | InsideOwnWindow
    | PoolNotReady
    | ForeignLock
    | BlockedReturn
    | RecordRefused
    | PlanChanged
    | NeverApproved
    | FieldChanged
    | NoFieldNamed
    | PlanTokens
    | OwnFileBlocked
    | OtherLaunch
    | NestedWork
    | NestedUnsaved
    | NotFetched
)


def code_of(c: Cause) -> str:
    """A cause's stable code (mypy checks here that every cause has one)."""
    return c.code
