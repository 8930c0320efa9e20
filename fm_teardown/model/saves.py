"""The saves `fm teardown --force` made, as values (spec §12): a save, the project holding
saves of a task, what `fm restore TASK` found, where a restore is asked to go, and what it
brought back.

A save is a commit under `refs/fm/discarded/<TASK>/<UTC stamp>` in the project repository,
parented on the slot's HEAD, whose tree is the slot's files as they were
(`act/discard.py`). They are read by `observe/saves.py`, chosen by `decide/restore_target.py`,
brought back by `act/restore.py` and shown by `report/restore_view.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fm_teardown.model.values import value

__all__ = ["PREFIX", "Found", "Project", "Restored", "Save", "Target"]

PREFIX = "refs/fm/discarded/"


@value
class Save:
    ref: str  # refs/fm/discarded/<TASK>/<stamp>
    stamp: str
    commit: str
    head: str  # the commit the save is parented on: the slot's HEAD when it was saved
    time: str  # committer date, ISO 8601
    subject: str
    files: int | None  # paths the save changes against `head` (None: could not count)


@dataclass
class Project:
    path: str  # as named: by --project, or by the journal line that made the save
    saves: list[Save] = field(default_factory=list)


@dataclass
class Found:
    projects: list[Project]
    from_journal: bool
    warnings: list[str] = field(default_factory=list)


@dataclass
class Restored:
    project: Project
    save: Save
    to: str
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # saved files back, but ignored by git
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """Where a restore is asked to go: the path as given made absolute, whether something is
    there already, its parent and whether that is a directory, and (only when it is, and
    nothing is there) the path resolved, which everything after acts on."""

    dest: str
    exists: bool
    parent: str
    parent_is_dir: bool
    real: str | None
