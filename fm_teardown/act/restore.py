"""`fm restore --to DIR`: a save brought back as a new worktree (spec §12).

The directory is created by fm itself, inside its parent opened without following links, and
is known by its device and inode from then on: `git worktree add --detach --no-checkout` on
the save, the save's files written as they are (through a private git dir of fm's own, in
which no filter, end-of-line conversion, `ident` or `working-tree-encoding` applies: the bytes
the slot held, spec §15.1), then `git reset` to the commit the save was parented on, so the
saved files are uncommitted modifications and untracked files again. Before each step the
directory must still be the one made; a failed step or an interrupt removes what was made
(only it) and says what is left. The save's ref is never moved or deleted. Also where a
restore goes by default (beside the main checkout, never in a slot) and the command that
restores the newest save.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from fm_teardown.adapters import interrupts, private_git, runner
from fm_teardown.adapters.interrupts import Interrupted
from fm_teardown.decide.restore_target import NEVER, other_dir
from fm_teardown.model.errors import FmError, Verdict, invalid
from fm_teardown.model.paths import canonical
from fm_teardown.model.records import shown
from fm_teardown.model.saves import Found, Project, Restored, Save

__all__ = ["Made", "make_worktree", "restore_command"]

_git = runner.git
_rev = runner.rev


def make_worktree(
    task: str, project: Project, save: Save, real: str, dest: str
) -> tuple[Restored, Made]:
    """Bring `save` back at the resolved target `real` (`dest` as given, for the messages):
    what was restored, and the directory made (to check it is still the one made)."""
    if _rev(project.path, save.ref) != save.commit:
        raise FmError(Verdict.FAILED, f"{save.ref} changed while fm restore was reading it")
    made = _make_dir(real, dest, task)
    done = Restored(project, save, made.path)
    tmp = tempfile.mkdtemp(prefix="fm-restore-")
    try:
        with interrupts.while_acting():
            _steps(project, save, made, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return done, made


def _steps(project: Project, save: Save, made: Made, tmp: str) -> None:
    """The worktree registered on the save without its files, the save's files written as
    they are, HEAD and the index back on the commit the save was parented on."""
    steps: tuple[tuple[str, Callable[[], runner.Result]], ...] = (
        (
            "git worktree add",
            lambda: _git(
                project.path, "worktree", "add", "--detach", "--no-checkout", made.path, save.commit
            ),
        ),
        ("writing the saved files", lambda: _write_files(project.path, made.path, save, tmp)),
        # HEAD and the index back on the commit the save was parented on; the files stay.
        ("git reset", lambda: _git(made.path, "reset", "--quiet", save.head)),
    )
    for what, step in steps:
        if not made.still_there():
            left = _undo(project.path, made)
            raise FmError(
                Verdict.FAILED,
                f"{shown(made.path)} is no longer the directory fm restore created; "
                f"nothing was restored{left}",
                (f"the save is untouched under {save.ref}",),
            )
        r = step()
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


def _write_files(project: str, dest: str, save: Save, tmp: str) -> runner.Result:
    """The files of the save, written into `dest` byte for byte through a private git dir
    (its own index: the new worktree's is made by the reset after)."""
    private = private_git.private_repo(project, dest, tmp)
    if isinstance(private, runner.Result):
        return private
    r = private_git.git_private(private, "read-tree", save.commit)
    return r if not r.ok else private_git.git_private(private, "checkout-index", "--all")


@dataclass
class Made:
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


def _make_dir(real: str, dest: str, task: str) -> Made:
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
        raise invalid(f"{shown(dest)} exists: {NEVER}", other_dir(task)) from None
    except OSError as exc:
        raise FmError(Verdict.FAILED, f"cannot create {shown(dest)}: {exc.strerror}") from None
    finally:
        os.close(pfd)
    return Made(real, st.st_dev, st.st_ino)


def _registered(project: str, dest: str) -> bool:
    r = _git(project, "worktree", "list", "--porcelain", "-z")
    if not r.ok:
        return True  # cannot tell: say so
    want = canonical(dest)
    return any(
        item.startswith(b"worktree ") and canonical(os.fsdecode(item[9:])) == want
        for item in r.out.split(b"\0")
    )


def _undo(project: str, made: Made) -> str:
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


def restore_command(task: str, found: Found) -> str | None:
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
