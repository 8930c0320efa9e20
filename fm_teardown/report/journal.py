"""The journal: JSON lines in `data/teardown-log.jsonl`, read as a stream.

A real run that will act first appends its intent (task, plan token, steps planned): a run
whose journal cannot take that line refuses before anything is destroyed, unless
`--no-journal`. Every real run (refusals included, invalid requests not) then appends its
result; a result line that cannot be written only warns. An intent with no later line for
its task is a run that ended in between (`unfinished`).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from fm_teardown.adapters import safefile

if TYPE_CHECKING:
    from fm_teardown.model.outcome import Outcome
    from fm_teardown.model.plan import Flags

__all__ = [
    "JOURNAL",
    "MAX_LINE",
    "append",
    "bounded_lines",
    "entry",
    "intent_entry",
    "result_entry",
    "torn_down_at",
    "unfinished",
    "unfinished_line",
]

JOURNAL = "teardown-log.jsonl"
# Longer than any line fm writes: a longer one is skipped in pieces, never held whole.
MAX_LINE = 1 << 20


def entry(
    task: str,
    flags: dict[str, Any],
    verdict: str,
    exit_code: int,
    steps: list[dict[str, str]] | None = None,
    signalled: list[dict[str, Any]] | None = None,
    discarded_ref: str | None = None,
    project: str | None = None,
) -> dict[str, Any]:
    return {
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "task": task,
        "flags": flags,
        "verdict": verdict,
        "exit_code": exit_code,
        "steps": steps or [],
        "signalled": signalled or [],
        "discarded_ref": discarded_ref,
        # The record's project (spec §12): where `fm restore` finds the save this run made.
        "project": project,
    }


def _entry_of(outcome: Outcome, flags: Flags) -> dict[str, Any]:
    """The journal line of one real run, from its Outcome."""
    from fm_teardown.report.step_words import detail

    return entry(
        outcome.task or "",
        {"force": flags.force, "discard_live_owner": flags.discard_live_owner},
        str(outcome.verdict),
        outcome.exit_code,
        [
            {
                "step": str(s.step),
                "target": s.target,
                "outcome": str(s.outcome),
                "detail": detail(s),
            }
            for s in outcome.steps
        ]
        if outcome.acted
        else [],
        [
            {"pid": s.pid, "start_time": s.start_time, "name": s.name, "signals": list(s.signals)}
            for s in outcome.every_signalled
        ],
        outcome.discarded_ref,
        outcome.decision.project if outcome.decision is not None else None,
    )


def append(data_dir: Path, entry: dict[str, Any]) -> bool:
    line = (json.dumps(entry, ensure_ascii=False) + "\n").encode()
    path = data_dir / JOURNAL
    try:
        safefile.refuse_inside_work(str(path))  # never inside a slot or a task's temp dir
        if os.path.lexists(data_dir) and not data_dir.is_dir():
            raise NotADirectoryError(20, "the data dir is not a directory", str(data_dir))
        data_dir.mkdir(parents=True, exist_ok=True)
        # Absent, or a regular file with one link, never followed, opened without blocking:
        # a FIFO would hang fm after it has acted, a hard link would put this line
        # into another task's file.
        safefile.append_line(str(path), line)
    except OSError as exc:
        why = exc.strerror or str(exc)
        sys.stderr.write(f"warning: could not append to the journal {path}: {why}\n")
        return False
    return True


def intent_entry(task: str, plan_id: str, steps: list[str], flags: Flags) -> dict[str, Any]:
    """The line a real run writes before its first destructive step; its result line follows.
    An intent with no later line for its task is a run that died in between (a crash)."""
    return {
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "phase": "intent",
        "task": task,
        "plan_id": plan_id,
        "steps": steps,
        "flags": {"force": flags.force, "discard_live_owner": flags.discard_live_owner},
        "pid": os.getpid(),
    }


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


def torn_down_at(data_dir: Path, task: str) -> str | None:
    """When TASK was torn down, if the journal's newest line for it is a real run's result
    that exited 0 (a teardown, or a stale slot's clearing); else None (no line, a refusal, a
    failure, or an intent with no result after it: a run that ended partway)."""
    newest: dict[str, Any] | None = None
    for line in _lines(data_dir, task):
        newest = line
    if newest is None or newest.get("phase", "result") != "result":
        return None
    done = newest.get("exit_code") == 0 and newest.get("verdict") in ("proceed", "stale")
    when = newest.get("time")
    return when if done and isinstance(when, str) else None


def unfinished_line(intent: dict[str, Any]) -> str:
    return (
        f"a teardown of {intent.get('task')} started at {intent.get('time')} (plan "
        f"{intent.get('plan_id') or '-'}, pid {intent.get('pid')}) journalled its intent and no "
        "result: it ended partway (a crash?); the steps it may have done: "
        + ", ".join(str(s) for s in intent.get("steps") or [])
    )


def result_entry(outcome: Outcome, flags: Flags) -> dict[str, Any]:
    """A real run's result line: `_entry_of`, with the plan token it ran (or refused) on."""
    line = _entry_of(outcome, flags)
    line["phase"] = "result"
    line["plan_id"] = outcome.plan_id
    return line


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
