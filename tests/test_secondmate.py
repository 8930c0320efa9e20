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

import pytest

from tests.fleet import Fleet, git, gone, tid, tree_hash

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


# -- a secondmate's home is its own work (spec §14.7, §14.8) ------------------------------------


def home_state(fleet: Fleet, home: Path, sm: str) -> tuple[object, ...]:
    """What a refused retirement must leave as it was: the home's files and git status, the
    record, the route and the pool's lease."""
    return (
        tree_hash(home),
        git(home, "status", "--porcelain", "--untracked-files=all"),
        (fleet.state / f"{sm}.meta").read_bytes(),
        (fleet.data / "secondmates.md").read_bytes(),
        pool_entry(fleet, home).get("lease_id"),
    )


WORK = {
    "notes": ("notes.txt", "what the secondmate learned\n"),
    "backlog": ("data/backlog.md", "- [ ] the next thing\n"),
    "report": ("data/scout-x/report.md", "# a scout's findings\n"),
    "tracked": ("README", "hello, edited in the home\n"),
}


@pytest.mark.parametrize("kind", sorted(WORK))
def test_a_home_with_work_of_its_own_refuses_exit_3_and_is_left_as_it_is(
    fleet: Fleet, kind: str
) -> None:
    sm = tid("domain")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    path, text = WORK[kind]
    (home / path).parent.mkdir(parents=True, exist_ok=True)
    (home / path).write_text(text)
    before = home_state(fleet, home, sm)
    code, doc = fleet.fm_json("teardown", sm)
    assert code == 3, doc
    assert doc["reasons"][0].startswith(f"REFUSED: {sm}'s own work is not landed: secondmate home")
    assert any(path in r for r in doc["reasons"]), doc["reasons"]
    assert home_state(fleet, home, sm) == before
    assert fleet.treehouse_calls() == []
    # firstmate's drop-in refuses the same way (its exit 1), changing nothing.
    r = fm_teardown(fleet, sm)
    assert r.returncode == 1 and r.stderr.startswith("REFUSED: "), r.stderr
    assert home_state(fleet, home, sm) == before


def test_force_saves_the_home_and_its_task_records_and_restore_brings_them_back(
    fleet: Fleet,
) -> None:
    sm, kid = tid("domain"), tid("kid")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    # As in firstmate's own homes, the state dir is ignored by git: the records are saved
    # all the same.
    exclude = Path(git(fleet.project, "rev-parse", "--git-common-dir"))
    exclude = (fleet.project / exclude if not exclude.is_absolute() else exclude) / "info"
    exclude.mkdir(exist_ok=True)
    (exclude / "exclude").write_text("state/\n")
    kid_meta = child(fleet, home, kid, fleet.slot(2, holder=kid))
    record_bytes = kid_meta.read_bytes()
    for path, text in WORK.values():
        (home / path).parent.mkdir(parents=True, exist_ok=True)
        (home / path).write_text(text)
    code, doc = fleet.fm_json("teardown", sm, "--force")
    assert code == 0, doc
    saved = [s for s in doc["steps"] if s["step"] == "save-discarded"]
    assert [s["outcome"] for s in saved] == ["done"], doc["steps"]
    assert f"state/{kid}.meta" in saved[0]["detail"]
    assert not (fleet.state / f"{sm}.meta").exists()
    assert not (home / "notes.txt").exists()  # the pool's reset took the home's files
    # `fm restore` lists the save (from the journal) and brings it back beside the project.
    r = fleet.fm("restore", sm)
    assert r.returncode == 0, r.stderr
    assert f"1 save of task {sm}" in r.stdout and f"refs/fm/discarded/{sm}/" in r.stdout
    to = fleet.root / "restored"
    r = fleet.fm("restore", sm, "--to", str(to))
    assert r.returncode == 0, (r.stdout, r.stderr)
    for path, text in WORK.values():
        assert (to / path).read_text() == text, path
    assert (to / "state" / f"{kid}.meta").read_bytes() == record_bytes
    # The command the save printed restores beside the project checkout, never in the pool.
    restore = saved[0]["detail"].split("to restore: ", 1)[1]
    assert f"--project {fleet.project} " in restore
    assert f"--to {fleet.project}-fm-restore-{sm}-" in restore


def test_a_hint_promises_a_save_only_when_the_forced_plan_makes_one(fleet: Fleet) -> None:
    """A secondmate's forced plan saves its home: its hint says so. A scout's forced plan
    saves nothing (its work is its report): its hint promises nothing."""
    sm, scout = tid("domain"), tid("scout")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    (home / "notes.txt").write_text("notes\n")
    slot = fleet.slot(2, holder=scout)
    fleet.task(scout, slot, "dead", extra={"kind": "scout"})
    (slot / "draft.md").write_text("not yet a report\n")
    for task in (sm, scout):
        code, refused = fleet.fm_json("teardown", task)
        assert code == 3, refused
        promise = f"saved first under refs/fm/discarded/{task}/"
        promised = any(promise in h for h in refused["hints"])
        code, forced = fleet.fm_json("teardown", task, "--force", "--dry-run")
        assert code == 0, forced
        plans_save = any(s["step"] == "save-discarded" for s in forced["steps"])
        assert promised == plans_save == (task == sm), (task, refused["hints"], forced["steps"])
        if not promised:
            assert any("nothing is saved first" in h for h in refused["hints"]), refused
            assert "nothing is saved" in forced["headline"], forced["headline"]


def test_a_home_commit_on_no_remote_refuses_and_force_saves_it(fleet: Fleet) -> None:
    """A commit made in the home (detached, as the pool hands slots out) is work the pool's
    reset would leave unreachable: refused (3); --force saves it, the save parented on it."""
    sm = tid("domain")
    home = fleet.slot(1, holder=sm)
    secondmate(fleet, sm, home)
    (home / "plan.md").write_text("the plan\n")
    git(home, "add", "plan.md")
    git(home, "-c", "user.name=T", "-c", "user.email=t@x.invalid", "commit", "-qm", "plan")
    head = git(home, "rev-parse", "HEAD")
    before = home_state(fleet, home, sm)
    code, doc = fleet.fm_json("teardown", sm)
    assert code == 3, doc
    assert "1 commit on no remote-tracking branch" in doc["reasons"][0], doc["reasons"]
    assert home_state(fleet, home, sm) == before
    code, doc = fleet.fm_json("teardown", sm, "--force")
    assert code == 0, doc
    ref = doc["discarded_ref"]
    assert ref.startswith(f"refs/fm/discarded/{sm}/")
    assert git(fleet.project, "rev-parse", f"{ref}^") == head
