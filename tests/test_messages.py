"""Every step result's words and outcome, pinned: the text people, scripts (`--json`) and the
journal read is what it was when act wrote sentences, and each kind of result is covered."""

from __future__ import annotations

from enum import Enum
from typing import get_args

import pytest

from fm_teardown.adapters import processes
from fm_teardown.decide.hints import shell_where
from fm_teardown.model.errors import Verdict
from fm_teardown.model.leaks import (
    BrowserLeft,
    BrowserResult,
    BrowserWhat,
    RemoteJobsResult,
    Worker,
    WorkersLeft,
)
from fm_teardown.model.not_landed import OwnWork
from fm_teardown.model.notes import Note, NoteCode
from fm_teardown.model.outcome import Skipped
from fm_teardown.model.parked_run import (
    Asked,
    Attribution,
    Confirmation,
    ParkedRunResult,
    ParkedRunWhat,
    RunStatus,
    RunUnasked,
)
from fm_teardown.model.plan import Step, StepName, StepOutcome
from fm_teardown.model.reasons import NotSelectedReason, NotSelectedWhy
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
    StepWarning,
)
from fm_teardown.model.world import BranchUse, Terminal
from fm_teardown.report import messages, step_words

D, A, S, F = StepOutcome.DONE, StepOutcome.ABSENT, StepOutcome.SKIPPED, StepOutcome.FAILED
W = ("@3", "@4")
CLAUDE, BASH = ProcRef("claude", 41), ProcRef("bash", 42)
CMD = "treehouse return --force --if-lease-id L1 /pool/p/1/proj"
SHA = "0123456789abcdef0123"
NM = "/usr/bin/no-mistakes"

