"""The fleet audit's values and its pure parts (spec §8): a row from a decision, a row for a
record refused before deciding, and the slots claimed by more than one record.

The audit itself (one observation of the fleet, rule 5's facts gathered for the rows that
reach it, the loose ends) is strung together by `fm_teardown/pipeline/audit.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fm_teardown.decide import fingerprint, finished
from fm_teardown.decide.ownership import live_of
from fm_teardown.model.causes import RecordRefused
from fm_teardown.model.errors import ErrorCode, Verdict
from fm_teardown.model.landing import Reason
from fm_teardown.model.notes import Note
from fm_teardown.model.reasons import Finished, FinishedWhy
from fm_teardown.model.records import (
    Fleet,
    own_record_problem,
    shown,
    task_id_problem,
)
from fm_teardown.model.values import value
from fm_teardown.model.world import EndpointState, Observation, Orphan

if TYPE_CHECKING:
    from fm_teardown.model.landing import LandedFacts
    from fm_teardown.model.plan import Decision
    from fm_teardown.model.request import Options

__all__ = ["Audit", "AuditRow", "RowReads", "row", "shared_slots", "unusable"]


@value
class AuditRow:
    task: str
    slot: str | None
    endpoint: EndpointState | None
    verdict: Verdict
    # Without a refusal's lead and tail: when `refused`, the first one is shown as
    # `REFUSED: …; nothing was changed` (report/messages.py, `refused_reasons`).
    reasons: tuple[Reason, ...]
    headline: Reason  # the one reason that matters
    owners: tuple[str, ...] = ()  # the live owners, for a live-owner row
    # Finished (what `--landed` selects), and why; the same function decides both.
    finished: Finished = Finished(False, FinishedWhy.REFUSED)
    # The launch the row describes: a batch skips a task relaunched since its selection.
    identity: tuple[object, ...] | None = None
    # The plan token the one-task dry run prints (`--expect-plan TASK=TOKEN` approves it);
    # None for a row refused before deciding.
    plan_id: str | None = None
    refused: bool = False
    owner_codes: tuple[str, ...] = ()  # each live owner's stable code, as `owners`

    @property
    def exit_code(self) -> int:
        return int(self.verdict.exit_code)


@value
class Audit:
    state_dir: Path
    rows: tuple[AuditRow, ...]
    shared_slots: tuple[tuple[str, tuple[str, ...]], ...]
    orphans: tuple[Orphan, ...] = ()
    pools: tuple[str, ...] = ()  # the pool dirs whose state files were read


@value
class RowReads:
    """What a row needs that decide may not read itself, read by the caller: the clock (epoch
    seconds), TASK's meta's inode as read now (None when it cannot be read), fm's own pid."""

    now: float
    inode: int | None
    fm_pid: int


def row(
    d: Decision,
    fleet: Fleet,
    obs: Observation,
    facts: LandedFacts | None,
    opts: Options,
    reads: RowReads,
) -> AuditRow:
    """TASK's row: what `fm teardown TASK --dry-run` says, finished or not, its launch and
    its plan token."""
    task = d.task
    ep = obs.endpoints[task]
    record = fleet.records[task]
    return AuditRow(
        task,
        d.slot,
        ep.state,
        d.verdict,
        d.reasons,
        d.headline,
        tuple(o.id for o in live_of(d.owners)) if d.verdict == Verdict.LIVE_OWNER else (),
        finished.classify(
            d.verdict, d.headline, record, facts, opts, finished.task_now(task, obs, reads.now)
        ),
        finished.identity(record, ep.window_ids, reads.inode),
        fingerprint.token(fingerprint.digests(d, obs, facts, fm_pid=reads.fm_pid)),
        refused=d.refused,
        owner_codes=tuple(o.kind.code for o in live_of(d.owners))
        if d.verdict == Verdict.LIVE_OWNER
        else (),
    )


def unusable(task: str, fleet: Fleet) -> AuditRow | None:
    """A record `fm teardown <task>` refuses before deciding: the row says what it would."""
    bad = fleet.invalid.get(task)
    if bad is not None:
        id_problem = task_id_problem(task)
        if id_problem:
            why = Note(ErrorCode.BAD_TASK_ID, f"invalid task id '{shown(task)}': {id_problem}")
            return _refused(AuditRow(task, _first(bad.claimed), None, Verdict.INVALID, (why,), why))
        line = RecordRefused(bad.meta_path, bad.problem, code=bad.code)
        return _refused(
            AuditRow(task, _first(bad.claimed), None, Verdict.UNSAFE, (line,), line, refused=True)
        )
    record = fleet.records[task]
    problem = own_record_problem(record)
    if problem is None:
        return None
    line = RecordRefused(record.meta_path, problem, code=ErrorCode.BACKEND_UNSUPPORTED)
    headline = RecordRefused(record.meta_path, problem, True, ErrorCode.BACKEND_UNSUPPORTED)
    return _refused(
        AuditRow(task, record.worktree, None, Verdict.UNSAFE, (line,), headline, refused=True)
    )


def _refused(r: AuditRow) -> AuditRow:
    from dataclasses import replace

    return replace(r, finished=finished.refused(r.verdict, r.headline))


def _first(claimed: tuple[str, ...] | None) -> str | None:
    return claimed[0] if claimed else None


def shared_slots(obs: Observation) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The slots more than one record claims, each with its claimants."""
    claims: dict[str, list[str]] = {slot: list(t) for slot, t in obs.claimants.items()}
    for task, slots in obs.invalid_slots.items():
        for slot in slots or ():
            claims.setdefault(slot, []).append(task)
    return tuple(
        (slot, tuple(sorted(tasks))) for slot, tasks in sorted(claims.items()) if len(tasks) > 1
    )
