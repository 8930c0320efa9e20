"""Rendering, in one place: an Outcome or an Audit, for programs (JSON, spec §7) and,
through `human`, for people. Which runbook a result points at is decided here, once, for
both (`"runbook"` in the JSON, the last hint line for people).

Beside the words, the JSON gives each reason, headline, warning, owner and finished reason
its stable code (`reason_codes`, `headline_code`, `warning_codes`, `code`; null for a
proceeding decision's own words, which are no refusal): the values carry them, `docs/codes.md`
says what each means.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from fm_teardown.model.causes import code_of
from fm_teardown.model.errors import ExitCode, FmError, Verdict
from fm_teardown.model.landing import ProofLine, Reason
from fm_teardown.model.notes import Note
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import Step, StepOutcome
from fm_teardown.model.results import PoolResult, PoolWhat
from fm_teardown.model.step_warnings import warning_code
from fm_teardown.report import messages, step_words
from fm_teardown.report.human import DropIn, Printer, render_error, render_outcome

if TYPE_CHECKING:  # the audit's module only when an audit is rendered
    from fm_teardown.decide.audit import Audit

__all__ = [
    "SCHEMA",
    "audit_error_json",
    "audit_json",
    "emit_json",
    "error_runbook",
    "outcome_json",
    "reason_code",
    "render",
    "render_firstmate",
    "runbook_for",
    "step_json",
    "usage_error_json",
]

SCHEMA = "fm-teardown/1"


def runbook_for(o: Outcome) -> str | None:
    """The runbook every refusal and failure names (spec §11); None for a go-ahead."""
    if o.exit_code == ExitCode.FAILED or o.interrupted:
        lock = any(
            s.outcome == StepOutcome.FAILED
            and isinstance(s.result, PoolResult)
            and s.result.what == PoolWhat.LOCK_PERSISTED
            for s in o.steps
        )
        return "git-lock" if lock else "failed"
    return {
        Verdict.LIVE_OWNER: "live-owner",
        Verdict.UNLANDED: "unlanded",
        Verdict.UNSAFE: "unsafe",
        Verdict.INVALID: "invalid",
        Verdict.STALE: "stale-slot",
        Verdict.FAILED: "failed",
        Verdict.PLAN_CHANGED: "plan-changed",
    }.get(o.verdict)


def error_runbook(err: FmError) -> str:
    """The runbook of a run that ended before deciding (the audit's included)."""
    return "unsafe" if err.verdict == Verdict.UNSAFE else "invalid"


def reason_code(r: Reason) -> str | None:
    """A reason's or headline's stable code; None for the decide stage's own words and a
    proof of landing (a proceeding decision's, no refusal)."""
    if isinstance(r, str | ProofLine):
        return None
    return str(r.code) if isinstance(r, Note) else code_of(r)


def step_json(step: Step) -> dict[str, str]:
    return {
        "step": str(step.step),
        "target": step.target,
        "outcome": str(step.outcome),
        "detail": step_words.detail(step),
    }


def outcome_json(o: Outcome) -> dict[str, Any]:
    """The one-task document: a dry run, a refusal, a real run, or an error before deciding."""
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "task": o.task,
        "dry_run": o.dry_run,
        "verdict": str(o.verdict),
        "exit_code": o.exit_code,
        "reasons": list(messages.reasons(o)),
        "reason_codes": [reason_code(r) for r in o.reasons],
    }
    d = o.decision
    doc["owners"] = [
        {
            "id": w.id,
            "kind": str(w.kind),
            "code": w.kind.code,
            "endpoint": str(w.endpoint),
            "live": w.live,
            "slot": w.slot,
            "why": w.why,
        }
        for w in (d.owners if d else ())
    ]
    doc["steps"] = [step_json(s) for s in o.steps]
    doc["warnings"] = list(step_words.warnings_text(o))
    doc["warning_codes"] = [warning_code(w) for w in o.warnings]
    doc["hints"] = list(o.hints)
    doc["runbook"] = runbook_for(o)
    if d is None:
        return doc
    doc["plan_id"] = o.plan_id
    doc["slot"] = d.slot
    doc["endpoint"] = str(d.endpoint) if d.endpoint else None
    doc["headline"] = messages.said_text(d.headline)
    doc["headline_code"] = reason_code(d.headline)
    doc["notes"] = list(d.notes)
    if not o.dry_run:
        doc["signalled"] = [
            {"pid": s.pid, "start_time": s.start_time, "name": s.name, "signals": list(s.signals)}
            for s in o.every_signalled
        ]
        doc["discarded_ref"] = o.discarded_ref
        doc["restore"] = o.restore
    return doc


