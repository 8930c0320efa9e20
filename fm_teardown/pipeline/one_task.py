"""One task's run as every command runs it, and the one place its result is journalled.

`teardown_task` is what `fm teardown TASK`, each task of a batch and the `fm-teardown`
drop-in run: `run_one` (the gate, firstmate's lifecycle locks, a re-run that converges, the
intent journalled before acting through the act stage's seam, then the stages of
`stages.py`), and the real run's result line (`report/journal.py`, `write_result`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fm_teardown.decide.before_acting import acts, other_launch, own_file_blocked
from fm_teardown.model.causes import OtherLaunch, OwnFile, OwnFileBlocked
from fm_teardown.model.errors import ExitCode, FmError, Verdict
from fm_teardown.model.notes import Note, NoteCode
from fm_teardown.model.outcome import Framing, Outcome
from fm_teardown.model.plan import Decision, Planned
from fm_teardown.model.records import RecordKind, load_record, task_id_problem
from fm_teardown.model.request import Caller, Flags
from fm_teardown.model.settings import Settings
from fm_teardown.pipeline.stages import Intent, TaskRun, decide_and_act

if TYPE_CHECKING:
    from fm_teardown.model.own_files import WorkPlaces
    from fm_teardown.report.journal import TornDown

__all__ = ["run_one", "teardown_task"]

UNFINISHED = NoteCode.UNFINISHED_TEARDOWN


def teardown_task(run: TaskRun) -> Outcome:
    """One task's teardown (or dry run), and its result journalled: the one caller of the
    journal's result line. An interrupt while deciding changed nothing: `fm teardown` and a
    batch report it as this task's outcome (journalled as well); the drop-in lets it end the
    script as firstmate's did, with its own line and no result. A batch's task no longer
    selected at its turn (NotSelected) is neither run nor journalled."""
    try:
        with _deciding(run):
            outcome = run_one(run)
    except KeyboardInterrupt:
        if run.flags.caller == Caller.DROP_IN:
            raise
        outcome = _interrupted_before_acting(run.task, run.flags)
    from fm_teardown.report import journal

    s = run.settings
    journal.write_result(s.data_dir, run.task, outcome, run.flags, lambda: _places_now(s))
    return outcome


def _deciding(run: TaskRun) -> AbstractContextManager[None]:
    """`fm teardown TASK`: SIGTERM while deciding ends the run as Ctrl-C does. A batch's task
    (it has a `guard`) runs under the batch's own handling of signals, which only notes them,
    and the drop-in keeps the script's."""
    from fm_teardown.adapters import interrupts

    alone = run.flags.caller == Caller.FM and run.guard is None
    return interrupts.while_deciding() if alone else nullcontext()


def _places_now(s: Settings) -> WorkPlaces | None:
    """Where fm's own files never go as the fleet is now (for a run that ended before it
    looked at the fleet); read only when a result line is written."""
    from fm_teardown.observe.own_places import work_places_now

    return work_places_now(s)


def run_one(run: TaskRun) -> Outcome:
    """One task's teardown (or dry run) as an Outcome: never raises FmError.

    For the drop-in (`Caller.DROP_IN`) a real run whose intent cannot be journalled only
    warns (the script it replaces had no journal), and a task with no record stays the
    script's `no meta` error; for `fm`, the first refuses (exit 5) and the second is reported
    `already torn down` (exit 0) when the journal says it was."""
    s, task, flags = run.settings, run.task, run.flags
    if task_id_problem(task) is None:
        from fm_teardown.observe import gate

        # A dry run says what the real run would: it refuses a gate agent as well.
        refused = gate.refusal(os.environ, os.getcwd())
        if refused is not None:
            return Outcome.of_error(task, refused, dry_run=flags.dry_run)
    if task_id_problem(task) is not None:
        return decide_and_act(run)
    from fm_teardown.act import lifecycle

    if flags.dry_run:
        # A dry run takes no lock: it says what a real run would meet now.
        busy = lifecycle.probe(s.state_dir, task) if s.state_dir.is_dir() else None
        home = _children_home(run) if busy is None else None
        if home is not None:
            busy = lifecycle.probe_descendants(Path(home))
        if busy is not None:
            return Outcome.of_error(task, busy, dry_run=True)
        return _decided(run)
    # firstmate's lifecycle locks, as its scripts take them, for the whole run: another
    # lifecycle action on TASK refuses this one before anything is read or changed.
    try:
        with lifecycle.lifecycle_locks(s.state_dir, task, s.lock_timeout), _children_locked(run):
            return _decided(run)
    except FmError as err:
        return Outcome.of_error(task, err, dry_run=False)


@contextmanager
def _children_locked(run: TaskRun) -> Iterator[None]:
    """A forced secondmate teardown takes its children's records with it: it holds their
    lifecycle locks too (read once TASK's own are held)."""
    home = _children_home(run)
    if home is None:
        yield
        return
    from fm_teardown.act import lifecycle

    with lifecycle.descendant_locks(Path(home)):
        yield


def _children_home(run: TaskRun) -> str | None:
    """The home whose children's records a forced secondmate teardown takes with it, or None
    (not forced, not a secondmate, or a record the run itself refuses)."""
    if not run.flags.force:
        return None
    try:
        record = load_record(run.settings.state_dir, run.task)
    except FmError:
        return None  # the run itself says why
    if record.kind != RecordKind.SECONDMATE:
        return None
    return record.home or record.worktree


