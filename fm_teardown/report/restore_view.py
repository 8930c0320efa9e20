"""Everything `fm restore` prints (spec §12): the saves found, what a restore brought back
and how to finish, the warnings, and a restore that did not happen; each as lines for people
or as one JSON document (`--json`).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from typing import Any

from fm_teardown.model.errors import ExitCode, FmError
from fm_teardown.model.records import shown
from fm_teardown.model.saves import Found, Project, Restored, Save
from fm_teardown.report import messages
from fm_teardown.report.human import Printer, render_error
from fm_teardown.report.json_out import SCHEMA, emit_json

__all__ = ["show_error", "show_restored", "show_saves"]

# Files named one per line in the human output of a restore; --json always lists them all.
_SHOWN_FILES = 100


def _doc(task: str, **rest: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "restore": True, "task": task, **rest}


def show_error(task: str, err: FmError, code: ExitCode, json_out: bool) -> None:
    """A restore that did not happen: one JSON document with `--json`, and the error's line."""
    if json_out:
        emit_json(
            _doc(
                task,
                exit_code=int(code),
                verdict=str(err.verdict),
                reasons=[messages.error_reason(err)],
                reason_codes=[str(err.code)],
                hints=list(err.hints),
            )
        )
    render_error(err)


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


def show_saves(task: str, found: Found, command: str | None, json_out: bool) -> None:
    """The saves found, newest first per project, and the command that restores the newest."""
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


def show_restored(task: str, done: Restored, subject: str | None, json_out: bool) -> None:
    """What is back and where, and how to finish (`subject`: of the commit HEAD is on)."""
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
    said = f" {shown(subject)}" if subject else ""
    out.line(f"  HEAD:    {save.head}{said}")
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
