"""`fm teardown`: the command line → a `Request` → the pipeline → output → exit code.

One TASK, several (a batch, spec §9), `--landed` (a batch of what the audit says is
ready), or none with `--dry-run` (the fleet audit, spec §8). `parse` is the one place the
options are checked: every combination the spec forbids is refused there (exit 2), before
anything is looked at; what it builds is passed down whole (`model/request.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fm_teardown.decide import fingerprint
from fm_teardown.model import settings
from fm_teardown.model.errors import ExitCode, FmError, invalid
from fm_teardown.model.records import shown
from fm_teardown.model.request import (
    DEFAULT_MIN_AGE,
    Asked,
    CommandLine,
    Flags,
    Options,
    Request,
)
from fm_teardown.report import json_out

__all__ = ["USAGE", "BadRequest", "audits", "parse", "teardown"]

USAGE = (
    "usage: fm teardown TASK [TASK ...] [--dry-run] [--force] [--json] "
    "[--expect-plan [TASK=]TOKEN ...] [--no-journal] | --landed "
    "[--include-live] [--include-pushed] [--min-age DURATION] | --dry-run"
)


class BadRequest(Exception):
    """A command line `fm teardown` cannot take (exit 2, or the settings' own error). The
    audit's own refusals (`audit`) are said in the audit's JSON shape with `--dry-run`."""

    def __init__(self, err: FmError, *, audit: bool = False) -> None:
        super().__init__(err.message)
        self.err = err
        self.audit = audit


def audits(tasks: Sequence[str], *, dry_run: bool, landed: bool) -> bool:
    """Does the line ask for the audit (no TASK, `--dry-run`, no `--landed`)? Then whatever
    refuses it is said in the audit's own shape, as the audit's answer would be."""
    return not tasks and dry_run and not landed


def teardown(line: CommandLine) -> int:
    """`fm teardown ...` as typed: its exit code."""
    try:
        s, request = parse(line)
    except BadRequest as bad:
        if bad.audit or audits(line.tasks, dry_run=line.dry_run, landed=line.landed):
            return _audit_error(bad.err, as_json=line.json, dry_run=line.dry_run)
        return _usage(line.tasks[0] if len(line.tasks) == 1 else None, bad.err, line)
    if request.asked == Asked.AUDIT:
        return _audit(s, request)
    # A run's pipeline and words, imported for a run only: an audit needs neither (it is
    # fm's most frequent look at the whole fleet).
    from fm_teardown.report import render as report

    if request.asked == Asked.ONE:
        from fm_teardown.pipeline.one_task import teardown_task
        from fm_teardown.pipeline.stages import TaskRun

        task = request.tasks[0]
        outcome = teardown_task(TaskRun(s, task, request.flags_for(task)))
        report.render(outcome, json_out=request.json)
        return outcome.exit_code
    from fm_teardown.commands import batch

    return batch.run(s, request)


def parse(line: CommandLine) -> tuple[settings.Settings, Request]:
    """The settings and the request; BadRequest for a line that cannot be taken. The checks
    keep their order: the settings, `--expect-plan`'s values, the combinations of options,
    `--min-age` and the `--landed` opt-ins, then what the audit and one task refuse."""
    from fm_teardown.decide.finished import parse_duration

    age = DEFAULT_MIN_AGE if line.min_age is None else parse_duration(line.min_age)
    try:
        s = settings.load(line.state_dir)
        refused = _combination(line)
        plans = _expected_plans(line)
    except FmError as err:
        raise BadRequest(err) from None
    refused = refused or _landed_options(line, age)
    if refused is not None or age is None:
        assert refused is not None
        raise BadRequest(refused)
    flags = Flags.given(
        force=line.force,
        discard_live_owner=line.discard_live_owner,
        dry_run=line.dry_run,
        no_journal=line.no_journal,
    )
    asked = _asked(line)
    opts = Options(include_live=line.include_live, include_pushed=line.include_pushed, min_age=age)
    return s, Request(asked, line.tasks, flags, opts, plans, line.json, line.state_dir)


def _asked(line: CommandLine) -> Asked:
    """What the line asks; the audit's and one task's own refusals."""
    if line.landed:
        return Asked.LANDED
    if len(line.tasks) > 1:
        return Asked.NAMED
    if not line.tasks:  # (an --expect-plan without a TASK was refused with the plans)
        if not line.dry_run:
            raise BadRequest(
                invalid("give a TASK to tear down, or --dry-run to audit the fleet", USAGE),
                audit=True,
            )
        if line.force or line.discard_live_owner is not None:
            raise BadRequest(invalid("--force and --discard-live-owner need a TASK"), audit=True)
        return Asked.AUDIT
    if line.discard_live_owner == "":
        raise BadRequest(invalid("--discard-live-owner needs the id of the live owner"))
    return Asked.ONE


def _combination(line: CommandLine) -> FmError | None:
    """The flag combinations spec §9 forbids (exit 2)."""
    tasks, discards = line.tasks, line.force or line.discard_live_owner is not None
    if line.landed and tasks:
        return invalid("--landed selects the tasks itself: give no TASK with it", USAGE)
    if line.landed and discards:
        return invalid(
            "--landed cannot be combined with --force or --discard-live-owner: it tears down "
            "only what is landed",
            USAGE,
        )
    if len(tasks) > 1 and discards:
        return invalid(
            "--force and --discard-live-owner take one task at a time",
            f"fm teardown {tasks[0]} --force ...",
        )
    if len(set(tasks)) != len(tasks):
        return invalid("a task is named more than once: " + ", ".join(tasks), USAGE)
    return None


def _landed_options(line: CommandLine, age: float | None) -> FmError | None:
    """`--min-age` a duration; `--include-live`, `--include-pushed`, `--min-age` only with
    `--landed` (or the audit)."""
    if age is None:
        return invalid(
            "--min-age takes a duration of at most 100 years, such as 90s, 10m, 1h or 2d "
            f"(or 0), not '{shown(line.min_age or '', 40)}'",
            USAGE,
        )
    chooses = line.include_live or line.include_pushed or line.min_age is not None
    if not line.landed and chooses and (line.tasks or not line.dry_run):
        return invalid(
            "--include-live, --include-pushed and --min-age choose what --landed "
            "selects: give them with --landed (or with the audit, --dry-run)",
            USAGE,
        )
    return None


def _expected_plans(line: CommandLine) -> dict[str, str] | None:
    """`--expect-plan TOKEN` (one TASK) or `--expect-plan TASK=TOKEN` (any number of TASKs,
    repeated once per task) as {task: token}; None when not given. Bad ones: exit 2."""
    if not line.expect_plan:
        return None
    tasks, landed = line.tasks, line.landed
    if not tasks and not landed:
        raise invalid("--expect-plan needs a TASK", USAGE)
    out: dict[str, str] = {}
    for value in line.expect_plan:
        task, eq, token = value.rpartition("=")
        if not eq:
            if len(tasks) != 1 or landed:
                raise invalid(
                    "with several tasks (or --landed), give one --expect-plan TASK=TOKEN per task",
                    USAGE,
                )
            task = tasks[0]
        bad = fingerprint.problem(token)
        if bad is not None:
            raise invalid(f"--expect-plan: {bad}", USAGE)
        if task in out:
            raise invalid(f"--expect-plan names {task} more than once", USAGE)
        if not landed and task not in tasks:
            raise invalid(f"--expect-plan names {task}, which is not a TASK of this run", USAGE)
        out[task] = token
    if not landed:
        missing = [t for t in tasks if t not in out]
        if missing:
            raise invalid("--expect-plan gives no token for " + ", ".join(missing), USAGE)
    return out


def _usage(task: str | None, err: FmError, line: CommandLine) -> int:
    from fm_teardown.model.outcome import Outcome
    from fm_teardown.report import render as report

    outcome = Outcome.of_error(task, err, dry_run=line.dry_run)
    report.render(outcome, json_out=line.json)
    return outcome.exit_code


def _audit(s: settings.Settings, request: Request) -> int:
    from fm_teardown.pipeline.audit import fleet_audit

    try:
        result = fleet_audit(s, request.select)
    except FmError as err:
        return _audit_error(err, as_json=request.json, dry_run=True)
    if request.json:
        from fm_teardown.report.audit_view import audit_json

        json_out.emit_json(audit_json(result))
    else:
        from fm_teardown.report import human

        human.render_audit(result)
    return int(ExitCode.OK)


def _audit_error(err: FmError, *, as_json: bool, dry_run: bool) -> int:
    """The audit could not run, or was asked without what it needs."""
    if as_json and dry_run:
        from fm_teardown.report.audit_view import audit_error_json

        json_out.emit_json(audit_error_json(err))
    elif as_json:
        from fm_teardown.report import render

        json_out.emit_json(render.usage_error_json(None, err, dry_run=dry_run))
    else:
        from fm_teardown.report import human

        human.render_error(err, runbook=json_out.error_runbook(err))
    return int(err.exit_code)
