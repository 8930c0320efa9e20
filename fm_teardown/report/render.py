"""Rendering, in one place: an Outcome or an Audit, for programs (JSON, spec §7) and,
through `human`, for people. Which runbook a result points at is decided here, once, for
both (`"runbook"` in the JSON, the last hint line for people). The audit's JSON document is
`audit_view.py`'s and what every document shares `json_out.py`'s: an audit with `--json`
imports neither this module nor a run's words.

Beside the words, the JSON gives each reason, headline, warning, owner and finished reason
its stable code (`reason_codes`, `headline_code`, `warning_codes`, `code`; null for a
proceeding decision's own words, which are no refusal): the values carry them, `docs/codes.md`
says what each means.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from fm_teardown.model.errors import ExitCode, FmError, Verdict
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import Step, StepOutcome
from fm_teardown.model.results import PoolResult, PoolWhat
from fm_teardown.model.step_warnings import warning_code
from fm_teardown.report import messages, step_words
from fm_teardown.report.human import DropIn, Printer, render_error, render_outcome
from fm_teardown.report.json_out import SCHEMA, emit_json, reason_code

__all__ = [
    "outcome_json",
    "render",
    "render_firstmate",
    "runbook_for",
    "step_json",
    "usage_error_json",
]


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


def usage_error_json(task: str | None, err: FmError, *, dry_run: bool) -> dict[str, Any]:
    return outcome_json(Outcome.of_error(task, err, dry_run=dry_run))


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
