"""Snapshot tests of the plain rendering (not a terminal, or NO_COLOR) of each verdict: what
an operator reads, line for line (spec §7, §11). The worlds are synthetic (no tmux, no
/proc), so the text is the same on every machine.

To accept a deliberate change of wording: `FM_UPDATE_SNAPSHOTS=1 python3 -m pytest
tests/test_render.py`, then read the diff of tests/snapshots/ before committing it.
"""

from __future__ import annotations

import io
import os
from dataclasses import replace
from pathlib import Path

import pytest

from fm_teardown.model.errors import ExitCode, Verdict, invalid
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import StepOutcome
from fm_teardown.model.results import ProcessesResult, ProcessesWhat, ProcRef, Signal
from fm_teardown.report import render as report
from tests.test_decide import POOL, S1, UNLANDED, World

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def rendered(o: Outcome) -> str:
    out, err = io.StringIO(), io.StringIO()
    report.render(o, json_out=False, out=out, err=err)
    return f"--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"


def with_pool(o: Outcome) -> Outcome:
    assert o.decision is not None
    return replace(o, decision=replace(o.decision, where=replace(o.decision.where, pool=POOL)))


DETAILS = {
    "endpoint": "killed window @3; confirmed gone",
    "processes": "ended 1: claude (41)",
    "hooks": "no hook file in the slot",
    "pool": "treehouse return --force /pool/proj-abc/1/proj: returned",
    "auth": "no hook auth entry to remove",
    "attribution": "appended a's row to /home/op/fleet/data/cost-attribution.tsv",
    "record": "removed a.meta",
}


# What the renderer reads as a value, not as words (the count of processes ended, what they
# were sent).
RESULTS = {
    "processes": ProcessesResult(
        ProcessesWhat.ENDED,
        (ProcRef("claude", 41),),
        signals=(Signal(41, 1.0, "claude", ("SIGTERM",)),),
    )
}


def done(o: Outcome, *outcomes: StepOutcome) -> Outcome:
    """A real run of the plan, each step with the given outcome (a run that started acting:
    its steps carry results, here the processes step's when it is done)."""
    steps = tuple(
        replace(
            s,
            outcome=oc,
            detail=DETAILS[str(s.step)] if oc != "skipped" else "not run",
            result=RESULTS.get(str(s.step)) if oc == StepOutcome.DONE else None,
        )
        for s, oc in zip(o.steps, outcomes, strict=False)
    )
    return replace(o, dry_run=False, steps=steps)


def cases() -> dict[str, Outcome]:
    proceed = Outcome.of_decision(World().task("a").decide("a"), dry_run=True)
    stale = Outcome.of_decision(
        World().task("a", spawn_gen="s1.1.1").task("b", spawn_gen="s2.1.1").decide("a"),
        dry_run=True,
    )
    live = Outcome.of_decision(
        World().task("a").task("b", endpoint="alive").decide("a"), dry_run=True
    )
    unlanded = Outcome.of_decision(World().task("a").decide("a", landed=UNLANDED), dry_run=True)
    unsafe = Outcome.of_decision(World().task("a").foreign_git().decide("a"), dry_run=True)
    D, A, S = StepOutcome.DONE, StepOutcome.ABSENT, StepOutcome.SKIPPED
    torn = done(proceed, D, D, A, D, A, D, D)
    failed = done(proceed, D, StepOutcome.FAILED, S, S, S, S, S)
    failed = replace(failed, verdict=Verdict.FAILED, exit_code=int(ExitCode.FAILED))
    error = Outcome.of_error(
        "x",
        invalid("no such task 'x' in the state dir /fleet/state", "did you mean: a?"),
        dry_run=True,
    )
    return {
        "proceed-dry-run": with_pool(proceed),
        "proceed-done": with_pool(torn),
        "stale-dry-run": with_pool(stale),
        "live-owner": with_pool(live),
        "unlanded": with_pool(unlanded),
        "unsafe": with_pool(unsafe),
        "failed": with_pool(failed),
        "invalid": error,
    }


