"""The plan token: a dry run prints it, `--expect-plan` binds a real run to it.

Each input of the token, changed alone on a real fleet, flips it and is named by the refusal;
nothing else does (two dry runs of an unchanged fleet give the same token).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.fleet import Fleet, Task, git, tid

TOKEN = r"[0-9a-f]{96}"


def token_of(fleet: Fleet, task: str, *extra: str) -> str:
    code, doc = fleet.fm_json("teardown", task, "--dry-run", *extra)
    assert isinstance(doc["plan_id"], str) and re.fullmatch(TOKEN, doc["plan_id"])
    r = fleet.fm("teardown", task, "--dry-run", *extra)
    assert r.returncode == code
    assert f"plan: {doc['plan_id']}" in r.stdout.splitlines()
    return str(doc["plan_id"])


def journal(fleet: Fleet) -> list[dict[str, Any]]:
    return fleet.journal(intents=True)


def base(fleet: Fleet, name: str) -> Task:
    t = tid(name)
    slot = fleet.slot(1, holder=t)
    return fleet.task(t, slot, "dead", extra={"treehouse_lease_holder": t})


def change_owner(fleet: Fleet, t: Task) -> None:
    # Another record names the slot; its window is gone (not live: no refusal).
    fleet.task(tid("other"), t.slot, "missing")


def change_liveness(fleet: Fleet, t: Task) -> None:
    # That other record is there from the start; here its agent comes back: a live owner
    # (a refusal, so the verdict, the steps and what the plan would touch change with it).
    fleet.tracked.update(fleet.endpoint(tid("other"), t.slot, "alive"))


def change_head(fleet: Fleet, t: Task) -> None:
    (t.slot / "more.txt").write_text("more\n")
    git(t.slot, "add", "more.txt")
    git(t.slot, "-c", "user.name=T", "-c", "user.email=t@e.invalid", "commit", "-qm", "more")
    git(t.slot, "push", "-q", "origin", "HEAD:main")


def change_dirty(fleet: Fleet, t: Task) -> None:
    (t.slot / "second.txt").write_text("unsaved\n")


def change_lease(fleet: Fleet, t: Task) -> None:
    for e in fleet.entries:
        e["lease_id"] = "f" * 32
    fleet.write_pool()


def change_window(fleet: Fleet, t: Task) -> None:
    # The same pane (same processes) moved into a new window of the same name: a new id.
    old = fleet.tmux.run("display-message", "-p", "-t", f"=firstmate:=fm-{t.id}", "#{pane_id}")
    new = fleet.tmux.new_window("firstmate", "placeholder", t.slot, "cat")
    holder = fleet.tmux.run("display-message", "-p", "-t", new, "#{pane_id}").stdout.strip()
    fleet.tmux.run("join-pane", "-d", "-s", old.stdout.strip(), "-t", new)
    fleet.tmux.run("kill-pane", "-t", holder)
    fleet.tmux.run("rename-window", "-t", new, f"fm-{t.id}")


def change_processes(fleet: Fleet, t: Task) -> None:
    fleet.spawn(["sleep", "100000"], t.slot)


def change_steps(fleet: Fleet, t: Task) -> None:
    (t.slot.parent / ".fm-slot-owner").write_text(f"task={t.id}\nhome={fleet.fm_home}\n")


CASES: dict[str, tuple[Callable[[Fleet, Task], None], set[str], int]] = {
    "owners": (change_owner, {"owners"}, 5),  # a new owner, not live: exit 4 says one is
    # The new plan refuses: it reads no HEAD and returns nothing, so HEAD and the lease, which
    # did not change, are not named (spec §16.2).
    "liveness": (change_liveness, {"verdict", "owners", "steps"}, 4),
    "head": (change_head, {"head"}, 5),
    "dirty": (change_dirty, {"dirty"}, 5),
    "lease": (change_lease, {"lease"}, 5),
    "windows": (change_window, {"windows"}, 5),
    "processes": (change_processes, {"processes"}, 5),
    "steps": (change_steps, {"steps"}, 5),
}
WORDS = {
    "verdict": "the verdict",
    "owners": "the owners of the slot or their liveness",
    "head": "the slot's HEAD",
    "dirty": "the slot's uncommitted or untracked paths",
    "lease": "the pool lease",
    "windows": "TASK's windows",
    "processes": "the processes to signal",
    "steps": "the steps",
}
HEADLINE = "the plan changed since it was approved: "


def named_fields(stderr: str) -> set[str]:
    """The fields a plan-changed refusal's first line names."""
    first = next(line for line in stderr.splitlines() if HEADLINE in line)
    listed = first.split(HEADLINE, 1)[1].rsplit("; nothing was changed", 1)[0]
    return {f for f, words in WORDS.items() if words in listed.split(", ")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_input_changed_alone_flips_the_token_and_is_named(fleet: Fleet, case: str) -> None:
    change, fields, code = CASES[case]
    t = base(fleet, f"pt-{case}")
    force: tuple[str, ...] = ()
    if case == "dirty":
        (t.slot / "first.txt").write_text("unsaved\n")
        force = ("--force",)  # the work is discarded either way: only the paths differ
    if case == "liveness":
        change_owner(fleet, t)
    before = token_of(fleet, t.id, *force)
    assert token_of(fleet, t.id, *force) == before  # nothing changed: the same token
    change(fleet, t)
    after = token_of(fleet, t.id, *force)
    assert after != before
    assert token_of(fleet, t.id, *force) == after
    snap = fleet.snapshot(t.slot)
    r = fleet.fm("teardown", t.id, *force, "--expect-plan", before)
    assert r.returncode == code, r.stderr
    assert "REFUSED — plan-changed: " + HEADLINE in r.stderr
    assert f"approved plan {before}; the plan now {after}" in r.stderr
    assert named_fields(r.stderr) == fields, r.stderr
    # Each changed field on a line of its own, before → now.
    for f in fields:
        assert any(
            line.strip().startswith(WORDS[f] + ": ") and " → " in line
            for line in r.stderr.splitlines()
        ), (f, r.stderr)
    assert r.stderr.splitlines()[-1] == "hint: runbook: fm runbook plan-changed"
    assert "nothing was changed" in r.stderr
    assert fleet.snapshot(t.slot) == snap and t.meta.exists()
    # The refusal is journalled with the token it found; no intent (nothing was about to run).
    lines = journal(fleet)
    assert [(e.get("phase"), e["verdict"], e["exit_code"], e["plan_id"]) for e in lines] == [
        ("result", "plan-changed", code, after)
    ]
    # The dry run of the changed fleet is approved as it stands now.
    code_now, doc = fleet.fm_json("teardown", t.id, "--dry-run", "--expect-plan", after, *force)
    assert doc["plan_id"] == after and "the plan changed" not in " ".join(doc["reasons"])
    assert code_now == (4 if case == "liveness" else 0)


def test_the_approved_plan_runs_and_the_json_carries_its_token(fleet: Fleet) -> None:
    t = base(fleet, "pt-go")
    token = token_of(fleet, t.id)
    code, doc = fleet.fm_json("teardown", t.id, "--expect-plan", f"{t.id}={token}")
    assert (code, doc["verdict"], doc["plan_id"]) == (0, "proceed", token)
    assert not t.meta.exists()
    intent, result = journal(fleet)
    assert intent["phase"] == "intent" and intent["plan_id"] == token
    assert intent["steps"][0] == "endpoint" and intent["steps"][-1] == "record"
    assert (result["phase"], result["plan_id"], result["exit_code"]) == ("result", token, 0)


def test_bad_tokens_and_combinations_are_usage_errors(fleet: Fleet) -> None:
    t = base(fleet, "pt-bad")
    snap = fleet.snapshot(t.slot)
    for args in (
        ("teardown", t.id, "--expect-plan", "nothex"),
        ("teardown", t.id, "--expect-plan", "0" * 24),  # the old, short token
        ("teardown", t.id, "--expect-plan", f"{tid('else')}={'0' * 96}"),
        ("teardown", t.id, tid("x"), "--expect-plan", "0" * 96),
        ("teardown", "--dry-run", "--expect-plan", "0" * 96),
    ):
        r = fleet.fm(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert "--expect-plan" in r.stderr and "Traceback" not in r.stderr
    assert fleet.snapshot(t.slot) == snap and not journal(fleet)


def test_a_batch_takes_one_token_per_task(fleet: Fleet) -> None:
    a, b = tid("pt-a"), tid("pt-b")
    sa, sb = fleet.slot(1, holder=a), fleet.slot(2, holder=b)
    fleet.task(a, sa, "dead", extra={"treehouse_lease_holder": a})
    tb = fleet.task(b, sb, "dead", extra={"treehouse_lease_holder": b})
    code, doc = fleet.fm_json("teardown", a, b, "--dry-run")
    tokens = {r["task"]: r["plan_id"] for r in doc["results"]}
    assert code == 0 and all(re.fullmatch(TOKEN, v) for v in tokens.values())
    r = fleet.fm("teardown", a, b, "--expect-plan", tokens[a])
    assert r.returncode == 2 and "TASK=TOKEN" in r.stderr
    # b's slot gets a process after the dry run: b refuses (5), a goes ahead.
    fleet.spawn(["sleep", "100000"], sb)
    code, doc = fleet.fm_json(
        "teardown", a, b, "--expect-plan", f"{a}={tokens[a]}", "--expect-plan", f"{b}={tokens[b]}"
    )
    assert [(x["task"], x["exit_code"]) for x in doc["results"]] == [(a, 0), (b, 5)]
    assert doc["results"][1]["verdict"] == "plan-changed"
    assert "the processes to signal" in doc["results"][1]["reasons"][0]
    assert tb.meta.exists() and not (fleet.state / f"{a}.meta").exists()


def test_landed_dry_run_prints_tokens_and_unnamed_tasks_refuse(fleet: Fleet) -> None:
    a, b = tid("pt-la"), tid("pt-lb")
    sa, sb = fleet.slot(1, holder=a), fleet.slot(2, holder=b)
    fleet.task(a, sa, "dead", extra={"treehouse_lease_holder": a})
    tb = fleet.task(b, sb, "dead", extra={"treehouse_lease_holder": b})
    r = fleet.fm("teardown", "--landed", "--dry-run", "--min-age", "0")
    tokens = dict(re.findall(r"^task (\S+) .*?\nplan: ([0-9a-f]{96})$", r.stdout, re.M | re.S))
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--min-age", "0")
    assert {x["task"]: x["plan_id"] for x in doc["results"]} == tokens
    assert set(tokens) == {a, b}
    code, doc = fleet.fm_json(
        "teardown", "--landed", "--min-age", "0", "--expect-plan", f"{a}={tokens[a]}"
    )
    assert code == 5
    assert [(x["task"], x["exit_code"]) for x in doc["results"]] == [(a, 0), (b, 5)]
    assert f"no --expect-plan token names {b}" in doc["results"][1]["reasons"][0]
    assert tb.meta.exists()


def test_runbooks_show_the_two_step_habit() -> None:
    out = subprocess.run(
        ["fm", "runbook", "mass-cleanup"], capture_output=True, text=True, check=True
    ).stdout
    assert "--expect-plan" in out


def test_the_audit_gives_each_row_the_token_a_batch_can_be_bound_to(fleet: Fleet) -> None:
    """An operator reviews the fleet once (`--dry-run --json`) and approves exactly those
    plans: the rows' tokens bind a batch run; a row whose world changed since is refused."""
    a, b = base(fleet, "a"), tid("b")
    fleet.task(b, fleet.slot(2, holder=b), "dead", extra={"treehouse_lease_holder": b})
    code, doc = fleet.fm_json("teardown", "--dry-run")
    assert code == 0, doc
    tokens = {r["task"]: r["plan_id"] for r in doc["tasks"]}
    assert tokens == {a.id: token_of(fleet, a.id), b: token_of(fleet, b)}
    (fleet.pool / "2" / "project" / "late.txt").write_text("written after the review\n")
    code, done = fleet.fm_json(
        "teardown", a.id, b, "--expect-plan", f"{a.id}={tokens[a.id]}",
        "--expect-plan", f"{b}={tokens[b]}",
    )  # fmt: skip
    verdicts = {r["task"]: r["verdict"] for r in done["results"]}
    assert verdicts == {a.id: "proceed", b: "plan-changed"}, done
    assert not (fleet.state / f"{a.id}.meta").exists()
    assert (fleet.state / f"{b}.meta").exists()
