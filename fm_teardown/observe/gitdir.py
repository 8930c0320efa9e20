"""Is a slot's git dir its own? (spec §7a) Pure file reads: no git subprocess.

A pool slot is a linked worktree of its project: its `.git` is a file naming
`<common dir>/worktrees/<n>`, and that directory's `gitdir` file names the slot's `.git` back.
Anything else means git run in the slot, and the pool's reset, act on another tree: a `cp -a`
copy of a live slot names the live slot's git dir (resetting it moves the other task's HEAD and
index); a slot without `.git` lets git find an enclosing repository; a `.git` directory is a
repository of its own that the pool does not own.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from fm_teardown.model.paths import canonical

__all__ = [
    "common_dir",
    "locked_worktrees",
    "nested_locks",
    "read_small",
    "slot_git_problem",
    "worktree_lock",
]

_MAX = 4096


def read_small(path: str) -> str | None:
    """The text of a small regular file, never through a symlink or a FIFO; None if it is not
    one. Bytes that are not UTF-8 survive (surrogateescape): the text names paths and refs."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _MAX).decode("utf-8", "surrogateescape")
    except OSError:
        return None
    finally:
        os.close(fd)


def _gitdir_line(text: str, base: str, canon: Callable[[str], str] = canonical) -> str | None:
    first = text.split("\n", 1)[0].strip()
    if not first.startswith("gitdir:"):
        return None
    target = first[len("gitdir:") :].strip()
    if not target:
        return None
    return canon(os.path.normpath(os.path.join(base, target)))


def common_dir(project: str) -> str | None:
    """The canonical common git dir of the project checkout, or None when it cannot be told."""
    dotgit = os.path.join(project, ".git")
    try:
        st = os.lstat(dotgit)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        gitdir = canonical(dotgit)
    elif stat.S_ISREG(st.st_mode):
        text = read_small(dotgit)
        found = _gitdir_line(text, project) if text is not None else None
        if found is None:
            return None
        gitdir = found
    else:
        return None
    common = read_small(os.path.join(gitdir, "commondir"))
    if common is not None and common.strip():
        return canonical(os.path.normpath(os.path.join(gitdir, common.strip())))
    return gitdir


def slot_git_problem(
    slot: str,
    project: str,
    project_common: str | None,
    canon: Callable[[str], str] = canonical,
    dotgit_text: str | None = None,
) -> str | None:
    """Why the slot's `.git` is not a linked worktree git dir of `project` naming this slot.

    `canon`: the observation's canonicaliser (the slots' git dirs share their ancestors).
    `dotgit_text`: the `.git` file's text when the caller read it already (`read_small`; ""
    when it could not be read, which both checks take as naming no git dir), so that this
    check and `worktree_lock` read it once; None: read here."""
    dotgit = os.path.join(slot, ".git")
    try:
        st = os.lstat(dotgit)
    except FileNotFoundError:
        return (
            f"slot {slot} has no .git: it is not a worktree of {project}, and git run there "
            "would act on an enclosing repository"
        )
    except OSError as exc:
        return f"slot {slot}: cannot read .git ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"slot {slot}: .git is a symlink"
    if stat.S_ISDIR(st.st_mode):
        return (
            f"slot {slot}: .git is a directory, a repository of its own, not a linked "
            f"worktree of {project}"
        )
    text = read_small(dotgit) if dotgit_text is None else dotgit_text
    target = _gitdir_line(text, slot, canon) if text is not None else None
    if target is None:
        return f"slot {slot}: .git does not name a git dir (no 'gitdir:' line)"
    if project_common is None:
        return f"cannot tell the git dir of the project {project}"
    if os.path.dirname(target) != os.path.join(project_common, "worktrees"):
        return (
            f"slot {slot}: .git names {target}, which is not a worktree git dir of the "
            f"project's repository {project_common}"
        )
    back = read_small(os.path.join(target, "gitdir"))
    named = _gitdir_line("gitdir: " + back, target, canon) if back is not None else None
    if named is None:
        return f"slot {slot}: its git dir {target} has no readable gitdir file"
    if named != canon(dotgit):
        return (
            f"slot {slot}: .git names {target}, which belongs to the worktree {named} "
            "(a copy of another slot?): git run here would act on that tree"
        )
    return None


# How much of a lock's reason is kept: enough to name the tool and its session.
_REASON_MAX = 200


def worktree_lock(
    slot: str, canon: Callable[[str], str] = canonical, dotgit_text: str | None = None
) -> str | None:
    """The reason of a `git worktree lock` on the slot, "" for a lock without one, or None
    when the slot is not locked (or its `.git` names no git dir: `slot_git_problem` says so).

    `git worktree lock` writes the file `locked` in the slot's git dir
    (`<common dir>/worktrees/<name>/locked`), its content the reason. The pool never locks its
    slots: a lock is another tool's claim on the tree (an agent tool writes
    `--reason "claude-code agent session …"`). A `locked` that is not a readable regular file
    is still a lock, of an unknown reason. `canon`, `dotgit_text`: as for `slot_git_problem`."""
    text = read_small(os.path.join(slot, ".git")) if dotgit_text is None else dotgit_text
    gitdir = _gitdir_line(text, slot, canon) if text is not None else None
    if gitdir is None:
        return None
    locked = os.path.join(gitdir, "locked")
    try:
        os.lstat(locked)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"(its reason cannot be read: {exc.strerror})"
    reason = read_small(locked)
    if reason is None:
        return "(its reason cannot be read)"
    said = " ".join(reason.split())
    return said if len(said) <= _REASON_MAX else said[: _REASON_MAX - 1] + "…"


def _said(reason: str) -> str:
    said = " ".join(reason.split())
    return said if len(said) <= _REASON_MAX else said[: _REASON_MAX - 1] + "…"


def locked_worktrees(
    common: str, canon: Callable[[str], str] = canonical
) -> tuple[tuple[str, str], ...]:
    """Every worktree of the repository whose common git dir is `common` that another tool
    locked (`git worktree lock`): its canonical path and the lock's reason ("" without one).
    Pure file reads: `<common>/worktrees/<name>/locked` and, for a locked one, its `gitdir`
    (which names `<path>/.git`). A worktree whose `gitdir` cannot be read is left out: where
    it is cannot be told, and the slot's own lock is read from the slot (`worktree_lock`)."""
    base = os.path.join(common, "worktrees")
    try:
        with os.scandir(base) as it:
            names = [e.name for e in it]
    except OSError:
        return ()
    out = []
    for name in sorted(names):
        locked = os.path.join(base, name, "locked")
        try:
            os.lstat(locked)
        except FileNotFoundError:
            continue
        except OSError as exc:
            reason = f"(its reason cannot be read: {exc.strerror})"
        else:
            text = read_small(locked)
            reason = "(its reason cannot be read)" if text is None else _said(text)
        named = read_small(os.path.join(base, name, "gitdir"))
        first = named.split("\n", 1)[0].strip() if named is not None else ""
        if not os.path.isabs(first):
            continue
        out.append((canon(os.path.dirname(os.path.normpath(first))), reason))
    return tuple(out)


def nested_locks(slot: str, locked: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The locked worktrees (`locked_worktrees`) whose path is inside `slot`, the slot itself
    left out: another tool's claim on a tree nested in the slot, which the pool's reset and
    the processes step would reach too."""
    prefix = slot.rstrip("/") + "/"
    return tuple((path, reason) for path, reason in locked if path.startswith(prefix))
