"""Intent before destruction: a real run journals `{"phase": "intent", ...}` before its first
destructive step and its result after; a journal that cannot be written refuses the run
(exit 5) unless `--no-journal`; a run that dies in between is reported by the next run and by
the audit."""

from __future__ import annotations

import json
from typing import Any

from tests.fleet import Fleet, Task, gone, tid


def journal(fleet: Fleet) -> list[dict[str, Any]]:
    return fleet.journal(intents=True)


def task(fleet: Fleet, name: str) -> Task:
    t = tid(name)
    slot = fleet.slot(1, holder=t)
    return fleet.task(t, slot, "alive", extra={"treehouse_lease_holder": t})


def test_a_journal_that_cannot_be_written_refuses_the_real_run(fleet: Fleet) -> None:
    t = task(fleet, "ij-unwritable")
    (fleet.data / "teardown-log.jsonl").mkdir()  # not a file: no line can be appended
    snap = fleet.snapshot(t.slot)
    code, doc = fleet.fm_json("teardown", t.id)
    assert (code, doc["verdict"]) == (5, "unsafe")
    assert "the journal" in doc["reasons"][0] and "cannot be written" in doc["reasons"][0]
    assert "nothing was changed" in doc["reasons"][0]
    assert any("--no-journal" in h for h in doc["hints"])
    assert fleet.snapshot(t.slot) == snap and t.meta.exists()
    assert not any(gone(p) for p in t.pids)
    # The human form names the reason on stderr, one line, no traceback.
    r = fleet.fm("teardown", t.id)
    assert r.returncode == 5 and "cannot be written" in r.stderr and "Traceback" not in r.stderr
    assert fleet.snapshot(t.slot) == snap
    # --no-journal: the run goes ahead without it.
    code, doc = fleet.fm_json("teardown", t.id, "--no-journal")
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert not t.meta.exists()
    assert list((fleet.data / "teardown-log.jsonl").iterdir()) == []


def test_a_dry_run_predicts_the_journal_it_would_need(fleet: Fleet) -> None:
    """The dry run writes nothing, but it refuses where the real run's intent line would
    (spec §15.9), and with --no-journal it proceeds as that real run would."""
    t = task(fleet, "ij-dry")
    (fleet.data / "teardown-log.jsonl").mkdir()
    code, doc = fleet.fm_json("teardown", t.id, "--dry-run")
    assert (code, doc["verdict"]) == (5, "unsafe")
    assert "cannot be written (it is not a regular file)" in doc["reasons"][0]
    code, doc = fleet.fm_json("teardown", t.id, "--dry-run", "--no-journal")
    assert (code, doc["verdict"]) == (0, "proceed")


def test_the_intent_precedes_the_first_destructive_step(fleet: Fleet) -> None:
    t = task(fleet, "ij-order")
    r = fleet.fm("teardown", t.id, env=fleet.env(FM_TEST_FAULT="crash:before-endpoint"))
    assert r.returncode == -9
    [intent] = journal(fleet)
    assert (intent["phase"], intent["task"]) == ("intent", t.id)
    assert intent["steps"][:2] == ["endpoint", "processes"] and intent["steps"][-1] == "record"
    token = json.loads(fleet.fm("teardown", t.id, "--dry-run", "--json").stdout)["plan_id"]
    assert intent["plan_id"] == token
    # Nothing was destroyed before it: the window and its agent are still there.
    assert t.window in fleet.tmux.windows() and not any(gone(p) for p in t.pids)


def test_a_crash_between_intent_and_result_is_reported_by_the_next_run_and_the_audit(
    fleet: Fleet,
) -> None:
    t = task(fleet, "ij-crash")
    r = fleet.fm("teardown", t.id, env=fleet.env(FM_TEST_FAULT="crash:after-endpoint"))
    assert r.returncode == -9
    assert [e.get("phase") for e in journal(fleet)] == ["intent"]
    # The audit lists it as a loose end, in both forms.
    code, doc = fleet.fm_json("teardown", "--dry-run")
    assert code == 0
    [row] = [o for o in doc["orphans"] if o["kind"] == "unfinished-teardown"]
    assert row["id"] == t.id and "journalled its intent and no result" in row["detail"]
    human = fleet.fm("teardown", "--dry-run").stdout
    assert f"unfinished-teardown {t.id}: a teardown of {t.id} started at" in human
    # The next run says so, re-checks from scratch and finishes the job.
    code, doc = fleet.fm_json("teardown", t.id)
    assert code == 0, doc
    assert any("journalled its intent and no result" in w for w in doc["warnings"])
    assert not t.meta.exists()
    assert [e.get("phase") for e in journal(fleet)] == ["intent", "intent", "result"]
    code, doc = fleet.fm_json("teardown", "--dry-run")
    assert not [o for o in doc["orphans"] if o["kind"] == "unfinished-teardown"]


def test_a_refusal_while_deciding_writes_no_intent(fleet: Fleet) -> None:
    t = task(fleet, "ij-refused")
    (t.slot / "wip.txt").write_text("unlanded\n")
    code, _ = fleet.fm_json("teardown", t.id)
    assert code == 3
    assert [(e.get("phase"), e["exit_code"]) for e in journal(fleet)] == [("result", 3)]
