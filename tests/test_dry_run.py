"""Dry runs against a real fleet: real tmux on a private socket, real git slots laid out as a
treehouse pool, real processes. Each test asserts what the operator sees (exit code, verdict,
named owners) and that nothing changed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.fleet import Fleet, tid

ID_BAD = tid("bad")
ID_DONE = tid("done")
ID_LIVE = tid("live")
ID_NEWER = tid("newer")
ID_OLDER = tid("older")
ID_OTHER = tid("other")
ID_SOLO = tid("solo")
ID_T1 = tid("t1")
ID_T10 = tid("t10")
ID_T2 = tid("t2")


def dry(
    fleet: Fleet, task: str, *flags: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    return fleet.fm_json("teardown", task, "--dry-run", *flags, env=env)


def owner_ids(doc: dict[str, Any]) -> list[str]:
    return [o["id"] for o in doc["owners"] if o["live"]]


RECORD = ["auth", "attribution", "record"]  # the record's duties go with it (spec §10)
FULL = ["endpoint", "processes", "hooks", "pool", *RECORD]


def steps(doc: dict[str, Any]) -> list[str]:
    return [s["step"] for s in doc["steps"]]


@pytest.fixture
def shared(fleet: Fleet) -> tuple[Fleet, Path]:
    """Slot 1 leased to `done`, whose record and dead pane remain; `live` now runs in it."""
    slot = fleet.slot(1, holder=ID_LIVE)
    fleet.task(ID_DONE, slot, "dead")
    fleet.task(ID_LIVE, slot, "alive", extra={"treehouse_lease_holder": ID_LIVE})
    fleet.spawn(["sleep", "100000"], slot)  # a non-agent worker in the tree
    return fleet, slot


def test_live_other_owner_refuses_and_is_named(shared: tuple[Fleet, Path]) -> None:
    fleet, slot = shared
    before = fleet.snapshot(slot)
    r = fleet.fm("teardown", ID_DONE, "--dry-run")
    assert r.returncode == 4
    assert ID_LIVE in r.stderr and "REFUSED" in r.stderr
    code, doc = dry(fleet, ID_DONE)
    assert (code, doc["verdict"], doc["exit_code"]) == (4, "live-owner", 4)
    assert owner_ids(doc) == [ID_LIVE]
    assert doc["steps"] == []
    assert fleet.snapshot(slot) == before


def test_force_alone_refuses(shared: tuple[Fleet, Path]) -> None:
    fleet, slot = shared
    before = fleet.snapshot(slot)
    code, doc = dry(fleet, ID_DONE, "--force")
    assert (code, doc["verdict"]) == (4, "live-owner")
    assert any("--force does not lift" in h for h in doc["hints"])
    assert fleet.snapshot(slot) == before


def test_force_with_matching_discard_proceeds(shared: tuple[Fleet, Path]) -> None:
    fleet, slot = shared
    before = fleet.snapshot(slot)
    code, doc = dry(fleet, ID_DONE, "--force", f"--discard-live-owner={ID_LIVE}")
    assert (code, doc["verdict"]) == (0, "proceed")
    assert steps(doc) == FULL
    assert any(f"{ID_LIVE}'s record is kept" in w for w in doc["warnings"])
    assert fleet.snapshot(slot) == before


def test_mismatched_discard_refuses(shared: tuple[Fleet, Path]) -> None:
    fleet, _ = shared
    code, doc = dry(fleet, ID_DONE, "--force", f"--discard-live-owner={ID_OTHER}")
    assert (code, doc["verdict"]) == (4, "live-owner")
    assert owner_ids(doc) == [ID_LIVE]


def test_discard_without_force_refuses(shared: tuple[Fleet, Path]) -> None:
    fleet, _ = shared
    code, doc = dry(fleet, ID_DONE, f"--discard-live-owner={ID_LIVE}")
    assert (code, doc["verdict"]) == (4, "live-owner")
    assert any("together with --force" in h for h in doc["hints"])


@pytest.mark.parametrize("other_state", ["dead", "missing"])
def test_non_live_other_claim_is_stale(fleet: Fleet, other_state: str) -> None:
    # No lease on the slot: a lease would be a live owner (or make its holder current).
    slot = fleet.slot(1, leased=False)
    fleet.task(ID_OLDER, slot, "dead", extra={"spawn_gen": "s1000.1.a"})
    fleet.task(ID_NEWER, slot, other_state, extra={"spawn_gen": "s2000.1.b"})
    before = fleet.snapshot(slot)
    code, doc = dry(fleet, ID_OLDER)
    assert (code, doc["verdict"]) == (0, "stale")
    assert steps(doc) == ["endpoint", *RECORD]
    # The promise: a warning that says the slot is stale for `older`, names `newer` as the
    # task it belongs to now, and says the tree is left alone.
    [warning] = [w for w in doc["warnings"] if "stale" in w]
    assert f"is stale for {ID_OLDER}: it belongs to {ID_NEWER}" in warning
    assert "the tree, its processes and the pool slot are left alone" in warning
    assert fleet.snapshot(slot) == before


def test_own_live_pane_proceeds(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_SOLO)
    fleet.task(ID_SOLO, slot, "alive")
    before = fleet.snapshot(slot)
    code, doc = dry(fleet, ID_SOLO)
    assert (code, doc["verdict"], doc["endpoint"]) == (0, "proceed", "alive")
    assert steps(doc) == FULL
    pool = doc["steps"][3]
    assert pool["target"] == str(slot)
    assert f"--if-lease-id {1:032x}" in pool["detail"]
    assert fleet.snapshot(slot) == before


def test_symlinked_alias_of_the_slot_is_the_same_slot(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_LIVE)
    alias = fleet.root / "alias"
    os.symlink(slot.parent, alias)
    fleet.task(ID_DONE, alias / "project" / ".." / "project", "dead")
    fleet.task(ID_LIVE, slot, "alive")
    code, doc = dry(fleet, ID_DONE)
    assert (code, owner_ids(doc)) == (4, [ID_LIVE])
    assert doc["slot"] == str(slot)


def test_prefix_slot_is_not_the_same_slot(fleet: Fleet) -> None:
    """`/pool/1` is not inside `/pool/10`: a live task in slot 10 does not own slot 1."""
    s1 = fleet.slot(1, holder=ID_T1)
    for n in range(2, 11):
        fleet.slot(n, leased=False)
    s10 = fleet.slot(10, holder=ID_T10)
    fleet.task(ID_T1, s1, "dead")
    fleet.task(ID_T10, s10, "alive")
    code, doc = dry(fleet, ID_T1)
    assert (code, doc["verdict"], owner_ids(doc)) == (0, "proceed", [])


def test_unattributed_agent_in_a_shared_slot_is_a_live_owner(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_OLDER)
    fleet.task(ID_OLDER, slot, "dead", extra={"spawn_gen": "s1.1.a"})
    fleet.task(ID_OTHER, slot, "missing", extra={"spawn_gen": "s2.1.a"})
    worker = fleet.agent_in(slot)
    code, doc = dry(fleet, ID_OLDER)
    assert (code, owner_ids(doc)) == (4, [f"pid:{worker.pid}"])


def test_leftover_agent_of_the_sole_claimant_is_not_an_owner(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_SOLO)
    fleet.task(ID_SOLO, slot, "dead")
    worker = fleet.agent_in(slot)
    code, doc = dry(fleet, ID_SOLO)
    assert (code, doc["verdict"]) == (0, "proceed")
    assert str(worker.pid) in doc["steps"][1]["detail"]


def test_foreign_lease_is_a_live_owner(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder="automation-A")
    fleet.task(ID_T1, slot, "dead")
    code, doc = dry(fleet, ID_T1)
    assert (code, owner_ids(doc)) == (4, ["lease:automation-A"])
    code, doc = dry(fleet, ID_T1, "--force", "--discard-live-owner=lease:automation-A")
    assert (code, doc["verdict"]) == (0, "proceed")


def test_unreadable_inventory_fails_closed(fleet: Fleet) -> None:
    """A tmux that cannot be read makes every other claimant `unreadable`, hence live."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    fleet.task(ID_T2, slot, "dead", extra={"spawn_gen": "s9.1.a"})
    fake = fleet.root / "faketmux"
    fake.mkdir()
    (fake / "tmux").write_text("#!/bin/sh\necho 'lost server' >&2\nexit 1\n")
    (fake / "tmux").chmod(0o755)
    env = fleet.env(PATH=f"{fake}:{os.environ['PATH']}")
    code, doc = fleet.fm_json("teardown", ID_T1, "--dry-run", env=env)
    # spec §14.3: TASK's own window cannot be confirmed gone: refused on the inventory itself.
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    assert "lost server" in doc["hints"][0] and "FM_TMUX_SOCKET" in doc["hints"][0]


