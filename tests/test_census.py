"""The slot census (spec §14.1), on real tmux servers, real processes and real git.

Every task here is finished by every other measure (its own endpoint is dead, launched long
ago, its slot clean at the default branch): what keeps it from being finished is someone
else working in its slot: an agent in an operator's pane, its own window moved to another
session, an agent in no pane, an agent in a pane of another tmux server, one in a
subdirectory, an operator's shell. `--landed` ends none of them; a single teardown refuses,
or treats the moved window as the task's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fleet import (
    Fleet,
    agent_alone,
    gone,
    other_tmux,
    pane_agent,
    pane_shell,
    tid,
)

OLD = {"spawn_gen": "s1000.1.a"}  # launched long ago


def done_task(fleet: Fleet, name: str, n: int, state: str = "dead") -> tuple[str, Path]:
    """A task finished by every other measure: its slot clean at main, launched long ago."""
    task = tid(name)
    slot = fleet.slot(n, holder=task)
    fleet.task(task, slot, state, extra=OLD)
    return task, slot


def not_selected(doc: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {n["task"]: (n["reason"], n["opt_in"]) for n in doc["not_selected"]}


def test_landed_ends_no_agent_or_terminal_that_is_not_the_tasks_own(fleet: Fleet) -> None:
    control, control_slot = done_task(fleet, "control", 1)
    operator, s2 = done_task(fleet, "operator", 2)
    _, in_pane = pane_agent(fleet, fleet.tmux, "other", "scratch", s2)
    moved, s3 = done_task(fleet, "moved", 3, "alive")
    fleet.tmux.run("new-session", "-d", "-s", "away", "-n", "keep", "bash --norc --noprofile")
    fleet.tmux.run("move-window", "-s", f"firstmate:fm-{moved}", "-t", "away:")
    orphan, s4 = done_task(fleet, "orphan", 4)
    alone = agent_alone(fleet, s4)
    foreign, s5 = done_task(fleet, "foreign", 5)
    server = other_tmux(fleet)
    _, on_other = pane_agent(fleet, server, "ops", "work", s5)
    deep, s6 = done_task(fleet, "deep", 6)
    (s6 / "sub" / "dir").mkdir(parents=True)
    _, in_sub = pane_agent(fleet, fleet.tmux, "other", "deep", s6 / "sub" / "dir")
    shell, s7 = done_task(fleet, "shell", 7)
    _, operator_shell = pane_shell(fleet, fleet.tmux, "ops", "sh", s7)
    live = [in_pane, alone.pid, on_other, in_sub, operator_shell]
    slots = [s2, s3, s4, s5, s6, s7]
    before = fleet.snapshot(*slots)
    windows = fleet.tmux.windows()

    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run")
    assert [r["task"] for r in doc["results"]] == [control], doc
    skipped = not_selected(doc)
    # An agent in someone's pane, a person's terminal: a live owner (spec §15.4).
    for task in (operator, foreign, deep, shell):
        reason, opt_in = skipped[task]
        assert reason.startswith("refused (live-owner)") and opt_in is None, reason
        assert "still working in its slot: " in reason
    # An agent in no pane: not finished, and no opt-in would take it (spec §15.4).
    reason, opt_in = skipped[orphan]
    assert reason.startswith("still working in its slot: ") and opt_in is None, reason
    assert f"claude ({in_pane})" in skipped[operator][0]
    assert "other:scratch" in skipped[operator][0]
    assert f"claude ({alone.pid}), an agent in no pane" in skipped[orphan][0]
    assert f"claude ({on_other})" in skipped[foreign][0] and server.socket in skipped[foreign][0]
    assert f"claude ({in_sub})" in skipped[deep][0]
    assert f"bash ({operator_shell}), a terminal no task holds" in skipped[shell][0]
    assert "ops:sh" in skipped[shell][0]
    assert "own endpoint is alive" in skipped[moved][0]
    # The audit's FINISHED column says the same.
    _, audit = fleet.fm_json("teardown", "--dry-run")
    assert [r["task"] for r in audit["tasks"] if r["finished"]["finished"]] == [control]

    code, doc = fleet.fm_json("teardown", "--landed")
    assert (code, [r["task"] for r in doc["results"]]) == (0, [control]), doc
    assert not any(gone(pid) for pid in live)
    assert fleet.snapshot(*slots)["slots"] == before["slots"]  # no slot was reset
    assert fleet.tmux.windows() == sorted(w for w in windows if w != f"firstmate:fm-{control}")
    assert f"away:fm-{moved}" in fleet.tmux.windows()
    assert not (fleet.state / f"{control}.meta").exists() and control_slot.exists()


def test_an_agent_in_an_operators_pane_is_a_live_owner(fleet: Fleet) -> None:
    task, slot = done_task(fleet, "op", 1)
    _, agent = pane_agent(fleet, fleet.tmux, "other", "scratch", slot / ".")
    before = fleet.snapshot(slot)
    for args in (("--dry-run",), ()):
        code, doc = fleet.fm_json("teardown", task, *args)
        assert (code, doc["verdict"]) == (4, "live-owner"), doc
        owners = {o["id"]: o for o in doc["owners"] if o["live"]}
        assert list(owners) == [f"pid:{agent}"]
        why = owners[f"pid:{agent}"]["why"]
        assert "other:scratch" in why and fleet.tmux.socket in why
    assert fleet.snapshot(slot) == before and not gone(agent)


def test_an_agent_in_a_pane_of_another_tmux_server_is_a_live_owner(fleet: Fleet) -> None:
    task, slot = done_task(fleet, "far", 1)
    (slot / "src").mkdir()
    server = other_tmux(fleet)
    _, agent = pane_agent(fleet, server, "ops", "work", slot / "src")
    before = fleet.snapshot(slot)
    code, doc = fleet.fm_json("teardown", task)
    assert (code, doc["verdict"]) == (4, "live-owner"), doc
    [owner] = [o for o in doc["owners"] if o["live"]]
    assert owner["id"] == f"pid:{agent}"
    assert "ops:work" in owner["why"] and server.socket in owner["why"]
    assert fleet.snapshot(slot) == before and not gone(agent)


def test_a_moved_own_window_is_the_tasks_endpoint(fleet: Fleet) -> None:
    task, _ = done_task(fleet, "mv", 1, "alive")
    fleet.tmux.run("new-session", "-d", "-s", "away", "-n", "keep", "bash --norc --noprofile")
    fleet.tmux.run("move-window", "-s", f"firstmate:fm-{task}", "-t", "away:")
    wid = fleet.tmux.run(
        "display-message", "-p", "-t", f"away:fm-{task}", "#{window_id}"
    ).stdout.strip()
    code, doc = fleet.fm_json("teardown", task, "--dry-run")
    assert (code, doc["verdict"], doc["endpoint"]) == (0, "proceed", "alive"), doc
    assert not [o for o in doc["owners"] if o["live"]]
    assert f"kill window {wid}" in doc["steps"][0]["detail"]


def test_an_agent_in_no_pane_is_the_sole_claimants_leftover_and_named_so(fleet: Fleet) -> None:
    task, slot = done_task(fleet, "alone", 1)
    alone = agent_alone(fleet, slot)
    code, doc = fleet.fm_json("teardown", task, "--dry-run")
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    processes = next(s for s in doc["steps"] if s["step"] == "processes")
    assert (
        f"claude ({alone.pid}) [an agent in no pane, left in {task}'s slot]"
        in (processes["detail"])
    )
