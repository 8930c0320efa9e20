"""The words of every cause of a refusal (and of a stale slot), written once, from the values
of `model/causes.py`. `messages.said_text` reads them here; nothing below report/ imports this
module (tests/test_layers.py) and nothing reads its words back (tests/test_no_prose_as_data.py).
"""

from __future__ import annotations

from fm_teardown.decide.fingerprint import FIELDS
from fm_teardown.model.causes import (
    AlsoClaimed,
    AtRisk,
    BlockedReturn,
    Cause,
    ChildEndpoint,
    FieldChanged,
    ForeignLock,
    InsideOwnWindow,
    InvalidClaimant,
    InvalidClaimantsHeadline,
    InventoryUnreadable,
    Listed,
    LiveChildren,
    LiveOwner,
    LiveOwners,
    NestedUnsaved,
    NestedWork,
    NeverApproved,
    NoFieldNamed,
    NotFetched,
    NotLanded,
    Observed,
    ObservedKind,
    OtherLaunch,
    OthersAtWork,
    OwnFile,
    OwnFileBlocked,
    PlanChanged,
    PlanTokens,
    PoolNotReady,
    PoolProblem,
    ProtectedRoot,
    RecordRefused,
    SlotOwned,
    StaleHeadline,
)
from fm_teardown.model.not_landed import (
    AndAlso,
    BranchNotLanded,
    HomeInFlight,
    HomeOwnWork,
    HomeProblem,
    HomeProblemKind,
    HomeRecordsUnknown,
    NestedRepo,
    NoHead,
    NotLandedWhy,
    NotMerged,
    OwnWork,
    RemoteUnknown,
    ScoutMissing,
    ScoutUnknown,
    SlotUninspected,
    SlotUninspectedKind,
    Unpushed,
)
from fm_teardown.model.plan import OwnerKind
from fm_teardown.model.records import record_refusal

__all__ = ["belongs_now", "cause_text", "listed", "nested_text", "not_landed_text"]


def listed(ids: Listed, sep: str = ", ") -> str:
    """Task ids as a reason names them: the first few, and how many more."""
    shown = sep.join(ids.ids)
    return f"{shown} and {ids.more} more" if ids.more else shown


def belongs_now(owner: str) -> str:
    """Whose a stale slot is now: the decision's headline and a real run's first line."""
    return f"the slot belongs to {owner} now"


def _owner_part(o: LiveOwner) -> str:
    if o.kind == OwnerKind.LEASE and o.id.startswith("lease:"):
        return f"{o.id} holds the pool lease on this slot"
    if o.kind in (OwnerKind.PROCESS, OwnerKind.TERMINAL):
        # Its why says where it runs (`tmux pane other:scratch (%4) on <socket>`).
        return f"{o.id} is working in this slot: {o.why}"
    return f"{o.id} is working in this slot"


_POOL = {
    PoolProblem.NO_TREEHOUSE: (
        "the pool's `treehouse` executable was not found (PATH or FM_TREEHOUSE_BIN)"
    ),
    PoolProblem.TREEHOUSE_BROKEN: "{detail}",
    PoolProblem.STATE_UNREADABLE: "the pool's state cannot be read: {detail}",
    PoolProblem.DESTROYING: "slot {slot} is being destroyed by the pool",
}


def _pool(c: PoolNotReady) -> str:
    if c.problem == PoolProblem.NOT_MANAGED:
        where = f" (no entry in {c.detail})" if c.detail else " (no pool state file)"
        return f"slot {c.slot} is not managed by the pool{where}"
    return _POOL[c.problem].format(detail=c.detail, slot=c.slot)


_SHOWN = 10  # items of a plan's field shown in full; past that, what was added and what is gone


def _items(text: str) -> list[str]:
    return [line for line in text.split("\n") if line]


def _list(items: list[str]) -> str:
    if not items:
        return "none"
    if len(items) <= _SHOWN:
        return ", ".join(items)
    return ", ".join(items[:_SHOWN]) + f" and {len(items) - _SHOWN} more"


def _change(before: str | None, now: str) -> str:
    """A field of the plan token, `before → now`."""
    now_items = _items(now)
    if before is None:
        return f"before: not found from the token → now {_list(now_items)}"
    before_items = _items(before)
    if before_items == now_items:
        # A pid that names another process now, a step with another target: what changed is
        # bound by the token but not said in these words.
        return f"{_list(now_items)} (the same in words: a start time or a target differs)"
    if len(before_items) <= _SHOWN and len(now_items) <= _SHOWN:
        return f"{_list(before_items)} → {_list(now_items)}"
    gone = [x for x in before_items if x not in set(now_items)]
    added = [x for x in now_items if x not in set(before_items)]
    return f"{len(before_items)} → {len(now_items)} (added: {_list(added)}; gone: {_list(gone)})"


_LABELS = dict(FIELDS)


