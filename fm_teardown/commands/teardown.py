"""`fm teardown`: flags → pipeline → journal → output → exit code."""

from __future__ import annotations

from fm_teardown import journal, report, settings
from fm_teardown.errors import ExitCode, FmError, Verdict, invalid
from fm_teardown.outcome import Outcome
from fm_teardown.plan import Flags
from fm_teardown.records import task_id_problem


def teardown(
    *,
    task: str | None,
    dry_run: bool,
    force: bool,
    discard_live_owner: str | None,
    json_out: bool,
    state_dir: str | None,
) -> int:
    flags = Flags(force=force, discard_live_owner=discard_live_owner, dry_run=dry_run)
    try:
        s = settings.load(state_dir)
    except FmError as err:
        outcome = Outcome.of_error(task, err, dry_run=dry_run)
        report.render(outcome, json_out=json_out)
        return outcome.exit_code
    if task is None:
        return _audit(s, dry_run=dry_run, flags=flags, json_out=json_out)
    outcome = run_one(s, task, flags)
    if journalled(outcome, task):
        # Every real run for a valid task id is journalled, refusals included.
        journal.append(s.data_dir, journal.entry_of(outcome, flags))
    report.render(outcome, json_out=json_out)
    return outcome.exit_code


def run_one(s: settings.Settings, task: str, flags: Flags) -> Outcome:
    """One task's teardown (or dry run) as an Outcome: never raises FmError."""
    if flags.discard_live_owner is not None and flags.discard_live_owner == "":
        return Outcome.of_error(
            task,
            invalid("--discard-live-owner needs the id of the live owner"),
            dry_run=flags.dry_run,
        )
    if not flags.dry_run and task_id_problem(task) is None:
        import os

        from fm_teardown import gate

        refused = gate.refusal(os.environ, os.getcwd())
        if refused is not None:
            return Outcome.of_error(task, refused, dry_run=False)
    from fm_teardown import pipeline

    return pipeline.teardown(s, task, flags)


def journalled(outcome: Outcome, task: str) -> bool:
    return (
        not outcome.dry_run and outcome.verdict != Verdict.INVALID and task_id_problem(task) is None
    )


def _audit(s: settings.Settings, *, dry_run: bool, flags: Flags, json_out: bool) -> int:
    try:
        if not dry_run:
            raise invalid(
                "give a TASK to tear down, or --dry-run to audit the fleet",
                "usage: fm teardown TASK [--dry-run] [--force] [--json]",
            )
        if flags.force or flags.discard_live_owner is not None:
            raise invalid("--force and --discard-live-owner need a TASK")
        from fm_teardown.audit import audit

        result = audit(s)
    except FmError as err:
        if json_out and dry_run:
            report.emit_json(report.audit_error_json(err))
        elif json_out:
            report.emit_json(report.usage_error_json(None, err, dry_run=dry_run))
        report.render_error(err)
        return int(err.exit_code)
    if json_out:
        report.emit_json(report.audit_json(result))
    else:
        report.render_audit(result)
    return int(ExitCode.OK)