def _decided(run: TaskRun) -> Outcome:
    from fm_teardown.report import journal

    s, task, flags = run.settings, run.task, run.flags
    converge = flags.caller == Caller.FM
    if converge and not os.path.lexists(s.state_dir / f"{task}.meta"):
        # Only without a record: a dry run of a task that has one reads the journal only for
        # a teardown of it that ended partway (below).
        done = journal.torn_down_at(s.data_dir, task)
        if done is not None:
            return _already_torn_down(task, done, dry_run=flags.dry_run)
    left = journal.unfinished(s.data_dir, task).get(task)
    changed = _launch_changed(s, task, left) if left is not None else None
    if changed is not None:
        assert left is not None
        return _other_launch(run, left, changed)
    if flags.dry_run or flags.no_journal:
        outcome = decide_and_act(run)
        if flags.dry_run and not flags.no_journal and flags.caller == Caller.FM:
            outcome = _journal_predicted(s, outcome)
    else:
        outcome = decide_and_act(run, intent=_intent_writer(s, flags))
    if left is not None:
        outcome = replace(
            outcome, warnings=(Note(UNFINISHED, journal.unfinished_line(left)), *outcome.warnings)
        )
    return outcome


def _journal_predicted(s: Settings, outcome: Outcome) -> Outcome:
    """A dry run whose plan would act refuses where its real run's intent line would: the
    journal cannot be written there (a link, a directory, not writable, inside a slot or a
    task's temp dir)."""
    from fm_teardown.report import journal

    d = outcome.decision
    if d is None or not acts(d) or outcome.places is None:
        return outcome
    problem = journal.write_problem(s.data_dir, outcome.places)
    if problem is None:
        return outcome
    blocked = OwnFileBlocked(OwnFile.JOURNAL, str(s.data_dir / journal.JOURNAL), problem)
    refused = Outcome.of_decision(own_file_blocked(d, blocked), dry_run=True)
    return replace(refused, plan_id=outcome.plan_id, places=outcome.places)


def _launch_changed(
    s: Settings, task: str, intent: Mapping[str, object]
) -> tuple[tuple[str, str, str], ...] | None:
    """How TASK's record now differs from the launch an unfinished teardown of it was tearing
    down (`spawn_gen`, `worktree`), or None: the same launch, no record, or an intent that
    does not say (written by an older fm)."""
    launch = intent.get("launch")
    if not isinstance(launch, dict):
        return None
    try:
        record = load_record(s.state_dir, task)
    except FmError:
        return None  # the run itself says why
    now = {"spawn_gen": record.spawn_gen, "worktree": record.worktree}
    changed = tuple(
        (name, str(launch.get(name) or "none"), str(now[name] or "none"))
        for name in ("spawn_gen", "worktree")
        if (launch.get(name) or None) != now[name]
    )
    return changed or None


def _other_launch(
    run: TaskRun, intent: Mapping[str, object], changed: tuple[tuple[str, str, str], ...]
) -> Outcome:
    """A teardown of TASK ended partway and TASK's record now names another launch: decided
    as a dry run (nothing is done), and a plan that would act refuses (exit 5) so that the
    new launch is reviewed first; the real run's refusal line closes the unfinished one."""
    from fm_teardown.model.request import RunMode
    from fm_teardown.report import journal

    task, dry_run = run.task, run.flags.dry_run
    seen = decide_and_act(replace(run, flags=replace(run.flags, mode=RunMode.DRY_RUN)))
    seen = replace(seen, dry_run=dry_run)
    d = seen.decision
    if d is not None and acts(d):
        cause = OtherLaunch(task, str(intent.get("time") or "?"), changed)
        refused = Outcome.of_decision(other_launch(d, cause, dry_run=dry_run), dry_run=False)
        seen = replace(refused, dry_run=dry_run, plan_id=seen.plan_id, places=seen.places)
    return replace(
        seen, warnings=(Note(UNFINISHED, journal.unfinished_line(dict(intent))), *seen.warnings)
    )


def _already_torn_down(task: str, done: TornDown, *, dry_run: bool) -> Outcome:
    """A re-run's result for a task the journal says was torn down: done, nothing to do."""
    code = NoteCode.ALREADY_TORN_DOWN_UNFINISHED if done.unfinished else NoteCode.ALREADY_TORN_DOWN
    if done.unfinished:
        reason = (
            f"already torn down at {done.when}: its record is gone; the teardown that started "
            "then journalled no result (it ended after its record step, the last one)"
        )
    else:
        reason = (
            f"already torn down at {done.when}: its record is gone, there is nothing left to do"
        )
    return Outcome(
        task=task,
        dry_run=dry_run,
        verdict=Verdict.ALREADY,
        exit_code=int(ExitCode.OK),
        reasons=(Note(code, reason),),
    )


def _intent_writer(s: Settings, flags: Flags) -> Intent:
    """A real run's intent, journalled through the act stage's seam (`report/journal.py`)."""

    def write(d: Decision, planned: Planned) -> OwnFileBlocked | None:
        from fm_teardown.report import journal

        return journal.write_intent(s.data_dir, d, planned, flags)

    return write


def _interrupted_before_acting(task: str, flags: Flags) -> Outcome:
    return Outcome(
        task=task,
        dry_run=flags.dry_run,
        verdict=Verdict.FAILED,
        exit_code=int(ExitCode.INTERRUPTED),
        reasons=(Note(NoteCode.INTERRUPTED_DECIDING, "interrupted while deciding"),),
        framing=Framing(tail=True),
    )
