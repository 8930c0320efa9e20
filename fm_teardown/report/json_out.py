"""What every JSON document fm prints shares: its schema, how it is written, the stable code
of a reason, and the runbook of a run that ended before deciding. Apart from `render.py`, so
that the audit's document (`audit_view.py`) needs none of a run's words or results.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from fm_teardown.model.causes import code_of
from fm_teardown.model.errors import FmError, Verdict
from fm_teardown.model.landing import ProofLine, Reason
from fm_teardown.model.notes import Note

__all__ = ["SCHEMA", "emit_json", "error_runbook", "reason_code"]

SCHEMA = "fm-teardown/1"


def error_runbook(err: FmError) -> str:
    """The runbook of a run that ended before deciding (the audit's included)."""
    return "unsafe" if err.verdict == Verdict.UNSAFE else "invalid"


def reason_code(r: Reason) -> str | None:
    """A reason's or headline's stable code; None for the decide stage's own words and a
    proof of landing (a proceeding decision's, no refusal)."""
    if isinstance(r, str | ProofLine):
        return None
    return str(r.code) if isinstance(r, Note) else code_of(r)


def emit_json(doc: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    out.flush()
