"""Repositories nested in a slot: untracked directories with a `.git` of their own, which the
slot's `git status` shows as one untracked path (`vendor/lib/`) and never looks into. They
hold work like the slot: their uncommitted changes and their commits on none of their own
remote-tracking branches. Gathering only, for `observe/landed.py`; every git call goes
through `runner`.

Each is inspected with the slot's own `git status` (and its nested repositories in turn, at
most `MAX_DEPTH` deep), and one `rev-list` of its commits on no remote-tracking ref of its
own. At most `MAX_NESTED` in all: beyond that, or deeper, a repository is not inspected and
says so (fail closed: a nested repository is untracked work of the slot whatever it holds).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from fm_teardown.adapters import runner
from fm_teardown.model.not_landed import NestedRepo
from fm_teardown.observe.slot_status import git_status, parse_status

__all__ = ["MAX_DEPTH", "MAX_NESTED", "inspect"]

# Nested repositories inspected per slot, all depths together, and how deep.
MAX_NESTED = 16
MAX_DEPTH = 3


def inspect(slot: str, paths: Sequence[str]) -> tuple[NestedRepo, ...]:
    """The nested repositories `paths` of `slot` (as its status shows them), each with its
    work, and those nested in them."""
    out: list[NestedRepo] = []
    todo = [(p, 1) for p in paths]
    left = 0
    while todo:
        path, depth = todo.pop(0)
        if len(out) >= MAX_NESTED:
            left += 1 + len(todo)
            break
        if depth > MAX_DEPTH:
            out.append(NestedRepo(path, error=f"nested more than {MAX_DEPTH} deep: not inspected"))
            continue
        repo, inner = _one(slot, path)
        out.append(repo)
        todo += [(p, depth + 1) for p in inner]
    if left:
        out.append(NestedRepo("…", error=f"{left} more nested repositories: not inspected"))
    return tuple(out)


def _one(slot: str, path: str) -> tuple[NestedRepo, list[str]]:
    """One nested repository (`path`, relative to the slot, ending in `/`): its work, and the
    repositories nested in it (as the slot's paths)."""
    where = os.path.join(slot, path)
    r = git_status(where)
    if not r.ok:
        return NestedRepo(path, error=f"git status failed: {r.why()}"), []
    st = parse_status(r.out)
    named = tuple(path + p for p in st.dirty[:3])
    commits = 0
    if st.head is not None:
        ahead = runner.git(where, "rev-list", "--count", st.head, "--not", "--remotes", "--")
        if not ahead.ok or not ahead.text.isdigit():
            why = f"cannot count its commits on no remote-tracking branch: {ahead.why()}"
            return NestedRepo(path, st.total, named, error=why), []
        commits = int(ahead.text)
    return NestedRepo(path, st.total, named, commits), [path + p for p in st.nested]
