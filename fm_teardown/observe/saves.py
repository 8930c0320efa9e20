"""The saves `fm teardown --force` made, read (spec §12): which projects hold saves of a task
(`--project`, else the journal lines that made them), the saves in each (their refs), the task
ids that have saves (for completion); the places a restore must never write into; what a
restore brought back, read after it. Every git call goes through the runner's git door (spec
§15.1): a restored worktree's status runs no filter or hook its attributes or config name.

The journal is report's file: it is read here through `JournalFile`, its path and the
bounded line reader `report/journal.py` gives, never followed through a link or blocking.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fm_teardown.adapters import runner, safefile
from fm_teardown.model import settings
from fm_teardown.model.errors import FmError, Verdict, invalid, unsafe
from fm_teardown.model.paths import canonical
from fm_teardown.model.records import (
    RecordKind,
    RecordProblem,
    check_task_id,
    near_ids,
    read_meta,
    shown,
)
from fm_teardown.model.saves import PREFIX, Found, Project, Restored, Save, Target

__all__ = [
    "JournalFile",
    "find",
    "head_subject",
    "protected_places",
    "read_back",
    "saved_tasks",
    "target_of",
]

_STAMP = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_HEX_OID = runner.HEX_OID

_git = runner.git
_rev = runner.rev


@dataclass(frozen=True)
class JournalFile:
    """The journal to read saves from: its path, and how its lines are read (bounded)."""

    path: Path
    lines: Callable[[BinaryIO], Iterator[bytes]]


def _hint(task: str) -> str:
    return f"fm restore {task} --project <project checkout>"


def _common_dir(path: str) -> tuple[str | None, str]:
    """The canonical git common dir of the repository at `path`, or None and why not."""
    if not os.path.isdir(path):
        return None, "no such directory"
    r = _git(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if not r.ok or not r.text or "\n" in r.text or not os.path.isabs(r.text):
        return None, r.why() if not r.ok else "git names no common dir"
    return canonical(r.text), ""


def find(journal: JournalFile, task: str, flag: str | None) -> Found:
    """The projects whose saves of TASK to list: `--project`, else the journal's."""
    if flag is not None:
        path = os.path.abspath(flag)
        common, why = _common_dir(path)
        if common is None:
            raise invalid(f"--project {shown(path)} is not a git repository: {why}")
        return Found([_project(path, task)], from_journal=False)
    named, old = _journal_projects(journal, task)
    if not named:
        if old:
            raise invalid(
                f"the journal {shown(str(journal.path))} records {old} save(s) of task {task} "
                "but not their project (lines written before v1.2): "
                "say which project with --project",
                _hint(task),
            )
        near = near_ids(task, _saved_tasks(journal, task))
        raise invalid(
            f"cannot tell which project holds the saves of task {task}: no line of the journal "
            f"{shown(str(journal.path))} records a save of it",
            *([f"did you mean: {', '.join(near)}? (fm restore {near[0]})"] if near else []),
            _hint(task),
        )
    found = Found([], from_journal=True)
    by_common: dict[str, Project] = {}
    for path in named:
        common, why = _common_dir(path)
        if common is None:
            found.warnings.append(
                f"the project {shown(path)} that the journal names for task {task} is not a git "
                f"repository now: {why}"
            )
            continue
        if common not in by_common:
            by_common[common] = _project(path, task)
            found.projects.append(by_common[common])
    if not found.projects:
        raise invalid(found.warnings[0], *found.warnings[1:], _hint(task))
    return found


def _journal_projects(journal: JournalFile, task: str) -> tuple[list[str], int]:
    """The projects of the journal lines that made a save of TASK, newest line first (no
    duplicates), and how many such lines do not say their project (written before v1.2).

    A save of TASK is a ref under refs/fm/discarded/<TASK>/: the line that made it is the one
    whose `discarded_ref` names it, whichever task that run tore down (`--discard-live-owner`
    saves the owner's work under the owner's id)."""
    own = f"{PREFIX}{task}/"
    named: list[str] = []
    old = 0
    for raw in _journal_lines(journal, task):
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a torn or foreign line: not a save fm recorded
        if not isinstance(line, dict):
            continue
        saved = line.get("discarded_ref")
        if not isinstance(saved, str) or not saved.startswith(own):
            continue
        project = line.get("project")
        if isinstance(project, str) and os.path.isabs(project) and "\0" not in project:
            named.append(os.path.normpath(project))
        else:
            old += 1
    return list(dict.fromkeys(reversed(named))), old


