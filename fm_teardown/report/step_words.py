"""The words of what each act step did and of what a real run warns about, from typed values.

Every step of a real run carries a typed result (`model/results.py`) and every warning of a
run is a value (`model/step_warnings.py`); their text, the same for people, the JSON output
and the journal, is made here and nowhere else: each step's words are one function of its
result (`_endpoint`, `_processes`, `_hooks`, ...), found by the result's type in
`result_text`, the steps' words table. No module reads any of it back
(tests/test_no_prose_as_data.py); nothing below report/ imports it (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fm_teardown.decide.hints import shell_where
from fm_teardown.model.leaks import BrowserLeft, BrowserResult, RemoteJobsResult, WorkersLeft
from fm_teardown.model.not_landed import UnlandedDiscarded
from fm_teardown.model.notes import Note
from fm_teardown.model.parked_run import ParkedRunResult, RunUnasked
from fm_teardown.model.plan import Step
from fm_teardown.model.results import (
    Arrived,
    AttributionResult,
    AttributionWhat,
    AuthLeft,
    AuthLeftWhy,
    AuthResult,
    BranchResult,
    BranchWhat,
    ClaimResult,
    ClaimWhat,
    Drift,
    DriftWhat,
    EndpointResult,
    EndpointWhat,
    HookFile,
    HooksResult,
    HooksWhat,
    NotNeeded,
    NotRun,
    NotRunCause,
    PoolResult,
    PoolWhat,
    ProcessesResult,
    ProcessesWhat,
    ProcRef,
    RecheckAt,
    RecordGone,
    RecordResult,
    RecordWhat,
    SaveResult,
    SaveWhat,
    StepResult,
    Unlinked,
    UnlinkWhat,
)
from fm_teardown.model.step_warnings import (
    AttributionFailed,
    BranchKept,
    ClaimKept,
    DecidedAgain,
    DecisionChanged,
    EndpointKept,
    HooksUnknown,
    LockRetried,
    LockRetry,
    RerunForNewDecision,
    RouteLeft,
    RunWarning,
    SavedForOther,
    StaleLockRemoved,
)
from fm_teardown.model.world import BranchUse
from fm_teardown.report import leak_words, parked_run_words
from fm_teardown.report.cause_words import not_landed_text

if TYPE_CHECKING:
    from fm_teardown.model.outcome import Outcome

__all__ = ["detail", "result_text", "unlinked", "warning_text", "warnings_text"]


# -- a step's detail ----------------------------------------------------------------------------


def detail(step: Step) -> str:
    """The text of a step: its result's words once it ran, the plan's description before."""
    return step.detail if step.result is None else result_text(step.result)


def _proc(p: ProcRef) -> str:
    if p.terminal is None:
        return f"{p.name} ({p.pid})"
    return f"{p.name} ({p.pid}, {shell_where(p.terminal)}, no task's)"


def _procs(procs: Iterable[ProcRef]) -> str:
    return ", ".join(_proc(p) for p in procs)


_NOT_RUN = {
    NotRunCause.INTERRUPTED: "not run: interrupted",
    NotRunCause.EARLIER_FAILED: "not run: an earlier step failed",
    NotRunCause.REFUSED: "not run: refused",
}


def result_text(r: StepResult) -> str:
    """A step result's words: each step's words function, found by its result's type (the
    words table of the steps; a result without a case here fails mypy's exhaustiveness)."""
    match r:
        case NotRun():
            return _NOT_RUN[r.cause]
        case NotNeeded():
            return r.why or "not needed"
        case RecordGone():
            return "the record is already gone"
        case Arrived():
            return _arrived(r)
        case EndpointResult():
            return _endpoint(r)
        case ProcessesResult():
            return _processes(r)
        case SaveResult():
            return _save(r)
        case HooksResult():
            return _hooks(r)
        case PoolResult():
            return _pool(r)
        case BranchResult():
            return _branch(r)
        case ClaimResult():
            return _claim(r)
        case AuthResult():
            return _auth(r)
        case AttributionResult():
            return _attribution(r)
        case BrowserResult():
            return leak_words.browser_text(r)
        case RemoteJobsResult():
            return leak_words.remote_jobs_text(r)
        case ParkedRunResult():
            return parked_run_words.parked_run_text(r)
        case RecordResult():
            return _record(r)


def _save(r: SaveResult) -> str:
    if r.what == SaveWhat.FAILED:
        return f"{r.error}; nothing was discarded"
    with_records = f" with the task records {', '.join(r.records)}" if r.records else ""
    return (
        f"saved {r.owner}'s work{with_records} as {r.commit[:12]} in {r.project}; to "
        f"restore: {r.restore}"
    )