def test_no_tmux_server_on_the_named_socket_is_a_gone_server(fleet: Fleet) -> None:
    """spec §15.3: FM_TMUX_SOCKET names a socket where no server answers (the fleet's server
    ended, its file left behind), and no other server of the user holds any record's window:
    the fleet's server is gone, every endpoint `missing`, and the teardown goes on."""
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    fleet.task(ID_T2, slot, "dead", extra={"spawn_gen": "s9.1.a"})
    fleet.tmux.stop()  # the socket file stays behind: no server answers there
    code, doc = dry(fleet, ID_T1)
    assert (code, doc["verdict"], doc["endpoint"]) == (0, "proceed", "missing"), doc


def test_lease_of_a_dead_other_task_makes_the_slot_stale(fleet: Fleet) -> None:
    """spec §7a: a lease held by another task is its claim; that task is not live (dead pane), so
    the pool says the slot is its: stale for `older`, whatever the launch order."""
    slot = fleet.slot(1, holder=ID_NEWER)
    fleet.task(ID_OLDER, slot, "dead", extra={"spawn_gen": "s900.1.a"})
    fleet.task(ID_NEWER, slot, "dead", extra={"spawn_gen": "s100.1.a"})
    code, doc = dry(fleet, ID_OLDER)
    assert (code, doc["verdict"], owner_ids(doc)) == (0, "stale", [])
    assert any(ID_NEWER in w for w in doc["warnings"])
    # older's dead shell in the slot is no owner, and fm never signals it.
    code, doc = dry(fleet, ID_NEWER)
    assert (code, doc["verdict"]) == (0, "proceed")
    processes = next(s for s in doc["steps"] if s["step"] == "processes")
    assert f"{ID_OLDER}'s endpoint" in processes["detail"]


