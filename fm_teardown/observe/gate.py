"""The no-mistakes gate refusal (spec §10): a gate agent must not drive the fleet.

A real run refuses (exit 5) when `NO_MISTAKES_GATE` is set at all, or when the current
directory is inside a `.no-mistakes/repos/*.git` repository (directly, or a worktree whose
git common dir is one), unless `FM_GATE_REFUSE_BYPASS=1` (test harnesses). No git runs for
this: the common dir is read from the `.git` files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fm_teardown.model.errors import ErrorCode, FmError, Lead, Verdict
from fm_teardown.model.paths import ancestors, canonical
from fm_teardown.observe.gitdir import common_dir

__all__ = ["MESSAGE", "refusal"]

MESSAGE = "no-mistakes gate agent must not drive the fleet"


def _gate_repo(path: str) -> str | None:
    """The `.no-mistakes/repos/<name>.git` directory that `path` lies in, if any."""
    for anc in ancestors(path):
        parent = os.path.dirname(anc)
        if (
            anc.endswith(".git")
            and os.path.basename(parent) == "repos"
            and os.path.basename(os.path.dirname(parent)) == ".no-mistakes"
        ):
            return anc
    return None


GATE = ErrorCode.NO_MISTAKES_GATE


def refusal(env: Mapping[str, str], cwd: str) -> FmError | None:
    if env.get("FM_GATE_REFUSE_BYPASS") == "1":
        return None
    if "NO_MISTAKES_GATE" in env:
        return FmError(
            Verdict.UNSAFE,
            f"{MESSAGE} (NO_MISTAKES_GATE set)",
            lead=Lead.ERROR,
            code=GATE,
        )
    here = canonical(os.path.abspath(cwd))
    gate = _gate_repo(here)
    if gate is None:
        # A worktree of the gate repository: its common dir lies under .no-mistakes/repos.
        for anc in ancestors(here):
            if os.path.lexists(os.path.join(anc, ".git")):
                common = common_dir(anc)
                gate = _gate_repo(common) if common else None
                break
    if gate is not None:
        return FmError(
            Verdict.UNSAFE,
            f"{MESSAGE} (inside a no-mistakes gate worktree: {gate})",
            lead=Lead.ERROR,
            code=GATE,
        )
    return None
