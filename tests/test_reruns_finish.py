"""Re-runs that finish the job (spec §15.8): the command a stopped batch prints finishes it
as printed, a run that ended after its record step converges, a re-run never tears down a
new launch of the id an unfinished teardown was about, and `--landed` with approved tokens
never drops a task whose plan changed."""

from __future__ import annotations

import json
import shlex
from typing import Any

from tests.fleet import Fleet, gone, tid

ID_A = tid("fin-a")
ID_DASH = tid("-fin")  # a task id may start with `-`
ID_C = tid("fin-c")
ID_T = tid("fin-t")
ID_U = tid("fin-u")


def results(doc: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    return [(r["task"], r["verdict"], r["exit_code"]) for r in doc["results"]]


def fm_doc(fleet: Fleet, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any]:
    """`fm teardown --json ARGS` (options before a `--` in ARGS)."""
    r = fleet.fm("teardown", "--json", *args, env=env)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError as exc:
        raise AssertionError(f"not one JSON object: {r.stdout!r} / {r.stderr!r}") from exc


def test_the_command_a_stopped_batch_prints_finishes_it(fleet: Fleet) -> None:
    ids = [ID_A, ID_DASH, ID_C]
    for i, task_id in enumerate(ids, start=1):
        fleet.task(task_id, fleet.slot(i, holder=task_id), "dead")
    code, doc = fm_doc(fleet, "--dry-run", "--", *ids)
    assert code == 0, doc
    tokens = [f"--expect-plan={r['task']}={r['plan_id']}" for r in doc["results"]]
    # Every pool return fails: the first task stops partway, the others are skipped.
    env = fleet.env(TREEHOUSE_STANDIN_FAULT="survivor")
    r = fleet.fm("teardown", *tokens, "--", *ids, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    summary = [line.split()[:3] for line in r.stdout.splitlines() if line.startswith("  ")]
    assert summary[-3:] == [
        [ID_A, "failed", "1"],
        [ID_DASH, "skipped", "-"],
        [ID_C, "skipped", "-"],
    ]
    # No token of a plan that no longer holds (the first task acted), `--` before the ids
    # (was: every token repeated, the first refusing as a changed plan; no `--`).
    finish = f"fm teardown -- {ID_A} {ID_DASH} {ID_C}"
    assert f"not done: {ID_A}, {ID_DASH}, {ID_C}; to finish them: {finish}" in r.stdout
    # Runnable as printed, and it finishes the job.
    argv = shlex.split(finish)
    assert argv[:2] == ["fm", "teardown"]
    r = fleet.fm(*argv[1:])
    assert r.returncode == 0, r.stdout + r.stderr
    assert not any((fleet.state / f"{t}.meta").exists() for t in ids)


def test_a_run_that_ended_after_its_record_step_is_already_torn_down(fleet: Fleet) -> None:
    """fm killed right after its record step: the journal holds its intent and no result,
    and the record is gone. The same command says it was torn down then (was: no such task)."""
    fleet.task(ID_T, fleet.slot(1, holder=ID_T), "dead")
    fleet.task(ID_U, fleet.slot(2, holder=ID_U), "dead")
    r = fleet.fm("teardown", ID_T, env=fleet.env(FM_TEST_FAULT="crash:after-record"))
    assert r.returncode == -9
    [intent] = fleet.journal(intents=True)
    assert (intent["phase"], intent["task"]) == ("intent", ID_T)
    assert not (fleet.state / f"{ID_T}.meta").exists()
    for args in ([ID_T], [ID_T, "--dry-run"]):
        code, doc = fleet.fm_json("teardown", *args)
        assert (code, doc["verdict"]) == (0, "already-torn-down"), doc  # was (2, "invalid")
        said = doc["reasons"][0]
        assert said.startswith(f"already torn down at {intent['time']}: "), said
        assert "journalled no result" in said
    r = fleet.fm("teardown", ID_T)
    assert r.returncode == 0 and f"already torn down at {intent['time']}" in r.stdout + r.stderr
    # In a batch too.
    code, doc = fleet.fm_json("teardown", ID_T, ID_U)
    assert (code, results(doc)) == (0, [(ID_T, "already-torn-down", 0), (ID_U, "proceed", 0)])


def test_a_rerun_after_an_unfinished_teardown_never_tears_down_a_new_launch(
    fleet: Fleet,
) -> None:
    """fm died after ending T's endpoint; T was then launched again (a new spawn_gen, another
    slot). The same command refuses (5) instead of tearing the new launch down; once that
    refusal is journalled, the next run decides afresh."""
    fleet.task(ID_T, fleet.slot(1, holder=ID_T), "alive", extra={"spawn_gen": "s100.1.a"})
    r = fleet.fm("teardown", ID_T, env=fleet.env(FM_TEST_FAULT="crash:after-endpoint"))
    assert r.returncode == -9
    slot2 = fleet.slot(2, holder=ID_T)
    new = fleet.task(ID_T, slot2, "alive", extra={"spawn_gen": "s200.1.b"})
    snap = fleet.snapshot(slot2)
    for args in ([ID_T, "--dry-run"], [ID_T]):
        code, doc = fleet.fm_json("teardown", *args)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc  # the real run was 0: torn down
        said = doc["reasons"][0]
        assert "ended partway, and it was of another launch" in said, said
        assert "spawn_gen s100.1.a → s200.1.b" in said and "worktree " in said
        assert any("--dry-run" in h for h in doc["hints"])
        assert [s["step"] for s in doc["steps"]][:1] == ["endpoint"]  # the plan, for review
    assert fleet.snapshot(slot2) == snap and new.meta.exists()
    assert not any(gone(p) for p in new.pids)
    # Reviewed: the refusal closed the unfinished teardown; the next run decides afresh.
    code, doc = fleet.fm_json("teardown", ID_T, "--dry-run")
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    code, doc = fleet.fm_json("teardown", ID_T)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert not new.meta.exists()


def test_landed_with_approved_tokens_never_drops_a_changed_task(fleet: Fleet) -> None:
    a = fleet.task(ID_A, fleet.slot(1, holder=ID_A), "dead")
    fleet.task(ID_C, fleet.slot(2, holder=ID_C), "dead")
    code, doc = fm_doc(fleet, "--landed", "--dry-run", "--min-age", "0")
    assert code == 0 and [t for t, _, _ in results(doc)] == [ID_A, ID_C], doc
    tokens = [f"--expect-plan={r['task']}={r['plan_id']}" for r in doc["results"]]
    # A's plan changes: new work in its slot, so --landed no longer selects it.
    (a.slot / "late.txt").write_text("unlanded\n")
    code, doc = fm_doc(fleet, "--landed", "--min-age", "0", *tokens)
    assert code == 5, doc  # was 0: A dropped without a word
    got = {t: (v, c) for t, v, c in results(doc)}
    assert got == {ID_A: ("plan-changed", 5), ID_C: ("proceed", 0)}, doc
    assert (fleet.state / f"{ID_A}.meta").exists()
    assert not (fleet.state / f"{ID_C}.meta").exists()
    assert ID_A not in [n["task"] for n in doc["not_selected"]]
