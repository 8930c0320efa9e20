"""The words of each cause of a refusal (and of a stale slot), pinned: `report/cause_words.py`
alone writes them, from the values of `model/causes.py`, and they are what fm has always
said (runbooks, scripts and firstmate's callers quote them)."""

from __future__ import annotations

from typing import get_args

import pytest

from fm_teardown.model.causes import (
    AlsoClaimed,
    AtRisk,
    AtRiskKind,
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
from fm_teardown.model.errors import Verdict
from fm_teardown.model.not_landed import NestedRepo, NoHead, OwnWork, Unpushed
from fm_teardown.model.plan import Decision, OwnerKind
from fm_teardown.model.world import EndpointState
from fm_teardown.report import messages
from fm_teardown.report.cause_words import cause_text

ALIVE = EndpointState.ALIVE
_BOB = LiveOwner("bob", OwnerKind.RECORD, ALIVE, "its record names this slot; endpoint alive")
_LEASE = LiveOwner("lease:ci", OwnerKind.LEASE, ALIVE, "holds the pool lease on this slot")
_PROC = LiveOwner("pid:7", OwnerKind.PROCESS, ALIVE, "tmux pane other:scratch (%4)")

CAUSES: list[tuple[Cause, str]] = [
    (
        SlotOwned("/p/1", ("bob", "lease:ci")),
        "slot /p/1 is owned by another live task: bob, lease:ci",
    ),
    (_BOB, "bob (record, endpoint alive): its record names this slot; endpoint alive"),
    (
        LiveOwners((_BOB, _LEASE, _PROC)),
        "bob is working in this slot; lease:ci holds the pool lease on this slot; pid:7 is "
        "working in this slot: tmux pane other:scratch (%4)",
    ),
    (
        LiveOwners(
            (LiveOwner("pid:8", OwnerKind.TERMINAL, ALIVE, "bash (8) in tmux pane ops:sh (%5)"),)
        ),
        "pid:8 is working in this slot: bash (8) in tmux pane ops:sh (%5)",
    ),
    (
        OthersAtWork(),
        "--include-live takes a task whose own endpoint is alive, never one where someone else "
        "works: mass cleanup ends no agent or terminal that is not its own",
    ),
    (LiveChildren("sm", ("sm/a", "sm/b")), "secondmate sm's home has a live task: sm/a, sm/b"),
    (
        ChildEndpoint("sm/a", ALIVE, "window x runs claude (9)"),
        "sm/a: endpoint alive: window x runs claude (9)",
    ),
    (
        NotLanded("t", Unpushed(1, ("origin/main",))),
        "t's own work is not landed: 1 commit on no remote-tracking branch and not in origin/main",
    ),
    (
        NotLanded("t", OwnWork(1, ("a",), commits=1), lost=True),
        "t's own work would be lost: uncommitted changes in 1 path (a); "
        "1 commit on no remote-tracking branch",
    ),
    (AtRisk(AtRiskKind.UNCOMMITTED, "a.txt"), "uncommitted: a.txt"),
    (AtRisk(AtRiskKind.UNTRACKED, "b.txt"), "untracked: b.txt"),
    (AtRisk(AtRiskKind.UNPUSHED, "abc1234 work"), "unpushed: abc1234 work"),
    (AtRisk(AtRiskKind.UNKNOWN, "gh failed"), "could not tell: gh failed"),
    (
        AlsoClaimed(Listed.of(["g"]), "the pool lease on the slot is g's", stale=True),
        "stale slot: g also claims it, none is live; the pool lease on the slot is g's",
    ),
    (
        AlsoClaimed(Listed.of(["f", "h"]), "the lease is this task's", stale=False),
        "f, h also claim the slot but none is live; the lease is this task's",
    ),
    (
        AlsoClaimed(Listed.of([f"t{i}" for i in range(12)]), "why", stale=True),
        "stale slot: t0, t1, t2, t3, t4, t5, t6, t7, t8, t9 and 2 more also claim it, none is "
        "live; why",
    ),
    (StaleHeadline("g", "f"), "the slot belongs to g now: only f's window and record are cleared"),
    (
        InvalidClaimant("/st/x.meta", "x", "bad", slot_known=True),
        "record /st/x.meta of task 'x' is invalid (bad) and it names this slot: it might be a "
        "live owner",
    ),
    (
        InvalidClaimant("/st/x.meta", "x", "bad", slot_known=False),
        "record /st/x.meta of task 'x' is invalid (bad) and its slot cannot be told: it might "
        "be a live owner",
    ),
    (
        InvalidClaimantsHeadline("x.meta", "bad", names_slot=True, more=0),
        "record x.meta is invalid (bad) and names this slot",
    ),
    (
        InvalidClaimantsHeadline("x.meta", "bad", names_slot=False, more=2),
        "record x.meta is invalid (bad) and names no slot fm can tell (and 2 more invalid records)",
    ),
    (
        Observed(ObservedKind.CLAIM, "cannot be read", "/p/1/.claim"),
        "the slot claim /p/1/.claim cannot be read",
    ),
    (
        Observed(ObservedKind.TASKTMP, "tasktmp /tmp/fm-t is a symlink"),
        "tasktmp /tmp/fm-t is a symlink",
    ),
    (
        Observed(ObservedKind.STATE_DIR, "state dir /st is not writable"),
        "state dir /st is not writable",
    ),
    (Observed(ObservedKind.CENSUS, "pane of 9 cannot be told"), "pane of 9 cannot be told"),
    (Observed(ObservedKind.GIT_DIR, "/p/1/.git is not its own"), "/p/1/.git is not its own"),
    (InventoryUnreadable("no server"), "the tmux inventory could not be read: no server"),
    (
        InventoryUnreadable("no server", headline=True),
        "the tmux inventory could not be read, so the task's own window cannot be confirmed "
        "gone: no server",
    ),
    (ProtectedRoot("/h", same=True, label="$HOME", root="/h"), "slot /h is $HOME (/h)"),
    (
        ProtectedRoot("/", same=False, label="$HOME", root="/h"),
        "slot / is an ancestor of $HOME (/h)",
    ),
    (
        ProtectedRoot("/h", same=True, label="$HOME", root="/h", headline=True),
        "the slot is $HOME (/h): it is not a pool worktree",
    ),
    (InsideOwnWindow("t", "s:fm-t"), "fm is running inside t's own window s:fm-t"),
    (
        PoolNotReady(PoolProblem.NO_TREEHOUSE, "/p/1"),
        "the pool's `treehouse` executable was not found (PATH or FM_TREEHOUSE_BIN)",
    ),
    (PoolNotReady(PoolProblem.TREEHOUSE_BROKEN, "/p/1", "treehouse exits 2"), "treehouse exits 2"),
    (
        PoolNotReady(PoolProblem.STATE_UNREADABLE, "/p/1", "bad json"),
        "the pool's state cannot be read: bad json",
    ),
    (
        PoolNotReady(PoolProblem.NOT_MANAGED, "/p/1", "/p/state.json"),
        "slot /p/1 is not managed by the pool (no entry in /p/state.json)",
    ),
    (
        PoolNotReady(PoolProblem.NOT_MANAGED, "/p/1"),
        "slot /p/1 is not managed by the pool (no pool state file)",
    ),
    (PoolNotReady(PoolProblem.DESTROYING, "/p/1"), "slot /p/1 is being destroyed by the pool"),
    (
        ForeignLock("/p/1", "ci run"),
        "slot /p/1 is locked by another tool (git worktree lock, reason: 'ci run'): that tool "
        "still claims the tree, and fm never removes its lock",
    ),
    (
        ForeignLock("/p/1", "", headline=True),
        "slot locked by another tool (git worktree lock, no reason given)",
    ),
    (
        BlockedReturn(("tmux server tmux (5)", "tmux (6) of b's endpoint"), "/p/1"),
        "tmux server tmux (5), tmux (6) of b's endpoint work in slot /p/1, and the pool's return "
        "ends every process there; fm never ends them",
    ),
    (
        BlockedReturn(("tmux server tmux (5)",), "/p/1", headline=True),
        "tmux server tmux (5) work in this slot, and the pool's return would end them",
    ),
    (
        PlanChanged(("verdict", "dirty")),
        "the plan changed since it was approved: the verdict, the slot's uncommitted or "
        "untracked paths",
    ),
    (PlanChanged(()), "the plan changed since it was approved: a field the token cannot name"),
    (
        NeverApproved("t", "abc"),
        "no --expect-plan token names t: its plan (now abc) was never approved",
    ),
    (FieldChanged("verdict", "proceed", "unlanded"), "the verdict: proceed → unlanded"),
    (
        FieldChanged("dirty", "", "new.txt"),
        "the slot's uncommitted or untracked paths: none → new.txt",
    ),
    (
        NoFieldNamed(),
        "no field's tag differs: either a field changed that the tags cannot name, or the token "
        "is not as a dry run printed it",
    ),
    (PlanTokens("abc", "def"), "approved plan abc; the plan now def"),
    (RecordRefused("/st/t.meta", "names backend 'x'"), "record /st/t.meta names backend 'x'"),
    (RecordRefused("/st/t.meta", "names backend 'x'", own=True), "its record names backend 'x'"),
    (
        OwnFileBlocked(OwnFile.JOURNAL, "/d/teardown-log.jsonl", "it is a symlink"),
        "the journal /d/teardown-log.jsonl cannot be written (it is a symlink): a real run "
        "journals its intent before it changes anything",
    ),
    (
        OwnFileBlocked(OwnFile.SLOT_LOCK, "/st/.slot-1.lock", "/st is inside the slot /p/1"),
        "the slot lock /st/.slot-1.lock would be written where fm never writes its own files: "
        "/st is inside the slot /p/1",
    ),
    (
        OtherLaunch("t", "2026-01-01T00:00:00Z", (("spawn_gen", "s1.1.a", "s2.1.b"),)),
        "a teardown of t that started at 2026-01-01T00:00:00Z ended partway, and it was of "
        "another launch (spawn_gen s1.1.a → s2.1.b): the record now names a new launch",
    ),
    (
        NestedWork(NestedRepo("lib/", 2, ("lib/a.py", "lib/b/"), 1)),
        "nested repository: lib/ (uncommitted changes in 2 paths (lib/a.py, lib/b/); 1 commit "
        "on none of its remote-tracking branches)",
    ),
    (
        NestedWork(NestedRepo("lib/")),
        "nested repository: lib/ (nothing uncommitted, every commit pushed)",
    ),
    (
        NestedWork(NestedRepo("lib/", error="git status failed: denied")),
        "nested repository: lib/ (could not tell what it holds: git status failed: denied)",
    ),
    (
        NestedUnsaved("t", ("lib/", "x/y/"), 2),
        "t's slot holds nested repositories (lib/, x/y/ and 2 more): --force cannot save them "
        "with their history",
    ),
    (
        NotFetched(("origin/main",)),
        "not fetched: a dry run uses origin/main as last fetched; the real run fetches first "
        "(with prune) and may decide otherwise",
    ),
]


@pytest.mark.parametrize(("cause", "text"), CAUSES)
def test_each_cause_has_its_words(cause: Cause, text: str) -> None:
    assert cause_text(cause) == text
    assert messages.said_text(cause) == text


def test_every_kind_of_cause_is_pinned() -> None:
    kinds = {type(c) for c, _ in CAUSES}
    assert set(get_args(Cause)) <= kinds
    assert set(AtRiskKind) <= {c.kind for c, _ in CAUSES if isinstance(c, AtRisk)}
    assert set(ObservedKind) <= {c.kind for c, _ in CAUSES if isinstance(c, Observed)}
    assert set(OwnFile) <= {c.file for c, _ in CAUSES if isinstance(c, OwnFileBlocked)}
    assert set(PoolProblem) <= {c.problem for c, _ in CAUSES if isinstance(c, PoolNotReady)}


def test_a_refusal_shows_its_first_cause_with_lead_and_tail() -> None:
    d = Decision(
        "t",
        Verdict.UNLANDED,
        (NotLanded("t", NoHead()), AtRisk(AtRiskKind.UNTRACKED, "x")),
        headline=NotLanded("t", NoHead(), lost=True),
    )
    no_head = "cannot tell whether the work landed: HEAD has no commit"
    assert messages.refused_reasons(d.reasons, d.refused) == (
        f"REFUSED: t's own work is not landed: {no_head}; nothing was changed",
        "untracked: x",
    )
    assert messages.said_text(d.headline) == f"t's own work would be lost: {no_head}"