def _hooks(r: HooksResult) -> str:
    if r.what == HooksWhat.UNTRACKED_UNKNOWN:
        return f"{_hooks_unknown(r)}; hook files left"
    if r.what == HooksWhat.NONE:
        return "no hook file in the slot"
    return "; ".join(_hook_file(f) for f in r.files)


def _auth(r: AuthResult) -> str:
    if r.removed:
        return "removed " + ", ".join(r.removed)
    return "no hook auth entry to remove"


def _attribution(r: AttributionResult) -> str:
    if r.what == AttributionWhat.FAILED:
        return f"could not append the row: {r.error}"
    if r.what == AttributionWhat.ALREADY_THERE:
        return f"{r.task}'s row is already in {r.path} (a re-run)"
    return f"appended {r.task}'s row to {r.path}"


def _endpoint(r: EndpointResult) -> str:
    ids = ", ".join(r.windows)
    match r.what:
        case EndpointWhat.NO_SERVER:
            return "no tmux server is running"
        case EndpointWhat.INVENTORY_UNREADABLE:
            return f"the tmux inventory cannot be read: {r.error}"
        case EndpointWhat.NEW_WINDOW:
            return (
                f"window {ids} named {r.window} appeared since deciding (a relaunch?); "
                "it was not killed; record kept"
            )
        case EndpointWhat.NO_WINDOW:
            return f"no window {r.window}"
        case EndpointWhat.UNCONFIRMED:
            return f"could not confirm the window is gone: {r.error}"
        case EndpointWhat.STILL_PRESENT:
            return f"{_still_present(r)}; record kept"
        case EndpointWhat.STILL_PRESENT_FORCED:
            return f"{_farewell(r)}{_still_present(r)} (continuing: --force)"
        case EndpointWhat.KILLED:
            return f"{_farewell(r)}killed window {ids}; confirmed gone"
        case EndpointWhat.CHANGED:
            changes = "; ".join(_drift(d) for d in r.drift)
            typed = "" if r.asked else "no keys sent, "
            return (
                f"{_farewell(r, signalled=False)}{changes}: {typed}window {ids} not killed; "
                "decided again"
            )
        case EndpointWhat.INTERRUPTED:
            return (
                f"{_farewell(r, signalled=False)}interrupted before the kill: window {ids} not "
                "killed, nothing signalled"
            )


def _drift(d: Drift) -> str:
    match d.what:
        case DriftWhat.SERVER:
            was = f"pid {d.before}" if d.before else "none seen"
            return (
                f"the tmux server is not the one seen when deciding (was {was}, now pid "
                f"{d.now}: restarted?)"
            )
        case DriftWhat.PANE_JOINED:
            return f"pane {d.subject} (pid {d.now}) joined the window since deciding"
        case DriftWhat.PANE_RESPAWNED:
            return f"pane {d.subject} was respawned since deciding (pid {d.before} → {d.now})"
        case DriftWhat.FOREGROUND:
            was = f"pid {d.before}" if d.before else "not known"
            return (
                f"another process has pane {d.subject}'s keyboard since deciding (was {was}, "
                f"now pid {d.now})"
            )


def _endpoint_changed(task: str, *, before: object, now: object) -> str:
    return (
        f"{task}'s window changed between deciding and acting, so it was decided again "
        f"(was {before}, now {now}); nothing more was sent or killed"
    )


def _farewell(r: EndpointResult, *, signalled: bool = True) -> str:
    """`asked claude (12): /exit Enter to quit; left on request: claude (12); `. With
    `signalled` false (nothing was killed after the wait) those still running are said to be
    left to quit by themselves."""
    parts = []
    if r.synchronized:
        parts.append(
            f"no quit keys: synchronize-panes is on in window {', '.join(r.synchronized)} "
            "(tmux would type them into every pane), so left to the signals"
        )
    if r.asked:
        parts.append(f"asked {', '.join(r.asked)} to quit")
    if r.hooks:
        done = [p for p in r.hooks if p not in r.hooks_stayed]
        waited = f"waited {r.grace:g}s for its descendants (exit hooks)"
        if done:
            waited += f"; finished: {_procs(tuple(done))}"
        if r.hooks_stayed:
            waited += f"; still running when the wait ended: {_procs(r.hooks_stayed)}"
        parts.append(waited)
    if r.left:
        parts.append(f"left on request: {_procs(r.left)}")
    if r.stayed:
        then = "so signalled" if signalled else "left to quit by itself"
        parts.append(f"still running after {r.grace:g}s, {then}: {_procs(r.stayed)}")
    return "; ".join(parts) + "; " if parts else ""


