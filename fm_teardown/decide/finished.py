"""Is a task finished? What `fm teardown --landed` selects and the audit's `finished` column.

Landed (nothing would be lost) is not finished: a task spawned a minute ago sits on a clean
tree at the default branch, and a pushed work-in-progress branch is on a remote-tracking ref.
A task is finished when all of these hold:

1. its verdict is `proceed` or `stale` (never a refusal);
2. its own endpoint is `dead` or `missing`: an `alive`, `ambiguous` or `unreadable` endpoint
   is a task still working; and no one else works in its slot or temp dir: no other task's
   endpoint, no agent that is not its own endpoint (in a pane or in none), no terminal no task
   holds (the slot census, `decide.census`); where a process there runs cannot be told (a
   tmux server whose panes cannot be listed), or whether it is an agent, is not finished
   either;
3. it was launched at least `min_age` ago (spawn_gen's epoch, else started_at, else the
   meta's modification time);
4. for `proceed`, its work is merged: in the default branch (any rung of the proof of
   landing against it, decide/landed.py), in local main for local-only, or its recorded PR
   merged; a scout's report or an empty secondmate home counts. A task with no commits of
   its own and a clean tree is finished only when its endpoint is gone.

Each opt-in lifts exactly one condition: `--include-live` (2: its own endpoint alive; never
someone else working there, nor the doubt: a task `--include-live` takes for its own live
endpoint refuses when someone else works in its slot too, listed with who, spec §15.4),
`--min-age` (3), `--include-pushed` (4: landed is enough). A task is offered the opt-ins that
would include it, and none when none would. The audit and `--landed` both call `classify`, so
they cannot disagree; a batch calls it again at each task's turn. Pure: the clock and the
meta's inode are read by the caller and passed in; the words of a reason are
`report/messages.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fm_teardown.decide import census
from fm_teardown.model.causes import OthersAtWork
from fm_teardown.model.errors import Verdict
from fm_teardown.model.reasons import Finished, FinishedWhy
from fm_teardown.model.records import RecordKind
from fm_teardown.model.request import Options
from fm_teardown.model.values import value
from fm_teardown.model.world import EndpointState

if TYPE_CHECKING:
    from fm_teardown.model.landing import LandedFacts, Reason
    from fm_teardown.model.records import Record
    from fm_teardown.model.world import Observation

__all__ = [
    "INCLUDE_LIVE",
    "INCLUDE_PUSHED",
    "MAX_DURATION",
    "MIN_AGE_0",
    "TaskNow",
    "classify",
    "identity",
    "parse_duration",
    "refused",
    "task_now",
]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"([0-9]+)([smhd]?)")
# The longest --min-age: a hundred years. A longer one is no duration but a typo, and a
# number of any length would overflow the clock arithmetic it feeds.
MAX_DURATION = 36525 * 86400.0
_SPAWN_GEN = re.compile(r"s(\d+)\.")
_NOT_LIVE = (EndpointState.DEAD, EndpointState.MISSING)
# The opt-ins, as a not-finished task offers them.
INCLUDE_LIVE = "--include-live"
INCLUDE_PUSHED = "--include-pushed"
MIN_AGE_0 = "--min-age 0"


def parse_duration(text: str) -> float | None:
    """`90s`, `10m`, `1h`, `2d`, or a bare number of seconds (`0`), in ASCII digits, of at
    most `MAX_DURATION`; None if not one."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or len(m.group(1).lstrip("0")) > 12:  # past any limit, never converted
        return None
    seconds = int(m.group(1)) * _UNITS[m.group(2) or "s"]
    return float(seconds) if seconds <= MAX_DURATION else None


def _launched_at(record: Record) -> tuple[float, str]:
    """When the task was launched (epoch seconds) and from what."""
    m = _SPAWN_GEN.match(record.spawn_gen or "")
    if m:
        return float(m.group(1)), "spawn_gen"
    if record.started_at:
        try:
            when = datetime.fromisoformat(record.started_at)
        except ValueError:
            pass
        else:
            return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp(), "started_at"
    return record.mtime_ns / 1e9, "record modification time"


def identity(record: Record, window_ids: tuple[str, ...], inode: int | None) -> tuple[object, ...]:
    """What says "the same launch": a batch skips a task whose identity changed since it
    was selected (its record was rewritten: relaunched). `inode`: the meta's, as read now
    (None when it cannot be read)."""
    return (tuple(window_ids), record.worktree, record.spawn_gen, inode, record.mtime_ns)


def refused(verdict: Verdict, headline: Reason, working: Sequence[str] = ()) -> Finished:
    """Not finished: the task is refused (its decision, or its record before deciding)."""
    return Finished(
        False, FinishedWhy.REFUSED, verdict=verdict, headline=headline, working=tuple(working)
    )