CASES: list[tuple[StepResult, StepOutcome, str]] = [
    (NotRun(NotRunCause.INTERRUPTED), S, "not run: interrupted"),
    (NotRun(NotRunCause.EARLIER_FAILED), S, "not run: an earlier step failed"),
    (NotRun(NotRunCause.REFUSED), S, "not run: refused"),
    (NotNeeded(), S, "not needed"),
    (
        NotNeeded("stale slot: left to its current owner"),
        S,
        "stale slot: left to its current owner",
    ),
    (RecordGone(), S, "the record is already gone"),
    (EndpointResult(EndpointWhat.NO_SERVER), A, "no tmux server is running"),
    (
        EndpointResult(EndpointWhat.INVENTORY_UNREADABLE, error="timed out"),
        F,
        "the tmux inventory cannot be read: timed out",
    ),
    (
        EndpointResult(EndpointWhat.NEW_WINDOW, ("@9",), "firstmate:fm-a"),
        F,
        "window @9 named firstmate:fm-a appeared since deciding (a relaunch?); it was not "
        "killed; record kept",
    ),
    (
        EndpointResult(EndpointWhat.NO_WINDOW, window="firstmate:fm-a"),
        A,
        "no window firstmate:fm-a",
    ),
    (
        EndpointResult(EndpointWhat.UNCONFIRMED, W, error="no answer"),
        F,
        "could not confirm the window is gone: no answer",
    ),
    (
        EndpointResult(EndpointWhat.STILL_PRESENT, W),
        F,
        "window @3, @4 is still present after kill-window; record kept",
    ),
    (
        EndpointResult(EndpointWhat.STILL_PRESENT_FORCED, W),
        D,
        "window @3, @4 is still present after kill-window (continuing: --force)",
    ),
    (EndpointResult(EndpointWhat.KILLED, W), D, "killed window @3, @4; confirmed gone"),
    (
        EndpointResult(
            EndpointWhat.KILLED,
            ("@3",),
            asked=("claude (41): /exit Enter",),
            left=(CLAUDE,),
            stayed=(BASH,),
            grace=2.5,
        ),
        D,
        "asked claude (41): /exit Enter to quit; left on request: claude (41); still running "
        "after 2.5s, so signalled: bash (42); killed window @3; confirmed gone",
    ),
    (
        EndpointResult(
            EndpointWhat.CHANGED,
            ("@3",),
            drift=(
                Drift(DriftWhat.PANE_RESPAWNED, "%5", 40, 90),
                Drift(DriftWhat.PANE_JOINED, "%8", now=91),
                Drift(DriftWhat.FOREGROUND, "%6", 41, 92),
            ),
        ),
        F,
        "pane %5 was respawned since deciding (pid 40 → 90); pane %8 (pid 91) joined the "
        "window since deciding; another process has pane %6's keyboard since deciding (was "
        "pid 41, now pid 92): no keys sent, window @3 not killed; decided again",
    ),
    (
        EndpointResult(
            EndpointWhat.CHANGED,
            ("@3",),
            asked=("claude (41): /exit Enter",),
            stayed=(CLAUDE,),
            grace=0.4,
            drift=(Drift(DriftWhat.SERVER, before=10, now=20),),
        ),
        F,
        "asked claude (41): /exit Enter to quit; still running after 0.4s, left to quit by "
        "itself: claude (41); the tmux server is not the one seen when deciding (was pid 10, "
        "now pid 20: restarted?): window @3 not killed; decided again",
    ),
    (
        EndpointResult(
            EndpointWhat.INTERRUPTED,
            ("@3",),
            asked=("claude (41): /exit Enter",),
            stayed=(CLAUDE,),
            grace=1.8,
        ),
        F,
        "asked claude (41): /exit Enter to quit; still running after 1.8s, left to quit by "
        "itself: claude (41); interrupted before the kill: window @3 not killed, nothing "
        "signalled",
    ),
    (
        EndpointResult(
            EndpointWhat.KILLED,
            ("@3",),
            asked=("claude (41): /exit Enter",),
            left=(CLAUDE,),
            grace=8.2,
            hooks=(ProcRef("sh", 50), ProcRef("node", 51)),
            hooks_stayed=(ProcRef("node", 51),),
        ),
        D,
        "asked claude (41): /exit Enter to quit; waited 8.2s for its descendants (exit hooks); "
        "finished: sh (50); still running when the wait ended: node (51); left on request: "
        "claude (41); killed window @3; confirmed gone",
    ),
    (
        EndpointResult(EndpointWhat.KILLED, ("@3",), synchronized=("@3",)),
        D,
        "no quit keys: synchronize-panes is on in window @3 (tmux would type them into every "
        "pane), so left to the signals; killed window @3; confirmed gone",
    ),
    (
        EndpointResult(EndpointWhat.STILL_PRESENT_FORCED, W, asked=("codex (7): C-c",)),
        D,
        "asked codex (7): C-c to quit; window @3, @4 is still present after kill-window "
        "(continuing: --force)",
    ),
    (
        ProcessesResult(ProcessesWhat.TMP_UNSAFE, error="/tmp/fm-a is a symlink"),
        F,
        "/tmp/fm-a is a symlink; never followed",
    ),
    (ProcessesResult(ProcessesWhat.NOTHING_TO_END), A, "nothing left to end"),
    (ProcessesResult(ProcessesWhat.SCAN_FAILED, error="/proc unreadable"), F, "/proc unreadable"),
    (
        ProcessesResult(ProcessesWhat.TMUX_UNREADABLE, error="timed out"),
        F,
        "tmux inventory unreadable: timed out",
    ),
    (ProcessesResult(ProcessesWhat.NONE_THERE), A, "no process runs there"),
    (
        ProcessesResult(ProcessesWhat.INTERRUPTED),
        F,
        "interrupted while waiting for the processes to end",
    ),
    (
        ProcessesResult(ProcessesWhat.LEFT_RUNNING, survivors=(CLAUDE,), newcomers=(BASH,)),
        F,
        "still running after SIGTERM and SIGKILL: claude (41); started there during the "
        "teardown: bash (42); slot kept",
    ),
    (
        ProcessesResult(ProcessesWhat.LEFT_RUNNING, newcomers=(BASH,)),
        F,
        "started there during the teardown: bash (42); slot kept",
    ),
    (ProcessesResult(ProcessesWhat.ENDED, (CLAUDE, BASH)), D, "ended 2: claude (41), bash (42)"),
    (
        ProcessesResult(ProcessesWhat.ENDED, (CLAUDE, BASH), later=(BASH,)),
        D,
        "ended 2: claude (41), bash (42); ended on a later pass, left behind by those ended "
        "(started there as they ended, no agent, no terminal): bash (42)",
    ),
    (
        ProcessesResult(ProcessesWhat.LEFT_RUNNING, newcomers=(CLAUDE,), later=(BASH,)),
        F,
        "started there during the teardown: claude (41); ended on a later pass, left behind "
        "by those ended (started there as they ended, no agent, no terminal): bash (42); "
        "slot kept",
    ),
    (
        SaveResult(SaveWhat.FAILED, error="git commit-tree failed"),
        F,
        "git commit-tree failed; nothing was discarded",
    ),
    (
        SaveResult(SaveWhat.SAVED, "a", SHA, "/src/proj", "fm restore a"),
        D,
        "saved a's work as 0123456789ab in /src/proj; to restore: fm restore a",
    ),
    (
        HooksResult(HooksWhat.UNTRACKED_UNKNOWN, error="git exited 128"),
        S,
        "cannot tell which hook files git tracks: git exited 128; hook files left",
    ),
    (HooksResult(HooksWhat.NONE), A, "no hook file in the slot"),
    (
        HooksResult(
            HooksWhat.DONE,
            (
                HookFile(".claude/settings.local.json", tracked=True),
                HookFile(".x", tracked=False, unlinked=Unlinked(UnlinkWhat.REMOVED)),
                HookFile(".y", tracked=False, unlinked=Unlinked(UnlinkWhat.REMOVED_LINK)),
            ),
        ),
        D,
        ".claude/settings.local.json: tracked by git, kept; .x: removed; "
        ".y: removed (the link itself)",
    ),
    (BranchResult(BranchWhat.NOT_RETURNED, "b", SHA), S, "the slot was not returned"),
    (
        BranchResult(BranchWhat.KEPT_DEFAULT, "main", SHA),
        S,
        "kept main: it is the project's default branch",
    ),
    (
        BranchResult(BranchWhat.KEPT_CHECKED_OUT, "b", SHA),
        S,
        "kept b: it is checked out in another worktree",
    ),
    (
        BranchResult(BranchWhat.KEPT_CHECKED_OUT, "b", SHA, worktree="/pool/2/proj"),
        S,
        "kept b: it is checked out in another worktree (/pool/2/proj)",
    ),
    (
        BranchResult(BranchWhat.KEPT_IN_SLOT, "b", SHA, worktree="/pool/1/proj"),
        S,
        "kept b: the slot, left to the pool as it is, still has it checked out (the pool's "
        "next get resets it)",
    ),
    (
        BranchResult(BranchWhat.UNLISTED, "b", SHA, "/src/proj", "git exited 128"),
        S,
        "cannot list the worktrees of /src/proj: git exited 128; branch kept",
    ),
    (
        BranchResult(BranchWhat.KEPT_MOVED, "b", SHA, "/src/proj", "bad ref"),
        S,
        "could not delete branch b at 0123456789ab (moved since deciding, or gone?): bad ref; "
        "branch kept",
    ),
    (
        BranchResult(BranchWhat.NO_GIT_DIR, "b", SHA, "/src/proj", "git exited 128"),
        S,
        "cannot find the git dir of /src/proj: git exited 128; branch kept",
    ),
    (
        BranchResult(
            BranchWhat.KEPT_IN_USE, "b", SHA, "/src/proj", worktree="/w/2", use=BranchUse.REBASING
        ),
        S,
        "/w/2 is rebasing b: an operation there needs it; branch kept",
    ),
    (
        BranchResult(BranchWhat.KEPT_IN_USE, "b", SHA, worktree="/w/2", use=BranchUse.BISECTING),
        S,
        "/w/2 is bisecting from b: an operation there needs it; branch kept",
    ),
    (
        BranchResult(BranchWhat.KEPT_IN_USE, "b", SHA, worktree="/src/proj", use=BranchUse.ON),
        S,
        "/src/proj is on b: an operation there needs it; branch kept",
    ),
    (BranchResult(BranchWhat.DELETED, "b", SHA), D, "deleted b (it named 0123456789ab)"),
    (
        ClaimResult(ClaimWhat.NOT_TASKS, "/s/.fm-slot-owner", "a"),
        A,
        "/s/.fm-slot-owner no longer names a: kept",
    ),
    (
        ClaimResult(ClaimWhat.ALREADY_GONE, "/s/.fm-slot-owner"),
        A,
        "/s/.fm-slot-owner is already gone",
    ),
    (
        ClaimResult(ClaimWhat.FAILED, "/s/.fm-slot-owner", "a", "Permission denied"),
        S,
        "could not remove the slot claim /s/.fm-slot-owner: Permission denied",
    ),
    (
        ClaimResult(ClaimWhat.KEPT_UNSAFE, "/s/.fm-slot-owner", "a", "it has 2 links"),
        S,
        "the slot claim /s/.fm-slot-owner is kept: it has 2 links",
    ),
    (ClaimResult(ClaimWhat.REMOVED, "/s/.fm-slot-owner", "a"), D, "removed /s/.fm-slot-owner"),
    (AuthResult(("/h/x", "/h/y")), D, "removed /h/x, /h/y"),
    (AuthResult(()), A, "no hook auth entry to remove"),
    (
        AttributionResult(AttributionWhat.FAILED, "a", error="No space left on device"),
        S,
        "could not append the row: No space left on device",
    ),
    (
        AttributionResult(AttributionWhat.ALREADY_THERE, "a", "/d/cost-attribution.tsv"),
        D,
        "a's row is already in /d/cost-attribution.tsv (a re-run)",
    ),
    (
        AttributionResult(AttributionWhat.APPENDED, "a", "/d/cost-attribution.tsv"),
        D,
        "appended a's row to /d/cost-attribution.tsv",
    ),
    (
        PoolResult(PoolWhat.PATH_MOVED, slot="/pool/p/1/proj", now="/elsewhere"),
        F,
        "the slot path no longer resolves to /pool/p/1/proj (now /elsewhere); slot kept",
    ),
    (
        PoolResult(PoolWhat.STATE_CHANGED),
        F,
        "the pool's state changed: the slot is no longer managed",
    ),
    (
        PoolResult(PoolWhat.STATE_CHANGED, error="bad JSON"),
        F,
        "the pool's state changed: bad JSON",
    ),
    (PoolResult(PoolWhat.DESTROYING), F, "the pool is destroying the slot; slot kept"),
    (PoolResult(PoolWhat.NO_TREEHOUSE), F, "treehouse is not available"),
    (
        PoolResult(
            PoolWhat.LOCK_PERSISTED, lock="/g/index.lock", retries=3, wait=0.5, error="held"
        ),
        F,
        "git lock /g/index.lock persisted across 3 retries (waiting 0.5s each) and is not "
        "provably stale: held; lock and slot kept",
    ),
    (
        PoolResult(PoolWhat.UNLANDED_AFTER_LOCK, unlanded=OwnWork(1, ("a",))),
        F,
        "after removing the stale lock: own work not landed: uncommitted changes in 1 path (a); "
        "slot kept",
    ),
    (
        PoolResult(PoolWhat.NOT_IN_STATE, CMD, error="done"),
        F,
        f"{CMD}: the slot is no longer in the pool's state (done)",
    ),
    (
        PoolResult(PoolWhat.NOT_IN_STATE, CMD, error=""),
        F,
        f"{CMD}: the slot is no longer in the pool's state ()",
    ),
    (PoolResult(PoolWhat.RETURNED, CMD), D, f"{CMD}: returned; the pool's state shows it unleased"),
    (
        PoolResult(PoolWhat.RETURNED_RELEASED, CMD),
        D,
        f"{CMD}: returned (the slot was leased again since)",
    ),
    (PoolResult(PoolWhat.ALREADY_RETURNED, CMD), A, f"{CMD}: the slot was already returned"),
    (
        PoolResult(PoolWhat.REUSED_AS_IS),
        S,
        "not returned: the slot is unleased, clean and its HEAD merged, so the pool reuses it "
        "as it is (a return could clear a lease granted meanwhile)",
    ),
    (
        PoolResult(PoolWhat.NOT_RETURNED, CMD, error="exit 0 with 'Aborted.'"),
        F,
        f"{CMD} did not return the slot: exit 0 with 'Aborted.'; slot and lease kept",
    ),
    (
        PoolResult(PoolWhat.DECLINED, CMD, error="🌳 Aborted.", dirty=("late.txt",)),
        F,
        f"the pool declined to return the slot ({CMD}: 🌳 Aborted.): its tree holds changes "
        "(late.txt) that appeared after the decision; they were preserved, not discarded; "
        "slot, lease and record kept: land or discard them, or re-run with --force (which "
        "saves them first, then discards them)",
    ),
    (
        PoolResult(PoolWhat.PRESERVED, unlanded=OwnWork(1, ("notes.md",), untracked=1)),
        F,
        "not returned: work appeared in the slot after the decision (uncommitted changes in 1 "
        "path, 1 of them untracked (notes.md)); they were preserved, not discarded; slot, "
        "lease and record kept: land or discard them, or re-run with --force (which saves "
        "them first, then discards them)",
    ),
    (
        Arrived(RecheckAt.PROCESSES, ("claude (7), an agent in no pane",)),
        F,
        "stopped before the processes step's first signal: someone came to work in the slot "
        "since the decision: claude (7), an agent in no pane; nothing of theirs was touched, "
        "the record is kept: re-run to decide again",
    ),
    (
        Arrived(RecheckAt.POOL, now=Verdict.PROCEED),
        F,
        "stopped before the pool's return: the decision's conditions changed (now proceed); "
        "nothing of theirs was touched, the record is kept: re-run to decide again",
    ),
    (RecordResult(RecordWhat.ALREADY_GONE), A, "the record is already gone"),
    (
        RecordResult(RecordWhat.CHANGED, error="has no worktree="),
        F,
        "the record changed: it has no worktree=",
    ),
    (
        RecordResult(RecordWhat.REWRITTEN),
        F,
        "the record was rewritten during the teardown (a relaunch?); kept",
    ),
    (
        RecordResult(RecordWhat.TMP_UNSAFE, error="/tmp/fm-a is a symlink"),
        F,
        "/tmp/fm-a is a symlink; record kept",
    ),
    (
        RecordResult(RecordWhat.REMOVE_FAILED, path="/s/a.x", error="Permission denied"),
        F,
        "could not remove /s/a.x: Permission denied",
    ),
    (
        RecordResult(RecordWhat.REMOVED, ("/tmp/fm-a", "a.pane", "a.meta")),
        D,
        "removed /tmp/fm-a, a.pane, a.meta",
    ),
    (
        RecordResult(RecordWhat.REMOVED, ("sm.meta",), route="no /d/secondmates.md: no route"),
        D,
        "removed sm.meta; no /d/secondmates.md: no route",
    ),
    *(
        (
            ParkedRunResult(
                ParkedRunWhat.NOT_PARKED,
                NM,
                attribution,
                run_id="01R",
                branch="fm/b",
                status="running",
                head=SHA,
                ended_as="passed",
            ),
            A,
            text,
        )
        for attribution, text in (
            (Attribution.NO_RUN, "no-mistakes names no run here: nothing to abort"),
            (
                Attribution.NO_BRANCH,
                "run 01R left alone: the slot has no branch checked out, so no run can be told "
                "to be this task's",
            ),
            (Attribution.OTHER_BRANCH, "run 01R is of branch fm/b, not the slot's: left alone"),
            (
                Attribution.OTHER_CODE,
                "run 01R (head 0123456789ab) is not of the slot's code (its head is neither the "
                "slot's HEAD nor a descendant of it): left alone",
            ),
            (
                Attribution.CONCLUDED,
                "this task's run 01R has ended already (passed): nothing to abort",
            ),
            (
                Attribution.UNDER_WAY,
                "this task's run 01R is running, not parked at a gate: left to no-mistakes",
            ),
        )
    ),
    (
        ParkedRunResult(ParkedRunWhat.IN_SLOT, "/pool/p/1/proj/bin/no-mistakes"),
        S,
        "not run: the no-mistakes found on PATH (/pool/p/1/proj/bin/no-mistakes) lies in the "
        "slot; a parked run of this task, if any, was not aborted",
    ),
    (
        ParkedRunResult(ParkedRunWhat.UNANSWERED, NM, problem="timed out after 10s"),
        S,
        "no-mistakes axi status did not answer (timed out after 10s): no run looked at, none "
        "aborted",
    ),
    (
        ParkedRunResult(
            ParkedRunWhat.ABORTED,
            NM,
            Attribution.PARKED,
            run_id="01R",
            status="awaiting_approval",
            confirmed=Confirmation.TERMINAL,
            ended_as="cancelled",
        ),
        D,
        "aborted this task's run 01R, parked at a gate (awaiting_approval): read back cancelled",
    ),
    (
        ParkedRunResult(
            ParkedRunWhat.ABORTED,
            NM,
            Attribution.PARKED,
            run_id="01R",
            confirmed=Confirmation.NOT_FOUND,
        ),
        D,
        "aborted this task's run 01R, parked at a gate (awaiting an agent): no-mistakes no "
        "longer has it",
    ),
    (
        ParkedRunResult(
            ParkedRunWhat.UNCONFIRMED,
            NM,
            Attribution.PARKED,
            run_id="01R",
            status="fix_review",
            after=Asked(True, RunStatus(id="02R", outcome="cancelled")),
        ),
        F,
        "aborted this task's run 01R, parked at a gate (fix_review), but it was not read back "
        "stopped (no-mistakes axi status --run 01R named another run (02R)); nothing of the "
        "task was touched: confirm it stopped (no-mistakes axi status --run 01R, in the slot) "
        "or abort it by hand (no-mistakes axi abort --run 01R), then run the same command again",
    ),
]

