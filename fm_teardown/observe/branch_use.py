"""Which branches another worktree's git operation holds (spec §13.5, §14.8). Pure file
reads of the repository's git dirs: no git subprocess.

`git worktree list` and `for-each-ref --format=%(worktreepath)` show only the branch each
worktree has checked out. A worktree in the middle of a rebase has HEAD detached, and names
the branch it rebases in `rebase-merge/head-name` (or `rebase-apply/head-name`); a
`git rebase --update-refs` also lists in `rebase-merge/update-refs` every branch it will move
when it finishes; a bisect names the branch it started from in `BISECT_START`. Deleting any
of them makes that operation fail, so each counts as in use.
"""

from __future__ import annotations

import os
import stat

from fm_teardown.model.world import BranchUse
from fm_teardown.observe.gitdir import read_small

__all__ = ["ANY_BRANCH", "MAX_UPDATE_REFS_BYTES", "branches_in_use", "held_by"]

# `rebase-merge/update-refs` holds three lines per branch; a file beyond this is not read
# through, and every branch then counts as held by it (limits fail closed).
MAX_UPDATE_REFS_BYTES = 1024 * 1024

# Where git records the branch an operation in progress works on, per worktree git dir:
# the file, and whether it holds the full ref name (else the short branch name).
_OPERATIONS = (
    ("rebase-merge/head-name", True, BranchUse.REBASING),
    ("rebase-apply/head-name", True, BranchUse.REBASING),
    ("BISECT_START", False, BranchUse.BISECTING),
    ("HEAD", True, BranchUse.ON),
)
_UPDATE_REFS = "rebase-merge/update-refs"
# The key under which an unreadable or too long update-refs file holds every branch.
ANY_BRANCH = "*"


def branches_in_use(common: str) -> dict[str, tuple[str, BranchUse]]:
    """Full ref name (`refs/heads/x`) -> (the worktree, what it is doing with it), for every
    worktree of the repository whose common git dir is `common`. The key `*` says that some
    worktree's update-refs list could not be read: every branch counts as held by it."""
    gitdirs = [(common, _main_worktree(common))]
    try:
        names = sorted(os.listdir(os.path.join(common, "worktrees")))
    except OSError:
        names = []
    for name in names:
        gitdir = os.path.join(common, "worktrees", name)
        gitdirs.append((gitdir, _linked_worktree(gitdir)))
    found: dict[str, tuple[str, BranchUse]] = {}
    for gitdir, worktree in gitdirs:
        for rel, full, what in _OPERATIONS:
            text = _small_text(os.path.join(gitdir, rel))
            if not text:
                continue
            if rel == "HEAD":
                if not text.startswith("ref: "):
                    continue
                text = text[len("ref: ") :]
            ref = text if full or text.startswith("refs/") else f"refs/heads/{text}"
            found.setdefault(ref, (worktree, what))
        held = _update_refs(os.path.join(gitdir, _UPDATE_REFS))
        for ref in held if held is not None else (ANY_BRANCH,):
            found.setdefault(ref, (worktree, BranchUse.UPDATE_REFS))
    return found


def held_by(common: str, ref: str) -> tuple[str, BranchUse] | None:
    """Right before the branch step deletes `ref`: the worktree whose operation holds it and
    what it does with it (any worktree, when some update-refs list cannot be read), or None."""
    in_use = branches_in_use(common)
    return in_use.get(ref) or in_use.get(ANY_BRANCH)


def _update_refs(path: str) -> tuple[str, ...] | None:
    """The refs a `rebase --update-refs` will move (every third line, from the first), ()
    when there is no such file, None when it cannot be read whole."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ()
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_UPDATE_REFS_BYTES:
            return None
        data = os.read(fd, MAX_UPDATE_REFS_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_UPDATE_REFS_BYTES:
        return None
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    return tuple(line.strip() for line in lines[0::3] if line.strip())


def _small_text(path: str) -> str | None:
    text = read_small(path)
    return None if text is None else text.strip()


def _main_worktree(common: str) -> str:
    return os.path.dirname(common) if os.path.basename(common) == ".git" else common


def _linked_worktree(gitdir: str) -> str:
    """The worktree of a linked git dir (its `gitdir` file names the worktree's `.git`)."""
    text = _small_text(os.path.join(gitdir, "gitdir"))
    if text and os.path.isabs(text):
        return os.path.dirname(text)
    return f"the worktree of {gitdir}"
