"""Right before the pool's return the world is looked at again, unless the processes step's
look, made moments ago, is that look: it signalled nothing, nothing was done since, no test
paused the run in between, and it is younger than `arrivals.QUIET_SECS`. Any other look is
taken anew (the arrivals themselves: tests/test_arrivals.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from fm_teardown.act import arrivals, faults
from fm_teardown.act.run_state import Rechecked, Run
from fm_teardown.model.plan import StepName
from fm_teardown.model.results import RecheckAt


def _run(monkeypatch: pytest.MonkeyPatch) -> tuple[Run, list[RecheckAt]]:
    looks: list[RecheckAt] = []

    def recheck(at: RecheckAt, *_: Any) -> Rechecked:
        looks.append(at)
        return cast(Rechecked, object())

    monkeypatch.setattr(arrivals, "check", lambda *_: None)  # what each look found: held
    run = SimpleNamespace(
        quiet=None,
        seams=SimpleNamespace(recheck=recheck),
        remembered=(),
        decided=SimpleNamespace(landed=None),
    )
    return cast(Run, run), looks


def test_the_processes_steps_quiet_look_is_the_look_before_the_return(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run, looks = _run(monkeypatch)
    look = arrivals.look_again(run, RecheckAt.PROCESSES, StepName.PROCESSES, "slot")
    arrivals.quiet(run, look)
    assert arrivals.look_again(run, RecheckAt.POOL, StepName.POOL, "slot") is look
    assert looks == [RecheckAt.PROCESSES]
    # Used once: the branch delete, after the return, looks again.
    arrivals.look_again(run, RecheckAt.BRANCH, StepName.BRANCH, "refs/heads/x")
    assert looks == [RecheckAt.PROCESSES, RecheckAt.BRANCH]


@pytest.mark.parametrize("why", ["signalled", "old", "paused"])
def test_otherwise_the_return_has_a_look_of_its_own(
    monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    run, looks = _run(monkeypatch)
    look = arrivals.look_again(run, RecheckAt.PROCESSES, StepName.PROCESSES, "slot")
    if why != "signalled":  # a step that signalled leaves no quiet look
        arrivals.quiet(run, look)
    if why == "old":
        monkeypatch.setattr(arrivals, "QUIET_SECS", 0.0)
    if why == "paused":
        monkeypatch.setattr(faults, "_PAUSES", [faults.pauses() + 1])
    arrivals.look_again(run, RecheckAt.POOL, StepName.POOL, "slot")
    assert looks == [RecheckAt.PROCESSES, RecheckAt.POOL]
