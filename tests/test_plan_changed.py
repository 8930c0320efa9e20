"""A plan-changed refusal (spec §13.9, §14.5, §14.8): a full-length token compared in full, a
verdict and runbook of its own, each changed field as `before → now` in words, and a token
that stays the same while the fleet does."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from fm_teardown.adapters import processes
from fm_teardown.decide import fingerprint
from fm_teardown.model.request import Flags
from fm_teardown.model.settings import load
from fm_teardown.pipeline import stages as pipeline
from fm_teardown.report.cause_words import cause_text
from tests.fleet import Fleet, Task, tid
from tests.test_plan_token import TOKEN, base, token_of


def refusal_lines(stderr: str) -> dict[str, str]:
    """`FIELD: BEFORE → NOW` lines of a plan-changed refusal, by field words."""
    out = {}
    for line in stderr.splitlines():
        m = re.match(r"\s+(the [^:]+|TASK's windows): (.* → .*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_the_token_is_128_bits_and_more_and_compared_in_full(fleet: Fleet) -> None:
    t = base(fleet, "pc-full")
    token = token_of(fleet, t.id)
    assert re.fullmatch(TOKEN, token)
    snap = fleet.snapshot(t.slot)
    last = "0" if token[-1] != "0" else "1"
    first = "0" if token[0] != "0" else "1"
    for wrong in (token[:-1] + last, first + token[1:]):
        code, doc = fleet.fm_json("teardown", t.id, "--expect-plan", wrong)
        assert (code, doc["verdict"], doc["runbook"]) == (5, "plan-changed", "plan-changed")
        assert doc["plan_id"] == token
        assert fleet.snapshot(t.slot) == snap and t.meta.exists()
    # A digest that differs where no field's tag does, or tags that differ from the digest's
    # (a token altered by hand), still refuse, naming no field.
    for wrong in (first + token[1:], token[:-1] + last):
        code, doc = fleet.fm_json("teardown", t.id, "--expect-plan", wrong)
        assert "a field the token cannot name" in doc["reasons"][0]
        assert doc["reasons"][1].startswith("no field's tag differs"), doc["reasons"]
    code, doc = fleet.fm_json("teardown", t.id, "--expect-plan", token)
    assert (code, doc["verdict"]) == (0, "proceed")


def test_a_new_process_is_named_before_and_now_by_name_and_pid(fleet: Fleet) -> None:
    t = base(fleet, "pc-proc")
    token = token_of(fleet, t.id)
    worker = fleet.spawn(["sleep", "100000"], t.slot)
    snap = fleet.snapshot(t.slot)
    r = fleet.fm("teardown", t.id, "--expect-plan", token)
    assert r.returncode == 5, r.stderr
    assert r.stderr.startswith(
        "REFUSED — plan-changed: the plan changed since it was approved: "
        "the processes to signal; nothing was changed"
    ), r.stderr
    change = refusal_lines(r.stderr)["the processes to signal"]
    before, now = change.split(" → ")
    shell = f"bash (pid {t.pids[0]})"
    assert before == shell, r.stderr
    assert now == f"{shell}, sleep (pid {worker.pid})", r.stderr
    assert fleet.snapshot(t.slot) == snap and worker.poll() is None


def test_an_owners_change_is_plan_changed_not_a_live_owner(fleet: Fleet) -> None:
    """Another record claims the slot after the dry run, its window gone: no live owner, so
    not live-owner (exit 4 would say one holds the slot) but plan-changed, exit 5."""
    t = base(fleet, "pc-own")
    token = token_of(fleet, t.id)
    other = tid("pc-other")
    fleet.task(other, t.slot, "missing")
    code, doc = fleet.fm_json("teardown", t.id, "--expect-plan", token)
    assert (code, doc["verdict"], doc["exit_code"]) == (5, "plan-changed", 5), doc
    assert doc["runbook"] == "plan-changed"
    assert any(
        r.startswith("the owners of the slot or their liveness: none → ")
        and f"{other} (record, endpoint missing, not live)" in r
        for r in doc["reasons"]
    ), doc["reasons"]
    # The new plan goes ahead: the hint invites a review, then its new token.
    (hint,) = doc["hints"]
    assert hint.startswith(f"review the new plan: fm teardown {t.id} --dry-run")
    assert f"--expect-plan {t.id}={doc['plan_id']}" in hint


def test_a_new_plan_that_refuses_is_said_to_and_no_new_token_is_offered(fleet: Fleet) -> None:
    t = base(fleet, "pc-live")
    other = tid("pc-live2")
    fleet.task(other, t.slot, "missing")
    token = token_of(fleet, t.id)
    fleet.tracked.update(fleet.endpoint(other, t.slot, "alive"))  # its agent comes back
    snap = fleet.snapshot(t.slot)
    r = fleet.fm("teardown", t.id, "--expect-plan", token)
    assert r.returncode == 4, r.stderr  # the plan as it is now has a live owner
    hints = [line for line in r.stderr.splitlines() if line.startswith("hint: ")]
    assert hints[0].startswith("hint: the plan now refuses (live-owner): ")
    assert "fm runbook live-owner" in hints[0]
    assert not any("--expect-plan" in h for h in hints), hints
    assert hints[-1] == "hint: runbook: fm runbook plan-changed"
    assert "the verdict: proceed → live-owner" in r.stderr
    assert fleet.snapshot(t.slot) == snap
    code, doc = fleet.fm_json("teardown", t.id, "--expect-plan", token)
    assert (code, doc["verdict"]) == (4, "plan-changed")


def test_before_is_found_from_the_token_alone(fleet: Fleet) -> None:
    """A dry run keeps nothing: the approved values are found again from the token's tags and
    the plan now, here from a token the audit printed."""
    t = base(fleet, "pc-audit")
    files = sorted(str(p) for p in fleet.fm_home.rglob("*"))
    _, doc = fleet.fm_json("teardown", "--dry-run")
    (token,) = [r["plan_id"] for r in doc["tasks"] if r["task"] == t.id]
    assert token_of(fleet, t.id) == token
    assert sorted(str(p) for p in fleet.fm_home.rglob("*")) == files  # nothing kept anywhere
    (t.slot / "late.txt").write_text("late\n")
    r = fleet.fm("teardown", t.id, "--force", "--expect-plan", token)
    assert r.returncode == 5, r.stderr
    change = refusal_lines(r.stderr)["the slot's uncommitted or untracked paths"]
    assert change == "none → late.txt"


def test_the_runbook_is_listed_and_printed() -> None:
    listing = subprocess.run(["fm", "runbook"], capture_output=True, text=True, check=True)
    assert "plan-changed" in listing.stdout
    r = subprocess.run(["fm", "runbook", "plan-changed"], capture_output=True, text=True)
    assert r.returncode == 0
    for words in ("what a token binds", "--dry-run", "new token", "the plan now refuses"):
        assert words.lower() in r.stdout.lower(), words


def assert_same_tokens(fleet: Fleet, t: Task, n: int) -> str:
    seen = {token_of(fleet, t.id) for _ in range(n)}
    _, doc = fleet.fm_json("teardown", "--dry-run")
    seen |= {r["plan_id"] for r in doc["tasks"] if r["task"] == t.id}
    assert len(seen) == 1, seen
    return seen.pop()


def test_dry_runs_of_an_unchanged_fleet_with_a_leased_slot_agree(fleet: Fleet) -> None:
    """A leased slot with TASK's live agent, a worker, an uncommitted file and a stale other
    record: dry runs, from elsewhere and from inside the slot, give one token."""
    t = tid("pc-same")
    slot = fleet.slot(1, holder=t)
    task = fleet.task(t, slot, "alive", extra={"treehouse_lease_holder": t})
    fleet.task(tid("pc-old"), slot, "missing")
    fleet.spawn(["sleep", "100000"], slot)
    token = assert_same_tokens(fleet, task, 4)
    inside = subprocess.run(
        [sys.executable, "-m", "fm_teardown", "teardown", t, "--dry-run", "--json"],
        capture_output=True,
        text=True,
        env=fleet.env(),
        cwd=slot,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert json.loads(inside.stdout)["plan_id"] == token


def test_a_boot_time_that_moves_by_a_second_keeps_the_token(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/proc/stat's boot time is worked out from the wall clock and moves by a second when
    the clock is adjusted near a second's end, shifting every process's start time: the
    token, which binds processes by pid and start time, must not move with it."""
    t = tid("pc-boot")
    slot = fleet.slot(1, holder=t)
    fleet.task(t, slot, "dead", extra={"treehouse_lease_holder": t})
    fleet.spawn(["sleep", "100000"], slot)
    settings = load(None, fleet.env())
    flags = Flags.given(dry_run=True)
    processes._clock()
    first = pipeline.plan(settings, t, flags)
    monkeypatch.setattr(processes, "_BOOT", [processes._BOOT[0] + 1])
    second = pipeline.plan(settings, t, flags)
    shifted = second.observation.processes.procs
    assert {p.start_time - 1 for p in shifted.values()} & {
        p.start_time for p in first.observation.processes.procs.values()
    }  # the same processes, each a second later
    assert second.plan_id == first.plan_id


