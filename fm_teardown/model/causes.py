"""Why a decision refuses (or leaves a slot stale), as values: each cause the facts its words
need, no words. `report/cause_words.py` alone words them (`cause_text`), at the moment a
decision's reasons and headline are shown, so changing a message never changes what fm does.

What an observation reports in its own words (a tasktmp that is a link, a state dir fm cannot
write, a slot claim it cannot read, a `.git` that is not the slot's own) stays those words:
`Observed` carries them with the kind of problem they are.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from fm_teardown.model.not_landed import NestedRepo, NotLandedWhy
from fm_teardown.model.values import value
from fm_teardown.model.world import EndpointState, InventoryDoubt

if TYPE_CHECKING:  # plan.py imports this module (through landing.py)
    from fm_teardown.model.plan import OwnerKind

__all__ = [
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


@value
class LiveOwners:
    """The headline of a live-owner refusal: who works in the slot."""

    owners: tuple[LiveOwner, ...]


@value
class OthersAtWork:
    """`--landed --include-live` refuses a task whose own endpoint is alive when someone else
    works in its slot too (another task's endpoint, an agent, a person's terminal): mass
    cleanup never ends another's work (spec §15.4). Who works there is said beside it."""


@value
class LiveChildren:
    """A secondmate's home holds task records whose endpoints are live."""

    task: str
    live: tuple[str, ...]


@value
class ChildEndpoint:
    """One live child of a secondmate and its endpoint."""

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


class AtRiskKind(StrEnum):
    UNCOMMITTED = "uncommitted"
    UNTRACKED = "untracked"
    UNPUSHED = "unpushed"
    UNKNOWN = "could not tell"  # what rule 5 could not tell


@value
class AtRisk:
    """One path, commit or doubt of the work that would be lost."""

    kind: AtRiskKind
    what: str


@value
class NestedWork:
    """A repository nested in TASK's slot, and the work it holds."""

    repo: NestedRepo


@value
class NestedUnsaved:
    """`--force` cannot save the repositories nested in TASK's slot (`paths`, the first of
    them; `more` others) with their history: its save would keep only a commit id."""

    task: str
    paths: tuple[str, ...]
    more: int = 0


@value
class NotFetched:
    """A dry run's verdict rests on remote-tracking refs it did not fetch (`refs`, as shown):
    the real run fetches first, with prune, and may decide otherwise."""

    refs: tuple[str, ...]


# -- a stale slot ---------------------------------------------------------------------------


@value
class AlsoClaimed:
    """Other tasks claim TASK's slot, none live; `why`: whose it is now, in ownership's
    words. `stale`: the slot is theirs now (else it is TASK's)."""

    others: Listed
    why: str
    stale: bool


@value
class StaleHeadline:
    """A stale slot's headline: whose it is now, and that only TASK's window and record go."""

    owner: str
    task: str


# -- unsafe ---------------------------------------------------------------------------------


@value
class InvalidClaimant:
    """Another record that cannot be validated might own TASK's slot."""

    meta_path: str
    task: str
    problem: str
    slot_known: bool  # whether the slot it names can be told


@value
class InvalidClaimantsHeadline:
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


@value
class Observed:
    """An unsafe fact the observation said in its own words."""

    kind: ObservedKind
    problem: str
    path: str = ""  # the slot claim's path (CLAIM)


@value
class InventoryUnreadable:
    error: str
    headline: bool = False
    # Why a tmux server that answered is no inventory fm may read; None: no answer at all.
    doubt: InventoryDoubt | None = None


@value
class ProtectedRoot:
    """The slot is (or is an ancestor of) a root fm never resets."""

    slot: str
    same: bool  # the slot is the root itself
    label: str
    root: str
    headline: bool = False


@value
class InsideOwnWindow:
    task: str
    window: str


class PoolProblem(StrEnum):
    NO_TREEHOUSE = "no-treehouse"
    TREEHOUSE_BROKEN = "treehouse-broken"  # `detail`: what is wrong with it
    STATE_UNREADABLE = "state-unreadable"  # `detail`: the error
    NOT_MANAGED = "not-managed"  # `detail`: the pool's state file ("" if there is none)
    DESTROYING = "destroying"


@value
class PoolNotReady:
    problem: PoolProblem
    slot: str
    detail: str = ""


@value
class ForeignLock:
    """Another tool's `git worktree lock` on the slot; `reason`: the lock's ("" if none).
    `nested`: the locked worktree when it is one nested inside the slot (None: the slot)."""

    slot: str
    reason: str
    headline: bool = False
    nested: str | None = None


@value
class BlockedReturn:
    """What fm never ends works in the slot the pool's return would empty."""

    blockers: tuple[str, ...]  # each by what it is, its name and pid
    slot: str
    headline: bool = False


@value
class RecordRefused:
    """TASK's own record is unsafe or invalid; `own`: as a headline says it (`its record …`)."""

    meta_path: str
    problem: str
    own: bool = False


# -- a plan that changed since it was approved (--expect-plan) --------------------------------


@value
class PlanChanged:
    """The headline: the fields (`fingerprint.FIELDS` names) two tokens differ in."""

    fields: tuple[str, ...]


@value
class NeverApproved:
    """No --expect-plan token names TASK (a --landed selection); `now`: its plan's token."""

    task: str
    now: str


@value
class FieldChanged:
    """One field's approved words (None: not found from the token) and its words now, each
    item on a line of its own (`fingerprint.words`)."""

    field: str
    before: str | None
    now: str


@value
class NoFieldNamed:
    """The tokens differ, but no field's tag does."""


@value
class PlanTokens:
    approved: str
    now: str


# -- what a real run writes before it changes anything, and the launch it tears down ---------


class OwnFile(StrEnum):
    JOURNAL = "journal"  # its intent line, journalled before the first destructive step
    SLOT_LOCK = "slot-lock"  # the slot's lock file in the state dir


@value
class OwnFileBlocked:
    """One of fm's own files that a real run writes before it changes anything cannot be
    written where it is: `problem`, in its writer's own words (a link, a directory, not
    writable, inside a slot or a task's temp dir). The run refuses, and its dry run says so."""

    file: OwnFile
    path: str
    problem: str


@value
class OtherLaunch:
    """A teardown of TASK ended partway (its intent journalled, no result) and was of another
    launch than the one TASK's record names now: `changed` holds (field, then, now)."""

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
