"""Rendering, in one place: an Outcome or an Audit, for people or for programs (CONTRACT §7).

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
from fm_teardown.errors import ExitCode, FmError
from fm_teardown.outcome import Outcome
from fm_teardown.plan import Step

SCHEMA = "fm-teardown/1"


def step_json(step: Step) -> dict[str, str]:
    return {
        "step": str(step.step),
        "target": step.target,
        "outcome": str(step.outcome),
        "detail": step.detail,
    }


def outcome_json(o: Outcome) -> dict[str, Any]:
    """The one-task document: a dry run, a refusal, a real run, or an error before deciding."""
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "task": o.task,
        "dry_run": o.dry_run,
        "verdict": str(o.verdict),
        "exit_code": o.exit_code,
        "reasons": list(o.reasons),
    }
    d = o.decision
    doc["owners"] = [
        {
            "id": w.id,
            "kind": str(w.kind),
            "endpoint": str(w.endpoint),
            "live": w.live,
            "slot": w.slot,
            "why": w.why,
        }
        for w in (d.owners if d else ())
    ]
    doc["steps"] = [step_json(s) for s in o.steps]
    doc["warnings"] = list(o.warnings)
    doc["hints"] = list(o.hints)
    if d is None:
        return doc
    doc["slot"] = d.slot
    doc["endpoint"] = str(d.endpoint) if d.endpoint else None
    doc["notes"] = list(d.notes)
    if o.acted:
        doc["signalled"] = [
            {"pid": s.pid, "start_time": s.start_time, "name": s.name, "signals": list(s.signals)}
            for s in o.signalled
        ]
        doc["discarded_ref"] = o.discarded_ref
        doc["restore"] = o.restore
    return doc


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
                "reasons": list(r.reasons),
                "headline": r.headline,
                "owners": list(r.owners),
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


def render(
    o: Outcome, *, json_out: bool, out: TextIO | None = None, err: TextIO | None = None
) -> None:
    """Everything `fm teardown TASK` shows, from its Outcome alone."""
    out = out or sys.stdout
    err = err or sys.stderr
    if o.interrupted:
        done = ", ".join(f"{s.step} ({s.detail})" for s in o.steps if s.outcome == "done")
        left = [str(s.step) for s in o.steps if s.outcome in ("skipped", "failed")]
        err.write(
            "fm: interrupted"
            + (f"; done: {done}" if done else "; nothing was changed")
            + (
                f"; left: {', '.join(left)} (the record is kept: re-run `fm teardown {o.task}` "
                "to finish)"
                if left
                else ""
            )
            + "\n"
        )
    if o.decision is None:
        if json_out:
            emit_json(outcome_json(o), out)
        render_error(FmError(o.verdict, o.reasons[0] if o.reasons else "", o.hints), err)
        return
    if json_out:
        emit_json(outcome_json(o), out)
        return
    _render_human(o, out, err)


def _render_human(
    o: Outcome,
    out: TextIO,
    err: TextIO,
    *,
    lead: str | None = None,
    completion_line: bool = True,
) -> None:
    """`lead`: a first stderr line that replaces the one fm would print first (the
    firstmate drop-in's `REFUSED:`/`error:` line); `completion_line`: end a finished run with
    `teardown <id> complete`."""
    d = o.decision
    assert d is not None
    out_p = Printer(out)
    err_p = Printer(err)
    v = str(o.verdict)
    code = o.exit_code
    refused = code not in (0, 1)
    if lead is not None:
        err_p.line(lead, "red")
    elif code == ExitCode.FAILED:
        # A run that stopped partway: the cause first, on one line.
        failed = next((s for s in o.steps if s.outcome == "failed"), None)
        cause = (
            f"{failed.step}: {failed.detail}"
            if failed
            else (o.warnings[-1] if o.warnings else "see the steps below")
        )
        err_p.line(f"fm: teardown {o.task} stopped: {cause}; the record is kept", "red")
        err_p.line(f"hint: re-run `fm teardown {o.task}` to finish")
    title = f"{'dry run: ' if o.dry_run else ''}teardown {o.task}: {v} (exit {code})"
    out_p.line(title, f"bold {VERDICT_STYLE.get(v, '')}")
    if d.slot:
        out_p.line(f"  slot: {d.slot}")
    if d.endpoint:
        out_p.line(f"  endpoint: {d.endpoint}")
    reasons_p = err_p if refused else out_p
    for i, r in enumerate(o.reasons):
        if i == 0 and lead is not None and refused:
            continue  # the lead line said it
        reasons_p.line(("" if refused and r.startswith("REFUSED") else "  ") + r)
    for n in d.notes:
        if not any(n in r for r in o.reasons):
            reasons_p.line(f"  could not tell: {n}")
    if d.owners:
        out_p.line("  owners of the slot:")
        for w in d.owners:
            live = "live" if w.live else "not live"
            out_p.line(f"    {w.id} [{w.kind}, {w.endpoint}, {live}]: {w.why}")
    if o.steps:
        out_p.line("  plan:" if o.dry_run else "  steps:")
        for i, s in enumerate(o.steps, 1):
            out_p.line(f"    {i}. {s.step} [{s.outcome}] {s.target}: {s.detail}")
    for text in o.warnings:
        err_p.line(f"warning: {text}", "yellow")
    for h in o.hints:
        err_p.line(f"hint: {h}")
    if o.completed and completion_line:
        out_p.line(f"teardown {o.task} complete")
    if o.discarded_ref:
        out_p.line(f"discarded work saved under {o.discarded_ref}; to bring it back: {o.restore}")


def render_firstmate(
    o: Outcome, *, lead: str | None, out: TextIO | None = None, err: TextIO | None = None
) -> None:
    """The drop-in's output (`fm-teardown`): fm's, with the script's first stderr line and
    without fm's own completion line (the caller prints the script's)."""
    _render_human(o, out or sys.stdout, err or sys.stderr, lead=lead, completion_line=False)


def render_error(err: FmError, stream: TextIO | None = None) -> None:
    p = Printer(stream or sys.stderr)
    verbatim = err.message.startswith(("REFUSED", "error:"))
    p.line(err.message if verbatim else f"fm: {err.message}", "red")
    for h in err.hints:
        p.line(f"hint: {h}")


def short_path(path: str | None, pools: tuple[str, ...]) -> str:
    """A slot as `<pool name>/<N>/<repo>` when it lies in a pool the audit read: full paths
    of pooled slots all share a long prefix and wrap into unreadability."""
    if not path:
        return "-"
    for pool in pools:
        if path.startswith(pool + "/"):
            return os.path.basename(pool) + path[len(pool) :]
    return path


def render_audit(a: Audit, out: TextIO | None = None) -> None:
    """The audit for a person: a header naming the state dir, one row per task with the one
    reason that matters, then the shared slots, then the loose ends."""
    stream = out or sys.stdout
    p = Printer(stream)
    n = len(a.rows)
    p.line(f"fleet audit of {a.state_dir}: {n} record{'s' if n != 1 else ''}", "bold")
    for pool in a.pools:
        p.line(f"  pool {os.path.basename(pool)} = {pool}")
    if not a.rows:
        p.line("no task records")
    else:
        headers = ("TASK", "VERDICT", "EXIT", "ENDPOINT", "SLOT", "WHY")
        table = [
            (
                r.task,
                str(r.verdict),
                str(r.exit_code),
                r.endpoint or "-",
                short_path(r.slot, a.pools),
                r.headline,
            )
            for r in a.rows
        ]
        styles = [VERDICT_STYLE.get(str(r.verdict)) for r in a.rows]
        _table(p, headers, table, styles)
    if a.shared_slots:
        p.line("slots claimed by more than one record:", "bold")
        for slot, tasks in a.shared_slots:
            p.line(f"  {short_path(slot, a.pools)}: {', '.join(tasks)}")
    if a.orphans:
        p.line("loose ends (no record accounts for them; they change no exit code):", "bold")
        for o in a.orphans:
            where = f" in {short_path(o.slot, a.pools)}" if o.slot else ""
            p.line(f"  {o.kind} {o.id}{where}: {o.detail}")


def _table(
    p: Printer,
    headers: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    styles: Sequence[str | None],
) -> None:
    """Aligned columns; the last one (the reason) is never padded, so it never wraps early."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers[:-1])]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(
            [*(c.ljust(w) for c, w in zip(cells[:-1], widths, strict=True)), cells[-1]]
        )

    p.line(fmt(headers), "bold")
    for row, style in zip(rows, styles, strict=True):
        p.line(fmt(row), style)