def _plan(c: PlanChanged | NeverApproved | FieldChanged | NoFieldNamed | PlanTokens) -> str:
    match c:
        case PlanChanged():
            # The headline is what a person reads first: every field that changed, by name.
            what = ", ".join(_LABELS[n] for n in c.fields) or "a field the token cannot name"
            return f"the plan changed since it was approved: {what}"
        case NeverApproved():
            return (
                f"no --expect-plan token names {c.task}: its plan (now {c.now}) was never approved"
            )
        case FieldChanged():
            return f"{_LABELS[c.field]}: {_change(c.before, c.now)}"
        case NoFieldNamed():
            return (
                "no field's tag differs: either a field changed that the tags cannot name, or "
                "the token is not as a dry run printed it"
            )
        case PlanTokens():
            return f"approved plan {c.approved}; the plan now {c.now}"


def cause_text(c: Cause) -> str:
    """A cause of a refusal (or of a stale slot) in one line."""
    match c:
        case SlotOwned():
            return f"slot {c.slot} is owned by another live task: {', '.join(c.owners)}"
        case LiveOwner():
            return f"{c.id} ({c.kind}, endpoint {c.endpoint}): {c.why}"
        case LiveOwners():
            return "; ".join(_owner_part(o) for o in c.owners)
        case OthersAtWork():
            return (
                "--include-live takes a task whose own endpoint is alive, never one where "
                "someone else works: mass cleanup ends no agent or terminal that is not its own"
            )
        case LiveChildren():
            return f"secondmate {c.task}'s home has a live task: {', '.join(c.live)}"
        case ChildEndpoint():
            return f"{c.task}: endpoint {c.state}: {c.detail}"
        case NotLanded():
            lost = "would be lost" if c.lost else "is not landed"
            return f"{c.task}'s own work {lost}: {not_landed_text(c.summary)}"
        case AtRisk():
            return f"{c.kind}: {c.what}"
        case AlsoClaimed():
            claim = "claims" if len(c.others.ids) == 1 and not c.others.more else "claim"
            if c.stale:
                return f"stale slot: {listed(c.others)} also {claim} it, none is live; {c.why}"
            return f"{listed(c.others)} also {claim} the slot but none is live; {c.why}"
        case StaleHeadline():
            return f"{belongs_now(c.owner)}: only {c.task}'s window and record are cleared"
        case InvalidClaimant():
            claim = "it names this slot" if c.slot_known else "its slot cannot be told"
            return (
                f"record {c.meta_path} of task '{c.task}' is invalid ({c.problem}) and {claim}: "
                "it might be a live owner"
            )
        case InvalidClaimantsHeadline():
            claim = "names this slot" if c.names_slot else "names no slot fm can tell"
            more = f" (and {c.more} more invalid records)" if c.more else ""
            return f"record {c.meta_name} is invalid ({c.problem}) and {claim}{more}"
        case Observed():
            if c.kind == ObservedKind.CLAIM:
                return f"the slot claim {c.path} {c.problem}"
            return c.problem
        case InventoryUnreadable():
            if c.headline:
                # Not the task's id: in the audit every row says the same, and it is said once.
                return (
                    "the tmux inventory could not be read, so the task's own window cannot be "
                    f"confirmed gone: {c.error}"
                )
            return f"the tmux inventory could not be read: {c.error}"
        case ProtectedRoot():
            what = "is" if c.same else "is an ancestor of"
            if c.headline:
                return f"the slot {what} {c.label} ({c.root}): it is not a pool worktree"
            return f"slot {c.slot} {what} {c.label} ({c.root})"
        case InsideOwnWindow():
            return f"fm is running inside {c.task}'s own window {c.window}"
        case PoolNotReady():
            return _pool(c)
        case ForeignLock():
            reason = f"reason: {c.reason!r}" if c.reason else "no reason given"
            if c.nested is not None:
                if c.headline:
                    return f"a worktree inside the slot is locked by another tool ({reason})"
                return (
                    f"slot {c.slot} holds the worktree {c.nested}, locked by another tool (git "
                    f"worktree lock, {reason}): that tool still claims a tree inside the slot, "
                    "and fm never removes its lock"
                )
            if c.headline:
                return f"slot locked by another tool (git worktree lock, {reason})"
            return (
                f"slot {c.slot} is locked by another tool (git worktree lock, {reason}): "
                "that tool still claims the tree, and fm never removes its lock"
            )
        case RecordRefused():
            # The same words as the refusal of `fm teardown` loading the record (an error).
            return f"its record {c.problem}" if c.own else record_refusal(c.meta_path, c.problem)
        case PlanChanged() | NeverApproved() | FieldChanged() | NoFieldNamed() | PlanTokens():
            return _plan(c)
        case NestedWork():
            return f"nested repository: {nested_text(c.repo)}"
        case NestedUnsaved():
            more = f" and {c.more} more" if c.more else ""
            return (
                f"{c.task}'s slot holds nested repositories ({', '.join(c.paths)}{more}): "
                "--force cannot save them with their history"
            )
        case NotFetched():
            return (
                f"not fetched: a dry run uses {' and '.join(c.refs)} as last fetched; the real "
                "run fetches first (with prune) and may decide otherwise"
            )
        case BlockedReturn():
            names = ", ".join(c.blockers)
            if c.headline:
                return f"{names} work in this slot, and the pool's return would end them"
            return (
                f"{names} work in slot {c.slot}, and the pool's return ends every process "
                "there; fm never ends them"
            )
        case OwnFileBlocked():
            if c.file == OwnFile.SLOT_LOCK:
                return (
                    f"the slot lock {c.path} would be written where fm never writes its own "
                    f"files: {c.problem}"
                )
            return (
                f"the journal {c.path} cannot be written ({c.problem}): a real run journals "
                "its intent before it changes anything"
            )
        case OtherLaunch():
            then = ", ".join(f"{name} {was} → {now}" for name, was, now in c.changed)
            return (
                f"a teardown of {c.task} that started at {c.started} ended partway, and it "
                f"was of another launch ({then}): the record now names a new launch"
            )


