"""What in a repository's own config makes fm run no git there, beyond a file it cannot read
(`git_config.scan`): a `core.worktree` naming another tree, and a hook the config configures
for a git that runs such hooks. Each check says why, or None."""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["WORKTREE", "configured_hook", "other_tree"]

# `core.worktree`'s entries in a scan's keys: (WORKTREE, its value, "worktree").
WORKTREE = "core.worktree"


def other_tree(values: list[str], gitdir: str, common: str, worktree: str) -> str | None:
    """Why not, unless every `core.worktree` value names `worktree` itself: git would read the
    tree it names, so a status there would say nothing of this one (an agent's line in the
    config could make a slot with unsaved work read as clean). A relative value is resolved
    from the git dir and from the common dir alike (either may be git's), and must name the
    tree both ways; a submodule's own (`../../../sub`) does."""
    if not worktree or not values:
        return None  # (most repositories set none: no path resolved for them)
    want = os.path.realpath(worktree)
    for val in values:
        named = {os.path.join(base, val) for base in (gitdir, common)} if val else {""}
        if not all(n and os.path.realpath(n) == want for n in named):
            return (
                f"the repository's config sets core.worktree to {val!r}, not this tree "
                f"({worktree}): git would read that tree instead"
            )
    return None


def configured_hook(names: list[str], hooks_run: Callable[[], bool]) -> str | None:
    """Why not, when the repository's config configures a hook (`hook.<name>.command`) and
    the git that would run reads such hooks (`hooks_run`: 2.54 and later, or a version that
    cannot be read): no override is known to stop every such hook in every version
    (`core.hooksPath` stops only the hooks directory's). An older git ignores them."""
    if names and hooks_run():
        return (
            f"the repository's config configures a hook (hook.{names[0]}.command), a program "
            "the git on PATH would run"
        )
    return None