def _still_present(r: EndpointResult) -> str:
    return f"window {', '.join(r.windows)} is still present after kill-window"


def _endpoint_kept(r: EndpointResult, target: str) -> str:
    return f"tmux: {_still_present(r)} (target {target}); continuing because of --force"


def _processes(r: ProcessesResult) -> str:
    match r.what:
        case ProcessesWhat.TMP_UNSAFE:
            return f"{r.error}; never followed"
        case ProcessesWhat.NOTHING_TO_END:
            return "nothing left to end"
        case ProcessesWhat.SCAN_FAILED:
            return r.error or "the process table cannot be read"
        case ProcessesWhat.TMUX_UNREADABLE:
            return f"tmux inventory unreadable: {r.error}"
        case ProcessesWhat.NONE_THERE:
            return "no process runs there"
        case ProcessesWhat.INTERRUPTED:
            return "interrupted while waiting for the processes to end"
        case ProcessesWhat.LEFT_RUNNING:
            parts = []
            if r.survivors:
                parts.append(f"still running after SIGTERM and SIGKILL: {_procs(r.survivors)}")
            if r.newcomers:
                parts.append(f"started there during the teardown: {_procs(r.newcomers)}")
            if r.later:
                parts.append(_later(r))
            return "; ".join(parts) + "; slot kept"
        case ProcessesWhat.ENDED:
            later = f"; {_later(r)}" if r.later else ""
            return f"ended {len(r.ended)}: {_procs(r.ended)}{later}"


def _later(r: ProcessesResult) -> str:
    return (
        "ended on a later pass, left behind by those ended (started there as they ended, no "
        f"agent, no terminal): {_procs(r.later)}"
    )


def unlinked(u: Unlinked) -> str:
    """What unlinking one path did: `removed`, or why it was left."""
    match u.what:
        case UnlinkWhat.ABSENT:
            return "absent"
        case UnlinkWhat.REMOVED:
            return "removed"
        case UnlinkWhat.REMOVED_LINK:
            return "removed (the link itself)"
        case UnlinkWhat.ROOT_UNOPENED:
            return f"left: the slot cannot be opened ({u.error})"
        case UnlinkWhat.NOT_A_DIR:
            return f"left: {u.part}/ is a symlink or not a directory"
        case UnlinkWhat.DIR_UNOPENED:
            return f"left: {u.part}/ cannot be opened ({u.error})"
        case UnlinkWhat.IS_DIR:
            return "left: it is a directory"
        case UnlinkWhat.NOT_SINGLE:
            return f"left: {u.error}"
        case UnlinkWhat.FAILED:
            return f"left: {u.error}"


def _hook_file(f: HookFile) -> str:
    if f.tracked or f.unlinked is None:
        return f"{f.path}: tracked by git, kept"
    return f"{f.path}: {unlinked(f.unlinked)}"


def _hooks_unknown(r: HooksResult) -> str:
    return f"cannot tell which hook files git tracks: {r.error}"


def _hooks_warning(r: HooksResult) -> str:
    return f"hooks: {_hooks_unknown(r)}"


_USE = {
    BranchUse.REBASING: "rebasing",
    BranchUse.BISECTING: "bisecting from",
    BranchUse.ON: "on",
    BranchUse.UPDATE_REFS: "rebasing with --update-refs, which will move",
    None: "using",
}


def _branch_problem(r: BranchResult) -> str:
    if r.what == BranchWhat.UNLISTED:
        return f"cannot list the worktrees of {r.project}: {r.error}"
    if r.what == BranchWhat.NO_GIT_DIR:
        return f"cannot find the git dir of {r.project}: {r.error}"
    if r.what == BranchWhat.KEPT_IN_USE:
        return f"{r.worktree} is {_USE[r.use]} {r.branch}: an operation there needs it"
    return (
        f"could not delete branch {r.branch} at {r.commit[:12]} (moved since deciding, or "
        f"gone?): {r.error}"
    )