@value
class TaskNow:
    """What `classify` reads of the world as it is now, beside the task's decision, record and
    facts (read by the caller, or from the observation by `task_now`): the clock, in epoch
    seconds; the task's own endpoint (its state, None when there is none, and what it is);
    who else still works in the task's slot or temp dir, each with where it runs
    (`census.still_working`); and why that cannot be told (`census.doubts`)."""

    clock: float
    endpoint: EndpointState | None = None
    endpoint_detail: str = ""
    working: tuple[str, ...] = ()
    doubt: tuple[str, ...] = ()


def task_now(task: str, obs: Observation, clock: float) -> TaskNow:
    """TASK as the observation `obs` shows it, at `clock`."""
    ep = obs.endpoints.get(task)
    return TaskNow(
        clock,
        ep.state if ep is not None else None,
        ep.detail if ep is not None else "",
        census.still_working(task, obs),
        census.doubts(task, obs),
    )


def classify(
    verdict: Verdict,
    headline: Reason,
    record: Record | None,
    landed: LandedFacts | None,
    opts: Options,
    now: TaskNow,
) -> Finished:
    """`now`: the task as it is now (its endpoint, who else works there, the clock).

    The opt-in a task not finished is offered is one that would include it: the first
    condition it fails is lifted, then the next, and the opt-ins are offered together only
    when lifting them all makes it finished (none when no opt-ins would)."""
    found = _classify(verdict, headline, record, landed, opts, now)
    if found.finished or found.opt_in is None:
        return found
    needed: list[str] = []
    lifted, then = opts, found
    while not then.finished and then.opt_in is not None and then.opt_in not in needed:
        needed.append(then.opt_in)
        lifted = _lift(lifted, then.opt_in)
        then = _classify(verdict, headline, record, landed, lifted, now)
    return replace(found, opt_in=" ".join(needed) if then.finished else None)


def _lift(opts: Options, opt_in: str) -> Options:
    if opt_in == INCLUDE_LIVE:
        return replace(opts, include_live=True)
    if opt_in == INCLUDE_PUSHED:
        return replace(opts, include_pushed=True)
    return replace(opts, min_age=0.0)


def _classify(
    verdict: Verdict,
    headline: Reason,
    record: Record | None,
    landed: LandedFacts | None,
    opts: Options,
    now: TaskNow,
) -> Finished:
    endpoint, working, doubt = now.endpoint, now.working, now.doubt
    if verdict not in (Verdict.PROCEED, Verdict.STALE) or record is None:
        return refused(verdict, headline, working)
    live = endpoint not in _NOT_LIVE
    if live and not opts.include_live:
        return Finished(
            False,
            FinishedWhy.OWN_ENDPOINT_LIVE,
            INCLUDE_LIVE,
            endpoint=endpoint,
            endpoint_detail=now.endpoint_detail,
            working=tuple(working),
        )
    if doubt:
        return Finished(False, FinishedWhy.CANNOT_TELL, doubt=doubt[0])
    if working and live:
        # Taken by --include-live for its own live endpoint, but someone else works there
        # too: the task refuses, as a live owner does (spec §15.4).
        return refused(Verdict.LIVE_OWNER, OthersAtWork(), working)
    if working:
        # Another task's endpoint, an agent that is not its own, a person's terminal: no
        # opt-in lifts it; mass cleanup never ends another's work.
        return Finished(False, FinishedWhy.OTHERS_WORKING, working=tuple(working))
    when, source = _launched_at(record)
    age = now.clock - when
    if age < opts.min_age:
        return Finished(
            False,
            FinishedWhy.TOO_YOUNG,
            MIN_AGE_0,
            age=age,
            launched_from=source,
            min_age=opts.min_age,
        )
    if verdict == Verdict.STALE:
        return Finished(True, FinishedWhy.STALE, headline=headline)
    if landed is None:
        # A ship task whose slot is gone: nothing of it is left to merge or lose.
        return Finished(True, FinishedWhy.SLOT_GONE)
    if landed.merged and not landed.own_commits and live and record.kind == RecordKind.SHIP:
        return Finished(False, FinishedWhy.NOTHING_OF_ITS_OWN, endpoint=endpoint)
    summary = landed.merge_summary
    if landed.merged:
        return Finished(True, FinishedWhy.MERGED, proof=landed.merge_proof)
    if landed.landed and opts.include_pushed:
        return Finished(True, FinishedWhy.PUSHED, summary=summary)
    return Finished(False, FinishedWhy.NOT_MERGED, INCLUDE_PUSHED, summary=summary)
