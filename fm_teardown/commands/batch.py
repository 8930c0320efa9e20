"""Several tasks at once (spec §9): `fm teardown A B C` and `fm teardown --landed`.

Each task is torn down exactly as `fm teardown TASK` alone would be, one after another: its
own decision (made again at its turn), its own slot lock and re-check, its own journal line.
A refusal changes nothing and the batch goes on; a failure stops it and the tasks after it are
`skipped`; an interrupt stops the current task at a step boundary and skips the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any, cast

from fm_teardown.adapters import interrupts
from fm_teardown.commands.one import interrupted_before_acting, journalled, with_expected_plan
from fm_teardown.model import messages
from fm_teardown.model.errors import ExitCode, FmError, Verdict
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import Flags
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.report import human, journal
from fm_teardown.report import render as report
from fm_teardown.report.human import VERDICT_STYLE

if TYPE_CHECKING:
    from fm_teardown.decide.finished import Options
    from fm_teardown.model.plan import Planned
    from fm_teardown.observe.landed import LandedFacts
    from fm_teardown.pipeline import Guard

__all__ = [
    "IDENTITY_FIELDS",
    "NotChosen",
    "Result",
    "Selection",
    "Skipped",
    "exit_code",
    "named",
    "run",
    "select_landed",
]


@value
class Skipped:
    """A task the batch did not reach."""

    task: str
    why: str


Result = Outcome | Skipped


def exit_code(results: list[Result], *, interrupted: bool = False) -> int:
    """0 when every task exited 0; else 1 when any failed or was skipped (130 when the batch
    was interrupted); else the largest refusal code."""
    codes = [r.exit_code for r in results if isinstance(r, Outcome)]
    if interrupted or any(isinstance(r, Outcome) and r.interrupted for r in results):
        return int(ExitCode.INTERRUPTED)
    if all(c == 0 for c in codes) and len(codes) == len(results):
        return 0
    if any(c == ExitCode.FAILED for c in codes) or len(codes) < len(results):
        return int(ExitCode.FAILED)
    return max(codes)


@value
class NotChosen:
    """A task `--landed` did not select: its verdict, the one reason, the opt-in (if any)."""

    task: str
    verdict: str
    reason: str
    opt_in: str | None


@value
class Selection:
    tasks: tuple[str, ...]
    # task -> the launch seen when selecting (finished.identity): changed means relaunched.
    identities: dict[str, tuple[object, ...]] = field(default_factory=dict)
    not_selected: tuple[NotChosen, ...] = ()


IDENTITY_FIELDS = ("window", "worktree", "spawn_gen", "meta inode", "meta mtime")


def select_landed(s: Settings, opts: Options) -> Selection:
    """`--landed`: every finished task (finished.classify, the audit's own column), from one
    observation of the fleet, in task-id order; the others with their one reason."""
    from fm_teardown.decide.audit import audit

    rows = sorted(audit(s, opts).rows, key=lambda r: r.task)
    chosen = [r for r in rows if r.finished.finished]
    return Selection(
        tuple(r.task for r in chosen),
        {r.task: r.identity for r in chosen if r.identity is not None},
        tuple(
            NotChosen(r.task, str(r.verdict), r.finished.reason, r.finished.opt_in)
            for r in rows
            if not r.finished.finished
        ),
    )


def named(s: Settings, tasks: list[str]) -> Selection:
    """`fm teardown A B C`: the launches named, as they are now (a task relaunched before
    its turn is skipped, not torn down in its new slot)."""
    from fm_teardown.decide.finished import identity
    from fm_teardown.model.records import load_fleet
    from fm_teardown.observe.observation import observe

    try:
        fleet = load_fleet(s.state_dir)
    except FmError:
        return Selection(tuple(tasks))  # each task reports the problem at its turn
    present = {t: fleet.records[t] for t in tasks if t in fleet.records}
    if not present:
        return Selection(tuple(tasks))
    obs = observe(s, fleet)
    return Selection(
        tuple(tasks),
        {t: identity(r, obs.endpoints[t].window_ids) for t, r in present.items()},
    )


def _guard(
    task: str,
    selection: Selection,
    returned: dict[str, str],
    opts: Options | None,
) -> Guard:
    """At its turn, TASK is selected again, not only decided again."""

    def guard(planned: Planned) -> str | None:
        from fm_teardown.decide.finished import classify, identity

        record = planned.fleet.records.get(task)
        ep = planned.observation.endpoints.get(task) if record is not None else None
        want = selection.identities.get(task)
        if want is not None and record is not None and ep is not None:
            now = identity(record, ep.window_ids)
            what = [n for n, a, b in zip(IDENTITY_FIELDS, want, now, strict=True) if a != b]
            if what[:1] == ["window"] and set(cast(tuple[str, ...], now[0])) <= set(
                cast(tuple[str, ...], want[0])
            ):
                what = what[1:]  # a window that went away is no relaunch; a new one is
            if what:
                return (
                    f"relaunched: its record changed since it was selected ({', '.join(what)}); "
                    f"nothing was done: run fm teardown {task} --dry-run to see the new launch"
                )
        d = planned.decision
        if d.pool_return is not None and d.slot in returned:
            return (
                f"slot {d.slot} was returned earlier in this batch (by {returned[d.slot]}): it "
                f"is no longer the slot {task} was selected with; nothing was done: run "
                f"fm teardown {task} --dry-run"
            )
        if opts is not None and d.verdict in (Verdict.PROCEED, Verdict.STALE):
            verdict = classify(
                d.verdict,
                d.headline,
                str(ep.state) if ep is not None else None,
                ep.detail if ep is not None else "",
                record,
                cast("LandedFacts | None", planned.landed),
                opts,
            )
            if not verdict.finished:
                return f"no longer finished: {verdict.reason}; nothing was done"
        return None

    return guard


def run(
    s: Settings,
    selection: Selection,
    flags: Flags,
    *,
    json_out: bool,
    one: Callable[[Settings, str, Flags, Guard | None], Outcome],
    landed: bool = False,
    opts: Options | None = None,
    plans: dict[str, str] | None = None,
    again: tuple[str, ...] = (),
) -> int:
    """Tear down `selection` one task after another; the batch's exit code. `again`: the
    options a command finishing this batch repeats (`--state-dir DIR`)."""
    from fm_teardown.pipeline import NotSelected

    tasks = list(selection.tasks)
    results: list[Result] = []
    progress = not json_out and sys.stderr.isatty()
    if landed and not json_out:
        _render_selection(selection)
    returned: dict[str, str] = {}  # slot -> the task of this batch that returned it
    stopped = False
    with interrupts.while_batch():
        for i, task in enumerate(tasks):
            if interrupts.requested():
                stopped = True
                results += [Skipped(t, "not run: interrupted") for t in tasks[i:]]
                break
            if progress:
                left = len(tasks) - i - 1
                sys.stderr.write(f"[{i + 1}/{len(tasks)}] fm teardown {task} ({left} left)\n")
            guard = _guard(task, selection, returned, opts if landed else None)
            try:
                mine = flags if plans is None else with_expected_plan(flags, task, plans)
                outcome = one(s, task, mine, guard)
            except NotSelected as skip:
                results.append(Skipped(task, skip.reason))
                continue
            except KeyboardInterrupt:
                # Interrupted while deciding: this task changed nothing.
                outcome = interrupted_before_acting(task, flags)
            if journalled(outcome, task) and not flags.no_journal:
                journal.append(s.data_dir, journal.result_entry(outcome, flags))
            results.append(outcome)
            d = outcome.decision
            if (
                d is not None
                and d.slot is not None
                and any(st.step == "pool" and st.outcome == "done" for st in outcome.steps)
            ):
                returned[d.slot] = task
            if not json_out:
                report.render(outcome, json_out=False)
            stopped = outcome.interrupted or interrupts.requested()
            if stopped or outcome.exit_code == ExitCode.FAILED:
                why = "interrupted" if stopped else f"{task} failed"
                results += [Skipped(t, f"not run: {why}") for t in tasks[i + 1 :]]
                break
        code = exit_code(results, interrupted=stopped)
        not_done = _not_done(results)
        finish = _finish_command(not_done, flags, plans, landed, opts, again) if not_done else None
        if json_out:
            doc = _batch_json(results, dry_run=flags.dry_run, code=code)
            if finish is not None:
                doc["not_done"] = not_done
                doc["finish"] = finish
            if landed:
                doc["not_selected"] = [
                    {"task": n.task, "verdict": n.verdict, "reason": n.reason, "opt_in": n.opt_in}
                    for n in selection.not_selected
                ]
            report.emit_json(doc)
        else:
            _render_summary(results, code, not_done, finish)
    return code


def _not_done(results: list[Result]) -> list[str]:
    """The tasks a stopped batch did not finish: interrupted, failed or never reached.
    A refusal is not among them: it needs the operator first (its hints say what)."""
    return [
        r.task or ""
        for r in results
        if isinstance(r, Skipped) or r.interrupted or r.exit_code == ExitCode.FAILED
    ]


def _finish_command(
    left: list[str],
    flags: Flags,
    plans: dict[str, str] | None,
    landed: bool,
    opts: Options | None,
    again: tuple[str, ...],
) -> str:
    """One command that finishes what a stopped batch left: the tasks not done, by name (a
    task finished meanwhile is reported `already torn down`), or `--landed` again."""
    import shlex

    if landed:
        words = ["fm", "teardown", "--landed"]
        if opts is not None:
            words += ["--include-live"] if opts.include_live else []
            words += ["--include-pushed"] if opts.include_pushed else []
            words += ["--min-age", f"{opts.min_age:g}s"]
    else:
        words = ["fm", "teardown", *left]
        for task in left:
            if plans is not None and task in plans:
                words += ["--expect-plan", f"{task}={plans[task]}"]
    if flags.dry_run:
        words.append("--dry-run")
    if flags.no_journal:
        words.append("--no-journal")
    return shlex.join([*words, *again])


def _render_selection(selection: Selection) -> None:
    p = human.Printer(sys.stdout)
    tasks = selection.tasks
    p.line(
        f"--landed selected {len(tasks)} task{'s' if len(tasks) != 1 else ''}: "
        + (", ".join(tasks) if tasks else "none"),
        "bold",
    )
    if selection.not_selected:
        p.line(f"not selected ({len(selection.not_selected)}):", "bold")
        width = max(len(n.task) for n in selection.not_selected)
        for n in selection.not_selected:
            opt = f" [include with {n.opt_in}]" if n.opt_in else ""
            p.line(f"  {n.task:<{width}}  {n.reason}{opt}")


def _result_json(r: Result) -> dict[str, Any]:
    if isinstance(r, Skipped):
        return {"task": r.task, "verdict": "skipped", "exit_code": None, "reasons": [r.why]}
    return report.outcome_json(r)


def _batch_json(results: list[Result], *, dry_run: bool, code: int) -> dict[str, Any]:
    return {
        "schema": report.SCHEMA,
        "batch": True,
        "dry_run": dry_run,
        "exit_code": code,
        "results": [_result_json(r) for r in results],
    }


def _what_was_done(r: Result) -> str:
    if isinstance(r, Skipped):
        return r.why
    d = r.decision
    reasons = messages.reasons(r)
    headline = d.headline if d is not None else (reasons[0] if reasons else "")
    if r.interrupted:
        return "interrupted; the record is kept: re-run to finish"
    if r.exit_code == ExitCode.FAILED:
        failed = next((s for s in r.steps if s.outcome == "failed"), None)
        return f"stopped at {failed.step}" if failed else "stopped"
    if r.exit_code != 0:
        return f"refused: {headline}"
    if r.verdict == Verdict.ALREADY:
        return reasons[0] if reasons else "already torn down"
    if r.dry_run:
        return (
            f"would {'clear its window and record' if r.verdict == Verdict.STALE else 'tear down'}"
        )
    if r.verdict == Verdict.STALE:
        return "window and record cleared; the slot left to its owner"
    returned = any(s.step == "pool" and s.outcome == "done" for s in r.steps)
    return "torn down" + ("; slot returned" if returned else "")


def _render_summary(results: list[Result], code: int, left: list[str], finish: str | None) -> None:
    p = human.Printer(sys.stdout)
    p.line(f"summary ({len(results)} task{'s' if len(results) != 1 else ''}, exit {code}):", "bold")
    if not results:
        p.line("  nothing to do")
        return
    width = max(len(str(getattr(r, "task", ""))) for r in results)
    for r in results:
        verdict = "skipped" if isinstance(r, Skipped) else str(r.verdict)
        ec = "-" if isinstance(r, Skipped) else str(r.exit_code)
        task = r.task if isinstance(r, Skipped) else (r.task or "")
        p.line(
            f"  {task:<{width}}  {verdict:<10}  {ec:>3}  {_what_was_done(r)}",
            VERDICT_STYLE.get(verdict),
        )
    if finish is not None:
        p.line(f"not done: {', '.join(left)}; to finish them: {finish}", "bold")
