"""The words of a refusal's lead and tail, of a decision's reasons, of the proof that work
landed, and of why a task is finished, not selected or skipped: written once, from typed values.

A refusal's reasons are kept without their lead and what the run changed; `reasons` adds the
lead (`REFUSED: `) and that tail to the first one (`nothing was changed`, or the steps this
run had already done). A proof of landing is a value until `proof_text` words its rung; a
refusal's cause until `cause_words` does. The words of each step's result and each warning of
a run are `step_words`'. No module reads any
of this text back: outcomes, counts and refs are read from the values
(tests/test_no_prose_as_data.py); nothing below report/ imports it (tests/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fm_teardown.model.errors import FmError, Lead
from fm_teardown.model.landing import LandedFacts, LandedRung, Proof, ProofLine, Reason
from fm_teardown.model.notes import Note
from fm_teardown.model.plan import Step, StepOutcome
from fm_teardown.model.reasons import Finished, FinishedWhy, NotSelectedReason, NotSelectedWhy
from fm_teardown.report.cause_words import cause_text, not_landed_text

if TYPE_CHECKING:
    from fm_teardown.model.outcome import Outcome, Skipped

__all__ = [
    "NOTHING_CHANGED",
    "bare_reasons",
    "error_line",
    "error_reason",
    "finished_reason",
    "interrupted_line",
    "landed_text",
    "led",
    "not_selected_reason",
    "nothing_changed",
    "proof_text",
    "reasons",
    "refusal_line",
    "refused_reasons",
    "said_text",
    "skipped_reason",
    "tail",
]

NOTHING_CHANGED = "nothing was changed"


_RUNGS = {
    LandedRung.REACHABLE: "reachable: HEAD is in {where}",
    LandedRung.PATCHES: "patches: every commit's patch is in {where} since the merge base",
    LandedRung.SQUASH: "squash: the branch's whole diff is the patch of one commit of {where}",
    LandedRung.MERGE_TREE: "merge-tree: merging HEAD into {where} changes nothing",
    LandedRung.PR_HEAD: "pr-head: {where} is merged and its head is HEAD or has HEAD as an "
    "ancestor",
    # The tasks without git work to land: what was found is the proof's whole text.
    LandedRung.SLOT_GONE: "{where}",
    LandedRung.SCOUT_REPORT: "{where}",
    LandedRung.EMPTY_HOME: "{where}",
}


def proof_text(p: Proof) -> str:
    """The rung that proves a task's work landed, in words that name it (spec §14.6)."""
    return _RUNGS[p.rung].format(where=p.where)


def said_text(r: Reason) -> str:
    """A decision's reason or headline in words: the decide stage's, with a proof of landing
    worded here, or a refusal's cause worded by `cause_words`."""
    if isinstance(r, str):
        return r
    if isinstance(r, ProofLine):
        return f"{r.before}{proof_text(r.proof)}{r.after}"
    if isinstance(r, Note):  # words with their code: shown as they are
        return r.text
    return cause_text(r)


def landed_text(f: LandedFacts | Finished) -> str:
    """Why the work is landed (its proof) or not (the judge's words), in one line."""
    return not_landed_text(f.summary) if f.proof is None else proof_text(f.proof)


_LEADS = {Lead.REFUSED: "REFUSED: ", Lead.ERROR: "error: ", Lead.PLAIN: ""}


def led(lead: Lead, text: str) -> str:
    """A line with its lead written out: `REFUSED: …`, `error: …`, or as it is."""
    return _LEADS[lead] + text


def refusal_line(text: str) -> str:
    """A refusal's line: `REFUSED: …` (runbooks, scripts and firstmate's callers quote it)."""
    return led(Lead.REFUSED, text)


def error_reason(err: FmError) -> str:
    """An error as the JSON output and the reasons give it: with its lead, if it has one."""
    return led(err.lead, err.message)


def error_line(err: FmError) -> str:
    """An error's one line for people: a plain one is said by `fm: `."""
    return f"fm: {err.message}" if err.lead == Lead.PLAIN else error_reason(err)


def nothing_changed(reason: str) -> str:
    """A refusal's line as said before anything was done."""
    return f"{reason}; {NOTHING_CHANGED}"


# -- what a run did, and a refusal's tail -------------------------------------------------------


def _what_ran(steps: Iterable[Step]) -> str:
    """The steps of a run that changed something, e.g. `endpoint (killed window @3)`."""
    # The words of a run's results, only for a run that has them: not the audit's reasons.
    from fm_teardown.report.step_words import detail

    return ", ".join(f"{s.step} ({detail(s)})" for s in steps if s.outcome == StepOutcome.DONE)


def tail(o: Outcome) -> str:
    """What a refused run changed: nothing, or the steps it had already done."""
    ran = _what_ran(o.steps) if o.acted else ""
    if ran:
        return f"already done by this run: {ran}; nothing else was changed"
    return NOTHING_CHANGED


