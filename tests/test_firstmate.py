"""firstmate's `bin/fm-teardown.sh` replaced for real (spec §10): `fm-teardown` driven as
firstmate's callers drive it, the slot claim, the teardown duties (hook files, branch, hook
auth entries, the cost-attribution row), the gate refusal. Adapted from the script's own
behavioural scenarios (docs/firstmate.md), on real tmux, git and processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet import Fleet, git, gone, tid, tree_hash, wait_for

ID_DONE = tid("done")
ID_LIVE = tid("live")
ID_MINE = tid("mine")
ID_NEW = tid("new")
ID_NEWER = tid("newer")
ID_NEWER_TASK = tid("newer-task")
ID_OLD = tid("old")
ID_OLDER = tid("older")
ID_OLDER_TASK = tid("older-task")
ID_OTHER = tid("other")
ID_T1 = tid("t1")
ID_T2 = tid("t2")


def fm_teardown(
    fleet: Fleet, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The drop-in, as firstmate's callers run it."""
    return subprocess.run(
        [sys.executable, "-m", "fm_teardown.commands.firstmate", *args],
        capture_output=True,
        text=True,
        cwd=cwd or fleet.fm_home,
        env=env or fleet.env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def first_error_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if not line.startswith("warning:"))


def success_line(task: str, fleet: Fleet, slot: Path) -> str:
    return f"teardown {task} complete (window firstmate:fm-{task}, worktree {slot})"


def claim(slot: Path, task: str, home: Path | str) -> Path:
    path = slot.parent / ".fm-slot-owner"
    path.write_text(f"task={task}\nhome={home}\n")
    return path


# -- the drop-in's argument shape and output ------------------------------------------------


def test_the_success_line_and_the_manual_backlog_reminder(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "alive")
    r = fm_teardown(fleet, ID_T1)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-2] == success_line(ID_T1, fleet, slot)
    assert lines[-1].startswith(
        f"Backlog: {ID_T1} just finished. Update data/backlog.md - move {ID_T1}"
    )
    assert not (fleet.state / f"{ID_T1}.meta").exists()
    lines = (fleet.data / "teardown-log.jsonl").read_text().splitlines()
    [entry] = [e for e in map(json.loads, lines) if e.get("phase") != "intent"]
    assert (entry["task"], entry["exit_code"]) == (ID_T1, 0)