UNLINKED = {
    UnlinkWhat.ABSENT: "absent",
    UnlinkWhat.REMOVED: "removed",
    UnlinkWhat.REMOVED_LINK: "removed (the link itself)",
    UnlinkWhat.ROOT_UNOPENED: "left: the slot cannot be opened (Permission denied)",
    UnlinkWhat.NOT_A_DIR: "left: .claude/ is a symlink or not a directory",
    UnlinkWhat.DIR_UNOPENED: "left: .claude/ cannot be opened (Permission denied)",
    UnlinkWhat.IS_DIR: "left: it is a directory",
    UnlinkWhat.NOT_SINGLE: "left: Permission denied",
    UnlinkWhat.FAILED: "left: Permission denied",
}


@pytest.mark.parametrize(("result", "outcome", "text"), CASES)
def test_each_result_has_its_words_and_outcome(
    result: StepResult, outcome: StepOutcome, text: str
) -> None:
    assert step_words.result_text(result) == text
    assert result.outcome == outcome
    step = Step(StepName.POOL, "t", "the plan's words", result.outcome, result)
    assert step_words.detail(step) == text  # the result's words replace the plan's


def test_every_kind_of_result_is_pinned() -> None:
    whats: set[Enum] = {r.cause for r, _, _ in CASES if isinstance(r, NotRun)}
    for r, _, _ in CASES:
        what = getattr(r, "what", None)
        if isinstance(what, Enum):
            whats.add(what)
    for kind in (
        EndpointWhat,
        ProcessesWhat,
        SaveWhat,
        HooksWhat,
        BranchWhat,
        ClaimWhat,
        AttributionWhat,
        PoolWhat,
        RecordWhat,
        NotRunCause,
        ParkedRunWhat,
    ):
        assert set(kind) <= whats, f"{kind.__name__}: {set(kind) - whats} not pinned"


