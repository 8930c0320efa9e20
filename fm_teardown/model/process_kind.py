"""What kind of process a process is, by its name and argv[0]: an agent, a shell, or other;
a tmux server or client; a shell that is someone's terminal (spec §4, §7a, §14.1).

Pure functions of values: observe classifies endpoints with them, decide the slot census,
the owners and what is never signalled, act the agents asked to quit and the terminals a
run ends.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from functools import lru_cache

from fm_teardown.model.results import Terminal
from fm_teardown.model.world import Proc, TmuxInventory

__all__ = [
    "AGENT_NAMES",
    "AGENT_PREFIXES",
    "AGENT_SUBSTRINGS",
    "HARNESS_DIRS",
    "SHELLS",
    "WRAPPERS",
    "ProcessClass",
    "base_name",
    "classify",
    "is_tmux",
    "is_wrapper",
    "terminal_of",
]

SHELLS = frozenset({"zsh", "bash", "sh", "dash", "ash", "ksh", "mksh", "tcsh", "csh", "fish"})
# Matched anywhere in the name: harness binaries come with suffixes and wrappers.
AGENT_SUBSTRINGS = ("claude", "codex", "opencode", "gemini", "aider", "grok", "kimi")
AGENT_NAMES = frozenset(
    {"cursor-agent", "pi", "pi-signed", "pi-launcher", "Pi", "muse", "goose", "amp", "qwen"}
)
AGENT_PREFIXES = ("muse-bin-", "cursor-agent")
HARNESS_DIRS = frozenset({*AGENT_SUBSTRINGS, "cursor-agent", "pi", "muse"})
# Programs a pane runs that only hold what runs under them: firstmate's spawn types
# `treehouse enter <slot>` into the pane, which opens the task's shell in the slot as its
# child. Such a process with a child is seen through (the endpoint is what runs under it);
# without one it is what it is (another program: `other`).
WRAPPERS = frozenset({"treehouse"})


# Memoised by name (here, `is_tmux` and `classify`): an audit classifies every process of every
# slot and pane, a few thousand calls over a few hundred distinct names (the answers are pure
# functions of the strings).
@lru_cache(maxsize=4096)
def base_name(name: str) -> str:
    """A process name or argv[0] without its directory and a login shell's leading `-`."""
    return os.path.basename(name).lstrip("-")


def _is_agent_name(name: str) -> bool:
    base = base_name(name)
    if not base:
        return False
    lower = base.lower()
    return (
        any(s in lower for s in AGENT_SUBSTRINGS)
        or base in AGENT_NAMES
        or base.startswith(AGENT_PREFIXES)
    )


@lru_cache(maxsize=4096)
def is_tmux(name: str, argv0: str) -> bool:
    """A tmux server or client (`tmux`, `tmux: server`, `tmux: client`): never signalled.

    Ending a tmux server ends every window of the fleet with it."""
    return any(b == "tmux" or b.startswith("tmux:") for b in (base_name(name), base_name(argv0)))


@lru_cache(maxsize=4096)
def is_wrapper(name: str, argv0: str) -> bool:
    """A program that only holds what runs under it (`treehouse enter`), by name or argv[0]."""
    return base_name(name) in WRAPPERS or base_name(argv0) in WRAPPERS


class ProcessClass(StrEnum):
    AGENT = "agent"
    SHELL = "shell"
    OTHER = "other"


@lru_cache(maxsize=4096)
def classify(name: str, argv0: str) -> ProcessClass:
    """`agent`, `shell` or `other`, by process name, then argv[0] and its path components."""
    if _is_agent_name(name) or _is_agent_name(argv0):
        return ProcessClass.AGENT
    if base_name(name) in SHELLS:
        return ProcessClass.SHELL
    # A harness installed under its own directory (`~/.claude/local/node ...`): the directory
    # names the harness even when the binary is a generic runtime.
    parts = [p.lstrip(".") for p in argv0.split("/") if p]
    if any(p in HARNESS_DIRS for p in parts[:-1]):
        return ProcessClass.AGENT
    if not name and base_name(argv0) in SHELLS:
        return ProcessClass.SHELL
    return ProcessClass.OTHER


def terminal_of(
    proc: Proc, endpoint_owner: Mapping[int, str], inventory: TmuxInventory
) -> Terminal | None:
    """A shell that no task's endpoint holds is someone's terminal cd'd into the slot (perhaps
    the operator's own): where it runs (its terminal, and the fleet's tmux pane when it is
    one), so that the dry run and the real run can say whose shell fm ends. None for any
    other process."""
    if proc.pid in endpoint_owner or classify(proc.name, proc.argv0) != ProcessClass.SHELL:
        return None
    pane = next((p for p in inventory.panes if p.pane_pid == proc.pid and not p.dead), None)
    where = f"{pane.session}:{pane.window_name} ({pane.pane_id})" if pane is not None else None
    return Terminal(proc.tty, where)
