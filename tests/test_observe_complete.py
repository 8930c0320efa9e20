"""The observation is complete before deciding: `decide` reads values only.

`observe` works out, before `decide` runs, every value deciding reads (a slot's facts, an
endpoint, the argv[0] of every process the rules classify or name). Here every argv[0]
the observation left unread is poisoned between observing and deciding, on a real fleet
with processes in its slots, a shared slot and loose ends; deciding must never read one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fm_teardown.decide import rules
from fm_teardown.model.request import Flags
from fm_teardown.model.settings import load
from fm_teardown.model.world import Observation
from fm_teardown.pipeline import audit as audit_mod
from fm_teardown.pipeline import stages as pipeline
from tests.fleet import Fleet, tid

ID_DONE = tid("done")
ID_STALE = tid("stale")
ID_LIVE = tid("live")


@contextmanager
def poisoned(obs: Observation, read: list[int]) -> Iterator[None]:
    """Every argv[0] still unread records its pid when read; put back afterwards."""

    def record(pid: int) -> str:
        read.append(pid)
        return ""

    saved = {}
    for proc in obs.processes.procs.values():
        if proc._argv0 is None:
            saved[proc.pid] = proc._read_cmdline
            proc._read_cmdline = record
    try:
        yield
    finally:
        for proc in obs.processes.procs.values():
            if proc.pid in saved:
                proc._read_cmdline = saved[proc.pid]


def guard(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, read: list[int]) -> list[int]:
    """Wrap `module.name(..., obs, ...)` so that it runs with the observation poisoned."""
    real: Callable[..., Any] = getattr(module, name)
    calls = []

    def wrapped(*args: Any, **kw: Any) -> Any:
        obs = next(a for a in (*args, *kw.values()) if isinstance(a, Observation))
        calls.append(1)
        with poisoned(obs, read):
            return real(*args, **kw)

    monkeypatch.setattr(module, name, wrapped)
    return calls


def world(fleet: Fleet) -> None:
    done = fleet.slot(1, holder=ID_DONE)
    fleet.task(ID_DONE, done, "dead")
    fleet.spawn(["sh", "-c", "exec sleep 600"], done)  # a stray process TASK's run would end
    shared = fleet.slot(2, holder=ID_LIVE)
    fleet.task(ID_LIVE, shared, "alive")
    fleet.task(ID_STALE, shared, "dead")  # a stale record on a live task's slot
    free = fleet.slot(3, holder="ci-bot")  # a loose end: leased, no record
    fleet.agent_in(free)


def test_one_task_decides_on_values_only(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    world(fleet)
    settings = load(None, fleet.env())
    read: list[int] = []
    calls = guard(monkeypatch, rules, "decide_with_landed", read)
    verdicts = {}
    for task in (ID_DONE, ID_STALE, ID_LIVE):
        planned = pipeline.plan(settings, task, Flags.given(dry_run=True))
        verdicts[task] = str(planned.decision.verdict)
    assert len(calls) == 3
    # The scenario reaches the rules that classify and name processes.
    assert verdicts == {ID_DONE: "proceed", ID_STALE: "live-owner", ID_LIVE: "proceed"}
    assert read == []


def test_the_audit_decides_on_values_only(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    world(fleet)
    settings = load(None, fleet.env())
    read: list[int] = []
    calls = guard(monkeypatch, audit_mod, "decide_all", read)
    result = audit_mod.audit(settings)
    assert calls == [1]
    assert {r.task: str(r.verdict) for r in result.rows} == {
        ID_DONE: "proceed",
        ID_STALE: "live-owner",
        ID_LIVE: "proceed",
    }
    # The loose ends are observed after deciding, and still name the free slot's agent.
    assert [o.kind for o in result.orphans].count("process") == 1
    assert read == []


def test_the_poison_sees_a_read(fleet: Fleet) -> None:
    """The check above can fail: reading an unread argv[0] is recorded."""
    world(fleet)
    settings = load(None, fleet.env())
    obs = pipeline.plan(settings, ID_DONE, Flags.given(dry_run=True)).observation
    unread = [p for p in obs.processes.procs.values() if p._argv0 is None]
    assert unread
    read: list[int] = []
    with poisoned(obs, read):
        unread[0].argv0  # noqa: B018
    assert read == [unread[0].pid]
