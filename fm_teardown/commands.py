"""`fm teardown`: turn flags into a pipeline run and the run into output and an exit code."""

from __future__ import annotations

from fm_teardown import journal, report, settings
from fm_teardown.decide import Flags
from fm_teardown.errors import ExitCode, FmError, Verdict, invalid
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
    s: settings.Settings | None = None
    try:
        s = settings.load(state_dir)
        if task is None:
            if not dry_run:
                raise invalid(
                    "give a TASK to tear down, or --dry-run to audit the fleet",
                    "usage: fm teardown TASK [--dry-run] [--force] [--json]",
                )
            if force or discard_live_owner is not None:
                raise invalid("--force and --discard-live-owner need a TASK")
            from fm_teardown.audit import audit

            result = audit(s)
            if json_out:
                report.emit_json(report.audit_json(result))
            else:
                report.render_audit(result)
            return int(ExitCode.OK)
        flags = Flags(force=force, discard_live_owner=discard_live_owner, dry_run=dry_run)
        if discard_live_owner is not None and discard_live_owner == "":
            raise invalid("--discard-live-owner needs the id of the live owner")
        from fm_teardown import pipeline

        planned = pipeline.plan(s, task, flags)
        decision = planned.decision
        if dry_run:
            if json_out:
                report.emit_json(report.decision_json(decision, dry_run=True))
            else:
                report.render_decision(decision, dry_run=True)
            return decision.exit_code
        from fm_teardown import act

        return act.run(s, planned, flags, json_out=json_out)
    except FmError as err:
        if (
            not dry_run
            and task is not None
            and err.verdict != Verdict.INVALID
            and task_id_problem(task) is None
            and s is not None
        ):
            # Every real run for a valid task id is journalled, refusals included.
            journal.append(
                s.data_dir,
                journal.entry(
                    task,
                    {"force": force, "discard_live_owner": discard_live_owner},
                    str(err.verdict),
                    int(err.exit_code),
                ),
            )
        if json_out and task is None and dry_run:
            report.emit_json(report.audit_error_json(err))
        elif json_out:
            report.emit_json(report.error_json(task, err, dry_run=dry_run))
        report.render_error(err)
        return int(err.exit_code)