def test_the_tasks_axi_reminder_names_the_last_pr(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead", extra={"pr": "https://x/pull/1"})
    with (fleet.state / f"{ID_T1}.meta").open("a") as f:
        f.write("pr=https://x/pull/2\n")
    stub = fleet.root / "axibin"
    stub.mkdir()
    (stub / "tasks-axi").write_text("#!/bin/sh\nexit 0\n")
    (stub / "tasks-axi").chmod(0o755)
    env = fleet.env(PATH=f"{stub}:{os.environ['PATH']}")
    r = fm_teardown(fleet, ID_T1, env=env)
    assert r.returncode == 0, r.stderr
    assert f"tasks-axi done {ID_T1} --pr https://x/pull/2" in r.stdout.splitlines()[-1]
    assert "tasks-axi ready" in r.stdout.splitlines()[-1]
    # A manual backend wins over tasks-axi on PATH.
    slot2 = fleet.slot(2, holder=ID_T2)
    fleet.task(ID_T2, slot2, "dead")
    (fleet.fm_home / "config").mkdir()
    (fleet.fm_home / "config" / "backlog-backend").write_text("manual\n")
    r = fm_teardown(fleet, ID_T2, env=env)
    assert f"Update data/backlog.md - move {ID_T2} to Done" in r.stdout.splitlines()[-1]


def test_argument_two_counts_only_when_it_is_exactly_force(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    (slot / "wip.txt").write_text("unlanded\n")
    r = fm_teardown(fleet, ID_T1, "--forcex", "extra")
    assert r.returncode == 1  # the script's code for every refusal
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert any("'--forcex'" in w for w in warnings) and any("'extra'" in w for w in warnings)
    assert first_error_line(r.stderr).startswith(f"REFUSED: {ID_T1}'s own work is not landed")
    r = fm_teardown(fleet, ID_T1, "--force")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2] == success_line(ID_T1, fleet, slot)


@pytest.mark.parametrize("args", [[], ["../x"], [".hidden"], ["a b"]])
def test_an_invalid_request_is_exit_2_with_the_scripts_words(fleet: Fleet, args: list[str]) -> None:
    r = fm_teardown(fleet, *args)
    assert r.returncode == 2
    assert r.stderr == "error: invalid teardown request\n"  # alone, as the script says it


def test_refusals_start_with_refused_and_errors_with_error(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_LIVE)
    fleet.task(ID_DONE, slot, "dead")
    live = fleet.task(ID_LIVE, slot, "alive", extra={"treehouse_lease_holder": ID_LIVE})
    before = fleet.snapshot(slot)
    for args in ([ID_DONE], [ID_DONE, "--force"]):
        r = fm_teardown(fleet, *args)
        assert r.returncode == 1  # the script's code for every refusal; `fm teardown` says 4
        assert first_error_line(r.stderr).startswith("REFUSED: ")
        assert ID_LIVE in first_error_line(r.stderr)
    assert fleet.snapshot(slot) == before and not any(gone(p) for p in live.pids)
    r = fm_teardown(fleet, "nosuch")
    assert r.returncode == 1 and first_error_line(r.stderr).startswith("error: no such task")
    assert fleet.fm("teardown", ID_DONE).returncode == 4
    # A step that fails (here: the record rewritten meanwhile, a relaunch) is `error:`, exit 1.
    slot2 = fleet.slot(2, holder=ID_T2)
    fleet.task(ID_T2, slot2, "dead")
    env = fleet.env(FM_TEST_FAULT=f"pause:after-pool:{fleet.root / 'p'}")
    (fleet.root / "p").touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fm_teardown.commands.firstmate", ID_T2],
        cwd=fleet.fm_home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    wait_for(lambda: (fleet.root / "p.reached").exists(), what="pause after the pool")
    with (fleet.state / f"{ID_T2}.meta").open("a") as f:
        f.write("spawn_gen=s9.9.relaunch\n")
    (fleet.root / "p").unlink()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert first_error_line(err).startswith(f"error: teardown {ID_T2} stopped: record:")


def test_processes_ended_in_the_slot_are_named_in_the_scripts_words(fleet: Fleet) -> None:
    task = tid("reap")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    leaked = fleet.spawn(["sleep", "100000"], slot)
    r = fm_teardown(fleet, task)
    assert r.returncode == 0, r.stderr
    [line] = [x for x in r.stderr.splitlines() if x.startswith("teardown: reaping leaked")]
    assert line.startswith(f"teardown: reaping leaked worktree process(es) for {task}: ")
    assert str(leaked.pid) in line.split(": ", 1)[1].split()
    wait_for(lambda: leaked.poll() is not None, what="the leaked process to end")
    # Nothing ended, nothing said.
    quiet = tid("quiet")
    slot2 = fleet.slot(2, holder=quiet)
    fleet.task(quiet, slot2, "missing")
    r = fm_teardown(fleet, quiet)
    assert r.returncode == 0, r.stderr
    assert "reaping leaked" not in r.stderr


def group_leader(fleet: Fleet, cwd: Path, *members: Path) -> subprocess.Popen[bytes]:
    """A `sleep` leading a process group of its own in `cwd`, and one more `sleep` of that
    group in each of `members` (started by the shell that becomes the leader)."""
    script = "".join(f"cd {m} && exec sleep 100000 & " for m in members)
    leader = fleet.spawn(["sh", "-c", f"{script}exec sleep 100000"], cwd, new_session=True)

    def sleeping_where() -> dict[str, int]:
        """cwd -> pid of each `sleep` of the group."""
        found = {}
        for d in os.listdir("/proc"):
            if d.isdigit() and _pgid(int(d)) == leader.pid and _comm(int(d)) == "sleep":
                found[_cwd(int(d)) or ""] = int(d)
        return found

    wanted = {str(cwd), *map(str, members)}
    wait_for(lambda: set(sleeping_where()) >= wanted, what="the process group")
    fleet.tracked.update(sleeping_where().values())
    return leader


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def test_a_process_group_ended_whole_is_named_in_the_scripts_words(fleet: Fleet) -> None:
    """A process in the slot leading a group whose every member works in the slot: the group
    is gone when the step is done, and the drop-in says so as the script did
    (`reaping leaked worktree process group for <id>: <pgid>`)."""
    task = tid("grp")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    (sub := slot / "sub").mkdir()
    leader = group_leader(fleet, slot, sub)
    r = fm_teardown(fleet, task)
    assert r.returncode == 0, r.stderr
    assert f"teardown: reaping leaked worktree process group for {task}: {leader.pid}\n" in (
        r.stderr
    )
    assert leader.wait(timeout=10) != 0
    with pytest.raises(ProcessLookupError):
        os.killpg(leader.pid, 0)


def test_a_group_with_a_member_outside_the_slot_is_not_said_reaped(fleet: Fleet) -> None:
    """The same leader, but a member of its group works outside the slot: fm ends only what
    is in the slot, so the group lives on and no group line is said."""
    task = tid("grpout")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    (outside := fleet.root / "elsewhere").mkdir()
    leader = group_leader(fleet, slot, outside)
    r = fm_teardown(fleet, task)
    assert r.returncode == 0, r.stderr
    assert f"teardown: reaping leaked worktree process(es) for {task}: {leader.pid}\n" in (r.stderr)
    assert "process group" not in r.stderr
    os.killpg(leader.pid, 0)  # the member outside runs on
    os.killpg(leader.pid, 9)


def test_fm_home_falls_back_to_fm_root_override(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    env = fleet.env(FM_ROOT_OVERRIDE=str(fleet.fm_home))
    del env["FM_HOME"]
    for cmd in (
        [sys.executable, "-m", "fm_teardown", "teardown", ID_T1, "--dry-run"],
        [sys.executable, "-m", "fm_teardown.commands.firstmate", ID_T1],
    ):
        r = subprocess.run(cmd, capture_output=True, text=True, cwd="/", env=env, check=False)
        assert r.returncode == 0, r.stderr


def test_the_console_script_is_installed() -> None:
    import shutil

    assert shutil.which("fm-teardown"), "pip install -e '.[dev]' installs fm-teardown"


# -- the gate refusal ---------------------------------------------------------------------------


def test_a_gate_agent_must_not_drive_the_fleet(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    t1 = fleet.task(ID_T1, slot, "alive")
    before = fleet.snapshot(slot)
    r = fm_teardown(fleet, ID_T1, env=fleet.env(NO_MISTAKES_GATE="1"))
    assert r.returncode == 3  # the script's code for the gate refusal; `fm teardown` says 5
    assert first_error_line(r.stderr) == (
        "error: no-mistakes gate agent must not drive the fleet (NO_MISTAKES_GATE set)"
    )
    r = fleet.fm("teardown", ID_T1, env=fleet.env(NO_MISTAKES_GATE=""))
    assert r.returncode == 5 and r.stderr.startswith("error: no-mistakes gate agent")
    gate = fleet.root / ".no-mistakes" / "repos" / "project.git"
    gate.mkdir(parents=True)
    r = fm_teardown(fleet, ID_T1, cwd=gate)
    assert r.returncode == 3
    assert first_error_line(r.stderr).startswith("error: no-mistakes gate agent must not drive")
    assert "inside a no-mistakes gate worktree" in first_error_line(r.stderr)
    assert fleet.snapshot(slot) == before and not any(gone(p) for p in t1.pids)
    # A dry run says what the real run would (spec §15.9); the bypass lifts it for both.
    assert (
        fleet.fm("teardown", ID_T1, "--dry-run", env=fleet.env(NO_MISTAKES_GATE="1")).returncode
        == 5
    )
    env = fleet.env(NO_MISTAKES_GATE="1", FM_GATE_REFUSE_BYPASS="1")
    assert fleet.fm("teardown", ID_T1, "--dry-run", env=env).returncode == 0
    assert fm_teardown(fleet, ID_T1, env=env).returncode == 0


# -- the slot claim -----------------------------------------------------------------------------


def test_a_claim_naming_a_live_task_of_another_home_is_a_live_owner(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_OLD)
    fleet.task(ID_OLD, slot, "dead")
    other_home = fleet.root / "second"
    (other_home / "state").mkdir(parents=True)
    (other_home / "state" / f"{ID_NEW}.meta").write_text(
        f"window=firstmate:fm-{ID_NEW}\nworktree={slot}\nproject={fleet.project}\n"
    )
    pids = fleet.endpoint(ID_NEW, slot, "alive")
    claim(slot, ID_NEW, other_home)
    before = fleet.snapshot(slot)
    r = fleet.fm("teardown", ID_OLD, "--json")
    doc = json.loads(r.stdout)
    assert (r.returncode, [o["id"] for o in doc["owners"] if o["live"]]) == (4, [ID_NEW])
    assert fleet.snapshot(slot) == before and not any(gone(p) for p in pids)


@pytest.mark.parametrize("force", [False, True])
def test_a_claim_naming_another_task_not_live_makes_the_slot_stale(
    fleet: Fleet, force: bool
) -> None:
    """The incident's shape: a clean, landed ship whose slot was reassigned."""
    slot = fleet.slot(1, holder=ID_OLD)
    fleet.task(ID_OLD, slot, "dead", extra={"treehouse_lease_holder": ID_OLD})
    path = claim(slot, ID_NEWER, "/elsewhere/home")
    (slot / "newer-work.txt").write_text("in progress\n")
    tree, pool_before = tree_hash(slot), (fleet.pool / "treehouse-state.json").read_bytes()
    r = fm_teardown(fleet, ID_OLD, *(["--force"] if force else []))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2] == success_line(ID_OLD, fleet, slot)
    warning = next(w for w in r.stderr.splitlines() if "reassigned" in w)
    assert ID_NEWER in warning and "/elsewhere/home" in warning
    assert (
        not (fleet.state / f"{ID_OLD}.meta").exists()
        and f"firstmate:fm-{ID_OLD}" not in fleet.tmux.windows()
    )
    assert (
        tree_hash(slot) == tree and path.read_text() == f"task={ID_NEWER}\nhome=/elsewhere/home\n"
    )
    assert (fleet.pool / "treehouse-state.json").read_bytes() == pool_before
    assert fleet.treehouse_calls() == []


def test_an_unreadable_claim_refuses_naming_it(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    path = slot.parent / ".fm-slot-owner"
    path.write_text("owner: who knows\n")
    before = fleet.snapshot(slot)
    r = fm_teardown(fleet, ID_T1)
    assert r.returncode == 1
    assert first_error_line(r.stderr).startswith(f"REFUSED: the slot claim {path}")
    assert fleet.snapshot(slot) == before
    path.unlink()
    path.symlink_to("/etc/passwd")
    assert fm_teardown(fleet, ID_T1).returncode == 1
    assert fleet.fm("teardown", ID_T1).returncode == 5


def test_the_tasks_own_claim_is_returned_normally_and_removed(fleet: Fleet) -> None:
    slot = fleet.slot(1, leased=False)
    # Its own claim makes it the current owner even though `other` is a newer launch.
    fleet.task(ID_MINE, slot, "dead", extra={"spawn_gen": "s100.1.a"})
    fleet.record(ID_OTHER, slot, extra={"spawn_gen": "s900.1.b"})
    path = claim(slot, ID_MINE, fleet.fm_home)
    code, doc = fleet.fm_json("teardown", ID_MINE)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert ("claim", "done") in [(s["step"], s["outcome"]) for s in doc["steps"]]
    assert not path.exists()
    # Unleased, clean and merged: the pool hands it out as it is, no return is called.
    assert ("pool", "skipped") in [(s["step"], s["outcome"]) for s in doc["steps"]]
    assert [c["argv"][0] for c in fleet.treehouse_calls()] == []


def test_a_superseded_duplicate_record_retires_only_itself(fleet: Fleet) -> None:
    """The script's attribution case: the older of two records on one slot, its endpoint dead."""
    slot = fleet.slot(1, leased=False)
    fleet.task(ID_OLDER_TASK, slot, "dead", extra={"spawn_gen": "s100.1.a"})
    newer = fleet.task(ID_NEWER_TASK, slot, "alive", extra={"spawn_gen": "s200.1.b"})
    tree = tree_hash(slot)
    # newer-task is live: the older one is refused (4) by it, naming it ...
    r = fm_teardown(fleet, ID_OLDER_TASK)
    assert r.returncode == 1 and ID_NEWER_TASK in first_error_line(r.stderr)
    # ... and once it is done (its agent gone, its shell left), the older record retires alone.
    fleet.tmux.run("respawn-pane", "-k", "-t", f"=firstmate:=fm-{ID_NEWER_TASK}", "bash --norc")
    r = fm_teardown(fleet, ID_OLDER_TASK)
    assert r.returncode == 0, r.stderr
    assert any(ID_NEWER_TASK in w for w in r.stderr.splitlines() if w.startswith("warning:"))
    assert f"firstmate:fm-{ID_NEWER_TASK}" in fleet.tmux.windows()
    assert f"firstmate:fm-{ID_OLDER_TASK}" not in fleet.tmux.windows()
    assert (fleet.state / f"{ID_NEWER_TASK}.meta").exists() and tree_hash(slot) == tree
    assert fleet.treehouse_calls() == []
    assert newer.pids


# -- the teardown duties ------------------------------------------------------------------------


def test_hook_files_leave_the_slot_before_the_return(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    # Ignored by git, so the pool's clean would keep them: only the hooks step removes them.
    exclude = Path(git(slot, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    (exclude / "info").mkdir(exist_ok=True)
    (exclude / "info" / "exclude").write_text(".claude/\n.fm-grok-turnend\n.opencode\n")
    (slot / ".claude").mkdir()
    (slot / ".claude" / "settings.local.json").write_text("{}\n")
    (slot / ".fm-grok-turnend").write_text("x\n")
    outside = fleet.root / "outside-plugins"
    (outside / "plugins").mkdir(parents=True)
    (outside / "plugins" / "fm-turn-end.js").write_text("keep me\n")
    (slot / ".opencode").symlink_to(outside)  # a parent that is a symlink: never followed
    fleet.task(ID_T1, slot, "dead")
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0, doc
    assert not (slot / ".claude" / "settings.local.json").exists()
    assert not (slot / ".fm-grok-turnend").exists()
    assert (outside / "plugins" / "fm-turn-end.js").read_text() == "keep me\n"
    [hooks] = [s for s in doc["steps"] if s["step"] == "hooks"]
    assert hooks["outcome"] == "done" and "symlink" in hooks["detail"]


def test_a_stale_slot_keeps_its_hook_files(fleet: Fleet) -> None:
    slot = fleet.slot(1, leased=False)
    fleet.task(ID_OLDER, slot, "dead", extra={"spawn_gen": "s100.1.a"})
    fleet.record(ID_NEWER, slot, extra={"spawn_gen": "s200.1.b"})
    (slot / ".fm-kimi-turnend").write_text("newer's hook\n")
    assert fleet.fm("teardown", ID_OLDER).returncode == 0
    assert (slot / ".fm-kimi-turnend").read_text() == "newer's hook\n"


def test_hook_auth_entries_go_for_proceed_and_stale(fleet: Fleet) -> None:
    grok = fleet.root / "grokhome"
    entries = {
        "grok": grok / "hooks" / "fm-turn-end.d",
        "kimi": fleet.home / ".kimi-code" / "fm-turn-end.d",
    }
    for d in entries.values():
        d.mkdir(parents=True)
    env = fleet.env(GROK_HOME=str(grok))
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    (fleet.state / f"{ID_T1}.grok-turnend-token").write_text("tok-g1\n")
    (fleet.state / f"{ID_T1}.kimi-turnend-token").write_text("tok-k1\n")
    (entries["grok"] / "tok-g1").write_text("")
    (entries["kimi"] / "tok-k1").write_text("")
    (entries["grok"] / "keep").write_text("")
    r = fm_teardown(fleet, ID_T1, env=env)
    assert r.returncode == 0, r.stderr
    assert not (entries["grok"] / "tok-g1").exists() and not (entries["kimi"] / "tok-k1").exists()
    assert (entries["grok"] / "keep").exists()
    # A stale slot clears them too; a token that is not a plain name is ignored, loudly.
    s2 = fleet.slot(2, leased=False)
    fleet.task(ID_OLD, s2, "dead", extra={"spawn_gen": "s1.1.a"})
    fleet.record(ID_NEW, s2, extra={"spawn_gen": "s2.1.b"})
    (fleet.state / f"{ID_OLD}.grok-turnend-token").write_text("../keep\n")
    (fleet.state / f"{ID_OLD}.kimi-turnend-token").write_text("tok-k2\n")
    (entries["kimi"] / "tok-k2").symlink_to(entries["grok"] / "keep")  # only the link goes
    r = fm_teardown(fleet, ID_OLD, env=env)
    assert r.returncode == 0, r.stderr
    assert (entries["grok"] / "keep").exists() and not os.path.lexists(entries["kimi"] / "tok-k2")
    assert any("no usable token" in line for line in r.stderr.splitlines())


def test_the_attribution_row_keeps_the_legacy_file_and_adds_one_header(fleet: Fleet) -> None:
    """Reference scenario 36."""
    legacy = b"task\tnotes\nold-1\tsomething\nold-2\tno final newline"
    (fleet.data / "cost-attribution.tsv").write_bytes(legacy)
    slot = fleet.slot(1, holder=ID_T1)
    fleet.record(
        ID_T1,
        slot,
        lines=[
            f"window=firstmate:fm-{ID_T1}",
            f"worktree={slot}",
            f"project={fleet.project}",
            "harness=claude",
            "effort=hi\tgh",
            "started_at=2026-11-30T10:00:00Z",
        ],
    )
    assert fleet.fm("teardown", ID_T1).returncode == 0
    s2 = fleet.slot(2, holder=ID_T2)
    fleet.task(ID_T2, s2, "dead")
    assert fleet.fm("teardown", ID_T2).returncode == 0
    data = (fleet.data / "cost-attribution.tsv").read_bytes()
    assert data.startswith(legacy + b"\n")
    rest = data[len(legacy) + 1 :].decode().splitlines()
    assert rest[0] == "# schema=firstmate-effort-attribution-v2"
    assert rest[1] == "task\tworktree\tharness\tmodel\teffort\tkind\tproject\tstarted_at\tended_at"
    row1, row2 = rest[2].split("\t"), rest[3].split("\t")
    assert len(rest) == 4 and len(row1) == 9 and len(row2) == 9
    assert row1[:8] == [ID_T1, str(slot), "claude", "default", "hi\\tgh", "ship",
                        str(fleet.project), "2026-11-30T10:00:00Z"]  # fmt: skip
    assert row2[0] == ID_T2 and row2[2] == "claude" and row2[3] == "default"
    assert row1[8].endswith("Z") and len(row1[8]) == 20


def test_a_rerun_after_a_crash_does_not_count_the_task_twice(fleet: Fleet) -> None:
    # Killed after the row went in but before the record was removed: the re-run finishes
    # the teardown and finds this record's row already there. A later task that reuses the
    # id is another run (another start) and gets its own row.
    rows = fleet.data / "cost-attribution.tsv"
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead", extra={"started_at": "2026-11-30T10:00:00Z"})
    r = fleet.fm("teardown", ID_T1, env=fleet.env(FM_TEST_FAULT="crash:before-meta"))
    assert r.returncode == -9 and (fleet.state / f"{ID_T1}.meta").exists()
    assert [ln.split("\t")[0] for ln in rows.read_text().splitlines()[2:]] == [ID_T1]
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0 and not (fleet.state / f"{ID_T1}.meta").exists(), doc
    attribution = [s for s in doc["steps"] if s["step"] == "attribution"]
    assert attribution[0]["outcome"] == "done" and "already" in attribution[0]["detail"]
    assert [ln.split("\t")[7] for ln in rows.read_text().splitlines()[2:]] == [
        "2026-11-30T10:00:00Z"
    ]
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead", extra={"started_at": "2026-12-01T09:00:00Z"})
    assert fleet.fm("teardown", ID_T1).returncode == 0
    assert [ln.split("\t")[7] for ln in rows.read_text().splitlines()[2:]] == [
        "2026-11-30T10:00:00Z",
        "2026-12-01T09:00:00Z",
    ]


def test_an_attribution_that_cannot_be_written_only_warns(fleet: Fleet) -> None:
    """Reference scenario 37."""
    blocker = fleet.root / "data-is-a-file"
    blocker.write_text("")
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    r = fm_teardown(fleet, ID_T1, env=fleet.env(FM_DATA_OVERRIDE=str(blocker)))
    assert r.returncode == 0, r.stderr
    assert (
        f"warning: could not append AI effort attribution for task {ID_T1}; teardown will continue"
        in r.stderr.splitlines()
    )
    assert not (fleet.state / f"{ID_T1}.meta").exists()


def test_the_tasks_branch_is_deleted_after_the_return(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    git(slot, "checkout", "-q", "-b", f"fm/{ID_T1}")
    (slot / "feature.txt").write_text("done\n")
    git(slot, "add", "feature.txt")
    git(slot, "commit", "-q", "-m", "feature")
    git(slot, "push", "-q", "origin", f"fm/{ID_T1}")
    fleet.task(ID_T1, slot, "dead")
    code, doc = fleet.fm_json("teardown", ID_T1)
    assert code == 0, doc
    assert ("branch", "done") in [(s["step"], s["outcome"]) for s in doc["steps"]]
    assert git(fleet.project, "branch", "--list", f"fm/{ID_T1}") == ""
    assert git(fleet.project, "branch", "--list", "main").strip().endswith("main")


def test_a_branch_that_moved_or_is_checked_out_elsewhere_is_kept(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    git(slot, "checkout", "-q", "-b", f"fm/{ID_T1}")
    fleet.task(ID_T1, slot, "dead")
    other = fleet.root / "other-wt"
    proc, pause = fleet.fm_paused("after-pool", ID_T1)
    # The pool's reset detached the slot; now someone checks fm/t1 out elsewhere.
    git(fleet.project, "worktree", "add", "-q", str(other), f"fm/{ID_T1}")
    pause.unlink()
    out, _ = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert (proc.returncode, doc["verdict"]) == (0, "proceed")
    [branch] = [s for s in doc["steps"] if s["step"] == "branch"]
    assert branch["outcome"] == "skipped" and "checked out" in branch["detail"]
    assert git(fleet.project, "branch", "--list", f"fm/{ID_T1}").strip().endswith(f"fm/{ID_T1}")


# -- a standalone clone recorded as the worktree ------------------------------------------------


def test_a_standalone_clone_as_the_worktree_is_refused_and_its_lock_kept(fleet: Fleet) -> None:
    """A slot whose `.git` is a directory is a repository of its own, not a pool worktree of
    the project: the pool's reset there would act on a tree no pool owns, so fm refuses it
    (the script cleared a stale lock and went on), whatever the pool state file claims."""
    task = tid("clone")
    path = fleet.pool / "7" / "project"
    path.parent.mkdir(parents=True)
    git(fleet.root, "clone", "-q", str(fleet.origin), str(path))
    slot = fleet.slot(7, holder=task)
    assert slot == path
    lock = path / ".git" / "index.lock"
    lock.write_text("")
    os.utime(lock, (0, 0))  # old enough to be provably stale by age
    fleet.task(task, slot, "dead")
    before = fleet.snapshot(slot)
    r = fm_teardown(fleet, task)
    assert r.returncode == 1
    first = first_error_line(r.stderr)
    assert first.startswith("REFUSED: ") and ".git is a directory, a repository of its own" in first
    assert fleet.fm("teardown", task).returncode == 5
    assert lock.exists() and fleet.snapshot(slot) == before and fleet.treehouse_calls() == []