def saved_tasks(journal: JournalFile, state_dir: Path) -> list[str]:
    """The task ids `fm restore` has saves of (what `fm restore <TAB>` offers): the refs under
    refs/fm/discarded/<TASK>/<stamp> in every project the journal names for a save and every
    project a record names. One `git for-each-ref` per project; [] when nothing can be read."""
    projects: list[str] = []
    try:
        for raw in _journal_lines(journal, ""):
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(line, dict):
                continue
            saved, project = line.get("discarded_ref"), line.get("project")
            if isinstance(saved, str) and saved.startswith(PREFIX) and isinstance(project, str):
                projects.append(project)
    except FmError:
        pass  # a journal fm will not read: the records' projects still count
    projects += _record_projects(state_dir)
    found: set[str] = set()
    seen: set[str] = set()
    for project in dict.fromkeys(p for p in projects if os.path.isabs(p) and "\0" not in p):
        common, _ = _common_dir(project)
        if common is None or common in seen:
            continue
        seen.add(common)
        r = _git(project, "for-each-ref", "--format=%(refname)", PREFIX)
        for name in r.text.splitlines() if r.ok else ():
            task, _, stamp = name[len(PREFIX) :].partition("/")
            if _STAMP.fullmatch(stamp) and _is_task_id(task):
                found.add(task)
    return sorted(found)


def _is_task_id(task: str) -> bool:
    try:
        check_task_id(task)
    except FmError:
        return False
    return True


def _record_projects(state_dir: Path) -> list[str]:
    """The `project=` of every record in the state dir (read without following a link)."""
    out: list[str] = []
    try:
        names = sorted(n for n in os.listdir(state_dir) if n.endswith(".meta"))
    except OSError:
        return out
    for name in names:
        try:
            text, _ = read_meta(str(state_dir / name))
        except (OSError, RecordProblem):
            continue
        out += [
            line[len("project=") :] for line in text.splitlines() if line.startswith("project=")
        ]
    return out


def _saved_tasks(journal: JournalFile, task: str) -> list[str]:
    """The task ids the journal records saves of (for a typo's suggestion)."""
    ids: set[str] = set()
    for raw in _journal_lines(journal, task):
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        saved = line.get("discarded_ref") if isinstance(line, dict) else None
        if isinstance(saved, str) and saved.startswith(PREFIX):
            ids.add(saved[len(PREFIX) :].split("/", 1)[0])
    return sorted(ids)


def _journal_lines(journal: JournalFile, task: str) -> Iterator[bytes]:
    """The journal's lines, read only when it is a regular file (judged without following a
    link) and opened without blocking: a FIFO or a link planted there is refused (exit 5)."""
    hint = f"say which project instead of reading the journal: {_hint(task)}"
    path = journal.path
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise unsafe(f"cannot read the journal {shown(str(path))}: {exc.strerror}", hint) from None
    if not stat.S_ISREG(st.st_mode):
        raise unsafe(f"refusing to read the journal {shown(str(path))}: {_kind(st)}", hint)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise unsafe(f"cannot read the journal {shown(str(path))}: {exc.strerror}", hint) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise unsafe(f"refusing to read the journal {shown(str(path))}: {_kind(st)}", hint)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            yield from journal.lines(fh)
    finally:
        os.close(fd)


