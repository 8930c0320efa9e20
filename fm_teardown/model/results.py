"""What each act step did, as values: an enum of what happened plus the facts the words need.

`act` and `duties` return these and never a sentence; `report/step_words.py` alone turns them
into the text people and programs read, and `human`, `render` and `journal` read their fields
(a count, a ref), never that text. Each value knows its step outcome (done, absent, skipped,
failed), so no outcome is ever read back out of words.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum, auto
from typing import ClassVar

from fm_teardown.model.errors import Verdict
from fm_teardown.model.landing import Reason
from fm_teardown.model.leaks import BrowserResult, RemoteJobsResult
from fm_teardown.model.not_landed import NotLandedWhy
from fm_teardown.model.parked_run import ParkedRunResult
from fm_teardown.model.plan import StepOutcome
from fm_teardown.model.reasons import NotSelectedReason
from fm_teardown.model.values import value
from fm_teardown.model.world import BranchUse, Terminal

__all__ = [
    "WINDOW_KILL_SIGNAL",
    "Arrived",
    "AttributionResult",
    "AttributionWhat",
    "AuthLeft",
    "AuthLeftWhy",
    "AuthResult",
    "BranchResult",
    "BranchWhat",
    "ClaimResult",
    "ClaimWhat",
    "Drift",
    "DriftWhat",
    "EndpointResult",
    "EndpointWhat",
    "HookFile",
    "HooksResult",
    "HooksWhat",
    "NotNeeded",
    "NotRun",
    "NotRunCause",
    "PoolResult",
    "PoolWhat",
    "ProcRef",
    "ProcessesResult",
    "ProcessesWhat",
    "RecheckAt",
    "RecordGone",
    "RecordResult",
    "RecordWhat",
    "SaveResult",
    "SaveWhat",
    "Signal",
    "StepResult",
    "UnlinkWhat",
    "Unlinked",
    "arrived",
    "signals_of",
]

_D, _A, _S, _F = StepOutcome.DONE, StepOutcome.ABSENT, StepOutcome.SKIPPED, StepOutcome.FAILED

# How a window kill's hangup of its panes' processes is named among the signals, beside the
# `SIGTERM` and `SIGKILL` of the processes step (the journal and the JSON list them).
WINDOW_KILL_SIGNAL = "SIGHUP (window killed)"


@value
class Signal:
    """A process a step signalled: pid, start time, name and the signals sent."""

    pid: int
    start_time: float
    name: str
    signals: tuple[str, ...]


# -- steps that did not run ---------------------------------------------------------------------


class NotRunCause(Enum):
    INTERRUPTED = auto()
    EARLIER_FAILED = auto()
    REFUSED = auto()


@value
class NotRun:
    """A planned step the run never reached."""

    cause: NotRunCause

    @property
    def outcome(self) -> StepOutcome:
        return _S


@value
class NotNeeded:
    """The processes or pool step left out: `why` is the decision's skip reason (a stale slot,
    a slot gone or already returned), None when the plan simply has no such step."""

    why: str | None = None

    @property
    def outcome(self) -> StepOutcome:
        return _S


@value
class RecordGone:
    """A duty of the record (auth, attribution) not done: the record was already gone."""

    @property
    def outcome(self) -> StepOutcome:
        return _S


@value
class ProcRef:
    name: str
    pid: int
    terminal: Terminal | None = None  # a shell in a terminal, no task's: ended all the same


# -- endpoint -----------------------------------------------------------------------------------


class EndpointWhat(Enum):
    NO_SERVER = auto()
    INVENTORY_UNREADABLE = auto()
    NEW_WINDOW = auto()  # a window of that name appeared since deciding: not killed
    NO_WINDOW = auto()
    UNCONFIRMED = auto()  # killed, but the listing after cannot be read
    STILL_PRESENT = auto()
    STILL_PRESENT_FORCED = auto()  # still present, going on because of --force
    KILLED = auto()
    # The window's panes, their foreground processes or the server are not the ones the
    # decision saw: nothing more typed, nothing killed, decided again.
    CHANGED = auto()
    # An interrupt came before the kill (during the wait after the quit keys, say): nothing
    # killed, the agents asked left to quit by themselves.
    INTERRUPTED = auto()


class DriftWhat(Enum):
    SERVER = auto()  # another tmux server answers on the socket (restarted since)
    PANE_JOINED = auto()  # a pane the decision did not see is in the window
    PANE_RESPAWNED = auto()  # the pane's own process is another one
    FOREGROUND = auto()  # another process group has the pane's keyboard


@value
class Drift:
    """One way TASK's window differs from what the decision saw (`subject`: the pane id;
    `before`/`now`: the pids, 0 when there was none or it is not known)."""

    what: DriftWhat
    subject: str = ""
    before: int = 0
    now: int = 0


_ENDPOINT = {
    EndpointWhat.NO_SERVER: _A,
    EndpointWhat.NO_WINDOW: _A,
    EndpointWhat.STILL_PRESENT_FORCED: _D,
    EndpointWhat.KILLED: _D,
}


@value
class EndpointResult:
    what: EndpointWhat
    windows: tuple[str, ...] = ()  # the window ids it is about
    window: str = ""  # the record's `session:window`
    error: str | None = None  # what tmux said
    # Before the kill: the agents asked to quit (`claude (12): /exit Enter`), those that left
    # on request, those still running after the grace (then signalled).
    asked: tuple[str, ...] = ()
    left: tuple[ProcRef, ...] = ()
    stayed: tuple[ProcRef, ...] = ()
    grace: float = 0.0  # the time actually waited for them
    # Windows whose panes got no keys because `synchronize-panes` was on (or unknown).
    synchronized: tuple[str, ...] = ()
    drift: tuple[Drift, ...] = ()  # CHANGED: what differs from the decision
    # The asked agents' descendants (exit hooks) waited for, and those still running at the
    # end of the wait.
    hooks: tuple[ProcRef, ...] = ()
    hooks_stayed: tuple[ProcRef, ...] = ()
    # Hung up by the kill (its panes' processes and foreground groups): signalled by the run.
    signals: tuple[Signal, ...] = ()

    @property
    def outcome(self) -> StepOutcome:
        return _ENDPOINT.get(self.what, _F)


# -- processes ----------------------------------------------------------------------------------


class ProcessesWhat(Enum):
    TMP_UNSAFE = auto()
    NOTHING_TO_END = auto()  # neither the slot nor a tasktmp to look in
    SCAN_FAILED = auto()
    TMUX_UNREADABLE = auto()
    NONE_THERE = auto()
    INTERRUPTED = auto()
    LEFT_RUNNING = auto()  # survivors of SIGKILL, or newcomers
    ENDED = auto()  # `later`: ended on a later pass, left behind by those ended before


_PROCESSES = {
    ProcessesWhat.NOTHING_TO_END: _A,
    ProcessesWhat.NONE_THERE: _A,
    ProcessesWhat.ENDED: _D,
}


@value
class ProcessesResult:
    what: ProcessesWhat
    ended: tuple[ProcRef, ...] = ()
    survivors: tuple[ProcRef, ...] = ()
    newcomers: tuple[ProcRef, ...] = ()
    error: str | None = None  # the tasktmp problem, the scan's or tmux's error
    # Started there while the others were ended (a child forked by a SIGTERM handler), none
    # of them an agent or in a terminal, TASK the slot's only claimant: ended on a later
    # pass. Also in `ended` when the step ended them all.
    later: tuple[ProcRef, ...] = ()
    # The process groups led by a process the step ended of which nothing is left when the
    # step is done: the whole group was ended (firstmate's callers read those as such).
    groups: tuple[int, ...] = ()
    # Every process the step signalled (SIGTERM, SIGKILL), whatever came of it.
    signals: tuple[Signal, ...] = ()

    @property
    def outcome(self) -> StepOutcome:
        return _PROCESSES.get(self.what, _F)


# -- save-discarded -----------------------------------------------------------------------------


class SaveWhat(Enum):
    SAVED = auto()
    FAILED = auto()


@value
class SaveResult:
    what: SaveWhat
    owner: str = ""
    commit: str = ""
    project: str = ""
    restore: str = ""
    error: str | None = None  # why the save failed (the discard module's line)
    records: tuple[str, ...] = ()  # a secondmate home's task records saved with it
    ref: str = ""  # `refs/fm/discarded/<owner>/<time>`

    @property
    def outcome(self) -> StepOutcome:
        return _D if self.what == SaveWhat.SAVED else _F


# -- hooks --------------------------------------------------------------------------------------


class UnlinkWhat(Enum):
    ABSENT = auto()
    REMOVED = auto()
    REMOVED_LINK = auto()  # a symlink: the link itself, never its target
    ROOT_UNOPENED = auto()
    NOT_A_DIR = auto()  # a directory on the way is a symlink or not a directory
    DIR_UNOPENED = auto()
    IS_DIR = auto()
    NOT_SINGLE = auto()  # a file with other names (hard links), or not a regular file: kept
    FAILED = auto()


@value
class Unlinked:
    """What unlinking one path inside a directory did, without following a link."""

    what: UnlinkWhat
    part: str = ""  # the directory on the way that stopped it
    error: str | None = None  # the OS's words

    @property
    def removed(self) -> bool:
        return self.what in (UnlinkWhat.REMOVED, UnlinkWhat.REMOVED_LINK)


@value
class HookFile:
    path: str  # relative to the slot
    tracked: bool  # tracked by git: kept
    unlinked: Unlinked | None = None


class HooksWhat(Enum):
    UNTRACKED_UNKNOWN = auto()  # which files git tracks cannot be told: all left
    NONE = auto()
    DONE = auto()


@value
class HooksResult:
    what: HooksWhat
    files: tuple[HookFile, ...] = ()
    error: str | None = None

    @property
    def outcome(self) -> StepOutcome:
        return {HooksWhat.UNTRACKED_UNKNOWN: _S, HooksWhat.NONE: _A}.get(self.what, _D)


# -- branch -------------------------------------------------------------------------------------


class BranchWhat(Enum):
    NOT_RETURNED = auto()  # the slot was not returned: the branch is not touched
    KEPT_DEFAULT = auto()
    KEPT_CHECKED_OUT = auto()  # checked out in another worktree
    KEPT_IN_SLOT = auto()  # still checked out in TASK's slot, which the pool reuses as it is
    UNLISTED = auto()  # the worktrees cannot be listed
    NO_GIT_DIR = auto()  # the project's git dir cannot be found
    KEPT_IN_USE = auto()  # another worktree is rebasing or bisecting from it, or is on it
    KEPT_MOVED = auto()  # no longer at the commit seen when deciding, or gone
    DELETED = auto()


_BRANCH_WARNS = (
    BranchWhat.UNLISTED,
    BranchWhat.NO_GIT_DIR,
    BranchWhat.KEPT_IN_USE,
    BranchWhat.KEPT_MOVED,
)


@value
class BranchResult:
    what: BranchWhat
    branch: str = ""
    commit: str = ""
    project: str = ""
    error: str | None = None  # git's words
    worktree: str = ""  # the worktree using it
    use: BranchUse | None = None

    @property
    def outcome(self) -> StepOutcome:
        return _D if self.what == BranchWhat.DELETED else _S

    @property
    def warns(self) -> bool:
        return self.what in _BRANCH_WARNS


# -- claim --------------------------------------------------------------------------------------


class ClaimWhat(Enum):
    NOT_TASKS = auto()  # no longer names TASK: kept
    ALREADY_GONE = auto()
    KEPT_UNSAFE = auto()  # not a single-linked regular file: kept
    FAILED = auto()
    REMOVED = auto()


@value
class ClaimResult:
    what: ClaimWhat
    path: str
    task: str = ""
    error: str | None = None

    @property
    def outcome(self) -> StepOutcome:
        return {ClaimWhat.REMOVED: _D, ClaimWhat.FAILED: _S, ClaimWhat.KEPT_UNSAFE: _S}.get(
            self.what, _A
        )

    @property
    def warns(self) -> bool:
        return self.what in (ClaimWhat.FAILED, ClaimWhat.KEPT_UNSAFE)


# -- auth, attribution --------------------------------------------------------------------------


class AuthLeftWhy(Enum):
    UNREADABLE = auto()  # the token file is not one to read (a link, too big, ...): `problem`
    NO_TOKEN = auto()  # the token file names no usable entry: `token`, its first characters
    NO_HOME = auto()  # no home to find the entry in
    NOT_UNLINKED = auto()  # the entry could not be removed: `unlinked` says why


@value
class AuthLeft:
    """A hook auth entry the auth step left, and why (a warning: the run goes on)."""

    why: AuthLeftWhy
    path: str  # the token file, or for NOT_UNLINKED the entry itself
    problem: str = ""
    token: str = ""
    unlinked: Unlinked | None = None
    code: ClassVar[str] = "auth-entry-left"  # as a warning (`docs/codes.md`)


@value
class AuthResult:
    removed: tuple[str, ...]  # the entries removed
    warnings: tuple[AuthLeft, ...] = ()

    @property
    def outcome(self) -> StepOutcome:
        return _D if self.removed else _A


class AttributionWhat(Enum):
    APPENDED = auto()
    ALREADY_THERE = auto()  # a re-run after a crash: the row is this record's
    FAILED = auto()


@value
class AttributionResult:
    what: AttributionWhat
    task: str = ""
    path: str = ""
    error: str | None = None  # why the row could not be appended

    @property
    def outcome(self) -> StepOutcome:
        return _S if self.what == AttributionWhat.FAILED else _D


# -- pool ---------------------------------------------------------------------------------------


class PoolWhat(Enum):
    PATH_MOVED = auto()  # the slot path no longer resolves to the decided slot
    STATE_CHANGED = auto()
    DESTROYING = auto()
    NO_TREEHOUSE = auto()
    LOCK_PERSISTED = auto()  # a git lock held across the retries, not provably stale
    UNLANDED_AFTER_LOCK = auto()
    NOT_IN_STATE = auto()
    RETURNED = auto()
    RETURNED_RELEASED = auto()  # returned; leased again since
    ALREADY_RETURNED = auto()
    NOT_RETURNED = auto()
    REUSED_AS_IS = auto()  # not returned: unleased and clean, the pool hands it out as it is
    # Not returned, the tree preserved: the unforced return was declined (the tree holds
    # changes: `dirty`), or fm's own look at the tree right before a forced one found work
    # that appeared after the decision (`unlanded`).
    DECLINED = auto()
    PRESERVED = auto()


_POOL = {
    PoolWhat.RETURNED: _D,
    PoolWhat.RETURNED_RELEASED: _D,
    PoolWhat.ALREADY_RETURNED: _A,
    PoolWhat.REUSED_AS_IS: _S,
}


@value
class PoolResult:
    what: PoolWhat
    command: str = ""  # `treehouse return …` as run
    slot: str = ""
    now: str = ""  # where the path resolves now
    lock: str = ""
    retries: int = 0
    wait: float = 0.0
    error: str | None = None  # the pool's, git's or treehouse's words
    # Why TASK's work is not landed (UNLANDED_AFTER_LOCK, PRESERVED).
    unlanded: NotLandedWhy | None = None
    dirty: tuple[str, ...] = ()  # DECLINED: the first changed paths of the tree after it

    @property
    def outcome(self) -> StepOutcome:
        return _POOL.get(self.what, _F)


# -- record -------------------------------------------------------------------------------------


class RecordWhat(Enum):
    ALREADY_GONE = auto()
    CHANGED = auto()  # it no longer parses
    REWRITTEN = auto()
    TMP_UNSAFE = auto()
    REMOVE_FAILED = auto()
    REMOVED = auto()


@value
class RecordResult:
    what: RecordWhat
    removed: tuple[str, ...] = ()  # tasktmp, sidecar names, the meta's name last
    path: str = ""  # what could not be removed
    error: str | None = None
    route: str | None = None  # a retired secondmate's route line removed (the registry's words)
    kept: tuple[str, ...] = ()  # TASK's `state/<id>.*` files firstmate does not write: left

    @property
    def outcome(self) -> StepOutcome:
        return {RecordWhat.REMOVED: _D, RecordWhat.ALREADY_GONE: _A}.get(self.what, _F)


# -- arrivals -----------------------------------------------------------------------------------


class RecheckAt(Enum):
    """Where the world is looked at again, right before which destructive call."""

    LOCKED = auto()  # under the slot lock, after TASK's own window: rule 5's facts again too
    PROCESSES = auto()  # right before the processes step's first signal
    POOL = auto()  # right before the pool's return
    BRANCH = auto()  # right before the branch delete


@value
class Arrived:
    """The world looked at again right before a destructive call no longer holds what the
    decision saw: someone came to work in the slot (`newcomers`, each named as the census
    names it, with where it runs), the decision's conditions changed (`now`: the verdict
    now, `headline`: why, when it refuses), or a batch's task is no longer what was
    selected (`not_selected`). That call and every step after it were not run."""

    at: RecheckAt
    newcomers: tuple[str, ...] = ()
    now: Verdict | None = None
    headline: Reason | None = None
    not_selected: NotSelectedReason | None = None

    @property
    def outcome(self) -> StepOutcome:
        return _F


StepResult = (
    NotRun
    | NotNeeded
    | RecordGone
    | EndpointResult
    | ProcessesResult
    | SaveResult
    | HooksResult
    | BranchResult
    | ClaimResult
    | AuthResult
    | AttributionResult
    | PoolResult
    | RecordResult
    | Arrived
    | BrowserResult
    | RemoteJobsResult
    | ParkedRunResult
)


def signals_of(r: StepResult | None) -> tuple[Signal, ...]:
    """What a step's result says it signalled (`signals`: the endpoint's window kill, the
    processes step); nothing for a step that signals nothing."""
    sent: tuple[Signal, ...] = getattr(r, "signals", ())
    return sent


def arrived(results: Iterable[StepResult | None]) -> bool:
    """Whether a run was stopped by someone who came to work in its slot (an `Arrived` step,
    or newcomers a later scan of the processes step found, none of its own processes left
    running): a batch goes on with its next task, as after a refusal."""
    for r in results:
        if isinstance(r, Arrived):
            return True
        if (
            isinstance(r, ProcessesResult)
            and r.what == ProcessesWhat.LEFT_RUNNING
            and r.newcomers
            and not r.survivors
        ):
            return True
    return False