def _branch(r: BranchResult) -> str:
    match r.what:
        case BranchWhat.NOT_RETURNED:
            return "the slot was not returned"
        case BranchWhat.KEPT_DEFAULT:
            return f"kept {r.branch}: it is the project's default branch"
        case BranchWhat.KEPT_CHECKED_OUT:
            where = f" ({r.worktree})" if r.worktree else ""
            return f"kept {r.branch}: it is checked out in another worktree{where}"
        case BranchWhat.KEPT_IN_SLOT:
            return (
                f"kept {r.branch}: the slot, left to the pool as it is, still has it checked "
                "out (the pool's next get resets it)"
            )
        case (
            BranchWhat.UNLISTED
            | BranchWhat.NO_GIT_DIR
            | BranchWhat.KEPT_IN_USE
            | BranchWhat.KEPT_MOVED
        ):
            return f"{_branch_problem(r)}; branch kept"
        case BranchWhat.DELETED:
            return f"deleted {r.branch} (it named {r.commit[:12]})"


def _branch_warning(r: BranchResult) -> str:
    return f"branch: {_branch_problem(r)}"


def _claim(r: ClaimResult) -> str:
    match r.what:
        case ClaimWhat.NOT_TASKS:
            return f"{r.path} no longer names {r.task}: kept"
        case ClaimWhat.ALREADY_GONE:
            return f"{r.path} is already gone"
        case ClaimWhat.KEPT_UNSAFE:
            return f"the slot claim {r.path} is kept: {r.error}"
        case ClaimWhat.FAILED:
            return f"could not remove the slot claim {r.path}: {r.error}"
        case ClaimWhat.REMOVED:
            return f"removed {r.path}"


def _claim_warning(r: ClaimResult) -> str:
    return f"claim: {_claim(r)}"


def _auth_left(w: AuthLeft) -> str:
    match w.why:
        case AuthLeftWhy.UNREADABLE:
            return f"auth: {w.path} {w.problem}: its hook auth entry was not removed"
        case AuthLeftWhy.NO_TOKEN:
            return f"auth: {w.path} holds no usable token ({w.token!r}): ignored"
        case AuthLeftWhy.NO_HOME:
            return f"auth: no home to find the entry of {w.path} in: not removed"
        case AuthLeftWhy.NOT_UNLINKED:
            assert w.unlinked is not None
            return f"auth: {w.path}: {unlinked(w.unlinked)}"


def warning_text(w: RunWarning) -> str:
    """A warning's words: the decision's are words already; a run's are made here."""
    match w:
        case Note():
            return w.text
        case UnlandedDiscarded():
            if w.live_owner:
                return (
                    f"--force --discard-live-owner: discarding {w.task}'s unlanded work "
                    f"in the slot ({not_landed_text(w.why)})"
                )
            return f"--force: discarding {w.task}'s own unlanded work ({not_landed_text(w.why)})"
        case EndpointKept():
            return _endpoint_kept(w.result, w.target)
        case HooksUnknown():
            return _hooks_warning(w.result)
        case BranchKept():
            return _branch_warning(w.result)
        case ClaimKept():
            return _claim_warning(w.result)
        case AuthLeft():
            return _auth_left(w)
        case LockRetry():
            # The script's words, which firstmate's operators (and its tests) look for.
            return (
                f"treehouse return failed with a transient git lock; waiting {w.wait:g}s and "
                f"retrying ({w.n}/{w.of})"
            )
        case LockRetried():
            return f"treehouse return succeeded on retry {w.n}; lock cleared"
        case StaleLockRemoved():
            return f"removed provably-stale git lock {w.lock} ({w.why})"
        case RouteLeft():
            return f"{w.error}; remove the line '- {w.task} ...' from the registry by hand"
        case SavedForOther():
            return (
                f"the work saved under {w.ref} is {w.owner}'s (the discarded live owner's), "
                f"not {w.task}'s"
            )
        case AttributionFailed():
            return (
                f"could not append AI effort attribution for task {w.task}; teardown will continue"
            )
        case DecidedAgain():
            return _endpoint_changed(w.task, before=w.before, now=w.now)
        case DecisionChanged():
            return (
                f"the decision changed while acting (was {w.before}, now {w.now}): "
                "nothing more was changed"
            )
        case RerunForNewDecision():
            return "re-run the same command to act on the new decision"
        case BrowserLeft():
            return leak_words.browser_left_text(w.result)
        case WorkersLeft():
            return leak_words.workers_left_text(w.result)
        case RunUnasked():
            return parked_run_words.unasked_text(w)


def warnings_text(o: Outcome) -> tuple[str, ...]:
    """An outcome's warnings in words, in order."""
    return tuple(warning_text(w) for w in o.warnings)


