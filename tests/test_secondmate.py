"""Secondmates as firstmate records them, and the records of their homes, on real tmux, git
and the pool stand-in.

firstmate's spawn writes a secondmate's record with `worktree=`, `project=` and `home=` all
naming its home, a pool slot leased for it. Its teardown is refused while the home still has
task records (unless `--force`), returns the home's lease, and removes its route from
`data/secondmates.md`. The records in a secondmate's `home/state/` are tasks too: they
claim the slots they name, for every teardown of the parent fleet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fleet import Fleet, gone, tid, tree_hash

REGISTRY_OTHER = (
    "- other - another domain (home: /elsewhere; scope: x; projects: y; added 2026-06-22)"
)


def secondmate(fleet: Fleet, task: str, home: Path, state: str = "dead") -> list[int]:
    """The record firstmate's spawn writes for a secondmate, its home seeded, its window."""
    (home / "state").mkdir(exist_ok=True)
    (home / ".fm-secondmate-home").write_text(f"{task}\n")
    fleet.record(
        task,
        home,
        lines=[
            f"window=firstmate:fm-{task}",
            f"worktree={home}",
            f"project={home}",
            "harness=claude",
            "kind=secondmate",
            "mode=secondmate",
            f"home={home}",
            "projects=alpha",
        ],
    )
    registry = fleet.data / "secondmates.md"
    registry.write_text(
        f"- {task} - design domain (home: {home}; scope: design; projects: alpha; "
        f"added 2026-06-22)\n{REGISTRY_OTHER}\n"
    )
    return fleet.endpoint(task, home, state)


def child(fleet: Fleet, home: Path, task: str, slot: Path) -> Path:
    """A task record of the secondmate's own fleet, in its home's state dir."""
    meta = home / "state" / f"{task}.meta"
    meta.write_text(
        f"window=firstmate:fm-{task}\nendpoint_task_id={task}\nworktree={slot}\n"
        f"project={fleet.project}\nharness=claude\nkind=ship\n"
    )
    return meta


def fm_teardown(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fm_teardown.commands.firstmate", *args],
        capture_output=True,
        text=True,
        cwd=fleet.fm_home,
        env=fleet.env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def pool_entry(fleet: Fleet, slot: Path) -> dict[str, object]:
    doc = json.loads((fleet.pool / "treehouse-state.json").read_text())
    [entry] = [e for e in doc["worktrees"] if e["path"] == str(slot)]
    return dict(entry)


def test_a_secondmate_is_retired_its_lease_returned_and_its_route_removed(fleet: Fleet) -> None:
    sm = tid("domain")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    r = fm_teardown(fleet, sm)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == (
        f"teardown {sm} complete (window firstmate:fm-{sm}, worktree {home})"
    )  # and no backlog reminder: a secondmate is no backlog item
    assert not pool_entry(fleet, home).get("leased")
    [call] = fleet.treehouse_calls()
    assert call["argv"][:2] == ["return", "--force"] and call["argv"][-1] == str(home)
    assert not (fleet.state / f"{sm}.meta").exists()
    assert (fleet.data / "secondmates.md").read_text() == REGISTRY_OTHER + "\n"
    assert f"firstmate:fm-{sm}" not in fleet.tmux.windows()


def test_a_secondmate_with_task_records_is_refused_unless_forced(fleet: Fleet) -> None:
    sm, kid = tid("domain"), tid("kid")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    kid_slot = fleet.slot(2, holder=kid)
    kid_meta = child(fleet, home, kid, kid_slot)
    before = fleet.snapshot(home, kid_slot)
    registry = (fleet.data / "secondmates.md").read_bytes()
    r = fm_teardown(fleet, sm)
    assert r.returncode == 1, r.stderr
    first = next(x for x in r.stderr.splitlines() if not x.startswith("warning:"))
    assert first.startswith(f"REFUSED: {sm}'s own work is not landed")
    assert f"{kid}.meta" in first
    assert fleet.fm("teardown", sm).returncode == 3
    # The audit lists this state dir's tasks only: the child is the secondmate's task.
    code, doc = fleet.fm_json("teardown", "--dry-run")
    assert code == 0 and [row["task"] for row in doc["tasks"]] == [sm], doc
    assert fleet.snapshot(home, kid_slot) == before
    assert (fleet.data / "secondmates.md").read_bytes() == registry
    # --force retires it: the child's record goes with the home (the return resets it), said
    # first; the child's slot is left alone.
    r = fm_teardown(fleet, sm, "--force")
    assert r.returncode == 0, r.stderr
    assert any(f"{sm}/{kid}" in w and "go with the home" in w for w in r.stderr.splitlines())
    assert not (fleet.state / f"{sm}.meta").exists() and not kid_meta.exists()
    assert not pool_entry(fleet, home).get("leased") and pool_entry(fleet, kid_slot)["leased"]


def test_a_secondmate_with_a_live_task_is_refused_even_with_force(fleet: Fleet) -> None:
    sm, kid = tid("domain"), tid("kid")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    kid_slot = fleet.slot(2, holder=kid)
    child(fleet, home, kid, kid_slot)
    pids = fleet.endpoint(kid, kid_slot, "alive")
    before = fleet.snapshot(home, kid_slot)
    code, doc = fleet.fm_json("teardown", sm, "--force")
    assert code == 4, doc
    assert doc["reasons"][0].startswith(f"REFUSED: secondmate {sm}'s home has a live task")
    assert f"{sm}/{kid}" in doc["reasons"][0]
    assert fleet.snapshot(home, kid_slot) == before and not any(gone(p) for p in pids)


def test_a_child_record_with_a_live_endpoint_owns_the_slot_it_names(fleet: Fleet) -> None:
    """A task of the parent fleet whose slot a secondmate's child now works in is refused,
    and so is the secondmate's own forced teardown when a live child works in its home."""
    sm, kid, old = tid("domain"), tid("kid"), tid("old")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    slot = fleet.slot(2, holder=old)
    fleet.task(old, slot, "dead")
    child(fleet, home, kid, slot)
    pids = fleet.endpoint(kid, slot, "alive")
    (slot / "kid-work.txt").write_text("in progress\n")
    before = fleet.snapshot(slot)
    r = fm_teardown(fleet, old)
    assert r.returncode == 1, r.stderr
    first = next(x for x in r.stderr.splitlines() if not x.startswith("warning:"))
    assert first.startswith("REFUSED: ") and f"{sm}/{kid}" in first
    code, doc = fleet.fm_json("teardown", old, "--force")
    assert code == 4 and [o["id"] for o in doc["owners"] if o["live"]] == [f"{sm}/{kid}"]
    assert fleet.snapshot(slot) == before and not any(gone(p) for p in pids)
    # The secondmate's own --force: a live child working in the home itself refuses too.
    inside = tid("inside")
    child(fleet, home, inside, home)
    inside_pids = fleet.endpoint(inside, home, "alive")
    tree = tree_hash(home)
    code, doc = fleet.fm_json("teardown", sm, "--force")
    assert code == 4, doc
    assert f"{sm}/{inside}" in [o["id"] for o in doc["owners"] if o["live"]]
    assert tree_hash(home) == tree and pool_entry(fleet, home)["leased"]
    assert not any(gone(p) for p in inside_pids)