# -- why work is not landed -----------------------------------------------------------------


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _own_work(w: OwnWork) -> str:
    parts = []
    if w.total:
        named = ", ".join(w.named) + (", …" if w.total > 3 else "")
        untracked = f", {w.untracked} of them untracked" if w.untracked else ""
        parts.append(f"uncommitted changes in {_plural(w.total, 'path')}{untracked} ({named})")
    if w.commits:
        parts.append(f"{_plural(w.commits, 'commit')} on no remote-tracking branch")
    return "; ".join(parts)


_SLOT = {
    SlotUninspectedKind.STATUS_FAILED: "cannot inspect the slot for uncommitted changes",
    SlotUninspectedKind.NOT_A_DIRECTORY: (
        "cannot inspect the slot: slot path {path} exists but is not a directory"
    ),
    SlotUninspectedKind.UNREADABLE: (
        "cannot inspect the slot: cannot read slot path {path}: {error}"
    ),
}

_HOME = {
    HomeProblemKind.UNREADABLE: "cannot read secondmate home {home}: {error}",
    HomeProblemKind.NOT_A_DIRECTORY: "secondmate home {home} exists but is not a directory",
    HomeProblemKind.GIT_FAILED: "cannot inspect the secondmate home",
}


def nested_text(n: NestedRepo) -> str:
    """A repository nested in the slot and the work it holds, in one line."""
    if n.error:
        return f"{n.path} (could not tell what it holds: {n.error})"
    parts = []
    if n.total:
        named = ", ".join(n.named) + (", …" if n.total > 3 else "")
        parts.append(f"uncommitted changes in {_plural(n.total, 'path')} ({named})")
    if n.commits:
        parts.append(f"{_plural(n.commits, 'commit')} on none of its remote-tracking branches")
    return f"{n.path} ({'; '.join(parts) or 'nothing uncommitted, every commit pushed'})"


def not_landed_text(w: NotLandedWhy | None) -> str:
    """Why a task's own work is not landed (or not merged), in one line ("" for none: the
    proof says why it is)."""
    match w:
        case None:
            return ""
        case ScoutUnknown():
            return f"cannot tell whether scout report {w.report} exists ({w.error})"
        case ScoutMissing():
            return f"scout task has no report at {w.report}"
        case HomeRecordsUnknown():
            return f"cannot tell whether secondmate home {w.home} has task records ({w.error})"
        case HomeInFlight():
            more = f" and {w.more} more" if w.more > 0 else ""
            return f"secondmate home {w.home} still has in-flight work: {', '.join(w.named)}{more}"
        case SlotUninspected():
            return _SLOT[w.kind].format(path=w.path, error=w.error)
        case NoHead():
            return "cannot tell whether the work landed: HEAD has no commit"
        case RemoteUnknown():
            return "cannot inspect the slot for commits not on a remote"
        case OwnWork():
            return _own_work(w)
        case Unpushed():
            compared = list(w.compared) or ["any default branch"]
            if w.pr is not None:
                compared.append(f"merged PR {w.pr}")
            told = " (could not tell everything; see notes)" if w.incomplete else ""
            return (
                f"{_plural(w.count, 'commit')} on no remote-tracking branch and not in "
                f"{' or '.join(compared)}{told}"
            )
        case NotMerged():
            return f"pushed but not merged into {' or '.join(w.targets) or 'the default branch'}"
        case HomeProblem():
            return _HOME[w.kind].format(home=w.home, error=w.error)
        case HomeOwnWork():
            return f"secondmate home {w.home} has work of its own: {_own_work(w.work)}"
        case AndAlso():
            return f"{not_landed_text(w.first)}; {not_landed_text(w.then)}"
        case BranchNotLanded():
            return f"branch {w.branch} has commits beyond HEAD: {not_landed_text(w.why)}"
