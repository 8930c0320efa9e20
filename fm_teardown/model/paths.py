"""Canonical slot paths (spec §4).

Slots are compared only by canonical path, component by component: symlinks and `..`
resolved, trailing slashes dropped, and for a path that no longer exists the deepest existing
ancestor resolved with the rest appended. Never by string prefix: `/p/1` is not inside `/p/10`.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fm_teardown.model.world import TaskTmp

__all__ = [
    "Canonicalizer",
    "ancestors",
    "canonical",
    "is_ancestor_or_same",
    "is_within",
    "tmp_root_of",
]


def canonical(path: str) -> str:
    """The canonical spelling of an absolute path, whether or not it still exists.

    `os.path.realpath` walks the path component by component, resolving each symlink before
    applying a following `..`, and keeps the unresolvable tail of a missing path as written:
    exactly "resolve the deepest existing ancestor, append the rest".
    """
    if not os.path.isabs(path):
        raise ValueError(f"not an absolute path: {path!r}")
    return os.path.realpath(path)


def tmp_root_of(tmp: TaskTmp) -> str:
    """The canonical spelling of a tasktmp that is a real directory: its parent resolved (/tmp
    may itself be a link elsewhere), its own name as is, never followed."""
    parent, name = os.path.split(tmp.path)
    return os.path.join(canonical(parent), name)


def is_within(child: str, parent: str) -> bool:
    """True when canonical `child` is `parent` or lies below it (component-wise)."""
    if child == parent:
        return True
    if parent == "/":
        return child.startswith("/")
    return child.startswith(parent + "/")


def is_ancestor_or_same(path: str, other: str) -> bool:
    """True when canonical `path` is `other` or one of its ancestors."""
    return is_within(other, path)


def ancestors(path: str) -> list[str]:
    """`path` and each of its ancestors up to `/`, nearest first (canonical input: absolute,
    no `//`, no trailing `/`). The audit asks this of every process's cwd: cut at the last
    `/` rather than through `os.path.dirname`, at a fifth of the cost."""
    out = [path]
    cut = path.rfind("/")
    while cut > 0:
        path = path[:cut]
        out.append(path)
        cut = path.rfind("/")
    if path != "/":
        out.append("/")
    return out


class Canonicalizer:
    """`canonical`, memoised per directory: a fleet's slots share most of their ancestors, so
    each directory is resolved once (one lstat) instead of once per path below it."""

    def __init__(self) -> None:
        self._cache: dict[str, str] = {"/": "/"}

    def __call__(self, path: str) -> str:
        cache = self._cache
        found = cache.get(path)
        if found is not None:
            return found
        if not path.startswith("/"):
            raise ValueError(f"not an absolute path: {path!r}")
        stripped = path.rstrip("/") or "/"
        marked = stripped + "/"
        if "//" in marked or "/./" in marked or "/../" in marked:
            # An empty, `.` or `..` component: `..` must be applied after resolving what
            # precedes it; leave that to realpath.
            result = os.path.realpath(path)
        else:
            parent, name = stripped.rsplit("/", 1)
            base = self(parent or "/")
            candidate = f"{base}/{name}" if base != "/" else f"/{name}"
            try:
                is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except OSError:
                is_link = False
            result = os.path.realpath(candidate) if is_link else candidate
        cache[path] = result
        return result
