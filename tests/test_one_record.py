"""One record never blocks another, and fm's own files stay out of every slot (spec §15.2):
an odd temp dir concerns its own task only, a run refused before it looked at the fleet writes
no journal line into a slot, and every worktree of the pool counts as a slot. Absurd numbers:
tests/test_absurd_numbers.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fleet import Fleet, tid

ID_ALPHA = tid("or-alpha")
ID_BRAVO = tid("or-bravo")
ID_CHARLIE = tid("or-charlie")


def test_a_linked_temp_dir_blocks_only_its_own_task(fleet: Fleet) -> None:
    """bravo's `/tmp/fm-<bravo>` is a link to the directory holding the fleet's home: only
    bravo's own teardown minds it; alpha's real teardown goes on and journals as usual."""
    alpha = fleet.task(ID_ALPHA, fleet.slot(1, holder=ID_ALPHA), "dead")
    bravo = fleet.task(ID_BRAVO, fleet.slot(2, holder=ID_BRAVO), "dead")
    Path(f"/tmp/fm-{ID_BRAVO}").symlink_to(fleet.root)  # removed by the fleet's close
    for args in ([ID_ALPHA, "--dry-run"], [ID_ALPHA]):
        code, doc = fleet.fm_json("teardown", *args)
        assert (code, doc["verdict"]) == (0, "proceed"), doc  # was 5: "inside the task temp dir"
    assert not alpha.meta.exists()
    assert [(e["task"], e["exit_code"]) for e in fleet.journal()] == [(ID_ALPHA, 0)]
    # bravo's own teardown refuses its linked temp dir, and nothing of bravo changed.
    snap = fleet.snapshot(bravo.slot)
    code, doc = fleet.fm_json("teardown", ID_BRAVO)
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    assert "symlink" in doc["reasons"][0]
    assert fleet.snapshot(bravo.slot) == snap and bravo.meta.exists()


@pytest.mark.parametrize("early", ["gate", "invalid-record"])
def test_a_run_refused_before_it_looked_writes_no_line_into_a_slot(
    fleet: Fleet, early: str
) -> None:
    """The data dir lies inside charlie's live slot: a run refused before it observed the
    fleet (the gate, its own record invalid) writes no journal line there, and says so."""
    fleet.task(ID_ALPHA, fleet.slot(1, holder=ID_ALPHA), "dead")
    charlie = fleet.task(ID_CHARLIE, fleet.slot(3, holder=ID_CHARLIE), "alive")
    data = charlie.slot / "fm-data"
    env = fleet.env(FM_DATA_OVERRIDE=str(data))
    if early == "gate":
        env["NO_MISTAKES_GATE"] = "1"
        task = ID_ALPHA
    else:
        task = ID_BRAVO
        fleet.record(ID_BRAVO, fleet.slot(2), extra={"kind": "freighter"})
    snap = fleet.snapshot(charlie.slot)
    r = fleet.fm("teardown", task, env=env)
    assert r.returncode == 5, r.stderr
    assert "Traceback" not in r.stderr
    assert not data.exists()  # was: fm-data/teardown-log.jsonl written into charlie's slot
    assert f"could not append to the journal {data / 'teardown-log.jsonl'}" in r.stderr
    assert fleet.snapshot(charlie.slot) == snap
    # Outside every slot, the same refusal is journalled as always.
    r = fleet.fm("teardown", task, env={**env, "FM_DATA_OVERRIDE": str(fleet.data)})
    assert r.returncode == 5, r.stderr
    assert [(e["task"], e["exit_code"]) for e in fleet.journal()] == [(task, 5)]


def test_an_idle_worktree_of_the_pool_is_a_slot_for_fms_own_files(fleet: Fleet) -> None:
    """No record names slot 7, but the pool may hand it out (and reset it) any time: the
    journal is not written inside it, and the dry run says what the real run does."""
    alpha = fleet.task(ID_ALPHA, fleet.slot(1, holder=ID_ALPHA), "dead")
    idle = fleet.slot(7, leased=False)
    data = idle / "fm-data"
    env = fleet.env(FM_DATA_OVERRIDE=str(data))
    for args in ([ID_ALPHA, "--dry-run"], [ID_ALPHA]):
        code, doc = fleet.fm_json("teardown", *args, env=env)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc  # was: written into slot 7
        assert f"inside the slot {idle}" in doc["reasons"][0]
    assert alpha.meta.exists() and not data.exists()
