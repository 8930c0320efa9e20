"""The journal: JSON lines in `data/teardown-log.jsonl`, read as a stream; the one module
that writes it.

A real run that will act first appends its intent (task, plan token, steps planned, the
launch it tears down; `write_intent`, called through the act stage's seam): a run whose
journal cannot take that line refuses before anything is destroyed, unless `--no-journal`
(or, for the drop-in, only warns); a dry run asks `write_problem` whether it could. Every
real run (refusals included, invalid requests not) then appends its result (`write_result`,
called from one place: `pipeline/one_task.py`); a result line that cannot be written only
warns. An intent with no later line for its task is a run that ended in between
(`unfinished`). The journal is one of fm's own files: it is never written inside a slot or a
task's temp dir of the run's `WorkPlaces`, and a run that has no such places (it never
looked at the fleet) writes no line. `tests/test_journal_writer.py` keeps every write here.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from fm_teardown.adapters import safefile
from fm_teardown.model.values import value

if TYPE_CHECKING:
    from fm_teardown.model.causes import OwnFileBlocked
    from fm_teardown.model.outcome import Outcome
    from fm_teardown.model.own_files import WorkPlaces
    from fm_teardown.model.plan import Decision, Planned
    from fm_teardown.model.request import Flags

__all__ = [
    "JOURNAL",
    "MAX_LINE",
    "TornDown",
    "bounded_lines",
    "torn_down_at",
    "unfinished",
    "unfinished_line",
    "write_intent",
    "write_problem",
    "write_result",
]

JOURNAL = "teardown-log.jsonl"
# Longer than any line fm writes: a longer one is skipped in pieces, never held whole.
MAX_LINE = 1 << 20


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _flags(flags: Flags) -> dict[str, Any]:
    """What a line says of the request: the discard asked for."""
    return {"force": flags.force, "discard_live_owner": flags.discard_live_owner}


def _result_line(outcome: Outcome, flags: Flags) -> dict[str, Any]:
    """The journal line of one real run, from its Outcome, with the plan token it ran (or
    refused) on."""
    from fm_teardown.report.step_words import detail

    steps = [
        {"step": str(s.step), "target": s.target, "outcome": str(s.outcome), "detail": detail(s)}
        for s in outcome.steps
    ]
    signalled = [
        {"pid": s.pid, "start_time": s.start_time, "name": s.name, "signals": list(s.signals)}
        for s in outcome.every_signalled
    ]
    return {
        "time": _now(),
        "task": outcome.task or "",
        "flags": _flags(flags),
        "verdict": str(outcome.verdict),
        "exit_code": outcome.exit_code,
        "steps": steps if outcome.acted else [],
        "signalled": signalled,
        "discarded_ref": outcome.discarded_ref,
        # The record's project (spec §12): where `fm restore` finds the save this run made.
        "project": outcome.decision.project if outcome.decision is not None else None,
        "phase": "result",
        "plan_id": outcome.plan_id,
    }


# Why a run that never looked at the fleet writes no journal line.
_UNPLACED = (
    "fm could not read the fleet, so it cannot tell that the journal lies outside every slot"
)


def _try_append(data_dir: Path, entry: dict[str, Any], places: WorkPlaces | None) -> str | None:
    """Append one line; why it could not be (nothing was written), or None. `places`: where
    fm's own files never go, as the run found the fleet; None writes nothing."""
    line = (json.dumps(entry, ensure_ascii=False) + "\n").encode()
    path = data_dir / JOURNAL
    if places is None:
        return _UNPLACED
    try:
        safefile.refuse_inside_work(str(path), places)  # never inside a task's work
        if os.path.lexists(data_dir) and not data_dir.is_dir():
            raise NotADirectoryError(20, "the data dir is not a directory", str(data_dir))
        data_dir.mkdir(parents=True, exist_ok=True)
        # Absent, or a regular file with one link, never followed, opened without blocking:
        # a FIFO would hang fm after it has acted, a hard link would put this line
        # into another task's file.
        safefile.append_line(str(path), line, places)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _append(data_dir: Path, entry: dict[str, Any], places: WorkPlaces | None) -> bool:
    """`_try_append`, warning when the line could not be written."""
    why = _try_append(data_dir, entry, places)
    if why is not None:
        sys.stderr.write(f"warning: could not append to the journal {data_dir / JOURNAL}: {why}\n")
    return why is None


def write_problem(data_dir: Path, places: WorkPlaces) -> str | None:
    """Why `_try_append` would fail now (the words it would give), or None; writes nothing.
    What a dry run checks so that it refuses where the real run's intent line would."""
    path = data_dir / JOURNAL
    why = safefile.inside_work(str(path), places)
    if why is not None:
        return f"{why}: fm does not write its own files there"
    if os.path.lexists(data_dir) and not data_dir.is_dir():
        return "the data dir is not a directory"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        # Made by the real run: the nearest directory that exists must let it.
        parent = data_dir
        while not os.path.lexists(parent) and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return os.strerror(20)
        return None if os.access(parent, os.W_OK | os.X_OK) else os.strerror(13)
    except OSError as exc:
        return exc.strerror or str(exc)
    problem = safefile.problem(st)
    if problem is not None:
        return problem
    return None if os.access(path, os.W_OK) else os.strerror(13)


