"""One task's teardown, shared by `fm teardown TASK`, batches and `fm-teardown`.

Takes firstmate's lifecycle locks for a real run, reports a task the journal says was torn
down already (a re-run converges, spec §14.4), journals the intent before acting, and runs
the pipeline. Journalling the result and rendering are the callers'.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fm_teardown.model import settings
from fm_teardown.model.errors import ExitCode, FmError, Verdict, invalid
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.plan import Decision, Flags
from fm_teardown.model.records import task_id_problem

if TYPE_CHECKING:
    from fm_teardown.pipeline import Guard

__all__ = [
    "already_torn_down",
    "interrupted_before_acting",
    "journalled",
    "run_one",
    "with_expected_plan",
]


def run_one(
    s: settings.Settings,
    task: str,
    flags: Flags,
    guard: Guard | None = None,
    *,
    journal_required: bool = True,
    converge: bool = True,
) -> Outcome:
    """One task's teardown (or dry run) as an Outcome: never raises FmError.

    `journal_required`: a real run whose intent cannot be journalled refuses (exit 5);
    False only warns (the firstmate drop-in: the script it replaces had no journal).
    `converge`: a task with no record that the journal says was torn down is reported
    `already torn down` (exit 0) rather than `no such task`; False for the drop-in, which
    keeps the script's `no meta` error."""
    if flags.discard_live_owner is not None and flags.discard_live_owner == "":
        return Outcome.of_error(
            task,
            invalid("--discard-live-owner needs the id of the live owner"),
            dry_run=flags.dry_run,
        )
    if not flags.dry_run and task_id_problem(task) is None:
        from fm_teardown.observe import gate

        refused = gate.refusal(os.environ, os.getcwd())
        if refused is not None:
            return Outcome.of_error(task, refused, dry_run=False)
    if task_id_problem(task) is not None:
        from fm_teardown import pipeline

        return pipeline.teardown(s, task, flags, guard)
    from fm_teardown.act import lifecycle

    if flags.dry_run:
        # A dry run takes no lock: it says what a real run would meet now.
        busy = lifecycle.probe(s.state_dir, task) if s.state_dir.is_dir() else None
        if busy is not None:
            return Outcome.of_error(task, busy, dry_run=True)
        return _decided(s, task, flags, guard, journal_required=journal_required, converge=converge)
    # firstmate's lifecycle locks, as its scripts take them, for the whole run: another
    # lifecycle action on TASK refuses this one before anything is read or changed.
    try:
        with (
            lifecycle.lifecycle_locks(s.state_dir, task, s.lock_timeout),
            _children_locked(s, task, flags),
        ):
            return _decided(
                s, task, flags, guard, journal_required=journal_required, converge=converge
            )
    except FmError as err:
        return Outcome.of_error(task, err, dry_run=False)


@contextmanager
def _children_locked(s: settings.Settings, task: str, flags: Flags) -> Iterator[None]:
    """A forced secondmate teardown takes its children's records with it: it holds their
    lifecycle locks too (read once TASK's own are held)."""
    from fm_teardown.model.records import load_record

    home = None
    if flags.force:
        try:
            record = load_record(s.state_dir, task)
        except FmError:
            record = None  # the run itself says why
        if record is not None and record.kind == "secondmate":
            home = record.home or record.worktree
    if home is None:
        yield
        return
    from fm_teardown.act import lifecycle

    with lifecycle.descendant_locks(Path(home)):
        yield


def _decided(
    s: settings.Settings,
    task: str,
    flags: Flags,
    guard: Guard | None,
    *,
    journal_required: bool,
    converge: bool,
) -> Outcome:
    from fm_teardown import pipeline

    if converge and not os.path.lexists(s.state_dir / f"{task}.meta"):
        from fm_teardown.report import journal  # only without a record: a dry run reads none

        when = journal.torn_down_at(s.data_dir, task)
        if when is not None:
            return already_torn_down(task, when, dry_run=flags.dry_run)
    if flags.dry_run or flags.no_journal:
        return pipeline.teardown(s, task, flags, guard)
    from fm_teardown.report import journal

    left = journal.unfinished(s.data_dir, task).get(task)
    outcome = pipeline.teardown(
        s, task, flags, guard, intent=_intent_writer(s, flags, required=journal_required)
    )
    if left is not None:
        outcome = replace(outcome, warnings=(journal.unfinished_line(left), *outcome.warnings))
    return outcome


def already_torn_down(task: str, when: str, *, dry_run: bool) -> Outcome:
    """A re-run's result for a task the journal says was torn down: done, nothing to do."""
    return Outcome(
        task=task,
        dry_run=dry_run,
        verdict=Verdict.ALREADY,
        exit_code=int(ExitCode.OK),
        reasons=(f"already torn down at {when}: its record is gone, there is nothing left to do",),
    )


def _intent_writer(
    s: settings.Settings, flags: Flags, *, required: bool
) -> Callable[[Decision, str], str | None]:
    """Journal a real run's intent; why it could not (the run then refuses), or None."""

    from fm_teardown.report import journal

    def write(d: Decision, plan_id: str) -> str | None:
        line = journal.intent_entry(d.task, plan_id, [str(st.step) for st in d.plan], flags)
        if journal.append(s.data_dir, line) or not required:
            return None
        return f"the journal {s.data_dir / journal.JOURNAL} cannot be written"

    return write


def with_expected_plan(flags: Flags, task: str, expected: dict[str, str]) -> Flags:
    """TASK's flags with its approved token. A task with none (a --landed selection the
    tokens do not name) gets "": it refuses, its plan was never approved."""
    from dataclasses import replace

    return replace(flags, expect_plan=expected.get(task, ""))


def journalled(outcome: Outcome, task: str) -> bool:
    """Every real run for a valid task id is journalled, refusals included; not a request
    fm could not take, and not a re-run of a task already torn down (nothing was done, and
    the journal's line for it stays the teardown's own)."""
    return (
        not outcome.dry_run
        and outcome.verdict not in (Verdict.INVALID, Verdict.ALREADY)
        and task_id_problem(task) is None
    )


def interrupted_before_acting(task: str, flags: Flags) -> Outcome:
    return Outcome(
        task=task,
        dry_run=flags.dry_run,
        verdict=Verdict.FAILED,
        exit_code=int(ExitCode.INTERRUPTED),
        reasons=("interrupted while deciding",),
        interrupted=True,
        tail=True,
    )
