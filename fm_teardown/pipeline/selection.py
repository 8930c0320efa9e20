"""What a batch tears down (spec §9): `fm teardown --landed` (every finished task, from the
audit) and `fm teardown A B C` (the launches named), and each task selected again at its turn.

Strung together here, beside `stages.py` and `audit.py`; `batch.py` runs the selection one
task after another, and `commands/batch.py` renders it.
"""

from __future__ import annotations

import time
from dataclasses import field
from typing import TYPE_CHECKING, cast

from fm_teardown.decide.finished import classify, identity, task_now
from fm_teardown.model.errors import FmError, Verdict
from fm_teardown.model.reasons import Finished, NotSelectedReason, NotSelectedWhy
from fm_teardown.model.request import Options
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.pipeline.stages import Guard, meta_inode

if TYPE_CHECKING:
    from fm_teardown.decide.audit import AuditRow
    from fm_teardown.model.landing import LandedFacts
    from fm_teardown.model.plan import Planned

__all__ = ["NotChosen", "Selection", "guard", "named", "select_landed"]


@value
class NotChosen:
    """A task `--landed` did not select: its verdict, and why (with the opt-in, if any)."""

    task: str
    verdict: Verdict
    finished: Finished
    # Refused rather than passed over: `--include-live` would take it for its own live
    # endpoint, but someone else works in its slot (spec §15.4); it counts in the exit code.
    refused: bool = False


@value
class Selection:
    tasks: tuple[str, ...]
    # task -> the launch seen when selecting (finished.identity): changed means relaunched.
    identities: dict[str, tuple[object, ...]] = field(default_factory=dict)
    not_selected: tuple[NotChosen, ...] = ()


_IDENTITY_FIELDS = ("window", "worktree", "spawn_gen", "meta inode", "meta mtime")


def select_landed(s: Settings, opts: Options) -> Selection:
    """`--landed`: every finished task (finished.classify, the audit's own column), from one
    observation of the fleet, in task-id order; the others with their one reason."""
    from fm_teardown.pipeline.audit import audit

    rows = sorted(audit(s, opts).rows, key=lambda r: r.task)
    chosen = [r for r in rows if r.finished.finished]
    return Selection(
        tuple(r.task for r in chosen),
        {r.task: r.identity for r in chosen if r.identity is not None},
        # A task `--include-live` took for its own live endpoint but where someone else works
        # too refuses as a live owner (its verdict here), though its own dry run proceeds.
        tuple(
            NotChosen(r.task, r.finished.verdict or r.verdict, r.finished, _refuses(r, opts))
            for r in rows
            if not r.finished.finished
        ),
    )


def _refuses(row: AuditRow, opts: Options) -> bool:
    """`--include-live` takes a task for its own live endpoint, never for someone else's work
    beside it: such a task refuses as a live owner does (4), whether its own decision already
    says so (a person's terminal there) or only the selection does (`OthersAtWork`)."""
    return (
        opts.include_live
        and row.endpoint is not None
        and row.endpoint.live
        and row.finished.verdict == Verdict.LIVE_OWNER
        and bool(row.finished.working)
    )


def named(s: Settings, tasks: list[str]) -> Selection:
    """`fm teardown A B C`: the launches named, as they are now (a task relaunched before
    its turn is skipped, not torn down in its new slot)."""
    from fm_teardown.model.records import load_fleet
    from fm_teardown.observe.observation import observe

    try:
        fleet = load_fleet(s.state_dir)
    except FmError:
        return Selection(tuple(tasks))  # each task reports the problem at its turn
    present = {t: fleet.records[t] for t in tasks if t in fleet.records}
    if not present:
        return Selection(tuple(tasks))
    obs = observe(s, fleet)
    return Selection(
        tuple(tasks),
        {t: identity(r, obs.endpoints[t].window_ids, meta_inode(r)) for t, r in present.items()},
    )


def guard(
    task: str,
    selection: Selection,
    returned: dict[str, str],
    opts: Options | None,
) -> Guard:
    """At its turn, TASK is selected again, not only decided again. `returned`: slot -> the
    task of this batch that returned it."""

    def check(planned: Planned) -> NotSelectedReason | None:
        record = planned.fleet.records.get(task)
        ep = planned.observation.endpoints.get(task) if record is not None else None
        want = selection.identities.get(task)
        if want is not None and record is not None and ep is not None:
            now = identity(record, ep.window_ids, meta_inode(record))
            what = [n for n, a, b in zip(_IDENTITY_FIELDS, want, now, strict=True) if a != b]
            if what[:1] == ["window"] and set(cast(tuple[str, ...], now[0])) <= set(
                cast(tuple[str, ...], want[0])
            ):
                what = what[1:]  # a window that went away is no relaunch; a new one is
            if what:
                return NotSelectedReason(NotSelectedWhy.RELAUNCHED, task, changed=tuple(what))
        d = planned.decision
        if d.pool_return is not None and d.slot in returned:
            return NotSelectedReason(
                NotSelectedWhy.SLOT_RETURNED, task, slot=d.slot, returned_by=returned[d.slot]
            )
        if opts is not None and d.verdict in (Verdict.PROCEED, Verdict.STALE):
            verdict = classify(
                d.verdict,
                d.headline,
                record,
                cast("LandedFacts | None", planned.landed),
                opts,
                # Someone who came to work in the slot since the selection keeps it unfinished.
                task_now(task, planned.observation, time.time()),
            )
            if not verdict.finished:
                return NotSelectedReason(NotSelectedWhy.NO_LONGER_FINISHED, task, finished=verdict)
        return None

    return check
