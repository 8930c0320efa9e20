"""The fleet audit (`fm teardown --dry-run` with no TASK, spec §8). Read-only.

Each row is exactly what `fm teardown <task> --dry-run` would say on the same world: the same
decision, rule 5 included, from one observation of the whole fleet. Rules 1-4 cost no
subprocess per row; rule 5 runs only for the rows that reach it, through the same batched
landed-work check as the one-task dry run (one `git status` per slot, a few git calls per
project). Then the slots claimed by more than one record, and the fleet's loose ends
(`observe.loose_ends`): windows, leases, agents and files that no record accounts for.

This module strings the stages together for the audit, as `stages.py` does for one task;
the rows themselves are built in `decide/audit.py`, from values.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from fm_teardown.decide.audit import Audit, AuditRow, RowReads, row, shared_slots, unusable
from fm_teardown.decide.before_acting import acts, own_file_blocked
from fm_teardown.decide.hints import inventory_hint
from fm_teardown.decide.rules import decide_all
from fm_teardown.model.causes import OwnFile, OwnFileBlocked
from fm_teardown.model.errors import ErrorCode, refused
from fm_teardown.model.paths import Canonicalizer
from fm_teardown.model.records import Backend, Fleet, Record, load_fleet
from fm_teardown.model.request import Flags, Options, RunMode
from fm_teardown.model.settings import Settings
from fm_teardown.model.world import InventoryStatus, Observation, Orphan
from fm_teardown.observe.loose_ends import branch_listings, orphans
from fm_teardown.observe.observation import observe, ready
from fm_teardown.pipeline.stages import lock_placed, meta_inode

if TYPE_CHECKING:
    from fm_teardown.adapters.runner import Result
    from fm_teardown.model.landing import LandedFacts
    from fm_teardown.model.own_files import WorkPlaces
    from fm_teardown.model.plan import Decision

__all__ = ["audit", "fleet_audit", "refuse_unreadable_inventory"]


def refuse_unreadable_inventory(fleet: Fleet, obs: Observation) -> None:
    """The audit and `--landed` refuse (exit 5) as one task's run does when the tmux inventory
    cannot be read (fm reads a server that is not the fleet's, tmux does not answer): no
    task's window can be confirmed gone, and nothing the audit said of them would hold."""
    error = obs.inventory.error or "unknown error"
    if obs.inventory.status != InventoryStatus.ERROR:
        return
    if not any(r.backend == Backend.TMUX for r in fleet.records.values()):
        return
    raise refused(
        f"the tmux inventory could not be read, so no task's window can be confirmed gone: {error}",
        inventory_hint(error),
        unchanged=True,
        code=ErrorCode.INVENTORY_UNREADABLE,
    )


def fleet_audit(settings: Settings, opts: Options) -> Audit:
    """`fm teardown --dry-run`: the audit, and the real runs the journal shows unfinished
    (an intent and no result: they died partway) among the loose ends."""
    result = audit(settings, opts)
    return replace(result, orphans=(*result.orphans, *_unfinished_runs(settings)))


def _unfinished_runs(s: Settings) -> tuple[Orphan, ...]:
    from fm_teardown.report import journal

    return tuple(
        Orphan("unfinished-teardown", task, None, journal.unfinished_line(intent))
        for task, intent in sorted(journal.unfinished(s.data_dir).items())
    )


def audit(settings: Settings, opts: Options | None = None) -> Audit:
    """The audit's rows (what `--landed` selects from), its shared slots and loose ends."""
    opts = opts or Options()
    _refuse_a_gate_agent()
    canon = Canonicalizer()  # one for the audit's look: loading, observing, fm's own places
    fleet = load_fleet(settings.state_dir, canon)
    obs = observe(settings, fleet, canon=canon)
    refuse_unreadable_inventory(fleet, obs)
    flags = Flags(mode=RunMode.DRY_RUN)
    rows: dict[str, AuditRow] = {}
    usable: list[str] = []
    for task in fleet.task_ids:
        bad = unusable(task, fleet)
        if bad is not None:
            rows[task] = bad
        else:
            usable.append(task)
    ready(obs, fleet, usable)
    # The loose ends' listing of task branches needs no status: it runs beside rule 5's.
    listings = branch_listings(obs)
    listed: dict[str, Result] = {}

    def gather(records: Sequence[Record]) -> Mapping[str, LandedFacts]:
        from fm_teardown.decide.landed import judge
        from fm_teardown.observe.home import with_homes
        from fm_teardown.observe.landed import gather_beside

        found, ran = gather_beside(
            list(records),
            settings.data_dir,
            fetch=False,
            fetch_timeout=settings.fetch_timeout,
            gh_bin=settings.gh_bin,
            also=listings,
        )
        listed.update(zip((project for project, _ in listings), ran, strict=True))
        return with_homes(records, {task: judge(facts) for task, facts in found.items()})

    decisions, facts = decide_all(usable, fleet, obs, flags, gather)
    now, me = time.time(), os.getpid()
    before_acting = _BeforeActing(settings, fleet, canon)
    for task, d in decisions.items():
        inode = meta_inode(fleet.records[task])
        d = before_acting.checked(d)
        rows[task] = row(d, fleet, obs, facts.get(task), opts, RowReads(now, inode, me))
    return Audit(
        settings.state_dir,
        tuple(rows[t] for t in fleet.task_ids),
        shared_slots(obs),
        orphans(fleet, obs, listed),
        tuple(sorted({e.canonical.rsplit("/", 2)[0] for e in obs.pool_entries})),
    )


def _refuse_a_gate_agent() -> None:
    """A no-mistakes gate agent must not drive the fleet: the audit refuses it as a whole (5),
    as each task's dry run does."""
    from fm_teardown.observe import gate

    refused_gate = gate.refusal(os.environ, os.getcwd())
    if refused_gate is not None:
        raise refused_gate


class _BeforeActing:
    """What each task's dry run checks after deciding and before a real run's first
    destructive step (the slot lock's place, the journal's), checked for the audit's rows
    alike, so that a row says what `fm teardown TASK --dry-run` says. Worked out once for the
    whole audit, and only when a row would act."""

    def __init__(self, settings: Settings, fleet: Fleet, canon: Canonicalizer) -> None:
        self._settings, self._fleet, self._canon = settings, fleet, canon
        self._places: WorkPlaces | None = None
        self._journal: OwnFileBlocked | None = None
        self._locks_inside = False

    def checked(self, d: Decision) -> Decision:
        if not acts(d):
            return d
        if self._places is None:
            from fm_teardown.adapters.safefile import inside_work
            from fm_teardown.model.own_files import lock_path
            from fm_teardown.observe.own_places import work_places
            from fm_teardown.report import journal

            self._places = work_places(self._settings, self._fleet, self._canon)
            problem = journal.write_problem(self._settings.data_dir, self._places)
            if problem is not None:
                path = str(self._settings.data_dir / journal.JOURNAL)
                self._journal = OwnFileBlocked(OwnFile.JOURNAL, path, problem)
            # Every slot's lock is a file of the state dir: whether it would lie inside a
            # task's work is one answer for all the rows (resolving the dir is not cheap).
            any_lock = str(lock_path(self._settings.state_dir, "/"))
            self._locks_inside = inside_work(any_lock, self._places) is not None
        if self._locks_inside:
            d = lock_placed(self._settings, d, self._places)
        if self._journal is not None and acts(d):
            d = own_file_blocked(d, self._journal)
        return d
