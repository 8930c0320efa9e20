"""Output for people: a teardown's Outcome, the fleet audit, an error (spec §7, §11).

Read at a glance: the first line says the verdict in words an operator acts on
(`REFUSED — live-owner: bravo is working in this slot; nothing was changed`), then where
(task, slot, endpoint), the owners of the slot, the plan or what was done, then warnings and
hints (the safe way first, the destructive one last), and last the runbook to read. On a
terminal: colour and tables (rich, imported only then); otherwise, or with NO_COLOR, the
same content as plain lines. Paths inside the pool are shown relative to it (the pool's full
path once), so long paths never wrap into unreadability. Refusals, failures and errors go to
stderr, the rest to stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from fm_teardown.model.errors import ExitCode, FmError, Verdict
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import StepName, StepOutcome
from fm_teardown.model.results import ProcessesResult
from fm_teardown.model.values import value
from fm_teardown.report import messages, step_words
from fm_teardown.report.cause_words import belongs_now

if TYPE_CHECKING:  # the audit's module only when an audit is rendered
    from fm_teardown.decide.audit import Audit, AuditRow

__all__ = [
    "ROW_REASON",
    "VERDICT_STYLE",
    "DropIn",
    "Printer",
    "Shortener",
    "cut",
    "headline",
    "plain",
    "render_audit",
    "render_error",
    "render_outcome",
    "said_once",
]

VERDICT_STYLE = {
    "proceed": "green",
    "stale": "yellow",
    "already-torn-down": "green",
    "unlanded": "red",
    "live-owner": "red",
    "unsafe": "red",
    "invalid": "red",
    "failed": "red",
    "plan-changed": "red",
    "skipped": "yellow",
}


def plain(stream: TextIO) -> bool:
    return bool(os.environ.get("NO_COLOR")) or not stream.isatty()


class Printer:
    """Lines for people: rich markup on a terminal, plain text elsewhere."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.rich = not plain(stream)
        self._console: Any = None

    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream, highlight=False, soft_wrap=True)
        return self._console

    def line(self, text: str, style: str | None = None) -> None:
        if self.rich:
            from rich.text import Text

            self.console().print(Text(text, style=style or ""))
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[str]],
        styles: Sequence[str | None] = (),
        indent: int = 2,
    ) -> None:
        """Aligned columns; the last one (the longest text) is never padded, so it only
        wraps at the screen's edge."""
        if self.rich:
            from rich.padding import Padding
            from rich.table import Table

            t = Table(box=None, show_edge=False, pad_edge=False, header_style="bold")
            for i, h in enumerate(headers):
                last = i == len(headers) - 1
                t.add_column(h, overflow="fold", no_wrap=not last)
            for i, row in enumerate(rows):
                t.add_row(*row, style=styles[i] if i < len(styles) else None)
            self.console().print(Padding(t, (0, 0, 0, indent)))
            return
        widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers[:-1])]
        pad = " " * indent

        def fmt(cells: Sequence[str]) -> str:
            head = [c.ljust(w) for c, w in zip(cells[:-1], widths, strict=True)]
            return pad + "  ".join([*head, cells[-1]])

        self.line(fmt(headers))
        for row in rows:
            self.line(fmt(row))


