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

Here the flags only: the saves are read by `observe/saves.py`, the save and the target judged by
`decide/restore_target.py`, the worktree made by `act/restore.py`, and every line printed by
`report/restore_view.py`.
"""

from __future__ import annotations

from fm_teardown.act import restore as act_restore
from fm_teardown.adapters.interrupts import Interrupted
from fm_teardown.decide import restore_target
from fm_teardown.model import settings
from fm_teardown.model.errors import ExitCode, FmError, Verdict, invalid
from fm_teardown.model.records import check_task_id, shown
from fm_teardown.model.saves import Project, Restored, Save
from fm_teardown.observe import saves
from fm_teardown.report import restore_view as view
from fm_teardown.report.journal import JOURNAL, bounded_lines

__all__ = ["USAGE", "restore", "saved_tasks"]

USAGE = "usage: fm restore TASK [--to DIR [--ref REF]] [--project DIR] [--json]"


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
        found = saves.find(_journal(s), task, project)
        if to is None:
            command = act_restore.restore_command(task, found)
            view.show_saves(task, found, command, json_out)
            return int(ExitCode.OK)
        chosen, save = restore_target.choose(task, found, ref, to)
        done = _restore(task, chosen, save, to, s)
        done.warnings[:0] = found.warnings
        subject = None if json_out else saves.head_subject(done.to, save.head)
        view.show_restored(task, done, subject, json_out)
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


def saved_tasks(s: settings.Settings) -> list[str]:
    """The task ids `fm restore` has saves of (what `fm restore <TAB>` offers; `saves.saved_tasks`
    says where it looks); [] when nothing can be read."""
    return saves.saved_tasks(_journal(s), s.state_dir)


def _journal(s: settings.Settings) -> saves.JournalFile:
    return saves.JournalFile(s.data_dir / JOURNAL, bounded_lines)


def _restore(
    task: str, project: Project, save: Save, to: str, s: settings.Settings | None = None
) -> Restored:
    """The target judged, the places it must not be in read and judged, the worktree made,
    and what is back read."""
    target = saves.target_of(to)
    real = restore_target.check_target(task, target)
    restore_target.check_places(task, target, real, saves.protected_places(real, project, s))
    done, made = act_restore.make_worktree(task, project, save, real, target.dest)
    saves.read_back(done, made.still_there())
    return done


def _fail(task: str, err: FmError, json_out: bool, code: ExitCode | None = None) -> int:
    code = err.exit_code if code is None else code
    view.show_error(task, err, code, json_out)
    return int(code)
