"""`fm restore TASK`: list the saves `fm teardown --force` made, and bring one back (spec §12).

A save is a commit under `refs/fm/discarded/<TASK>/<UTC stamp>` in the project repository,
parented on the slot's HEAD, whose tree is the slot's files as they were
(fm_teardown/act/discard.py).

- `fm restore TASK` lists the saves, newest first (the stamps sort lexically), of the project
  named by `--project DIR`, or else of every project the journal names for a save of TASK.
- `fm restore TASK --to DIR [--ref REF]` adds a new detached worktree at DIR on the save (the
  newest by default) and moves its HEAD and index back to the commit the save was parented on,
  so the saved files are uncommitted modifications and untracked files again.

It never writes into an existing directory (exit 2), never moves or deletes a save's ref, and
leaves nothing half-made when git fails (exit 1). Every git call goes through the runner.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fm_teardown.adapters import interrupts, runner, safefile
from fm_teardown.adapters.interrupts import Interrupted
from fm_teardown.model import messages, settings
from fm_teardown.model.errors import ExitCode, FmError, Verdict, invalid, unsafe
from fm_teardown.model.paths import canonical, is_within
from fm_teardown.model.records import RecordProblem, check_task_id, near_ids, read_meta, shown
from fm_teardown.model.values import value
from fm_teardown.report.human import Printer, render_error
from fm_teardown.report.journal import JOURNAL, bounded_lines
from fm_teardown.report.render import SCHEMA, emit_json

__all__ = ["PREFIX", "USAGE", "Found", "Project", "Restored", "Save", "restore", "saved_tasks"]

USAGE = "usage: fm restore TASK [--to DIR [--ref REF]] [--project DIR] [--json]"
PREFIX = "refs/fm/discarded/"
_STAMP = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_HEX_OID = runner.HEX_OID
# Files named one per line in the human output of a restore; --json always lists them all.
_SHOWN_FILES = 100

_git = runner.git
_rev = runner.rev


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


def restore(
    *,
    task: str,
    to: str | None,
    ref: str | None,
    project: str | None,
    json_out: bool,
    state_dir: str | None,
) -> int:
    """`fm restore TASK [--to DIR [--ref REF]] [--project DIR] [--json]`: the exit code."""
    try:
        check_task_id(task)
        s = settings.load(state_dir)
        if ref is not None and to is None:
            raise invalid("--ref picks the save to restore: give --to DIR with it", USAGE)
        if to == "":
            raise invalid("--to needs a directory that does not exist yet", USAGE)
        if ref == "":
            raise invalid("--ref needs a save of the task: its ref name or its stamp", USAGE)
        if project == "":
            raise invalid("--project needs the project checkout", USAGE)
        found = _find(s, task, project)
        if to is None:
            _show_saves(task, found, json_out)
            return int(ExitCode.OK)
        chosen, save = _choose(task, found, ref, to)
        done = _restore(task, chosen, save, to, s)
        done.warnings[:0] = found.warnings
        _show_restored(task, done, json_out)
        return int(ExitCode.OK)
    except FmError as err:
        return _fail(task, err, json_out)
    except Interrupted as exc:
        stopped = FmError(Verdict.FAILED, exc.what, exc.hints)
        return _fail(task, stopped, json_out, ExitCode.INTERRUPTED)
    except OSError as exc:  # the filesystem said no somewhere unexpected: one line, no traceback
        where = f" ({shown(str(exc.filename))})" if exc.filename else ""
        return _fail(
            task, FmError(Verdict.FAILED, f"restore failed: {exc.strerror or exc}{where}"), json_out
        )


# -- where the saves are ------------------------------------------------------------------


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


def _find(s: settings.Settings, task: str, flag: str | None) -> Found:
    """The projects whose saves of TASK to list: `--project`, else the journal's."""
    if flag is not None:
        path = os.path.abspath(flag)
        common, why = _common_dir(path)
        if common is None:
            raise invalid(f"--project {shown(path)} is not a git repository: {why}")
        return Found([_project(path, task)], from_journal=False)
    journal = s.data_dir / JOURNAL
    named, old = _journal_projects(journal, task)
    if not named:
        if old:
            raise invalid(
                f"the journal {shown(str(journal))} records {old} save(s) of task {task} but not "
                "their project (lines written before v1.2): say which project with --project",
                _hint(task),
            )
        near = near_ids(task, _saved_tasks(journal, task))
        raise invalid(
            f"cannot tell which project holds the saves of task {task}: no line of the journal "
            f"{shown(str(journal))} records a save of it",
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


def _journal_projects(journal: Path, task: str) -> tuple[list[str], int]:
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


def saved_tasks(s: settings.Settings) -> list[str]:
    """The task ids `fm restore` has saves of (what `fm restore <TAB>` offers): the refs under
    refs/fm/discarded/<TASK>/<stamp> in every project the journal names for a save and every
    project a record names. One `git for-each-ref` per project; [] when nothing can be read."""
    projects: list[str] = []
    try:
        for raw in _journal_lines(s.data_dir / JOURNAL, ""):
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
    projects += _record_projects(s.state_dir)
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


def _saved_tasks(journal: Path, task: str) -> list[str]:
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


def _journal_lines(journal: Path, task: str) -> Iterator[bytes]:
    """The journal's lines, read only when it is a regular file (judged without following a
    link) and opened without blocking: a FIFO or a link planted there is refused (exit 5)."""
    hint = f"say which project instead of reading the journal: {_hint(task)}"
    try:
        st = os.lstat(journal)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise unsafe(
            f"cannot read the journal {shown(str(journal))}: {exc.strerror}", hint
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise unsafe(f"refusing to read the journal {shown(str(journal))}: {_kind(st)}", hint)
    try:
        fd = os.open(journal, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise unsafe(
            f"cannot read the journal {shown(str(journal))}: {exc.strerror}", hint
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise unsafe(f"refusing to read the journal {shown(str(journal))}: {_kind(st)}", hint)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            yield from bounded_lines(fh)
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


# -- choosing the save ----------------------------------------------------------------------


def _matches(save: Save, ref: str) -> bool:
    return ref in (save.ref, save.stamp)


def _choose(task: str, found: Found, ref: str | None, to: str) -> tuple[Project, Save]:
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


# -- restoring ------------------------------------------------------------------------------


def _restore(
    task: str, project: Project, save: Save, to: str, s: settings.Settings | None = None
) -> Restored:
    dest = os.path.abspath(to)
    never = "fm restore never writes into an existing directory"
    other = f"give a path that does not exist yet: fm restore {task} --to <new dir>"
    if os.path.lexists(dest):
        raise invalid(f"{shown(dest)} exists: {never}", other)
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        raise invalid(f"the parent directory {shown(parent)} of {shown(dest)} does not exist")
    # Everything below acts on the resolved path, never on the text given: a link in it may
    # be switched at any moment.
    real = os.path.join(canonical(parent), os.path.basename(dest))
    inside = _inside_protected(real, project, s)
    if inside is not None:
        raise invalid(
            f"{shown(dest)} is inside {inside}: fm restore never writes into a slot, a task's "
            "worktree or temp dir, the project checkout or a secondmate home",
            other,
        )
    if _rev(project.path, save.ref) != save.commit:
        raise FmError(Verdict.FAILED, f"{save.ref} changed while fm restore was reading it")
    made = _make_dir(real, dest, never, other)
    done = Restored(project, save, made.path)
    with interrupts.while_acting():
        steps = (
            (
                "git worktree add",
                project.path,
                ("worktree", "add", "--detach", made.path, save.commit),
            ),
            # HEAD and the index back on the commit the save was parented on; the files stay.
            ("git reset", made.path, ("reset", "--quiet", save.head)),
        )
        for what, repo, args in steps:
            if not made.still_there():
                left = _undo(project.path, made)
                raise FmError(
                    Verdict.FAILED,
                    f"{shown(made.path)} is no longer the directory fm restore created; "
                    f"nothing was restored{left}",
                    (f"the save is untouched under {save.ref}",),
                )
            r = _git(repo, *args)
            if not r.ok:
                left = _undo(project.path, made)
                raise FmError(
                    Verdict.FAILED,
                    f"{what} failed: {r.why()}; nothing was restored{left}",
                    (f"the save is untouched under {save.ref}",),
                )
            if interrupts.requested():
                left = _undo(project.path, made)
                # Ctrl-C or SIGTERM while restoring: what was made is removed again; exit 130.
                raise Interrupted(
                    f"interrupted; nothing was restored{left}",
                    (f"the save is untouched under {save.ref}",),
                )
    if made.still_there():
        _summarise(done)
    else:
        done.warnings.append(f"{shown(made.path)} changed after the restore: not read")
    if _rev(project.path, save.ref) != save.commit:
        done.warnings.append(f"{save.ref} no longer names {save.commit}: something else moved it")
    return done


def _inside_protected(real: str, project: Project, s: settings.Settings | None) -> str | None:
    """What `real` (a resolved path) lies inside, of the places a restore must never write
    into: every worktree of the project (its checkout and the pool's slots), the slot roots
    and worktrees the pool's state files list, the worktrees, projects, temp dirs and homes
    the task records name, and every task's temp dir `/tmp/fm-*`. None when it is inside none
    of them. Records that cannot be read refuse (exit 5): the target cannot be told safe."""
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
        return f"a task's temp dir {shown(tmp)}"
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
            if record.kind == "secondmate":
                add(record.home, f"secondmate {record.task_id}'s home")
            if os.path.isabs(record.worktree):
                reader.view(record.worktree, canonical(record.worktree))
        for bad in fleet.invalid.values() if fleet is not None else ():
            for claimed in bad.claimed or ():
                add(claimed, f"the worktree of task {bad.task_id}'s unreadable record")
        for entry in reader.entries():
            add(entry.canonical, "a pool slot")
            add(os.path.dirname(entry.canonical), "a pool slot")
    for place in sorted(places, key=len, reverse=True):
        if is_within(real, place):
            return f"{places[place]} {shown(place)}"
    return None


@dataclass
class _Made:
    """The directory this command created: its resolved path and its device and inode."""

    path: str
    dev: int
    ino: int

    def still_there(self) -> bool:
        """The resolved path still leads, through no link, to the very directory made."""
        try:
            fd = _open_nofollow(self.path)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return (st.st_dev, st.st_ino) == (self.dev, self.ino)


def _open_nofollow(path: str) -> int:
    """Open a resolved directory path one component at a time, following no link."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags)
    for part in path.split("/"):
        if not part:
            continue
        try:
            nfd = os.open(part, flags, dir_fd=fd)
        finally:
            os.close(fd)
        fd = nfd
    return fd


def _make_dir(real: str, dest: str, never: str, other: str) -> _Made:
    """Create `real` inside its parent opened without following links; atomically ours."""
    parent, name = os.path.split(real)
    try:
        pfd = _open_nofollow(parent)
    except OSError as exc:
        raise FmError(
            Verdict.FAILED, f"cannot open {shown(parent)} without following links: {exc.strerror}"
        ) from None
    try:
        os.mkdir(name, 0o777, dir_fd=pfd)
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except FileExistsError:
        raise invalid(f"{shown(dest)} exists: {never}", other) from None
    except OSError as exc:
        raise FmError(Verdict.FAILED, f"cannot create {shown(dest)}: {exc.strerror}") from None
    finally:
        os.close(pfd)
    return _Made(real, st.st_dev, st.st_ino)


def _registered(project: str, dest: str) -> bool:
    r = _git(project, "worktree", "list", "--porcelain", "-z")
    if not r.ok:
        return True  # cannot tell: say so
    want = canonical(dest)
    return any(
        item.startswith(b"worktree ") and canonical(os.fsdecode(item[9:])) == want
        for item in r.out.split(b"\0")
    )


def _undo(project: str, made: _Made) -> str:
    """Remove the directory this command created, and only it: found again through its
    parent opened without following links, and removed only when its device and inode are
    still the ones created; then git's entry for it. Returns "" or what is left over, as the
    end of a sentence."""
    parent, name = os.path.split(made.path)
    removed = False
    try:
        pfd = _open_nofollow(parent)
    except OSError:
        pfd = None
    if pfd is not None:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (made.dev, made.ino):
                shutil.rmtree(name, dir_fd=pfd)
                removed = True
        except OSError:
            pass
        finally:
            os.close(pfd)
    if removed and _registered(project, made.path):
        # The directory is gone now, so git only drops its entry.
        _git(project, "worktree", "remove", "--force", "--force", made.path)
    if not removed or _registered(project, made.path):
        cmd = shlex.join(["git", "-C", project, "worktree", "remove", "--force", made.path])
        return (
            f"; {shown(made.path)} is no longer (only) what fm restore created and was left "
            f"as it is; check it, then: {cmd}"
        )
    return ""


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


# -- output -----------------------------------------------------------------------------------


def _doc(task: str, **rest: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "restore": True, "task": task, **rest}


def _fail(task: str, err: FmError, json_out: bool, code: ExitCode | None = None) -> int:
    code = err.exit_code if code is None else code
    if json_out:
        emit_json(
            _doc(
                task,
                exit_code=int(code),
                verdict=str(err.verdict),
                reasons=[messages.error_reason(err)],
                hints=list(err.hints),
            )
        )
    render_error(err)
    return int(code)


def _suggested_dir(project: Project, task: str, save: Save) -> str:
    """The directory discard.py's restore command names (beside the project, never in a
    slot), or the first free `<it>-2`, `<it>-3`... when a restore already made it."""
    from fm_teardown.act.discard import main_checkout

    # A secondmate's saves are found through its home, a pool slot: beside the main checkout.
    base = f"{os.path.normpath(main_checkout(project.path))}-fm-restore-{task}-{save.stamp}"
    for n in range(1, 100):
        candidate = base if n == 1 else f"{base}-{n}"
        if not os.path.lexists(candidate):
            return candidate
    return f"{base}-<n>"


def _restore_command(task: str, found: Found) -> str | None:
    """The exact command that restores the newest save (None: there is none)."""
    with_saves = [p for p in found.projects if p.saves]
    if not with_saves:
        return None
    project = with_saves[0]
    newest = project.saves[0]
    argv = ["fm", "restore", task, "--to", _suggested_dir(project, task, newest)]
    if not found.from_journal or len(with_saves) > 1:
        argv += ["--project", project.path]
    return shlex.join(argv)


def _save_json(s: Save, project: Project) -> dict[str, Any]:
    return {
        "ref": s.ref,
        "stamp": s.stamp,
        "commit": s.commit,
        "head": s.head,
        "time": s.time,
        "subject": s.subject,
        "files": s.files,
        "project": project.path,
    }


def _show_saves(task: str, found: Found, json_out: bool) -> None:
    command = _restore_command(task, found)
    if json_out:
        emit_json(
            _doc(
                task,
                exit_code=0,
                project=found.projects[0].path if len(found.projects) == 1 else None,
                projects=[p.path for p in found.projects],
                saves=[_save_json(s, p) for p in found.projects for s in p.saves],
                restore_command=command,
                warnings=found.warnings,
            )
        )
        _warn(found.warnings)
        return
    out = Printer(sys.stdout)
    source = "from the journal" if found.from_journal else "--project"
    for project in found.projects:
        where = f"{shown(project.path, 200)} ({source})"
        if not project.saves:
            out.line(f"no saves of task {task} in {where}: nothing to restore")
            continue
        n = len(project.saves)
        out.line(
            f"{n} save{'s' if n != 1 else ''} of task {task} in {where}, newest first:", "bold"
        )
        out.table(
            ("REF", "SAVED", "FILES", "HEAD", "SUBJECT"),
            [
                (
                    s.ref,
                    s.time,
                    "?" if s.files is None else str(s.files),
                    s.head[:12],
                    shown(s.subject),
                )
                for s in project.saves
            ],
        )
    with_saves = [p for p in found.projects if p.saves]
    if command is not None:
        out.line(f"to restore the newest: {command}")
        if any(len(p.saves) > 1 for p in with_saves):
            out.line("  an older one: add --ref <stamp or ref>")
        if len(with_saves) > 1:
            out.line("  saves are in more than one project: --to needs --project")
    _warn(found.warnings)


def _warn(warnings: Sequence[str]) -> None:
    err = Printer(sys.stderr)
    for w in warnings:
        err.line(f"warning: {w}", "yellow")


def _show_restored(task: str, done: Restored, json_out: bool) -> None:
    save, project, dest = done.save, done.project, done.to
    if json_out:
        emit_json(
            _doc(
                task,
                exit_code=0,
                project=project.path,
                ref=save.ref,
                commit=save.commit,
                head=save.head,
                to=dest,
                modified=done.modified,
                deleted=done.deleted,
                untracked=done.untracked,
                ignored=done.ignored,
                warnings=done.warnings,
            )
        )
        _warn(done.warnings)
        return
    out = Printer(sys.stdout)
    out.line(f"restored {save.ref} into {shown(dest, 200)}", "bold green")
    out.line(f"  project: {shown(project.path, 200)}")
    out.line(f"  save:    {save.commit} ({save.time})")
    r = _git(dest, "log", "-1", "--format=%s", save.head)
    subject = f" {shown(r.text)}" if r.ok and r.text else ""
    out.line(f"  HEAD:    {save.head}{subject}")
    out.line("           (detached: the slot's HEAD when the work was saved)")
    files = [
        *(("modified", p) for p in done.modified),
        *(("deleted", p) for p in done.deleted),
        *(("untracked", p) for p in done.untracked),
        *(("ignored", p) for p in done.ignored),
    ]
    counts = ", ".join(
        f"{len(v)} {k}"
        for k, v in (
            ("modified", done.modified),
            ("deleted", done.deleted),
            ("untracked", done.untracked),
            ("ignored", done.ignored),
        )
        if v
    )
    out.line(f"  uncommitted again: {counts or 'nothing (the save changed no file)'}")
    for kind, path in files[:_SHOWN_FILES]:
        out.line(f"    {kind:<9}  {shown(path, 200)}")
    if len(files) > _SHOWN_FILES:
        out.line(f"    … and {len(files) - _SHOWN_FILES} more: git -C {shlex.quote(dest)} status")
    if done.ignored:
        out.line("  (ignored files are back on disk, but `git add -A` skips them: `git add -f`)")
    q, qp = shlex.quote(dest), shlex.quote(project.path)
    out.line("to finish:")
    out.line(f"  git -C {q} switch -c <branch>      # HEAD is detached: name the work")
    out.line(f"  git -C {q} add -A && git -C {q} commit")
    out.line(f"  git -C {q} push -u origin <branch>")
    out.line(f"  git -C {qp} worktree remove {q}      # when done")
    out.line(f"the save stays under {save.ref} (fm restore never moves or deletes it)")
    _warn(done.warnings)