class Shortener:
    """`<pool>/3/project` → `project-abc123/3/project` for every pool dir given."""

    def __init__(self, pools: Sequence[str]) -> None:
        self.pools = sorted({p for p in pools if p}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for pool in self.pools:
            text = text.replace(pool + "/", os.path.basename(pool) + "/")
        return text


# -- one task -------------------------------------------------------------------------------------


def _what_was_done(o: Outcome) -> str:
    done = {s.step: s for s in o.steps if s.outcome == StepOutcome.DONE}
    parts = []
    if StepName.PARKED_RUN in done:
        parts.append("parked no-mistakes run aborted")
    if StepName.ENDPOINT in done:
        parts.append("window killed")
    ended = done.get(StepName.PROCESSES)
    if ended is not None and isinstance(ended.result, ProcessesResult):
        count = len(ended.result.ended)
        parts.append(f"{count} process{'' if count == 1 else 'es'} ended")
    if StepName.SAVE_DISCARDED in done:
        parts.append("unlanded work saved")
    if StepName.POOL in done:
        parts.append("slot returned to the pool")
    if StepName.BRANCH in done:
        parts.append("branch deleted")
    parts.append("record cleared" if StepName.RECORD in done else "record already gone")
    return ", ".join(parts)


def headline(o: Outcome) -> str:
    """The first line: the verdict in words an operator acts on."""
    d = o.decision
    task = o.task or "?"
    reasons = messages.reasons(o)
    say = (
        messages.said_text(d.headline)
        if d is not None and d.headline
        else (reasons[0] if reasons else "")
    )
    if o.exit_code == ExitCode.FAILED:
        failed = next((s for s in o.steps if s.outcome == StepOutcome.FAILED), None)
        cause = (
            f"{failed.step}: {step_words.detail(failed)}"
            if failed
            else (step_words.warnings_text(o) or ("?",))[-1]
        )
        return f"FAILED — {task} stopped at {cause}; the record is kept"
    if o.verdict == Verdict.PROCEED:
        if o.dry_run:
            return f"PROCEED — {task} can be torn down: {say}"
        return f"TORN DOWN — {task}: {_what_was_done(o)}"
    if o.verdict == Verdict.STALE:
        if o.dry_run:
            return f"STALE — {task}: {say}"
        # What is cleared starts this line; the rest is whose the slot is now.
        now = belongs_now(d.stale_owner) if d is not None and d.stale_owner else say
        return f"CLEARED — {task}'s window and record; {now}"
    return f"REFUSED — {o.verdict}: {say}; {messages.tail(o)}"


def _runbook_hint(name: str | None) -> str | None:
    return f"hint: runbook: fm runbook {name}" if name else None


@value
class DropIn:
    """The firstmate drop-in's output (`fm-teardown`): its first line (`REFUSED: …`,
    `error: …`), which replaces fm's own when given and may be the outcome's first reason
    itself (`lead_is_first_reason`: fm's detail lines then do not say it again); it ends with
    the script's completion line, not fm's."""

    lead: str | None = None
    lead_is_first_reason: bool = False


def render_outcome(
    o: Outcome, out: TextIO, err: TextIO, *, runbook: str | None, drop_in: DropIn | None = None
) -> None:
    """One task's outcome for people: the first line and the reasons under it, where, the
    owners, the plan or the steps as they ran, the warnings and hints, the runbook; a finished
    run ends with `teardown <id> complete` (not the drop-in's: `drop_in`)."""
    d = o.decision
    assert d is not None
    out_p, err_p = Printer(out), Printer(err)
    short = Shortener([d.pool] if d.pool else [])
    _first_lines(o, err_p if o.exit_code != 0 else out_p, short, drop_in)
    _where(o, out_p, short)
    if o.steps:
        if not o.dry_run:
            out_p.line("steps:", "bold")
        for i, s in enumerate(o.steps, 1):
            detail = step_words.detail(s)
            out_p.line(f"  {i}. {s.step} [{s.outcome}] {short(s.target)}: {short(detail)}")
    for text in step_words.warnings_text(o):
        err_p.line(f"warning: {short(text)}", "yellow")
    for h in o.hints:
        # Never shortened: a hint is a command to run from where the operator stands, so its
        # paths stay absolute.
        err_p.line(f"hint: {h}")
    if o.exit_code == ExitCode.FAILED and not o.interrupted:
        err_p.line(f"hint: re-run `fm teardown {o.task}` to finish (it re-checks ownership first)")
    hint = _runbook_hint(runbook)
    if hint:
        err_p.line(hint)
    if o.completed and drop_in is None:
        out_p.line(f"teardown {o.task} complete")
    if o.discarded_ref:
        out_p.line(f"discarded work saved under {o.discarded_ref}; to bring it back: {o.restore}")


def _first_lines(o: Outcome, first_p: Printer, short: Shortener, drop_in: DropIn | None) -> None:
    """The first line (the verdict in words, or the drop-in's), then the detail under it."""
    d = o.decision
    assert d is not None
    bad = o.exit_code != 0
    lead = drop_in.lead if drop_in is not None else None
    style = f"bold {VERDICT_STYLE.get(str(o.verdict), '')}"
    if o.interrupted:
        pass  # the "fm: interrupted …" line is the first line
    elif lead is not None:
        first_p.line(lead, style)
    else:
        first_p.line(short(headline(o)), style)
    # The detail under the first line: the reasons, verbatim (runbooks and scripts quote
    # them), but a live owner's own lines, which the owners table shows, and the first
    # reason when the drop-in's lead line is that reason already.
    details = list(messages.reasons(o))
    if o.verdict == Verdict.LIVE_OWNER:
        details = details[:1]
    if o.exit_code == ExitCode.FAILED:
        details = []  # the reasons to go ahead; the first line says what stopped it
    if lead is not None and drop_in is not None and drop_in.lead_is_first_reason:
        details = details[1:]
    elif lead is None and o.refused and details:
        # The first line said it already (`REFUSED — VERDICT: why`); the full slot path that
        # this reason adds is on the `task · slot` line. `--json` keeps it verbatim.
        details = details[1:]
    if d.verdict != Verdict.UNLANDED:
        # An unlanded refusal lists what fm could not tell among its reasons already.
        details += [f"could not tell: {n}" for n in d.notes]
    for r in details:
        # A refusal's reasons go verbatim (runbooks and scripts quote them); a go-ahead's
        # are shortened like the rest of stdout.
        first_p.line("  " + (r if bad else short(r)))


def _where(o: Outcome, out_p: Printer, short: Shortener) -> None:
    """Where: task, slot and endpoint, the pool, the owners of the slot, the plan's token."""
    d = o.decision
    assert d is not None
    where = [f"task {o.task}"]
    if d.slot:
        where.append(f"slot {d.slot}")  # in full: the one place an operator copies it from
    if d.endpoint:
        where.append(f"endpoint {d.endpoint}")
    out_p.line(" · ".join(where))
    if d.pool and not (d.slot or "").startswith(d.pool + "/"):
        out_p.line(f"  pool {os.path.basename(d.pool)} = {d.pool}")
    if d.owners:
        # A real run acts after this table was observed: say so (a discarded owner still
        # shows `alive yes` here).
        out_p.line(
            "owners of the slot:" if o.dry_run else "owners of the slot (before this run):", "bold"
        )
        out_p.table(
            ("ID", "KIND", "ENDPOINT", "LIVE", "WHY"),
            [
                (w.id, str(w.kind), str(w.endpoint), "yes" if w.live else "no", short(w.why))
                for w in d.owners
            ],
            ["red" if w.live else None for w in d.owners],
        )
    if o.dry_run and (o.plan_id or o.steps):
        # The token `--expect-plan` takes: a script approves exactly this plan.
        out_p.line(f"plan: {o.plan_id}" if o.plan_id else "plan:", "bold")


def render_error(err: FmError, stream: TextIO | None = None, runbook: str | None = None) -> None:
    """One clear line (plus hints, the runbook last) for a run that ended before deciding."""
    p = Printer(stream or sys.stderr)
    p.line(messages.error_line(err), "bold red")
    for h in err.hints:
        p.line(f"hint: {h}")
    hint = _runbook_hint(runbook)
    if hint:
        p.line(hint)


# -- the fleet audit ------------------------------------------------------------------------------


def _short_path(path: str | None, pools: tuple[str, ...]) -> str:
    """A slot as `<pool name>/<N>/<repo>` when it lies in a pool the audit read: full paths
    of pooled slots all share a long prefix and wrap into unreadability."""
    if not path:
        return "-"
    for pool in pools:
        if path.startswith(pool + "/"):
            return os.path.basename(pool) + path[len(pool) :]
    return path


def _why(r: AuditRow) -> str:
    """The row's one reason; a row that would proceed but is not finished says why not (what
    `--landed` would skip it for, and the opt-in that would include it)."""
    f = r.finished
    if f.finished or r.verdict not in (Verdict.PROCEED, Verdict.STALE):
        return messages.said_text(r.headline)
    opt = f" [include with {f.opt_in}]" if f.opt_in else ""
    return f"not finished: {messages.finished_reason(f)}{opt}"


# A WHY cell longer than this is cut (`…`); the reason is then said in full once, below the
# table, for every task it applies to (a socket doubt names every server: 600 characters).
_WHY_WIDTH = 120
# A reason on a row of any other table (a batch's summary, the tasks `--landed` did not
# select) fits the row: at most this long, and said in full once below it (spec §15.10).
ROW_REASON = 200


def cut(text: str, width: int = _WHY_WIDTH) -> str:
    """A row's reason as the row shows it: cut (`…`) past `width` characters."""
    return text if len(text) <= width else text[: width - 1] + "…"


def said_once(
    p: Printer, rows: Iterable[tuple[str, str]], title: str, width: int = _WHY_WIDTH
) -> None:
    """Each reason a row showed cut, in full, once, with the tasks it is theirs: below the
    table (the JSON has every row's in full)."""
    by_reason: dict[str, list[str]] = {}
    for task, why in rows:
        if len(why) > width:
            by_reason.setdefault(why, []).append(task)
    if not by_reason:
        return
    p.line(title, "bold")
    for why, tasks in by_reason.items():
        p.line(f"  {', '.join(tasks)}: {why}")


def _reasons_in_full(p: Printer, rows: Sequence[AuditRow]) -> None:
    said_once(
        p, ((r.task, _why(r)) for r in rows), "WHY in full (cut above; --json has every row's):"
    )


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
        headers = ("TASK", "VERDICT", "EXIT", "ENDPOINT", "FINISHED", "SLOT", "WHY")
        table = [
            (
                r.task,
                str(r.verdict),
                str(r.exit_code),
                r.endpoint or "-",
                "yes" if r.finished.finished else "no",
                _short_path(r.slot, a.pools),
                cut(_why(r)),
            )
            for r in a.rows
        ]
        styles = [VERDICT_STYLE.get(str(r.verdict)) for r in a.rows]
        p.table(headers, table, styles, indent=0)
        _reasons_in_full(p, a.rows)
    if a.shared_slots:
        p.line("slots claimed by more than one record:", "bold")
        for slot, tasks in a.shared_slots:
            p.line(f"  {_short_path(slot, a.pools)}: {', '.join(tasks)}")
    if a.orphans:
        p.line("loose ends (no record accounts for them; they change no exit code):", "bold")
        for o in a.orphans:
            where = f" in {_short_path(o.slot, a.pools)}" if o.slot else ""
            p.line(f"  {o.kind} {o.id}{where}: {o.detail}")
