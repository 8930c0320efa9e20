"""Observe the world once: one tmux listing, one process scan, each pool state file once.

No subprocess per record: a fleet of a thousand records costs one tmux call and one walk of
the process table, plus one small file read per record and per pool.
"""

from __future__ import annotations

import os

from fm_teardown import processes, tmux
from fm_teardown.endpoint import classify, endpoint_of, panes_by_window
from fm_teardown.paths import Canonicalizer, ancestors, canonical
from fm_teardown.pool import PoolReader
from fm_teardown.records import Fleet
from fm_teardown.settings import Settings
from fm_teardown.world import (
    Endpoint,
    Environment,
    Observation,
    Proc,
    ProcessTable,
    SlotFacts,
    TmuxInventory,
)


def environment(settings: Settings, table: ProcessTable | None = None) -> Environment:
    return Environment(
        home=canonical(settings.home) if settings.home and os.path.isabs(settings.home) else None,
        fm_home=canonical(str(settings.fm_home)),
        treehouse_bin=settings.treehouse_bin,
        protected=self_and_ancestors(table) if table is not None else frozenset(),
    )


def self_and_ancestors(table: ProcessTable) -> frozenset[int]:
    pids: set[int] = set()
    pid = os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        proc = table.procs.get(pid)
        if proc is None:
            break
        pid = proc.ppid
    return frozenset(pids)


def observe(settings: Settings, fleet: Fleet) -> Observation:
    inventory = tmux.list_panes(settings)
    table = processes.scan()
    return assemble(settings, fleet, inventory, table)


def assemble(
    settings: Settings, fleet: Fleet, inventory: TmuxInventory, table: ProcessTable
) -> Observation:
    """Everything but the two scans: split out so tests can feed scans of their own."""
    # Records share projects and pool directories: resolve each directory once.
    canon = Canonicalizer()

    slot_of = {tid: canon(r.worktree) for tid, r in fleet.records.items()}
    project_of = {tid: canon(r.project) for tid, r in fleet.records.items()}
    invalid_slots = {
        tid: (tuple(canon(p) for p in bad.claimed) if bad.claimed is not None else None)
        for tid, bad in fleet.invalid.items()
    }
    index = panes_by_window(inventory)
    endpoints: dict[str, Endpoint] = {
        tid: endpoint_of(r, inventory, table, index) for tid, r in fleet.records.items()
    }
    in_slot = procs_by_slot(set(slot_of.values()), table)
    reader = PoolReader(canon)
    slots: dict[str, SlotFacts] = {}
    for tid, record in fleet.records.items():
        slot = slot_of[tid]
        if slot in slots:
            continue
        procs = tuple(in_slot.get(slot, ()))
        slots[slot] = SlotFacts(
            canonical=slot,
            exists=os.path.isdir(slot),
            pool=reader.view(record.worktree, slot),
            agents=tuple(p for p in procs if classify(p.name, p.argv0) == "agent"),
            procs=procs,
        )
    tasktmp_exists = {
        tid: os.path.lexists(r.tasktmp) for tid, r in fleet.records.items() if r.tasktmp
    }
    return Observation(
        inventory=inventory,
        processes=table,
        env=environment(settings, table),
        slot_of=slot_of,
        endpoints=endpoints,
        slots=slots,
        invalid_slots=invalid_slots,
        project_of=project_of,
        tasktmp_exists=tasktmp_exists,
    )


def procs_by_slot(slots: set[str], table: ProcessTable) -> dict[str, list[Proc]]:
    """Processes whose cwd lies inside each slot (a cwd is matched against its ancestors, so
    this costs processes x path depth, not processes x slots)."""
    out: dict[str, list[Proc]] = {}
    if not slots:
        return out
    for proc in table.procs.values():
        if not proc.cwd or proc.zombie or not proc.cwd.startswith("/"):
            continue
        for anc in ancestors(proc.cwd):
            if anc in slots:
                out.setdefault(anc, []).append(proc)
    return out
