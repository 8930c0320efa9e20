"""Rendering: a Decision, an Outcome or an Audit, for people or for programs (CONTRACT §7).

JSON goes to stdout as exactly one object. Human output uses rich on a terminal and plain text
otherwise (or with NO_COLOR); diagnostics go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from fm_teardown.audit import Audit
from fm_teardown.decide import Decision, Step
from fm_teardown.errors import FmError

SCHEMA = "fm-teardown/1"


def step_json(step: Step) -> dict[str, str]:
    return {
        "step": step.step,
        "target": step.target,
        "outcome": step.outcome,
        "detail": step.detail,
    }


def decision_json(
    d: Decision,
    *,
    dry_run: bool,
    steps: Sequence[Step] | None = None,
    verdict: str | None = None,
    exit_code: int | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "task": d.task,
        "dry_run": dry_run,
        "verdict": verdict or str(d.verdict),
        "exit_code": d.exit_code if exit_code is None else exit_code,
        "reasons": list(d.reasons),
        "owners": [
            {
                "id": o.id,
                "kind": o.kind,
                "endpoint": str(o.endpoint),
                "live": o.live,
                "slot": o.slot,
                "why": o.why,
            }
            for o in d.owners
        ],
        "steps": [step_json(s) for s in (d.plan if steps is None else steps)],
        "warnings": list(d.warnings),
        "hints": list(d.hints),
        "slot": d.slot,
        "endpoint": str(d.endpoint) if d.endpoint else None,
    }
    if extra:
        doc.update(extra)
    return doc


def error_json(task: str | None, err: FmError, *, dry_run: bool) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "task": task,
        "dry_run": dry_run,
        "verdict": str(err.verdict),
        "exit_code": int(err.exit_code),
        "reasons": [err.message],
        "owners": [],
        "steps": [],
        "warnings": [],
        "hints": list(err.hints),
    }


def audit_error_json(err: FmError) -> dict[str, Any]:
    """The audit's own shape when it cannot run (CONTRACT §8)."""
    return {
        "schema": SCHEMA,
        "audit": True,
        "exit_code": int(err.exit_code),
        "verdict": str(err.verdict),
        "reasons": [err.message],
        "hints": list(err.hints),
        "tasks": [],
        "shared_slots": [],
        "orphans": [],
    }


def audit_json(a: Audit) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "audit": True,
        "exit_code": 0,
        "tasks": [
            {
                "task": r.task,
                "slot": r.slot,
                "endpoint": r.endpoint,
                "verdict": str(r.verdict),
                "exit_code": r.exit_code,
                "reasons": list(r.reasons),
            }
            for r in a.rows
        ],
        "shared_slots": [{"slot": s, "tasks": list(t)} for s, t in a.shared_slots],
    }


def emit_json(doc: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    out.flush()


def plain(stream: TextIO) -> bool:
    return bool(os.environ.get("NO_COLOR")) or not stream.isatty()


class Printer:
    """Lines for people: rich markup on a terminal, plain text elsewhere."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.rich = not plain(stream)
        self._console: Any = None

    def line(self, text: str, style: str | None = None) -> None:
        if self.rich:
            if self._console is None:
                from rich.console import Console

                self._console = Console(file=self.stream, highlight=False, soft_wrap=True)
            from rich.text import Text

            self._console.print(Text(text, style=style or ""))
        else:
            self.stream.write(text + "\n")
            self.stream.flush()


VERDICT_STYLE = {
    "proceed": "green",
    "stale": "yellow",
    "unlanded": "red",
    "live-owner": "red",
    "unsafe": "red",
    "invalid": "red",
    "failed": "red",
}


def render_decision(
    d: Decision,
    *,
    dry_run: bool,
    steps: Sequence[Step] | None = None,
    verdict: str | None = None,
    exit_code: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    out_p = Printer(out or sys.stdout)
    err_p = Printer(err or sys.stderr)
    v = verdict or str(d.verdict)
    code = d.exit_code if exit_code is None else exit_code
    shown_steps = d.plan if steps is None else steps
    refused = code not in (0, 1)
    if code == 1:
        # A run that stopped partway: the cause first, on one line.
        failed = next((s for s in shown_steps if s.outcome == "failed"), None)
        cause = (
            f"{failed.step}: {failed.detail}"
            if failed
            else (d.warnings[-1] if d.warnings else "see the steps below")
        )
        err_p.line(f"fm: teardown {d.task} stopped: {cause}; the record is kept", "red")
        err_p.line(f"hint: re-run `fm teardown {d.task}` to finish")
    title = f"{'dry run: ' if dry_run else ''}teardown {d.task}: {v} (exit {code})"
    out_p.line(title, f"bold {VERDICT_STYLE.get(v, '')}")
    if d.slot:
        out_p.line(f"  slot: {d.slot}")
    if d.endpoint:
        out_p.line(f"  endpoint: {d.endpoint}")
    reasons_p = err_p if refused else out_p
    for r in d.reasons:
        reasons_p.line(("" if refused and r.startswith("REFUSED") else "  ") + r)
    if d.owners:
        out_p.line("  owners of the slot:")
        for o in d.owners:
            live = "live" if o.live else "not live"
            out_p.line(f"    {o.id} [{o.kind}, {o.endpoint}, {live}]: {o.why}")
    if shown_steps:
        out_p.line("  plan:" if dry_run else "  steps:")
        for i, s in enumerate(shown_steps, 1):
            out_p.line(f"    {i}. {s.step} [{s.outcome}] {s.target}: {s.detail}")
    for w in d.warnings:
        err_p.line(f"warning: {w}", "yellow")
    for h in d.hints:
        err_p.line(f"hint: {h}")


def render_error(err: FmError, stream: TextIO | None = None) -> None:
    p = Printer(stream or sys.stderr)
    p.line(f"fm: {err.message}" if not err.message.startswith("REFUSED") else err.message, "red")
    for h in err.hints:
        p.line(f"hint: {h}")


def render_audit(a: Audit, out: TextIO | None = None) -> None:
    p = Printer(out or sys.stdout)
    if not a.rows:
        p.line("no task records")
    width = max([4, *(len(r.task) for r in a.rows)])
    p.line(f"{'TASK':<{width}}  {'VERDICT':<10}  {'ENDPOINT':<10}  SLOT", "bold")
    for r in a.rows:
        p.line(
            f"{r.task:<{width}}  {r.verdict!s:<10}  {r.endpoint or '-':<10}  {r.slot or '-'}",
            VERDICT_STYLE.get(str(r.verdict)),
        )
    if a.shared_slots:
        p.line("slots claimed by more than one record:", "bold")
        for slot, tasks in a.shared_slots:
            p.line(f"  {slot}: {', '.join(tasks)}")
