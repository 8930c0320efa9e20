"""The words of the parked-run step (`model/parked_run.py`): its result and its warning,
written once, here, for `step_words.py` to call (a module of their own, as the leaks' words
are, to keep `step_words.py` within the module limit). The lines firstmate's drop-in prints for
the step, in the script's words, are `firstmate_view.py`'s."""

from __future__ import annotations

from fm_teardown.model.parked_run import (
    Asked,
    Attribution,
    Confirmation,
    ParkedRunResult,
    ParkedRunWhat,
    RunUnasked,
)

__all__ = [
    "parked_run_text",
    "unasked_text",
]


def _run(r: ParkedRunResult) -> str:
    return f"run {r.run_id}"


def _short(head: str) -> str:
    return head[:12] if head else "none"


def _left_alone(r: ParkedRunResult) -> str:
    match r.attribution:
        case Attribution.NO_BRANCH:
            return (
                f"{_run(r)} left alone: the slot has no branch checked out, so no run can be "
                "told to be this task's"
            )
        case Attribution.OTHER_BRANCH:
            return f"{_run(r)} is of branch {r.branch or '(none)'}, not the slot's: left alone"
        case Attribution.OTHER_CODE:
            return (
                f"{_run(r)} (head {_short(r.head)}) is not of the slot's code (its head is "
                "neither the slot's HEAD nor a descendant of it): left alone"
            )
        case Attribution.CONCLUDED:
            return f"this task's {_run(r)} has ended already ({r.ended_as}): nothing to abort"
        case Attribution.UNDER_WAY:
            return (
                f"this task's {_run(r)} is {r.status or 'under way'}, not parked at a gate: "
                "left to no-mistakes"
            )
    return "no-mistakes names no run here: nothing to abort"


def _parked(r: ParkedRunResult) -> str:
    return f"this task's {_run(r)}, parked at a gate ({r.status or 'awaiting an agent'})"


def _read_back(after: Asked | None, run_id: str) -> str:
    if after is None:
        return "not read back"
    if after.problem:
        return f"no-mistakes axi status --run {run_id} did not answer ({after.problem})"
    s = after.status
    if s is None or not s.id:
        return f"no-mistakes axi status --run {run_id} named no run"
    if s.id != run_id:
        return f"no-mistakes axi status --run {run_id} named another run ({s.id})"
    return f"its outcome reads {s.outcome or 'none'} ({s.status or 'no status'})"


def parked_run_text(r: ParkedRunResult) -> str:
    """The step's detail."""
    match r.what:
        case ParkedRunWhat.IN_SLOT:
            return (
                f"not run: the no-mistakes found on PATH ({r.binary}) lies in the slot; a "
                "parked run of this task, if any, was not aborted"
            )
        case ParkedRunWhat.UNANSWERED:
            return (
                f"no-mistakes axi status did not answer ({r.problem}): no run looked at, "
                "none aborted"
            )
        case ParkedRunWhat.NOT_PARKED:
            return _left_alone(r)
        case ParkedRunWhat.ABORTED:
            back = (
                f"read back {r.ended_as}"
                if r.confirmed == Confirmation.TERMINAL
                else "no-mistakes no longer has it"
            )
            return f"aborted {_parked(r)}: {back}"
    return (
        f"aborted {_parked(r)}, but it was not read back stopped "
        f"({_read_back(r.after, r.run_id)}); nothing of the task was touched: confirm it "
        f"stopped (no-mistakes axi status --run {r.run_id}, in the slot) or abort it by hand "
        f"(no-mistakes axi abort --run {r.run_id}), then run the same command again"
    )


def unasked_text(w: RunUnasked) -> str:
    """The warning of a run that could not be looked at."""
    if w.result.what == ParkedRunWhat.IN_SLOT:
        why = f"the no-mistakes found on PATH ({w.result.binary}) lies in its slot and was not run"
    else:
        why = f"no-mistakes axi status did not answer: {w.result.problem}"
    return (
        f"{w.task}'s no-mistakes run could not be looked at ({why}): a run parked at a gate, "
        f"if any, was not aborted; check with no-mistakes axi status in {w.slot}"
    )
