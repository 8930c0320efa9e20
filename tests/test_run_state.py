"""Nothing a run works out outlives it: two plans in one process (a test, a library caller)
each start afresh, as two `fm` processes would.

What one look at the world works out once (a task's census, a listing's panes by window) is
kept on that look's own values, and what a run remembers between its looks (the tmux servers
that held the records' windows) on the run's `Settings`: none of it is module-level state a
second run would inherit.
"""

from __future__ import annotations

import gc
import weakref

from fm_teardown.decide import census
from fm_teardown.model.causes import InventoryUnreadable
from fm_teardown.model.errors import Verdict
from fm_teardown.model.request import Flags
from fm_teardown.model.settings import load
from fm_teardown.model.world import InventoryDoubt
from fm_teardown.pipeline import stages as pipeline
from tests.fleet import Fleet, tid


def test_a_plans_observation_is_not_kept_once_the_plan_is_gone(fleet: Fleet) -> None:
    """The census and the panes by window are worked out once per observation (an audit asks
    for a task's census three times), and go with it: once a plan is dropped, nothing holds
    its observation or its listing, and a second plan works out its own."""
    t = tid("rs-obs")
    slot = fleet.slot(1, holder=t)
    fleet.task(t, slot, "dead")
    fleet.agent_in(slot)  # a process in the slot: the census has a member
    first = pipeline.plan(load(None, fleet.env()), t, Flags.given(dry_run=True))
    obs = first.observation
    members = census.census(t, obs)
    assert members and census.census(t, obs) is members  # worked out once per observation
    seen = weakref.ref(obs)
    listing = weakref.ref(obs.inventory)
    del first, obs, members
    gc.collect()
    assert seen() is None and listing() is None
    second = pipeline.plan(load(None, fleet.env()), t, Flags.given(dry_run=True)).observation
    assert census.census(t, second) is census.census(t, second)


def test_the_servers_a_run_saw_holding_the_windows_are_not_a_later_runs(fleet: Fleet) -> None:
    """Within a run, windows that left the fleet's server after it was seen holding them left
    by the run's own doing. A second run in the same process has seen nothing: with another
    tmux server now holding the task's window and the fleet's holding none, it refuses as
    the first look of any run does (5: the fleet may be elsewhere)."""
    t = tid("rs-held")
    slot = fleet.slot(1, holder=t)
    task = fleet.task(t, slot, "dead")
    first_run = load(None, fleet.env())
    assert (
        pipeline.plan(first_run, t, Flags.given(dry_run=True)).decision.verdict == Verdict.PROCEED
    )
    # The window moves to another tmux server: the fleet's holds none of the records' windows.
    fleet.tmux.run("kill-window", "-t", f"={task.window}")
    other = fleet.tmux_server_in(fleet.root)
    other.new_window("elsewhere", f"fm-{t}", fleet.root, "bash --norc --noprofile")

    # The first run's later look: the window's going is taken as the run's own doing.
    again = pipeline.plan(first_run, t, Flags.given(dry_run=True)).decision
    assert again.verdict == Verdict.PROCEED, again.reasons

    later_run = pipeline.plan(load(None, fleet.env()), t, Flags.given(dry_run=True)).decision
    assert later_run.verdict == Verdict.UNSAFE, later_run.reasons
    doubts = [r for r in later_run.reasons if isinstance(r, InventoryUnreadable)]
    assert [d.doubt for d in doubts] == [InventoryDoubt.FLEET_ELSEWHERE], later_run.reasons