def _pool(r: PoolResult) -> str:
    match r.what:
        case PoolWhat.PATH_MOVED:
            return f"the slot path no longer resolves to {r.slot} (now {r.now}); slot kept"
        case PoolWhat.STATE_CHANGED:
            return f"the pool's state changed: {r.error or 'the slot is no longer managed'}"
        case PoolWhat.DESTROYING:
            return "the pool is destroying the slot; slot kept"
        case PoolWhat.NO_TREEHOUSE:
            return "treehouse is not available"
        case PoolWhat.LOCK_PERSISTED:
            return (
                f"git lock {r.lock} persisted across {r.retries} retries (waiting "
                f"{r.wait:g}s each) and is not provably stale: {r.error}; lock and slot kept"
            )
        case PoolWhat.UNLANDED_AFTER_LOCK:
            why = not_landed_text(r.unlanded)
            return f"after removing the stale lock: own work not landed: {why}; slot kept"
        case PoolWhat.NOT_IN_STATE:
            return f"{r.command}: the slot is no longer in the pool's state ({r.error or ''})"
        case PoolWhat.RETURNED:
            return f"{r.command}: returned; the pool's state shows it unleased"
        case PoolWhat.RETURNED_RELEASED:
            return f"{r.command}: returned (the slot was leased again since)"
        case PoolWhat.ALREADY_RETURNED:
            return f"{r.command}: the slot was already returned"
        case PoolWhat.NOT_RETURNED:
            return f"{r.command} did not return the slot: {r.error}; slot and lease kept"
        case PoolWhat.REUSED_AS_IS:
            return (
                "not returned: the slot is unleased, clean and its HEAD merged, so the pool "
                "reuses it as it is (a return could clear a lease granted meanwhile)"
            )
        case PoolWhat.DECLINED:
            said = f"{r.command}: {r.error}" if r.error else r.command
            changes = (
                f" ({', '.join(r.dirty)}{', ...' if len(r.dirty) >= 5 else ''})" if r.dirty else ""
            )
            return (
                f"the pool declined to return the slot ({said}): its tree holds changes{changes} "
                f"that appeared after the decision; {_PRESERVED}"
            )
        case PoolWhat.PRESERVED:
            why = not_landed_text(r.unlanded)
            return (
                f"not returned: work appeared in the slot after the decision ({why}); {_PRESERVED}"
            )


_PRESERVED = (
    "they were preserved, not discarded; slot, lease and record kept: land or discard them, "
    "or re-run with --force (which saves them first, then discards them)"
)

_AT = {
    RecheckAt.LOCKED: "under the slot lock, before acting in the slot",
    RecheckAt.PROCESSES: "before the processes step's first signal",
    RecheckAt.POOL: "before the pool's return",
    RecheckAt.BRANCH: "before the branch delete",
}


def _arrived(r: Arrived) -> str:
    """A look at the world again right before a destructive call stopped the run."""
    from fm_teardown.report.messages import finished_reason, said_text

    parts = []
    if r.newcomers:
        parts.append(
            "someone came to work in the slot since the decision: " + "; ".join(r.newcomers)
        )
    if r.now is not None:
        why = f": {said_text(r.headline)}" if r.headline is not None else ""
        parts.append(f"the decision's conditions changed (now {r.now}{why})")
    if r.not_selected is not None:
        n = r.not_selected
        if n.finished is not None:
            parts.append(f"no longer what the batch selected: {finished_reason(n.finished)}")
        elif n.changed:
            parts.append(f"relaunched since it was selected ({', '.join(n.changed)})")
        else:
            parts.append(f"its slot was returned earlier in this batch (by {n.returned_by})")
    return (
        f"stopped {_AT[r.at]}: " + "; ".join(parts) + "; nothing of theirs was touched, the "
        "record is kept: re-run to decide again"
    )


def _record(r: RecordResult) -> str:
    match r.what:
        case RecordWhat.ALREADY_GONE:
            return "the record is already gone"
        case RecordWhat.CHANGED:
            return f"the record changed: it {r.error}"
        case RecordWhat.REWRITTEN:
            return "the record was rewritten during the teardown (a relaunch?); kept"
        case RecordWhat.TMP_UNSAFE:
            return f"{r.error}; record kept"
        case RecordWhat.REMOVE_FAILED:
            return f"could not remove {r.path}: {r.error}"
        case RecordWhat.REMOVED:
            said = "removed " + ", ".join(r.removed)
            if r.kept:
                said += (
                    f"; kept {', '.join(r.kept)} (not a sidecar firstmate writes: someone's "
                    "copy; remove it by hand if it is not needed)"
                )
            return f"{said}; {r.route}" if r.route else said