def test_socket_path_that_does_not_exist_is_unreadable(fleet: Fleet) -> None:
    """spec §7a: a wrong FM_TMUX_SOCKET must not make every other task look not live."""
    slot = fleet.slot(1, leased=False)
    fleet.task(ID_T1, slot, "dead", extra={"spawn_gen": "s1.1.a"})
    fleet.task(ID_T2, slot, "alive", extra={"spawn_gen": "s2.1.a"})
    for wrong in (str(fleet.root / "no-such-socket"), "/etc/passwd"):
        code, doc = dry(fleet, ID_T1, env=fleet.env(FM_TMUX_SOCKET=wrong))
        # spec §14.3: refused on the inventory itself, the hint naming the variable.
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        assert f"FM_TMUX_SOCKET={wrong}" in doc["hints"][0]


def test_invalid_other_record_claiming_the_slot_refuses(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    fleet.record(ID_BAD, slot, lines=[f"worktree={slot}", f"window=firstmate:fm-{ID_OTHER}"])
    code, doc = dry(fleet, ID_T1)
    assert (code, doc["verdict"]) == (5, "unsafe")
    assert ID_BAD in doc["reasons"][0]
    # The audit reports it and still exits 0.
    r = fleet.fm("teardown", "--dry-run")
    assert r.returncode == 0 and ID_BAD in r.stdout


def test_slot_equal_to_the_project_refuses(fleet: Fleet) -> None:
    fleet.task(ID_T1, fleet.project, "dead")
    code, doc = dry(fleet, ID_T1)
    assert (code, doc["verdict"]) == (5, "unsafe")


def test_unmanaged_slot_and_missing_treehouse_refuse(fleet: Fleet) -> None:
    slot = fleet.slot(1, managed=False)
    fleet.task(ID_T1, slot, "dead")
    assert dry(fleet, ID_T1)[0] == 5
    slot2 = fleet.slot(2, holder=ID_T2)
    fleet.task(ID_T2, slot2, "dead")
    env = fleet.env(FM_TREEHOUSE_BIN="", PATH="/usr/bin:/bin")
    code, doc = fleet.fm_json("teardown", ID_T2, "--dry-run", env=env)
    assert (code, doc["verdict"]) == (5, "unsafe")
    assert "treehouse" in doc["reasons"][0]


def test_missing_slot_directory_plans_endpoint_and_record(fleet: Fleet) -> None:
    fleet.task(ID_T1, fleet.root / "pool" / "gone" / "9" / "project", "dead")
    code, doc = dry(fleet, ID_T1)
    assert (code, steps(doc)) == (0, ["endpoint", *RECORD])


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["teardown"], 2),
        (["teardown", "../x", "--dry-run"], 2),
        (["teardown", ".hidden", "--dry-run"], 2),
        (["teardown", "nosuch", "--dry-run"], 2),
        (["teardown", "--bogus"], 2),
    ],
)
def test_invalid_requests_exit_2_without_traceback(
    fleet: Fleet, args: list[str], code: int
) -> None:
    r = fleet.fm(*args)
    assert r.returncode == code
    assert "Traceback" not in r.stderr
    assert r.stderr.strip() != ""