@pytest.mark.parametrize("name", list(cases()))
def test_plain_rendering_of_each_verdict(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    text = rendered(cases()[name])
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("FM_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text)
    assert path.exists(), f"no snapshot {path}: run with FM_UPDATE_SNAPSHOTS=1 and read it"
    assert text == path.read_text(), f"the rendering of {name} changed (see {path})"


def test_the_first_line_says_the_verdict_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    c = cases()
    first = {n: rendered(o).split("\n") for n, o in c.items()}
    # stdout's first line for a go-ahead, stderr's for a refusal, a failure or an error
    assert first["proceed-dry-run"][1].startswith("PROCEED — a can be torn down: ")
    assert first["proceed-done"][1].startswith("TORN DOWN — a: window killed")
    assert first["stale-dry-run"][1].startswith("STALE — a: the slot belongs to b now")
    err = {n: t.split("--- stderr\n", 1)[1].split("\n") for n, t in rendered_all(c).items()}
    assert err["live-owner"][0] == (
        "REFUSED — live-owner: b is working in this slot; nothing was changed"
    )
    assert err["unlanded"][0].startswith("REFUSED — unlanded: a's own work would be lost: ")
    assert err["unsafe"][0].startswith("REFUSED — unsafe: slot ")
    assert err["failed"][0].startswith("FAILED — a stopped at processes: ")
    assert err["invalid"][0].startswith("fm: no such task 'x'")
    for name, lines in err.items():
        want = report.runbook_for(c[name])
        if want:
            assert [ln for ln in lines if ln][-1] == f"hint: runbook: fm runbook {want}", name


def rendered_all(c: dict[str, Outcome]) -> dict[str, str]:
    return {n: rendered(o) for n, o in c.items()}


def test_paths_in_the_pool_are_shown_relative_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    text = rendered(cases()["proceed-dry-run"])
    out = text.split("--- stderr", 1)[0]
    assert f"{os.path.basename(POOL)}/1/proj" in out
    # The slot's full path once, on the `task · slot` line; it says what the short name
    # stands for, so the pool dir is not spelled out again.
    assert f"task a · slot {S1} · " in out
    assert out.count(POOL) == 1 and out.count(S1) == 1


def test_a_refusal_states_its_reason_once_and_a_real_runs_owners_table_says_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    c = cases()
    for name in ("live-owner", "unlanded", "unsafe"):
        err = rendered(c[name]).split("--- stderr\n", 1)[1]
        assert err.count("REFUSED") == 1, (name, err)
    # A real run shows the owners as observed before it acted (a discarded owner still
    # `alive yes`): the table says so; a dry run's is the state now.
    stale = c["stale-dry-run"]
    assert "owners of the slot:\n" in rendered(stale)
    real = rendered(replace(stale, dry_run=False))
    assert "owners of the slot (before this run):\n" in real


def test_the_stale_headline_says_what_was_cleared_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    stale = cases()["stale-dry-run"]
    first = rendered(replace(stale, dry_run=False)).splitlines()[1]
    assert first == "CLEARED — a's window and record; the slot belongs to b now", first


def test_a_refusal_made_while_deciding_never_acted() -> None:
    """A real run refused while deciding did nothing: it is not `acted` (so it is never taken
    for a run that started acting), and its JSON is still a real run's: what was signalled
    (nothing), no save, and the first reason saying that nothing was changed."""
    d = World().task("a").task("b", endpoint="alive").decide("a")
    o = Outcome.of_decision(d, dry_run=False)
    assert not o.acted and not o.completed
    doc = report.outcome_json(o)
    assert doc["signalled"] == [] and doc["discarded_ref"] is None and doc["restore"] is None
    assert doc["reasons"][0].endswith("is owned by another live task: b; nothing was changed")
    assert "signalled" not in report.outcome_json(Outcome.of_decision(d, dry_run=True))
