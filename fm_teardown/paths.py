"""Canonical slot paths (CONTRACT §4).

Slots are compared only by canonical path, component by component: symlinks and `..`
resolved, trailing slashes dropped, and for a path that no longer exists the deepest existing
ancestor resolved with the rest appended. Never by string prefix: `/p/1` is not inside `/p/10`.
"""

from __future__ import annotations

import os


def canonical(path: str) -> str:
    """The canonical spelling of an absolute path, whether or not it still exists.

    `os.path.realpath` walks the path component by component, resolving each symlink before
    applying a following `..`, and keeps the unresolvable tail of a missing path as written:
    exactly "resolve the deepest existing ancestor, append the rest".
    """
    if not os.path.isabs(path):
        raise ValueError(f"not an absolute path: {path!r}")
    return os.path.realpath(path)


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
    """`path` and each of its ancestors up to `/`, nearest first (canonical input)."""
    out = [path]
    while path != "/":
        path = os.path.dirname(path)
        out.append(path)
    return out
