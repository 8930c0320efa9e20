"""The fleet's loose ends, as the audit lists them (spec §8): what no record accounts for.

Windows `fm-<id>` with no record <id>, leases on pool slots no record claims, agent
processes working in such slots that no endpoint holds, names in the state dir that are
no task's record or sidecar, and task branches `fm/<id>` left in a project with no record
<id> and no worktree that has them checked out or holds them for a rebase, a bisect or a
`rebase --update-refs`. Observed facts, never a verdict: they change
no exit code.

A task's branch is known by firstmate's spawn convention, `fm/<id>`: records do not name
branches. A teardown deletes TASK's branch after returning its slot; a stale teardown (the
slot is someone else's now) and a discarded live owner leave theirs, and so does work done
by hand. fm never deletes such a branch from the audit: it may hold the only copy of work.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from fm_teardown.adapters import runner
from fm_teardown.model.leases import lease_name, lease_task
from fm_teardown.model.paths import ancestors
from fm_teardown.model.process_kind import ProcessClass, classify_proc
from fm_teardown.model.records import Fleet
from fm_teardown.model.sidecars import split
from fm_teardown.model.world import Observation, Orphan
from fm_teardown.observe.branch_use import ANY_BRANCH, branches_in_use
from fm_teardown.observe.gitdir import common_dir
from fm_teardown.observe.observation import procs_by_slot

__all__ = ["BRANCHES_ARGS", "branch_listings", "orphans"]


def orphans(
    fleet: Fleet, obs: Observation, listed: Mapping[str, runner.Result] | None = None
) -> tuple[Orphan, ...]:
    """Windows `fm-<id>` with no record <id>; leases on pool slots no record claims; agent
    processes working in such slots that no endpoint accounts for (spec §8); names in the state dir
    that are no task's record or sidecar. They never change an exit code. `listed`: the
    projects' task branches, listed already (`branch_listings`, beside rule 5's statuses)."""
    out = _windows(fleet, obs)
    free = _free_slots(obs)
    out += _leases(free, fleet, obs)
    out += _agents(free, obs)
    out += _dead_branches(fleet, obs, listed or {})
    out += _strays(fleet)
    out += _kept_sidecars(fleet)
    return tuple(out)


def _windows(fleet: Fleet, obs: Observation) -> list[Orphan]:
    """Windows `fm-<id>` with no record <id>, once per session and name, with the agents they
    run."""
    out: list[Orphan] = []
    # A secondmate's child is recorded in the secondmate's home (`<secondmate>/<id>`): its
    # window `fm-<id>` is accounted for.
    known = {k for tid in (*fleet.records, *fleet.invalid) for k in (tid, tid.rsplit("/", 1)[-1])}
    seen: set[tuple[str, str]] = set()
    for pane in obs.inventory.panes:
        name = pane.window_name
        if not name.startswith("fm-") or name[3:] in known:
            continue
        key = (pane.session, name)
        if key in seen:
            continue
        seen.add(key)
        tree = [
            p
            for q in obs.inventory.panes
            if (q.session, q.window_name) == key and not q.dead
            for p in obs.processes.tree(q.pane_pid)
        ]
        agents = [p for p in tree if classify_proc(p) == ProcessClass.AGENT]
        runs = (
            "runs " + ", ".join(f"{p.name} ({p.pid})" for p in agents[:3])
            if agents
            else "runs no agent"
        )
        out.append(
            Orphan(
                "window",
                name[3:],
                None,
                f"window {pane.session}:{name} ({pane.window_id}) has no record; it {runs}",
            )
        )
    return out


def _free_slots(obs: Observation) -> list[str]:
    """The pool's slots no record claims, sorted."""
    claimed = set(obs.claimants) | {s for slots in obs.invalid_slots.values() for s in slots or ()}
    above = {a for slot in claimed for a in ancestors(slot)}

    def unclaimed(slot: str) -> bool:
        # Claimed when a record names it, a slot inside it, or a slot containing it.
        return slot not in above and not any(a in claimed for a in ancestors(slot))

    return sorted({e.canonical for e in obs.pool_entries if unclaimed(e.canonical)})


def _leases(free: list[str], fleet: Fleet, obs: Observation) -> list[Orphan]:
    """The leases on `free` slots (no record claims them)."""
    out: list[Orphan] = []
    for entry in sorted(obs.pool_entries, key=lambda e: e.canonical):
        if not entry.leased or entry.canonical not in free:
            continue
        holder = lease_task(entry, "", fleet)
        detail = f"leased (lease id {entry.lease_id or 'none'}, holder '{entry.lease_holder}')"
        detail += " on a slot no record claims"
        if holder is not None:
            detail += f"; it is {holder}'s lease, whose record names {obs.slot_of[holder]}"
        out.append(Orphan("lease", lease_name(entry), entry.canonical, detail))
    return out


def _agents(free: list[str], obs: Observation) -> list[Orphan]:
    """Agents working in `free` slots that no endpoint holds, each under its nearest slot."""
    in_free = procs_by_slot(set(free), obs.processes)
    loose: dict[int, tuple[str, str]] = {}  # pid -> (its nearest free slot, its name)
    for slot in sorted(free, key=len, reverse=True):
        for proc in in_free.get(slot, ()):
            if proc.pid in loose or proc.pid in obs.endpoint_owner:
                continue
            if classify_proc(proc) == ProcessClass.AGENT:
                loose[proc.pid] = (slot, proc.name or proc.argv0)
    out: list[Orphan] = []
    for pid in sorted(loose):
        slot, name = loose[pid]
        out.append(
            Orphan(
                "process",
                f"pid:{pid}",
                slot,
                f"agent {name} ({pid}) works in a slot no record claims and belongs to no "
                "task's endpoint",
            )
        )
    return out


