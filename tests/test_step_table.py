"""A step is one value found through one table per layer (issue 38): its action in the plan
(`model/step_actions.py`, made by `decide/plan_builder.py`'s builder of it), its act function
(a row of `act/steps.py`'s table, in the order the steps run) and its words
(`report/step_words.py`, one function of its result). These tests hold the tables together,
so that adding a step is its modules and a row in each table, never a field of `Decision` or
`Outcome`."""

from __future__ import annotations

from dataclasses import replace

from fm_teardown.act.steps import BEFORE_THE_LOCK, UNDER_THE_LOCK
from fm_teardown.decide import plan_builder
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import Decision, LeftOut, StepName
from fm_teardown.model.step_actions import (
    AbortParkedRun,
    BranchDelete,
    EndProcesses,
    PoolReturn,
    RemoveClaim,
    RemoveHooks,
    SaveWork,
)
from tests.test_decide import S1, UNLANDED, World

TABLE = (*BEFORE_THE_LOCK, *UNDER_THE_LOCK)
# The run's order, a row's duties (carried out by its act function) right before it.
ORDER = [n for row in TABLE for n in (*row.duties, row.name)]
# Noted by the record's act function only when something was there: never planned.
UNPLANNED = {StepName.BROWSER, StepName.REMOTE_JOBS}


NO_MISTAKES = "/usr/local/bin/no-mistakes"


def everything() -> Decision:
    """A plan with every step: a ship task's parked run looked for first (no-mistakes is on
    PATH), --force saves the unlanded work, the branch and TASK's own claim go after the
    return."""
    facts = replace(UNLANDED, head="c" * 40, branch="fm/a", default_branch="main")
    world = World(no_mistakes_bin=NO_MISTAKES)
    return world.task("a").claim("a").decide("a", force=True, landed=facts)


def test_every_step_is_carried_out_by_one_row_of_the_act_table() -> None:
    assert sorted(ORDER) == sorted(StepName)
    assert len(ORDER) == len(set(ORDER))


def test_the_plan_is_built_in_the_order_the_steps_run() -> None:
    d = everything()
    names = [s.step for s in d.plan]
    assert set(names) == set(StepName) - UNPLANNED, names
    assert names == [n for n in ORDER if n in names]
    stale = World().task("a", mtime_ns=1).task("b", mtime_ns=2).decide("a")
    assert [s.step for s in stale.plan] == [n for n in ORDER if n in [s.step for s in stale.plan]]
    assert len(plan_builder.PROCEED_STEPS) == len(set(StepName) - UNPLANNED)


def test_each_step_carries_what_it_will_do_as_its_action() -> None:
    d = everything()
    actions = {s.step: s.action for s in d.plan}
    assert actions == {
        StepName.PARKED_RUN: AbortParkedRun(S1, NO_MISTAKES),
        StepName.ENDPOINT: None,
        StepName.PROCESSES: EndProcesses(S1, None, sole_claimant=True),
        StepName.SAVE_DISCARDED: SaveWork("a"),
        StepName.HOOKS: RemoveHooks(S1),
        StepName.POOL: PoolReturn(S1, None, None, force=True),
        StepName.BRANCH: BranchDelete("fm/a", "c" * 40, "main"),
        StepName.CLAIM: RemoveClaim("/pool/proj-abc/1/.fm-slot-owner"),
        StepName.AUTH: None,
        StepName.ATTRIBUTION: None,
        StepName.RECORD: None,
    }
    assert d.pool_return == d.action(PoolReturn) == PoolReturn(S1, None, None, force=True)
    assert d.left_out == ()


def test_a_slot_left_as_it_is_says_which_steps_are_left_out_and_why() -> None:
    stale = World().task("a", mtime_ns=1).task("b", mtime_ns=2).decide("a")
    why = "stale slot: left to its current owner"
    assert stale.left_out == (
        LeftOut(StepName.PROCESSES, S1, why),
        LeftOut(StepName.POOL, S1, why),
    )
    gone = World().task("a").gone(S1).decide("a")
    assert [left.step for left in gone.left_out] == [StepName.PROCESSES, StepName.POOL]
    assert all(left.why is not None and "no longer exists" in left.why for left in gone.left_out)


def test_no_step_is_a_field_of_the_decision_or_the_outcome() -> None:
    """A step's details are its action and its result: the decision and the outcome stay
    small (issue 38: at most 12 fields each), whatever steps are added."""
    assert len(Decision.__annotations__) <= 12, list(Decision.__annotations__)
    assert len(Outcome.__annotations__) <= 12, list(Outcome.__annotations__)
    fields = {*Decision.__annotations__, *Outcome.__annotations__}
    assert not fields & {str(n).replace("-", "_") for n in StepName}, fields
