"""Tasks as today's firstmate spawns them (docs/firstmate.md, "Today's firstmate"): the slot
leased as `fm-<id>` with no lease key in the record, the pane sent into the slot with
`treehouse enter <slot>`; the agy harness's files; a secondmate on another host. On real tmux,
git and processes, with the pool stand-in."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.fleet import SESSION, Fleet, files_of, state_hash, tid, wait_for

ID_T1 = tid("t1")
ID_T2 = tid("t2")
ID_AGY = tid("agy")
ID_FAR = tid("far")


def fm_teardown(
    fleet: Fleet, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The drop-in, as firstmate's callers run it."""
    return subprocess.run(
        [sys.executable, "-m", "fm_teardown.commands.firstmate", *args],
        capture_output=True,
        text=True,
        cwd=fleet.fm_home,
        env=env or fleet.env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def lease_get(fleet: Fleet, holder: str) -> Path:
    """`treehouse get --lease --lease-holder <holder>` from the project, as firstmate's spawn
    runs it: the slot's path."""
    r = subprocess.run(
        [str(fleet.treehouse), "get", "--lease", "--lease-holder", holder],
        cwd=fleet.project,
        env=fleet.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(r.stdout.splitlines()[0])


def pool_entry(fleet: Fleet, slot: Path) -> dict[str, object]:
    doc = json.loads((fleet.pool / "treehouse-state.json").read_text())
    [entry] = [e for e in doc["worktrees"] if e["path"] == str(slot)]
    return dict(entry)


def entered(fleet: Fleet, task_id: str, slot: Path, *, agent: bool) -> int:
    """TASK's window as firstmate's spawn opens it: a shell in the project, into which
    `treehouse enter <slot>` is typed (the pool's subshell in the slot, the stand-in's child),
    then, with `agent`, the agent typed into that subshell. The pane's process."""
    wid = fleet.tmux.new_window(SESSION, f"fm-{task_id}", fleet.project, "bash --norc --noprofile")
    [pane] = fleet.tmux.pane_pids(wid)
    fleet.tracked.add(pane)
    root = fleet.root / "pool"
    line = f"TREEHOUSE_ROOT={root} {fleet.treehouse} enter {slot.parent.name}"
    fleet.tmux.run("send-keys", "-t", wid, line, "Enter")

    def under(name: str) -> list[psutil.Process]:
        out = []
        for p in psutil.Process(pane).children(recursive=True):
            try:
                if p.name() == name and p.cwd() == str(slot):
                    out.append(p)
            except psutil.Error:
                continue
        return out

    def wrapped() -> bool:
        kids = psutil.Process(pane).children()
        return any(k.name() == "treehouse" for k in kids) and bool(under("bash"))

    wait_for(wrapped, what=f"treehouse enter's shell in {slot}")
    if agent:
        fleet.tmux.run("send-keys", "-t", wid, f"{fleet.bin}/claude 100000", "Enter")
        wait_for(lambda: bool(under("claude")), what=f"the agent in {task_id}'s pane")
    fleet.tracked.update(p.pid for p in psutil.Process(pane).children(recursive=True))
    return pane


def spawned(fleet: Fleet, task_id: str, *, agent: bool = True, holder: str = "fm-") -> Path:
    """A task spawned as today's firstmate spawns it: the slot leased as `fm-<id>` (`holder`
    `""`: as `<id>`), a record with no lease key, the pane entered into the slot. The slot."""
    slot = lease_get(fleet, f"{holder}{task_id}")
    fleet.record(task_id, slot, extra={"mode": "no-mistakes", "yolo": "off"})
    assert "treehouse_lease" not in (fleet.state / f"{task_id}.meta").read_text()
    entered(fleet, task_id, slot, agent=agent)
    return slot


# -- the spawn's own lease, `treehouse enter` in the pane ---------------------------------------


@pytest.mark.parametrize("command", ["fm teardown", "fm-teardown"])
def test_a_task_spawned_as_todays_firstmate_spawns_is_torn_down(fleet: Fleet, command: str) -> None:
    slot = spawned(fleet, ID_T1)
    assert pool_entry(fleet, slot)["lease_holder"] == f"fm-{ID_T1}"
    if command == "fm teardown":
        code, doc = fleet.fm_json("teardown", ID_T1)
        assert code == 0, doc
        [pool] = [s for s in doc["steps"] if s["step"] == "pool"]
        assert f"--if-lease-holder fm-{ID_T1}" in pool["detail"], pool
    else:
        r = fm_teardown(fleet, ID_T1)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-2] == (
            f"teardown {ID_T1} complete (window {SESSION}:fm-{ID_T1}, worktree {slot})"
        )
    assert not (fleet.state / f"{ID_T1}.meta").exists()
    assert "leased" not in pool_entry(fleet, slot)  # the lease released by TASK's own return
    assert f"{SESSION}:fm-{ID_T1}" not in fleet.tmux.windows()


def test_the_spawns_lease_is_never_called_another_owners_work(fleet: Fleet) -> None:
    """TASK's own `fm-<id>` lease is no owner: a dry run of a task with unlanded work says
    only that the work is TASK's own (3), never a lease's live work to discard (4)."""
    slot = spawned(fleet, ID_T1, agent=False)
    (slot / "wip.txt").write_text("not landed\n")
    r = fleet.fm("teardown", ID_T1, "--dry-run")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "lease:" not in r.stdout + r.stderr
    assert "--discard-live-owner" not in r.stdout + r.stderr


def test_a_lease_in_the_tasks_name_under_another_id_is_not_called_someones_work(
    fleet: Fleet,
) -> None:
    """The record names one lease id, the pool holds another in the task's own name
    (`fm-<id>`): not provably this task's lease (4, nothing changed), but never worded as
    another owner's live work to destroy."""
    slot = fleet.slot(1, holder=f"fm-{ID_T1}", lease_id="b" * 32)
    fleet.task(ID_T1, slot, "dead", extra={"treehouse_lease": "a" * 32})
    before = state_hash(fleet.state)
    r = fleet.fm("teardown", ID_T1)
    assert r.returncode == 4, r.stdout + r.stderr
    assert f"held in {ID_T1}'s own name" in r.stderr, r.stderr
    assert "destroys" not in r.stderr and "live work" not in r.stderr, r.stderr
    assert state_hash(fleet.state) == before


def test_another_tasks_spawn_lease_is_that_task(fleet: Fleet) -> None:
    """A lease held as `fm-<other>` is the other task's claim: named by its id (a live task:
    4), never as an anonymous `lease:fm-<other>`."""
    slot = spawned(fleet, ID_T2)
    fleet.record(ID_T1, slot)
    before = state_hash(fleet.state)
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 4, doc
    assert [o["id"] for o in doc["owners"] if o["live"]] == [ID_T2]
    assert "lease:" not in json.dumps(doc)
    assert state_hash(fleet.state) == before


def test_a_pane_that_runs_treehouse_enter_is_read_through(fleet: Fleet) -> None:
    """The endpoint of a pane running `treehouse enter` is what runs under it: its shell
    alone is `dead` (the agent has left), the agent under it `alive`."""
    slot = spawned(fleet, ID_T1, agent=False, holder="")
    code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run")
    assert (code, doc["endpoint"]) == (0, "dead"), doc
    slot2 = spawned(fleet, ID_T2, agent=True, holder="")
    code, doc = fleet.fm_json("teardown", ID_T2, "--dry-run")
    assert (code, doc["endpoint"]) == (0, "alive"), doc
    assert slot != slot2


# -- the agy harness ----------------------------------------------------------------------------


@pytest.mark.parametrize(("config_var", "pointer"), [(True, True), (False, False)])
def test_the_agy_harness_files_go_with_the_task(
    fleet: Fleet, config_var: bool, pointer: bool
) -> None:
    """`.fm-agy-turnend` is the harness's (not work) and leaves the slot; the token and
    session sidecars go with the record; the token's auth entry under agy's config root
    (`FM_AGY_CONFIG_HOME`, else `~/.gemini/config`) is removed, and no other."""
    config = fleet.root / "agyconf" if config_var else fleet.home / ".gemini" / "config"
    entries = config / "plugins" / "fm-turn-end" / "fm-turn-end.d"
    entries.mkdir(parents=True)
    (entries / "tok-a1").write_text("")
    (entries / "someone-else").write_text("")
    env = fleet.env(**({"FM_AGY_CONFIG_HOME": str(config)} if config_var else {}))
    slot = fleet.slot(1, holder=ID_AGY)
    fleet.task(ID_AGY, slot, "dead", extra={"harness": "agy"})
    if pointer:
        (slot / ".fm-agy-turnend").write_text("pointer\n")  # untracked: the harness's, not work
    (fleet.state / f"{ID_AGY}.agy-turnend-token").write_text("tok-a1\n")
    (fleet.state / f"{ID_AGY}.agy-session").write_text("conversation=c1\n")
    code, doc = fleet.fm_json("teardown", ID_AGY, env=env)
    assert code == 0, doc
    assert not (slot / ".fm-agy-turnend").exists()
    assert not (fleet.state / f"{ID_AGY}.agy-turnend-token").exists()
    assert not (fleet.state / f"{ID_AGY}.agy-session").exists()
    assert not (entries / "tok-a1").exists() and (entries / "someone-else").exists()
    [auth] = [s for s in doc["steps"] if s["step"] == "auth"]
    assert auth["outcome"] == "done" and str(entries / "tok-a1") in auth["detail"]


# -- a secondmate on another host ---------------------------------------------------------------


def test_a_record_on_another_host_is_refused_as_firstmate_writes_it(fleet: Fleet) -> None:
    home = fleet.root / "far-home"
    home.mkdir()
    (fleet.state / f"{ID_FAR}.meta").write_text(
        "\n".join(
            [
                f"window=remote:{ID_FAR}",
                f"endpoint_task_id={ID_FAR}",
                f"worktree={home}",
                f"project={fleet.root / 'far-root'}",
                "harness=claude",
                "kind=secondmate",
                "mode=secondmate",
                "yolo=off",
                "tasktmp=",
                f"home={home}",
                "remote_host=build-box",
                f"remote_root={fleet.root / 'far-root'}",
            ]
        )
        + "\n"
    )
    before = state_hash(fleet.state)
    r = fleet.fm("teardown", ID_FAR)
    assert r.returncode == 5, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith("REFUSED:") and "remote_host=build-box" in first, r.stderr
    assert f"bin/fm-on.sh {ID_FAR} fm-remote-secondmate-control.sh retire {ID_FAR}" in r.stderr, (
        r.stderr
    )
    assert state_hash(fleet.state) == before
    d = fm_teardown(fleet, ID_FAR)
    assert d.returncode == 1 and d.stderr.startswith("REFUSED:") and "build-box" in d.stderr
    assert state_hash(fleet.state) == before


def test_a_record_on_another_host_touches_nothing_it_names_here(fleet: Fleet) -> None:
    """Even a record that names a real slot, a live window and an existing temp dir here is
    refused (5) once it names `remote_host=`: the window, the slot, the temp dir, the pool and
    the journal are left exactly as they were."""
    slot = fleet.slot(1, holder=ID_FAR)
    task = fleet.task(ID_FAR, slot, "alive", extra={"remote_host": "build-box"})
    tmp = fleet.make_tasktmp(ID_FAR)
    (tmp / "scratch").write_text("x\n")
    (slot / "wip.txt").write_text("work\n")
    files, pool = files_of(slot), (fleet.pool / "treehouse-state.json").read_bytes()
    before = state_hash(fleet.state)
    for args in (("teardown", ID_FAR), ("teardown", ID_FAR, "--force")):
        r = fleet.fm(*args)
        assert r.returncode == 5, r.stdout + r.stderr
        assert "build-box" in r.stderr.splitlines()[0]
    assert fm_teardown(fleet, ID_FAR, "--force").returncode == 1
    assert f"{SESSION}:fm-{ID_FAR}" in fleet.tmux.windows()
    assert all(psutil.pid_exists(p) for p in task.pids)
    assert files_of(slot) == files and (tmp / "scratch").exists()
    assert (fleet.pool / "treehouse-state.json").read_bytes() == pool
    assert fleet.treehouse_calls() == []
    assert state_hash(fleet.state) == before
    assert not (fleet.data / "teardown-log.jsonl").exists() or not [
        line
        for line in (fleet.data / "teardown-log.jsonl").read_text().splitlines()
        if json.loads(line).get("phase") == "intent"
    ]


# -- words ---------------------------------------------------------------------------------------


def test_the_spawns_holder_names_its_task() -> None:
    from fm_teardown.model.leases import holder_tasks, holders_of

    assert holders_of("t1") == ("t1", "fm-t1")
    assert holder_tasks("fm-t1") == ("fm-t1", "t1")
    assert holder_tasks("t1") == ("t1",)
    assert holder_tasks("fm-") == ("fm-",)
    assert holder_tasks("") == ()
    # firstmate's home tag, as its hometag library derives it.
    from fm_teardown.model.leaks import home_tag

    digest = hashlib.sha256(b"/srv/firstmate").hexdigest()[:8]
    assert home_tag(None, "/srv/firstmate") == f"firstmate-{digest}"
    assert home_tag(" sm1\n", "/srv/firstmate") == f"2ndmate-sm1-{digest}"
    assert home_tag("", "/srv/firstmate") == f"firstmate-{digest}"