def test_the_audit_and_each_dry_run_agree_on_a_shared_slot(fleet: Fleet) -> None:
    """Records sharing a slot share one sum of owner digests, minus each record itself, with
    what differs for it on top (a lease it holds, an unattributed agent): each row's token is
    the one its own dry run prints, and the sum equals the owners digested one by one."""
    ids = [tid(f"pc-sh{i}") for i in range(4)]
    slot = fleet.slot(1, holder=ids[0])
    fleet.task(ids[0], slot, "dead", extra={"treehouse_lease_holder": ids[0]})
    for i, state in zip(ids[1:], ("alive", "missing", "dead"), strict=True):
        fleet.task(i, slot, state)  # ids[0]'s lease makes it an owner of a changed kind
    fleet.tracked.add(fleet.agent_in(slot).pid)
    _, doc = fleet.fm_json("teardown", "--dry-run")
    rows = {r["task"]: r["plan_id"] for r in doc["tasks"]}
    assert {t: token_of(fleet, t) for t in ids} == {t: rows[t] for t in ids}
    settings = load(None, fleet.env())
    changed: set[str] = set()
    for t in ids:
        planned = pipeline.plan(settings, t, Flags.given(dry_run=True))
        owners = planned.decision.owners
        assert len(owners) >= 3
        changed.update(o.id for o in owners if "lease" in o.why)
        one_by_one = fingerprint._owners_digest(list(owners), planned.observation)
        assert fingerprint._owners_digest(owners, planned.observation) == one_by_one
    assert changed == {ids[0]}  # the case where TASK's owners differ from the group's


def test_the_words_of_a_change() -> None:
    """Long lists show what was added and what is gone; equal words say that what differs
    is bound by the token only (a pid that now names another process)."""
    many = "\n".join(f"w{i} (pid {i})" for i in range(12))
    (change,) = fingerprint.describe(["processes"], {"processes": many + "\nx (pid 99)"}, None)
    assert cause_text(change).startswith(
        "the processes to signal: before: not found from the token → now"
    )
    (change,) = fingerprint.describe(
        ["processes"], {"processes": many + "\nx (pid 99)"}, {"processes": many}
    )
    assert cause_text(change) == "the processes to signal: 12 → 13 (added: x (pid 99); gone: none)"
    (change,) = fingerprint.describe(
        ["processes"], {"processes": "a (pid 7)"}, {"processes": "a (pid 7)"}
    )
    assert cause_text(change) == (
        "the processes to signal: a (pid 7) (the same in words: a start time or a target differs)"
    )