def audit_error_json(err: FmError) -> dict[str, Any]:
    """The audit's own shape when it cannot run (spec §8)."""
    return {
        "schema": SCHEMA,
        "audit": True,
        "exit_code": int(err.exit_code),
        "verdict": str(err.verdict),
        "reasons": [messages.error_reason(err)],
        "reason_codes": [str(err.code)],
        "hints": list(err.hints),
        "runbook": error_runbook(err),
        "tasks": [],
        "shared_slots": [],
        "orphans": [],
    }


def usage_error_json(task: str | None, err: FmError, *, dry_run: bool) -> dict[str, Any]:
    return outcome_json(Outcome.of_error(task, err, dry_run=dry_run))


def audit_json(a: Audit) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "audit": True,
        "exit_code": 0,
        "state_dir": str(a.state_dir),
        "tasks": [
            {
                "task": r.task,
                "slot": r.slot,
                "endpoint": r.endpoint,
                "verdict": str(r.verdict),
                "exit_code": r.exit_code,
                "reasons": list(messages.refused_reasons(r.reasons, r.refused)),
                "reason_codes": [reason_code(x) for x in r.reasons],
                "headline": messages.said_text(r.headline),
                "headline_code": reason_code(r.headline),
                "plan_id": r.plan_id,
                "owners": list(r.owners),
                "owner_codes": list(r.owner_codes),
                "finished": {
                    "finished": r.finished.finished,
                    "reason": messages.finished_reason(r.finished),
                    "code": r.finished.code,
                    "opt_in": r.finished.opt_in,
                },
            }
            for r in a.rows
        ],
        "shared_slots": [{"slot": s, "tasks": list(t)} for s, t in a.shared_slots],
        "orphans": [
            {"kind": o.kind, "id": o.id, "slot": o.slot, "detail": o.detail} for o in a.orphans
        ],
    }


def emit_json(doc: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    out.flush()


def render(
    o: Outcome, *, json_out: bool, out: TextIO | None = None, err: TextIO | None = None
) -> None:
    """Everything `fm teardown TASK` shows, from its Outcome alone. With --json: one object on
    stdout, and on stderr nothing but an interrupt's line (errors before a decision included:
    a refusal and an error say the same amount)."""
    out = out or sys.stdout
    err = err or sys.stderr
    if o.interrupted:  # said on stderr even with --json (spec §7a)
        Printer(err).line(messages.interrupted_line(o), "bold red")
    if json_out:
        emit_json(outcome_json(o), out)
        return
    if o.decision is None and o.exit_code == ExitCode.OK:
        # Nothing left to do (a re-run of a task already torn down): said on stdout.
        Printer(out).line(
            f"{o.task}: {messages.said_text(o.reasons[0])}" if o.reasons else str(o.verdict),
            "green",
        )
        return
    if o.decision is None:
        said = messages.bare_reasons(o)
        message = said[0] if said else str(o.verdict)
        render_error(FmError(o.verdict, message, o.hints, lead=o.lead), err, runbook_for(o))
        return
    render_outcome(o, out, err, runbook=runbook_for(o))


def render_firstmate(
    o: Outcome,
    *,
    lead: str | None,
    lead_is_first_reason: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    """The drop-in's output (`fm-teardown`): fm's, with the script's first stderr line and
    without fm's own completion line (the caller prints the script's)."""
    render_outcome(
        o,
        out or sys.stdout,
        err or sys.stderr,
        runbook=runbook_for(o),
        drop_in=DropIn(lead, lead_is_first_reason),
    )
