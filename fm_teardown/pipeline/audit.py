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

from fm_teardown.decide.audit import Audit, AuditRow, row, shared_slots, unusable
from fm_teardown.decide.hints import inventory_hint
from fm_teardown.decide.rules import decide_all
from fm_teardown.model.errors import ErrorCode, refused
from fm_teardown.model.records import Backend, Fleet, Record, load_fleet
from fm_teardown.model.request import Flags, Options, RunMode
from fm_teardown.model.settings import Settings
from fm_teardown.model.world import InventoryStatus, Observation, Orphan
from fm_teardown.observe.loose_ends import orphans
from fm_teardown.observe.observation import observe, ready
from fm_teardown.pipeline.stages import meta_inode

if TYPE_CHECKING:
    from fm_teardown.model.landing import LandedFacts

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
    fleet = load_fleet(settings.state_dir)
    obs = observe(settings, fleet)
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

    def gather(records: Sequence[Record]) -> Mapping[str, LandedFacts]:
        from fm_teardown.decide.landed import judge
        from fm_teardown.observe.home import with_homes
        from fm_teardown.observe.landed import gather_many

        found = gather_many(
            list(records),
            settings.data_dir,
            fetch=False,
            fetch_timeout=settings.fetch_timeout,
            gh_bin=settings.gh_bin,
        )
        return with_homes(records, {task: judge(facts) for task, facts in found.items()})

    decisions, facts = decide_all(usable, fleet, obs, flags, gather)
    now, me = time.time(), os.getpid()
    for task, d in decisions.items():
        inode = meta_inode(fleet.records[task])
        rows[task] = row(d, fleet, obs, facts.get(task), opts, now=now, inode=inode, fm_pid=me)
    return Audit(
        settings.state_dir,
        tuple(rows[t] for t in fleet.task_ids),
        shared_slots(obs),
        orphans(fleet, obs),
        tuple(sorted({e.canonical.rsplit("/", 2)[0] for e in obs.pool_entries})),
    )