@pytest.mark.parametrize("what", list(UnlinkWhat))
def test_each_unlink_result_has_its_words(what: UnlinkWhat) -> None:
    part = ".claude" if what in (UnlinkWhat.NOT_A_DIR, UnlinkWhat.DIR_UNOPENED) else ""
    u = Unlinked(what, part, "Permission denied")
    assert step_words.unlinked(u) == UNLINKED[what]
    assert u.removed == (what in (UnlinkWhat.REMOVED, UnlinkWhat.REMOVED_LINK))


def test_a_step_not_run_yet_shows_the_plan() -> None:
    assert step_words.detail(Step(StepName.POOL, "t", "the plan's words")) == "the plan's words"


@pytest.mark.parametrize(
    ("terminal", "words"),
    [
        (Terminal(), "a shell in a terminal"),
        (Terminal("/dev/pts/3"), "a shell in terminal /dev/pts/3"),
        (Terminal("/dev/pts/3", "ops:2 (%5)"), "a shell in tmux pane ops:2 (%5) on /dev/pts/3"),
    ],
)
def test_a_shell_no_task_holds_is_named_by_what_is_known_of_its_terminal(
    terminal: Terminal, words: str
) -> None:
    assert shell_where(terminal) == words
    ended = ProcessesResult(ProcessesWhat.ENDED, (ProcRef("zsh", 7, terminal), ProcRef("sleep", 8)))
    assert step_words.result_text(ended) == f"ended 2: zsh (7, {words}, no task's), sleep (8)"


