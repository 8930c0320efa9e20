"""Which save `fm restore` brings back, and whether the target may take it (spec §12). Pure.

The save: `--ref` (its full name or its stamp), else the newest, in the one project that
holds it. The target: a path that does not exist yet, in a directory that does, inside none
of the places a restore must never write into (`observe/saves.py`, `protected_places`).
Each refusal is a usage error (exit 2) that says what to give instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from fm_teardown.model.errors import invalid
from fm_teardown.model.paths import is_within
from fm_teardown.model.records import shown
from fm_teardown.model.saves import Found, Project, Save, Target

__all__ = ["NEVER", "check_places", "check_target", "choose", "other_dir"]

NEVER = "fm restore never writes into an existing directory"


def other_dir(task: str) -> str:
    """The hint of a target that may not be used."""
    return f"give a path that does not exist yet: fm restore {task} --to <new dir>"


def _matches(save: Save, ref: str) -> bool:
    return ref in (save.ref, save.stamp)


def choose(task: str, found: Found, ref: str | None, to: str) -> tuple[Project, Save]:
    """The save to restore: REF (full name or stamp), else the newest, in the one project that
    holds it (--project is required when several do)."""
    holding = [p for p in found.projects if any(ref is None or _matches(s, ref) for s in p.saves)]
    where = ", ".join(shown(p.path) for p in found.projects)
    if not holding:
        if ref is None:
            raise invalid(f"nothing to restore: there are no saves of task {task} in {where}")
        known = [s.ref for p in found.projects for s in p.saves]
        raise invalid(
            f"{shown(ref)} is not a save of task {task} in {where}",
            "the saves: " + ", ".join(known) if known else f"there are no saves of task {task}",
            f"give --ref as the full ref name or its stamp (fm restore {task} lists them)",
        )
    if len(holding) > 1:
        raise invalid(
            f"saves of task {task} are in more than one project ({where}): say which with "
            "--project",
            *(
                shlex.join(["fm", "restore", task, "--to", to, "--project", p.path])
                for p in holding
            ),
        )
    project = holding[0]
    save = next(s for s in project.saves if ref is None or _matches(s, ref))
    return project, save


def check_target(task: str, target: Target) -> str:
    """The resolved target, when nothing is there yet and its directory exists."""
    if target.exists:
        raise invalid(f"{shown(target.dest)} exists: {NEVER}", other_dir(task))
    if not target.parent_is_dir or target.real is None:
        raise invalid(
            f"the parent directory {shown(target.parent)} of {shown(target.dest)} does not exist"
        )
    return target.real


def check_places(task: str, target: Target, real: str, places: Mapping[str, str]) -> None:
    """Refuse a resolved target inside a place a restore must never write into (the deepest
    such place is named)."""
    for place in sorted(places, key=len, reverse=True):
        if is_within(real, place):
            raise invalid(
                f"{shown(target.dest)} is inside {places[place]} {shown(place)}: fm restore "
                "never writes into a slot, a task's worktree or temp dir, the project checkout "
                "or a secondmate home",
                other_dir(task),
            )