def write_intent(
    data_dir: Path, d: Decision, planned: Planned, flags: Flags
) -> OwnFileBlocked | None:
    """Journal a real run's intent before its first destructive step, naming the launch it
    tears down (`spawn_gen`, `worktree` as the record names them), so that a re-run can tell a
    new launch of the same id from the one that was torn down; its result line follows. An
    intent with no later line for its task is a run that died in between (a crash). Why it
    could not be written (the run then refuses), or None; the drop-in's run only warns."""
    from fm_teardown.model.causes import OwnFile, OwnFileBlocked
    from fm_teardown.model.request import Caller

    record = planned.fleet.records.get(d.task)
    launch = (
        {"spawn_gen": record.spawn_gen, "worktree": record.worktree} if record is not None else None
    )
    line = {
        "time": _now(),
        "phase": "intent",
        "task": d.task,
        "plan_id": planned.plan_id or "",
        "steps": [str(st.step) for st in d.plan],
        "flags": _flags(flags),
        "pid": os.getpid(),
        "launch": launch,
    }
    if flags.caller == Caller.DROP_IN:
        _append(data_dir, line, planned.places)  # warns when it cannot
        return None
    problem = _try_append(data_dir, line, planned.places)
    if problem is None:
        return None
    return OwnFileBlocked(OwnFile.JOURNAL, str(data_dir / JOURNAL), problem)


def write_result(
    data_dir: Path,
    task: str,
    outcome: Outcome,
    flags: Flags,
    places_now: Callable[[], WorkPlaces | None],
) -> None:
    """Append a real run's result line: every real run for a valid task id, refusals
    included; not a request fm could not take, not a re-run of a task already torn down
    (nothing was done, and the journal's line for it stays the teardown's own), not one run
    with `--no-journal`. Never inside a task's work: where fm's own files never go is what
    the run found, or, for a run that ended before it looked at the fleet, what the fleet
    shows now (`places_now`); a fleet that cannot be read shows nothing, and then no line is
    written (a warning says so)."""
    from fm_teardown.model.errors import Verdict
    from fm_teardown.model.records import task_id_problem

    if (
        outcome.dry_run
        or outcome.verdict in (Verdict.INVALID, Verdict.ALREADY)
        or task_id_problem(task) is not None
        or flags.no_journal
    ):
        return
    places = outcome.places if outcome.places is not None else places_now()
    _append(data_dir, _result_line(outcome, flags), places)


def _lines(data_dir: Path, task: str | None) -> Iterator[dict[str, Any]]:
    """The journal's lines (all tasks, or `task`'s only), oldest first, as a stream: read
    without following a link or blocking; an unreadable journal yields nothing."""
    path = data_dir / JOURNAL
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        with os.fdopen(fd, "rb", closefd=False) as f:
            for raw in bounded_lines(f):
                if task is not None and task.encode() not in raw:
                    continue
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(line, dict) or not isinstance(line.get("task"), str):
                    continue
                if task is not None and line["task"] != task:
                    continue
                yield line
    except OSError:
        return
    finally:
        os.close(fd)


def unfinished(data_dir: Path, task: str | None = None) -> dict[str, dict[str, Any]]:
    """The intents with no later line for their task (all tasks, or `task` only): runs that
    ended between their intent and their result."""
    open_: dict[str, dict[str, Any]] = {}
    for line in _lines(data_dir, task):
        if line.get("phase") == "intent":
            open_[line["task"]] = line
        else:
            open_.pop(line["task"], None)
    return open_


@value
class TornDown:
    """When TASK was torn down, as the journal says; `unfinished`: told by an intent with no
    result (the run ended after its record step, before its result line)."""

    when: str
    unfinished: bool = False


def torn_down_at(data_dir: Path, task: str) -> TornDown | None:
    """When TASK was torn down, for a task with no record: the journal's newest line for it
    is a real run's result that exited 0 (a teardown, or a stale slot's clearing), or an
    intent with no result (the record step is the last: a run whose record is gone finished
    it, and ended before its result line). None otherwise (no line, a refusal, a failure)."""
    newest: dict[str, Any] | None = None
    for line in _lines(data_dir, task):
        newest = line
    when = newest.get("time") if newest is not None else None
    if newest is None or not isinstance(when, str):
        return None
    if newest.get("phase") == "intent":
        return TornDown(when, unfinished=True)
    if newest.get("phase", "result") != "result":
        return None
    done = newest.get("exit_code") == 0 and newest.get("verdict") in ("proceed", "stale")
    return TornDown(when) if done else None


def unfinished_line(intent: dict[str, Any]) -> str:
    return (
        f"a teardown of {intent.get('task')} started at {intent.get('time')} (plan "
        f"{intent.get('plan_id') or '-'}, pid {intent.get('pid')}) journalled its intent and no "
        "result: it ended partway (a crash?); the steps it may have done: "
        + ", ".join(str(s) for s in intent.get("steps") or [])
    )


def bounded_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of a stream, one at a time; a line longer than any fm writes is skipped in
    pieces (never held whole): memory stays flat however large the journal is."""
    while True:
        line = fh.readline(MAX_LINE)
        if not line:
            return
        if len(line) == MAX_LINE and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = fh.readline(MAX_LINE)
            continue
        yield line