def _strays(fleet: Fleet) -> list[Orphan]:
    """Names in the state dir that are no task's record or sidecar (its README aside)."""
    out: list[Orphan] = []
    for name, why in fleet.strays:
        if _documentation(name):
            continue
        detail = f"{why}; it owns no slot and fm leaves it alone"
        out.append(Orphan("file", name, None, detail))
    return out


def _kept_sidecars(fleet: Fleet) -> list[Orphan]:
    """`state/<id>.*` files of a record that firstmate does not write (`<id>.meta.bak`, an
    editor's copy): its teardown keeps them, so they are said here (spec §14.7)."""
    own = [r for tid, r in sorted(fleet.records.items()) if tid not in fleet.children]
    if not own:
        return []
    try:
        listing = os.listdir(os.path.dirname(own[0].meta_path))
    except OSError:
        return []
    # Each name under every id it could belong to (an id may hold dots: `a.b.status` is `a`'s
    # or `a.b`'s): one pass over the listing, not one per record.
    by_id: dict[str, list[str]] = {}
    for name in listing:
        dot = name.find(".")
        while dot > 0:
            by_id.setdefault(name[:dot], []).append(name)
            dot = name.find(".", dot + 1)
    out = []
    for record in own:
        for name in split(record.task_id, by_id.get(record.task_id, ())).foreign:
            detail = (
                f"beside {record.task_id}'s record, not a sidecar firstmate writes: "
                f"fm teardown {record.task_id} keeps it; remove it by hand if it is not needed"
            )
            out.append(Orphan("file", name, None, detail))
    return out


def _documentation(name: str) -> bool:
    """A state dir's README (README, README.md, README.txt, ...) documents the dir: it is no
    loose end."""
    return name.split(".", 1)[0].upper() == "README"


# firstmate's spawn names a task's branch `fm/<id>`.
TASK_BRANCH = "fm/"


# How a project's task branches are listed, with the worktree that has each checked out.
BRANCHES_ARGS = (
    "for-each-ref",
    "--format=%(refname)%00%(worktreepath)",
    f"refs/heads/{TASK_BRANCH}",
)


def branch_listings(obs: Observation) -> list[tuple[str, tuple[str, ...]]]:
    """The git calls (project, args) that list each project's task branches: one per project
    that is a directory, for a caller that runs them beside other git calls."""
    projects = sorted(set(obs.project_of.values()))
    return [(project, BRANCHES_ARGS) for project in projects if os.path.isdir(project)]


def _dead_branches(
    fleet: Fleet, obs: Observation, listed: Mapping[str, runner.Result]
) -> list[Orphan]:
    """`fm/<id>` branches of the fleet's projects whose task has no record and which no
    worktree has checked out, rebases, bisects from or will move for a `rebase --update-refs`:
    one git call per project, and one more only when such a branch is found (whether its
    commits are all on the default branch: that decides the advice)."""
    known = {tid.rsplit("/", 1)[-1] for tid in (*fleet.records, *fleet.invalid)}
    out: list[Orphan] = []
    for project, _ in branch_listings(obs):
        r = listed.get(project)
        if r is None:
            r = runner.git(project, *BRANCHES_ARGS)
        if not r.ok:
            continue  # a project git cannot read: its records' rows say so already
        candidates: list[tuple[str, str]] = []  # (ref, task)
        for line in r.text.splitlines():
            ref, _, worktree = line.partition("\0")
            branch = ref.removeprefix("refs/heads/")  # in full: `:short` may add `heads/`
            task = branch[len(TASK_BRANCH) :]
            if not worktree and task and task not in known:
                candidates.append((ref, task))
        if not candidates:
            continue  # no worktree's operations to read: nothing they hold would be listed
        common = common_dir(project)
        in_use = branches_in_use(common) if common is not None else {}
        if ANY_BRANCH in in_use:
            continue  # some operation may hold any branch: none is listed as unused
        dead = [(ref, task) for ref, task in candidates if ref not in in_use]
        merged = _merged(project, [ref for ref, _ in dead]) if dead else frozenset()
        for ref, task in dead:
            branch = ref.removeprefix("refs/heads/")
            out.append(
                Orphan("branch", branch, None, _branch_advice(project, branch, task, ref in merged))
            )
    return out


def _merged(project: str, refs: list[str]) -> frozenset[str]:
    """Those of `refs` whose commits are all on origin's default branch (`origin/HEAD`); none
    when that cannot be told (then each is advised as holding work of its own)."""
    r = runner.git(
        project, "for-each-ref", "--format=%(refname)", "--merged=refs/remotes/origin/HEAD", *refs
    )
    return frozenset(r.text.splitlines()) if r.ok else frozenset()


def _branch_advice(project: str, branch: str, task: str, merged: bool) -> str:
    """What the audit says of a loose task branch: delete it only once nothing of its own is
    left; a branch with commits of its own is saved or landed first, and no `-D` is offered."""
    where = (
        f"branch {branch} in {project}: task {task} has no record and no worktree has it "
        "checked out or in use (a stale or discarded teardown leaves its branch); fm never "
        "deletes it"
    )
    p, b = shlex.quote(project), shlex.quote(branch)
    if merged:
        return (
            f"{where}: its commits are all on the default branch, so deleting it loses "
            f"nothing: git -C {p} branch -D {b}"
        )
    return (
        f"{where}: it holds commits not on the default branch (or fm cannot tell): save or "
        f"land it first (git -C {p} push origin {b}, then merge it), and delete it only "
        "once they are on the default branch"
    )
