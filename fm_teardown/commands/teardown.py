"""`fm teardown`: flags → pipeline → journal → output → exit code.

One TASK, several (a batch, spec §9), `--landed` (a batch of what the audit says is
ready), or none with `--dry-run` (the fleet audit, spec §8).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from fm_teardown.adapters import interrupts
from fm_teardown.decide import fingerprint
from fm_teardown.model import settings
from fm_teardown.model.errors import ExitCode, FmError, invalid
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import Flags
from fm_teardown.model.records import shown
from fm_teardown.pipeline import (
    interrupted_before_acting,
    journal_result,
    run_one,
    with_expected_plan,
)
from fm_teardown.report import human
from fm_teardown.report import render as report

if TYPE_CHECKING:
    from fm_teardown.decide.finished import Options
    from fm_teardown.model.world import Orphan

__all__ = ["USAGE", "teardown"]

USAGE = (
    "usage: fm teardown TASK [TASK ...] [--dry-run] [--force] [--json] "
    "[--expect-plan [TASK=]TOKEN ...] [--no-journal] | --landed "
    "[--include-live] [--include-pushed] [--min-age DURATION] | --dry-run"
)


def teardown(
    *,
    tasks: list[str],
    dry_run: bool,
    force: bool,
    discard_live_owner: str | None,
    landed: bool,
    json_out: bool,
    state_dir: str | None,
    include_live: bool = False,
    include_pushed: bool = False,
    min_age: str | None = None,
    expect_plan: list[str] | None = None,
    no_journal: bool = False,
) -> int:
    from fm_teardown.decide.finished import DEFAULT_MIN_AGE, Options, parse_duration

    flags = Flags(
        force=force, discard_live_owner=discard_live_owner, dry_run=dry_run, no_journal=no_journal
    )
    first = tasks[0] if len(tasks) == 1 else None
    age = DEFAULT_MIN_AGE if min_age is None else parse_duration(min_age)
    try:
        s = settings.load(state_dir)
        refused = _combination(tasks, flags, landed)
        expected = _expected_plans(expect_plan or [], tasks, landed)
        if age is None:
            refused = refused or invalid(
                "--min-age takes a duration of at most 100 years, such as 90s, 10m, 1h or 2d "
                f"(or 0), not '{shown(min_age or '', 40)}'",
                USAGE,
            )
        elif (
            not landed
            and (include_live or include_pushed or min_age is not None)
            and (tasks or not dry_run)
        ):
            refused = refused or invalid(
                "--include-live, --include-pushed and --min-age choose what --landed "
                "selects: give them with --landed (or with the audit, --dry-run)",
                USAGE,
            )
    except FmError as err:
        return _usage(first, err, flags, json_out)
    if refused is not None or age is None:
        assert refused is not None
        return _usage(first, refused, flags, json_out)
    opts = Options(include_live=include_live, include_pushed=include_pushed, min_age=age)
    if landed or len(tasks) > 1:
        from fm_teardown import selection as select
        from fm_teardown.commands import batch

        with interrupts.while_deciding():
            try:
                selection = select.select_landed(s, opts) if landed else select.named(s, tasks)
            except FmError as err:
                return _usage(None, err, flags, json_out)
            except KeyboardInterrupt:
                from fm_teardown.report import console

                console.interrupted("selecting")
                return int(ExitCode.INTERRUPTED)
            return batch.run(
                s,
                selection,
                flags,
                json_out=json_out,
                one=run_one,
                landed=landed,
                opts=opts,
                plans=expected,
                again=("--state-dir", str(s.state_dir)) if state_dir else (),
            )
    if not tasks:
        if expected is not None:
            return _usage(None, invalid("--expect-plan needs a TASK", USAGE), flags, json_out)
        return _audit(s, dry_run=dry_run, flags=flags, json_out=json_out, opts=opts)
    task = tasks[0]
    if expected is not None:
        flags = with_expected_plan(flags, task, expected)
    with interrupts.while_deciding():
        try:
            outcome = run_one(s, task, flags)
        except KeyboardInterrupt:
            outcome = interrupted_before_acting(task, flags)
    # Every real run for a valid task id is journalled, refusals included.
    journal_result(s, outcome, task, flags)
    report.render(outcome, json_out=json_out)
    return outcome.exit_code


def _combination(tasks: list[str], flags: Flags, landed: bool) -> FmError | None:
    """The flag combinations spec §9 forbids (exit 2)."""
    if landed and tasks:
        return invalid("--landed selects the tasks itself: give no TASK with it", USAGE)
    if landed and (flags.force or flags.discard_live_owner is not None):
        return invalid(
            "--landed cannot be combined with --force or --discard-live-owner: it tears down "
            "only what is landed",
            USAGE,
        )
    if len(tasks) > 1 and (flags.force or flags.discard_live_owner is not None):
        return invalid(
            "--force and --discard-live-owner take one task at a time",
            f"fm teardown {tasks[0]} --force ...",
        )
    if len(set(tasks)) != len(tasks):
        return invalid("a task is named more than once: " + ", ".join(tasks), USAGE)
    return None


def _usage(task: str | None, err: FmError, flags: Flags, json_out: bool) -> int:
    outcome = Outcome.of_error(task, err, dry_run=flags.dry_run)
    report.render(outcome, json_out=json_out)
    return outcome.exit_code


def _expected_plans(values: list[str], tasks: list[str], landed: bool) -> dict[str, str] | None:
    """`--expect-plan TOKEN` (one TASK) or `--expect-plan TASK=TOKEN` (any number of TASKs,
    repeated once per task) as {task: token}; None when not given. Bad ones: exit 2."""
    if not values:
        return None
    out: dict[str, str] = {}
    for value in values:
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


def _unfinished_runs(s: settings.Settings) -> tuple[Orphan, ...]:
    """Real runs that journalled their intent and no result: they died partway (a crash)."""
    from fm_teardown.model.world import Orphan
    from fm_teardown.report import journal

    return tuple(
        Orphan("unfinished-teardown", task, None, journal.unfinished_line(intent))
        for task, intent in sorted(journal.unfinished(s.data_dir).items())
    )


def _audit(
    s: settings.Settings, *, dry_run: bool, flags: Flags, json_out: bool, opts: Options
) -> int:
    try:
        if not dry_run:
            raise invalid("give a TASK to tear down, or --dry-run to audit the fleet", USAGE)
        if flags.force or flags.discard_live_owner is not None:
            raise invalid("--force and --discard-live-owner need a TASK")
        from fm_teardown.audit import audit

        result = audit(s, opts)
        # The journal is the report stage's: the runs it shows unfinished join the orphans here.
        result = replace(result, orphans=(*result.orphans, *_unfinished_runs(s)))
    except FmError as err:
        if json_out and dry_run:
            report.emit_json(report.audit_error_json(err))
        elif json_out:
            report.emit_json(report.usage_error_json(None, err, dry_run=dry_run))
        else:
            human.render_error(err, runbook=report.error_runbook(err))
        return int(err.exit_code)
    if json_out:
        report.emit_json(report.audit_json(result))
    else:
        human.render_audit(result)
    return int(ExitCode.OK)
