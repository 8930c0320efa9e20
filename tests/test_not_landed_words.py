"""The words of why a task's own work is not landed (or not merged), pinned: `report/
cause_words.py` alone writes them, from the values of `model/not_landed.py`, and they are what
fm has always said (a refusal's first line, a `--force` warning, a `--landed` selection)."""

from __future__ import annotations

from typing import get_args

import pytest

from fm_teardown.model.not_landed import (
    AndAlso,
    BranchNotLanded,
    HomeInFlight,
    HomeOwnWork,
    HomeProblem,
    HomeProblemKind,
    HomeRecordsUnknown,
    NoHead,
    NotLandedWhy,
    NotMerged,
    OwnWork,
    RemoteUnknown,
    ScoutMissing,
    ScoutUnknown,
    SlotUninspected,
    SlotUninspectedKind,
    UnlandedDiscarded,
    Unpushed,
)
from fm_teardown.model.reasons import Finished, FinishedWhy
from fm_teardown.model.results import PoolResult, PoolWhat
from fm_teardown.report.cause_words import not_landed_text
from fm_teardown.report.messages import finished_reason
from fm_teardown.report.step_words import result_text, warning_text

WHYS: list[tuple[NotLandedWhy, str]] = [
    (
        ScoutUnknown("/d/t/report.md", "Permission denied"),
        "cannot tell whether scout report /d/t/report.md exists (Permission denied)",
    ),
    (ScoutMissing("/d/t/report.md"), "scout task has no report at /d/t/report.md"),
    (
        HomeRecordsUnknown("/h", "Permission denied"),
        "cannot tell whether secondmate home /h has task records (Permission denied)",
    ),
    (
        HomeInFlight("/h", ("a.meta", "b.meta")),
        "secondmate home /h still has in-flight work: a.meta, b.meta",
    ),
    (
        HomeInFlight("/h", ("a.meta",), 2),
        "secondmate home /h still has in-flight work: a.meta and 2 more",
    ),
    (
        SlotUninspected(SlotUninspectedKind.STATUS_FAILED, "/s", "fatal: bad"),
        "cannot inspect the slot for uncommitted changes",
    ),
    (
        SlotUninspected(SlotUninspectedKind.NOT_A_DIRECTORY, "/s"),
        "cannot inspect the slot: slot path /s exists but is not a directory",
    ),
    (
        SlotUninspected(SlotUninspectedKind.UNREADABLE, "/s", "Permission denied"),
        "cannot inspect the slot: cannot read slot path /s: Permission denied",
    ),
    (NoHead(), "cannot tell whether the work landed: HEAD has no commit"),
    (RemoteUnknown(), "cannot inspect the slot for commits not on a remote"),
    (OwnWork(1, ("a",)), "uncommitted changes in 1 path (a)"),
    (
        OwnWork(5, ("a", "b", "c"), 2, 1),
        "uncommitted changes in 5 paths, 2 of them untracked (a, b, c, …); "
        "1 commit on no remote-tracking branch",
    ),
    (OwnWork(0, (), commits=2), "2 commits on no remote-tracking branch"),
    (
        Unpushed(1, ("origin/main", "local main")),
        "1 commit on no remote-tracking branch and not in origin/main or local main",
    ),
    (
        Unpushed(2, (), "#7", incomplete=True),
        "2 commits on no remote-tracking branch and not in any default branch or merged PR #7 "
        "(could not tell everything; see notes)",
    ),
    (NotMerged(("origin/main",)), "pushed but not merged into origin/main"),
    (NotMerged(()), "pushed but not merged into the default branch"),
    (
        HomeProblem(HomeProblemKind.UNREADABLE, "/h", "Permission denied"),
        "cannot read secondmate home /h: Permission denied",
    ),
    (
        HomeProblem(HomeProblemKind.NOT_A_DIRECTORY, "/h"),
        "secondmate home /h exists but is not a directory",
    ),
    (HomeProblem(HomeProblemKind.GIT_FAILED, "/h"), "cannot inspect the secondmate home"),
    (
        HomeOwnWork("/h", OwnWork(2, ("x", "y"), 1, 3)),
        "secondmate home /h has work of its own: uncommitted changes in 2 paths, 1 of them "
        "untracked (x, y); 3 commits on no remote-tracking branch",
    ),
    (
        AndAlso(HomeProblem(HomeProblemKind.GIT_FAILED, "/h"), HomeInFlight("/h", ("a.meta",))),
        "cannot inspect the secondmate home; secondmate home /h still has in-flight work: a.meta",
    ),
    (
        BranchNotLanded("fm/t", Unpushed(1, ("origin/main",))),
        "branch fm/t has commits beyond HEAD: 1 commit on no remote-tracking branch and not in "
        "origin/main",
    ),
]


@pytest.mark.parametrize(("why", "text"), WHYS)
def test_each_why_has_its_words(why: NotLandedWhy, text: str) -> None:
    assert not_landed_text(why) == text


def test_every_kind_of_why_is_pinned() -> None:
    assert set(get_args(NotLandedWhy)) <= {type(w) for w, _ in WHYS}
    assert set(SlotUninspectedKind) <= {w.kind for w, _ in WHYS if isinstance(w, SlotUninspected)}
    assert set(HomeProblemKind) <= {w.kind for w, _ in WHYS if isinstance(w, HomeProblem)}


def test_none_says_nothing() -> None:
    assert not_landed_text(None) == ""


def test_the_why_in_a_force_warning_a_pool_step_and_a_landed_selection() -> None:
    why = Unpushed(1, ("origin/main",))
    said = "1 commit on no remote-tracking branch and not in origin/main"
    assert warning_text(UnlandedDiscarded("t", why)) == (
        f"--force: discarding t's own unlanded work ({said})"
    )
    assert warning_text(UnlandedDiscarded("o", why, live_owner=True)) == (
        f"--force --discard-live-owner: discarding o's unlanded work in the slot ({said})"
    )
    pool = PoolResult(PoolWhat.UNLANDED_AFTER_LOCK, unlanded=why)
    assert result_text(pool) == (
        f"after removing the stale lock: own work not landed: {said}; slot kept"
    )
    pushed = NotMerged(("origin/main",))
    assert finished_reason(Finished(True, FinishedWhy.PUSHED, summary=pushed)) == (
        "pushed, not merged (--include-pushed): pushed but not merged into origin/main"
    )
    assert finished_reason(Finished(False, FinishedWhy.NOT_MERGED, summary=why)) == (
        f"not merged: {said}"
    )