@pytest.mark.parametrize(
    ("tty_nr", "name"),
    [
        (0, None),
        ((136 << 8) | 3, "/dev/pts/3"),
        ((137 << 8) | 4, "/dev/pts/260"),
        ((136 << 8) | (1 << 20), "/dev/pts/256"),  # a minor past 255, packed as the kernel does
        ((4 << 8) | 1, "/dev/tty1"),
    ],
)
def test_a_controlling_terminal_is_named_from_proc_tty_nr(tty_nr: int, name: str | None) -> None:
    assert processes.tty_name(tty_nr) == name


# Every warning a run gives, with the words act wrote before warnings were values.
WARNINGS: list[tuple[RunWarning, str]] = [
    (
        EndpointKept(EndpointResult(EndpointWhat.STILL_PRESENT_FORCED, W, "fm-t"), "s:=fm-t"),
        "tmux: window @3, @4 is still present after kill-window (target s:=fm-t); continuing "
        "because of --force",
    ),
    (
        HooksUnknown(HooksResult(HooksWhat.UNTRACKED_UNKNOWN, error="git failed")),
        "hooks: cannot tell which hook files git tracks: git failed",
    ),
    (
        BranchKept(BranchResult(BranchWhat.UNLISTED, project="/p", error="boom")),
        "branch: cannot list the worktrees of /p: boom",
    ),
    (
        ClaimKept(ClaimResult(ClaimWhat.FAILED, "/s/.fm-claim", error="EPERM")),
        "claim: could not remove the slot claim /s/.fm-claim: EPERM",
    ),
    (
        AuthLeft(AuthLeftWhy.UNREADABLE, "/st/t.kimi-turnend-token", problem="is a symlink"),
        "auth: /st/t.kimi-turnend-token is a symlink: its hook auth entry was not removed",
    ),
    (
        AuthLeft(AuthLeftWhy.NO_TOKEN, "/st/t.kimi-turnend-token", token="a/b"),
        "auth: /st/t.kimi-turnend-token holds no usable token ('a/b'): ignored",
    ),
    (
        AuthLeft(AuthLeftWhy.NO_HOME, "/st/t.kimi-turnend-token"),
        "auth: no home to find the entry of /st/t.kimi-turnend-token in: not removed",
    ),
    (
        AuthLeft(AuthLeftWhy.NOT_UNLINKED, "/h/d/tok", unlinked=Unlinked(UnlinkWhat.IS_DIR)),
        "auth: /h/d/tok: left: it is a directory",
    ),
    (
        AttributionFailed("t"),
        "could not append AI effort attribution for task t; teardown will continue",
    ),
    (
        DecidedAgain("t", Verdict.PROCEED, Verdict.LIVE_OWNER),
        "t's window changed between deciding and acting, so it was decided again (was "
        "proceed, now live-owner); nothing more was sent or killed",
    ),
    (
        DecisionChanged(Verdict.PROCEED, Verdict.STALE),
        "the decision changed while acting (was proceed, now stale): nothing more was changed",
    ),
    (RerunForNewDecision(), "re-run the same command to act on the new decision"),
    (
        LockRetry(0.5, 1, 3),
        "treehouse return failed with a transient git lock; waiting 0.5s and retrying (1/3)",
    ),
    (LockRetried(2), "treehouse return succeeded on retry 2; lock cleared"),
    (
        StaleLockRemoved("/s/.git/index.lock", "no holder, 700s old"),
        "removed provably-stale git lock /s/.git/index.lock (no holder, 700s old)",
    ),
    (
        RouteLeft("cannot read /d/secondmates.md: Permission denied", "sm"),
        "cannot read /d/secondmates.md: Permission denied; remove the line '- sm ...' from the "
        "registry by hand",
    ),
    (
        SavedForOther("refs/fm/discarded/b/1", "b", "a"),
        "the work saved under refs/fm/discarded/b/1 is b's (the discarded live owner's), not a's",
    ),
    (
        BrowserLeft(BrowserResult(BrowserWhat.NOT_BRIDGE, "fm-firstmate-0a1b2c3d-t", 42)),
        "browser session fm-firstmate-0a1b2c3d-t left as it is: pid 42 runs, but its argv names "
        "no chrome-devtools-axi bridge",
    ),
    (
        WorkersLeft(RemoteJobsResult(survived=(Worker(7, "/gone/root"),))),
        "abandoned remote-job workers survived ending: 7 (pruned code root /gone/root)",
    ),
    (Note(NoteCode.STRAY_RECORD, "a decision's own words"), "a decision's own words"),
    (
        RunUnasked(
            "a",
            "/pool/p/1/proj",
            ParkedRunResult(ParkedRunWhat.UNANSWERED, NM, problem="exited 2: no daemon"),
        ),
        "a's no-mistakes run could not be looked at (no-mistakes axi status did not answer: "
        "exited 2: no daemon): a run parked at a gate, if any, was not aborted; check with "
        "no-mistakes axi status in /pool/p/1/proj",
    ),
]


@pytest.mark.parametrize(("warning", "text"), WARNINGS)
def test_each_warning_has_its_words(warning: RunWarning, text: str) -> None:
    assert step_words.warning_text(warning) == text


def test_every_kind_of_warning_is_pinned() -> None:
    kinds = {type(w) for w, _ in WARNINGS}
    assert set(get_args(StepWarning)) <= kinds
    assert set(AuthLeftWhy) <= {w.why for w, _ in WARNINGS if isinstance(w, AuthLeft)}


def test_a_task_a_batch_did_not_run_says_why() -> None:
    assert messages.skipped_reason(Skipped("t")) == "not run: interrupted"
    assert messages.skipped_reason(Skipped("t", "a")) == "not run: a failed"
    moved = NotSelectedReason(NotSelectedWhy.SLOT_RETURNED, "t", slot="/s", returned_by="a")
    assert messages.skipped_reason(Skipped("t", not_selected=moved)) == (
        "slot /s was returned earlier in this batch (by a): it is no longer the slot t was "
        "selected with; nothing was done: run fm teardown t --dry-run"
    )