def test_fleet_audit(fleet: Fleet) -> None:
    s1 = fleet.slot(1, holder=ID_LIVE)
    s2 = fleet.slot(2, holder=ID_SOLO)
    fleet.task(ID_DONE, s1, "dead")
    fleet.task(ID_LIVE, s1, "alive")
    fleet.task(ID_SOLO, s2, "missing")
    before = fleet.snapshot(s1, s2)
    code, doc = fleet.fm_json("teardown", "--dry-run")
    assert code == 0 and doc["audit"] is True and doc["schema"] == "fm-teardown/1"
    rows = {t["task"]: t for t in doc["tasks"]}
    assert rows[ID_DONE]["verdict"] == "live-owner" and rows[ID_DONE]["exit_code"] == 4
    assert rows[ID_SOLO]["verdict"] == "proceed" and rows[ID_SOLO]["endpoint"] == "missing"
    assert rows[ID_LIVE]["endpoint"] == "alive"
    assert doc["shared_slots"] == [{"slot": str(s1), "tasks": [ID_DONE, ID_LIVE]}]
    assert fleet.snapshot(s1, s2) == before


def test_json_is_exactly_one_object(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_T1)
    fleet.task(ID_T1, slot, "dead")
    r = fleet.fm("teardown", ID_T1, "--dry-run", "--json")
    assert r.stdout.count("\n") == 1
    r = fleet.fm("teardown", "../bad", "--dry-run", "--json")
    assert r.returncode == 2 and r.stdout.count("\n") == 1


def test_live_owner_reservation_of_an_interactive_get_is_a_live_owner(fleet: Fleet) -> None:
    """An unleased slot reserved by a live interactive `treehouse get` belongs to that process;
    a reservation whose process is gone (or whose start time differs) does not count."""
    import psutil

    slot = fleet.slot(1, leased=False)
    fleet.task(ID_T1, slot, "dead")
    holder = fleet.spawn(["sleep", "100000"], fleet.root)
    started_ms = int(psutil.Process(holder.pid).create_time()) * 1000

    def reserve(pid: int, started: int) -> None:
        entry = next(e for e in fleet.entries if e["path"] == str(slot))
        entry.update(owner_pid=pid, owner_started_at=started)
        fleet.write_pool()

    reserve(holder.pid, started_ms)
    code, doc = dry(fleet, ID_T1)
    assert (code, owner_ids(doc)) == (4, [f"pid:{holder.pid}"])
    reserve(holder.pid, started_ms - 60_000)  # the pid was recycled: another process
    assert dry(fleet, ID_T1)[0] == 0