def _kind(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink"
    if stat.S_ISFIFO(st.st_mode):
        return "it is a FIFO"
    return "it is not a regular file"


def _project(path: str, task: str) -> Project:
    return Project(path, _saves(path, task))


def _saves(project: str, task: str) -> list[Save]:
    """The saves of TASK in `project`, newest first: the commits under refs/fm/discarded/<TASK>/
    named by a UTC stamp, each with the one parent it was saved on."""
    own = f"{PREFIX}{task}/"
    fields = ("refname", "objectname", "objecttype", "parent", "committerdate:iso-strict")
    fmt = "%00".join(f"%({f})" for f in fields) + "%00%(subject)"
    r = _git(project, "for-each-ref", "--sort=-refname", f"--format={fmt}", own)
    if not r.ok:
        raise FmError(
            Verdict.FAILED,
            f"could not list the saves in {shown(project)}: git for-each-ref failed: {r.why()}",
        )
    saves: list[Save] = []
    for row in r.out.decode("utf-8", "replace").splitlines():
        parts = row.split("\0")
        if len(parts) != 6:
            continue
        name, commit, kind, parents, when, subject = parts
        stamp = name[len(own) :]
        heads = parents.split()
        if (
            not name.startswith(own)
            or not _STAMP.fullmatch(stamp)
            or kind != "commit"
            or len(heads) != 1
            or not _HEX_OID.fullmatch(commit)
        ):
            continue  # not a save fm made: nothing to restore from it
        saves.append(Save(name, stamp, commit, heads[0], when, subject, _count(project, commit)))
    return saves


def _changes(repo: str, commit: str) -> list[tuple[str, str]] | None:
    """(status letter, path) of every path `commit` changes against its parent."""
    r = _git(
        repo, "diff-tree", "-r", "-z", "--no-commit-id", "--name-status", "--no-renames", commit
    )
    if not r.ok:
        return None
    items = r.out.split(b"\0")
    return [
        (items[i].decode("ascii", "replace"), os.fsdecode(items[i + 1]))
        for i in range(0, len(items) - 1, 2)
        if items[i]
    ]


def _count(repo: str, commit: str) -> int | None:
    changes = _changes(repo, commit)
    return None if changes is None else len(changes)


def target_of(to: str) -> Target:
    """The target `--to` names, looked at once."""
    dest = os.path.abspath(to)
    if os.path.lexists(dest):
        return Target(dest, True, os.path.dirname(dest), False, None)
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        return Target(dest, False, parent, False, None)
    # Everything after acts on the resolved path, never on the text given: a link in it may
    # be switched at any moment.
    real = os.path.join(canonical(parent), os.path.basename(dest))
    return Target(dest, False, parent, True, real)


def protected_places(real: str, project: Project, s: settings.Settings | None) -> dict[str, str]:
    """The places a restore must never write into (canonical path -> what it is), for the
    resolved target `real`: every worktree of the project (its checkout and the pool's
    slots), the slot roots and worktrees the pool's state files list, the worktrees,
    projects, temp dirs and homes the task records name; when `real` is inside a task's temp
    dir `/tmp/fm-*`, that temp dir alone (the records need not be read). Records that cannot
    be read refuse (exit 5): the target cannot be told safe. `decide/restore_target.py`
    judges the target against them."""
    places: dict[str, str] = {}

    def add(path: str | None, what: str) -> None:
        if path and os.path.isabs(path):
            places.setdefault(canonical(path), what)

    add(project.path, "the project checkout")
    r = _git(project.path, "worktree", "list", "--porcelain", "-z")
    if not r.ok:
        raise FmError(
            Verdict.FAILED, f"cannot list the worktrees of {shown(project.path)}: {r.why()}"
        )
    for item in r.out.split(b"\0"):
        if item.startswith(b"worktree "):
            add(os.fsdecode(item[9:]), "a worktree of the project")
    tmp = safefile.task_tmp_of(real)
    if tmp is not None:
        return {tmp: "a task's temp dir"}
    if s is not None:
        from fm_teardown.adapters.pool import PoolReader
        from fm_teardown.model.records import load_fleet

        try:
            fleet = load_fleet(s.state_dir)
        except FmError as err:
            if os.path.isdir(s.state_dir):
                # Records fm cannot read may name the target: fail closed.
                raise FmError(
                    Verdict.UNSAFE,
                    f"cannot tell whether {shown(real)} is a task's: {err.message}",
                    ("fix the state dir (or --state-dir), then re-run",),
                ) from None
            fleet = None  # no fleet here: no record names anything
        reader = PoolReader()
        for record in fleet.records.values() if fleet is not None else ():
            what = f"task {record.task_id}'s"
            add(record.worktree, f"{what} worktree")
            add(record.project, f"{what} project checkout")
            add(record.tasktmp, f"{what} temp dir")
            if record.kind == RecordKind.SECONDMATE:
                add(record.home, f"secondmate {record.task_id}'s home")
            if os.path.isabs(record.worktree):
                reader.view(record.worktree, canonical(record.worktree))
        for bad in fleet.invalid.values() if fleet is not None else ():
            for claimed in bad.claimed or ():
                add(claimed, f"the worktree of task {bad.task_id}'s unreadable record")
        for entry in reader.entries():
            add(entry.canonical, "a pool slot")
            add(os.path.dirname(entry.canonical), "a pool slot")
    return places


def read_back(done: Restored, intact: bool) -> None:
    """What a restore brought back, read after it (`intact`: the directory made is still the
    one made), and whether the save's ref still names the save."""
    if intact:
        _summarise(done)
    else:
        done.warnings.append(f"{shown(done.to)} changed after the restore: not read")
    save = done.save
    if _rev(done.project.path, save.ref) != save.commit:
        done.warnings.append(f"{save.ref} no longer names {save.commit}: something else moved it")


def head_subject(dest: str, head: str) -> str | None:
    """The subject of the commit a restore's HEAD is on (None: git could not say)."""
    r = _git(dest, "log", "-1", "--format=%s", head)
    return r.text if r.ok and r.text else None


def _summarise(done: Restored) -> None:
    """What is back: the worktree's status against the original HEAD, and the saved files git
    ignores (back on disk, but `git add -A` will not take them)."""
    r = _git(done.to, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    if not r.ok:
        done.warnings.append(f"git status failed in {shown(done.to)}: {r.why()}")
        return
    seen: set[str] = set()
    for item in r.out.split(b"\0"):
        if len(item) < 4:
            continue
        code, path = item[:2].decode("ascii", "replace"), os.fsdecode(item[3:])
        seen.add(path)
        if code == "??":
            done.untracked.append(path)
        elif "D" in code:
            done.deleted.append(path)
        else:
            done.modified.append(path)
    changes = _changes(done.to, done.save.commit) or []
    done.ignored = [p for kind, p in changes if kind == "A" and p not in seen]
