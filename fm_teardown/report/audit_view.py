"""The audit's JSON document (spec §8), and the one it gives when it cannot run. What an
audit prints with `--json` needs only these words (`messages`), not a run's (`step_words`,
`human`): an audit imports none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fm_teardown.model.errors import FmError
from fm_teardown.report import messages
from fm_teardown.report.json_out import SCHEMA, error_runbook, reason_code

if TYPE_CHECKING:  # the audit's module only when an audit is rendered
    from fm_teardown.decide.audit import Audit

__all__ = ["audit_error_json", "audit_json"]


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
