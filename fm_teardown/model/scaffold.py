"""The files the fleet itself drops into a slot: harness hooks and turn-end markers.

They are not the task's work, so they never make a slot "dirty" (firstmate issue #1605).
Exact paths, relative to the slot root: a file of the same name elsewhere in the tree is real
work. One list, used by the landed-work check and by the teardown's hook-removal step.
"""

from __future__ import annotations

__all__ = ["SCAFFOLD_BYTES", "SCAFFOLD_PATHS"]

SCAFFOLD_PATHS: tuple[str, ...] = (
    ".claude/settings.local.json",
    ".fm-grok-turnend",
    ".fm-kimi-turnend",
    # agy's turn-end pointer (firstmate's agy harness; its hooks are one global plugin).
    ".fm-agy-turnend",
    ".opencode/plugins/fm-turn-end.js",
    ".opencode/plugins/fm-busy-state.js",
)
SCAFFOLD_BYTES = frozenset(p.encode() for p in SCAFFOLD_PATHS)