def bare_reasons(o: Outcome) -> tuple[str, ...]:
    """The reasons without the first one's lead: the first one followed by the refusal's
    tail when it has one (firstmate's drop-in writes its own lead)."""
    said = tuple(said_text(r) for r in o.reasons)
    if not said or not o.tail:
        return said
    return (f"{said[0]}; {tail(o)}", *said[1:])


def reasons(o: Outcome) -> tuple[str, ...]:
    """The reasons as shown: the first one with its lead (`REFUSED: …`) and tail."""
    said = bare_reasons(o)
    if not said:
        return said
    return (led(o.lead, said[0]), *said[1:])


def refused_reasons(reasons: tuple[Reason, ...], refused: bool) -> tuple[str, ...]:
    """Reasons as shown before anything was done: a refusal's first one is `REFUSED: …` and
    says that nothing was changed (a decision's, an audit row's)."""
    said = tuple(said_text(r) for r in reasons)
    if not said or not refused:
        return said
    return (refusal_line(nothing_changed(said[0])), *said[1:])


def interrupted_line(o: Outcome) -> str:
    from fm_teardown.report.step_words import detail

    done = ", ".join(f"{s.step} ({detail(s)})" for s in o.steps if s.outcome == StepOutcome.DONE)
    left = [str(s.step) for s in o.steps if s.outcome in (StepOutcome.SKIPPED, StepOutcome.FAILED)]
    return (
        "fm: interrupted"
        + (f"; done: {done}" if done else f"; {NOTHING_CHANGED}")
        + (
            f"; left: {', '.join(left)} (the record is kept: re-run `fm teardown {o.task}` "
            "to finish)"
            if left
            else ""
        )
    )


def _few(items: Iterable[str]) -> str:
    items = list(items)
    shown = "; ".join(items[:3])
    return shown + (f"; and {len(items) - 3} more" if len(items) > 3 else "")


def _duration(seconds: float) -> str:
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if (s >= size and s % size == 0) or s >= 10 * size:
            return f"{s // size}{unit}"
    return f"{s}s"


def finished_reason(f: Finished) -> str:
    """Why a task is finished, or the first condition it fails, in one line."""
    others = f"; still working in its slot: {_few(f.working)}" if f.working else ""
    match f.why:
        case FinishedWhy.REFUSED:
            return f"refused ({f.verdict}): {said_text(f.headline)}{others}"
        case FinishedWhy.OWN_ENDPOINT_LIVE:
            detail = f" ({f.endpoint_detail})" if f.endpoint_detail else ""
            return f"still working: own endpoint is {f.endpoint}{detail}{others}"
        case FinishedWhy.CANNOT_TELL:
            return f"whether someone still works in its slot cannot be told: {f.doubt}"
        case FinishedWhy.OTHERS_WORKING:
            return f"still working in its slot: {_few(f.working)}"
        case FinishedWhy.TOO_YOUNG:
            return (
                f"launched {_duration(f.age)} ago ({f.launched_from}), less than --min-age "
                f"{_duration(f.min_age)}"
            )
        case FinishedWhy.STALE:
            return f"stale: {said_text(f.headline)}"
        case FinishedWhy.SLOT_GONE:
            return "its slot no longer exists"
        case FinishedWhy.NOTHING_OF_ITS_OWN:
            return (
                "nothing of its own yet: no commits beyond the default branch, a clean tree, "
                f"and its endpoint is {f.endpoint}"
            )
        case FinishedWhy.MERGED:
            return f"merged: {landed_text(f)}"
        case FinishedWhy.PUSHED:
            return f"pushed, not merged (--include-pushed): {not_landed_text(f.summary)}"
        case FinishedWhy.NOT_MERGED:
            return f"not merged: {not_landed_text(f.summary)}"


def skipped_reason(r: Skipped) -> str:
    """Why a batch did not run one of its tasks."""
    if r.not_selected is not None:
        return not_selected_reason(r.not_selected)
    return f"not run: {r.failed} failed" if r.failed is not None else "not run: interrupted"


def not_selected_reason(r: NotSelectedReason) -> str:
    """Why a batch's task was skipped at its turn: nothing was done to it."""
    match r.why:
        case NotSelectedWhy.RELAUNCHED:
            return (
                f"relaunched: its record changed since it was selected ({', '.join(r.changed)}); "
                f"nothing was done: run fm teardown {r.task} --dry-run to see the new launch"
            )
        case NotSelectedWhy.SLOT_RETURNED:
            return (
                f"slot {r.slot} was returned earlier in this batch (by {r.returned_by}): it "
                f"is no longer the slot {r.task} was selected with; nothing was done: run "
                f"fm teardown {r.task} --dry-run"
            )
        case NotSelectedWhy.NO_LONGER_FINISHED:
            assert r.finished is not None
            return f"no longer finished: {finished_reason(r.finished)}; nothing was done"
