"""Asking TASK's agent to leave the way its operator would, before any signal.

An agent killed by a signal may die mid-write; asked with its harness's own quit keys, it
saves and exits. The keys go to TASK's own panes only (the panes of the window ids decided
on, by pane id), and only to a pane whose foreground process group holds that agent and
nothing but the agent and shells: keys typed into an editor, a pager or a busy tool would do
something else; and only when the window's `synchronize-panes` is off, which tmux itself
checks in the same command that types the keys (`tmux.quit_keys`). Then fm waits while the
agent or any of its descendants (its exit hooks: Claude Code's SessionEnd, a notes export)
still run, up to `FM_QUIT_HOOK_GRACE_SECS` (30 s), or up to `FM_QUIT_GRACE_SECS` (5 s) for an
agent with no descendants, ending as soon as they are all gone. An interrupt ends the wait
and sends nothing more: the endpoint step then stops before any signal.
"""

from __future__ import annotations

import os
import time

from fm_teardown.adapters import interrupts, processes, tmux
from fm_teardown.model.process_kind import ProcessClass, classify_proc, runs_agent
from fm_teardown.model.settings import Settings
from fm_teardown.model.values import value
from fm_teardown.model.world import Pane, Proc, ProcessTable, ProcStat

__all__ = [
    "CTRL_C",
    "CTRL_D",
    "ENTER",
    "QUIT_KEYS",
    "Farewell",
    "ask_to_quit",
    "hung_up",
]

ENTER = ("Enter", False)
CTRL_C = ("C-c", False)
CTRL_D = ("C-d", False)

# Each harness's own way out, as its operator types it (docs/behaviour.md says why each).
# Matched on the process name (else argv[0]'s base name) as the classifier matches agents;
# the first match wins, so the longer names come first.
QUIT_KEYS: tuple[tuple[str, tuple[tuple[str, bool], ...]], ...] = (
    ("cursor-agent", (CTRL_C, CTRL_C)),
    ("claude", (("/exit", True), ENTER)),
    ("codex", (("/quit", True), ENTER)),
    ("opencode", (("/exit", True), ENTER)),
    ("gemini", (("/quit", True), ENTER)),
    ("qwen", (("/quit", True), ENTER)),
    ("aider", (("/exit", True), ENTER)),
    ("goose", (("/exit", True), ENTER)),
    ("kimi", (("/exit", True), ENTER)),
    ("grok", (CTRL_C, CTRL_C)),
    ("amp", (CTRL_C, CTRL_C)),
    ("pi", (CTRL_C, CTRL_C)),
)


def _shown_keys(keys: tuple[tuple[str, bool], ...]) -> str:
    return " ".join(text for text, _ in keys)


def _harness_of(proc: Proc) -> str | None:
    """The harness whose quit keys `proc` answers to, or None (an agent fm has no keys for).
    An interpreter running an agent answers as that agent (`node …/@google/gemini-cli/…`:
    gemini's keys)."""
    said = (proc.name, proc.argv0, runs_agent(proc) or "")
    names = [os.path.basename(n).lstrip("-").lower() for n in said[:2] if n]
    if said[2]:
        names.append(said[2].lower())  # the script or package, its directories included
    for harness, _ in QUIT_KEYS:
        for name in names:
            if harness in ("pi", "amp") and name not in (harness, f"{harness}-signed"):
                continue  # short names: whole names only
            if harness in name:
                return harness
    return None


def _groups(pid: int) -> tuple[int, int] | None:
    """(process group, foreground process group of its terminal) from /proc/<pid>/stat."""
    fields = processes.stat_fields(pid)
    try:
        return (int(fields[2]), int(fields[5])) if fields is not None else None
    except (IndexError, ValueError):
        return None


def _foreground_agents(pane: Pane, table: ProcessTable) -> tuple[str | None, list[Proc]]:
    """The harness and the agent processes of the pane's foreground process group, when that
    group holds agents of one harness and otherwise only shells; else (None, [])."""
    if pane.dead:
        return None, []
    head = _groups(pane.pane_pid)
    if head is None or head[1] <= 0:
        return None, []
    foreground = head[1]
    agents: list[Proc] = []
    harnesses: set[str | None] = set()
    for proc in table.tree(pane.pane_pid):
        if proc.zombie:
            continue
        groups = _groups(proc.pid)
        if groups is None or groups[0] != foreground:
            continue
        kind = classify_proc(proc)
        if kind not in (ProcessClass.AGENT, ProcessClass.SHELL):
            return None, []  # something else (or what cannot be told) has the keyboard
        if kind == ProcessClass.AGENT:
            agents.append(proc)
            harnesses.add(_harness_of(proc))
    if not agents or len(harnesses) != 1 or None in harnesses:
        return None, []
    return harnesses.pop(), agents


@value
class Farewell:
    """Which agents were asked to quit, which left on request, which stayed, and how long fm
    waited for them; the descendants (exit hooks) waited for, and those still running at the
    end; the windows whose panes got no keys because of `synchronize-panes`."""

    asked: tuple[str, ...] = ()  # `claude (123): /exit Enter`
    left: tuple[Proc, ...] = ()
    stayed: tuple[Proc, ...] = ()
    waited: float = 0.0
    synchronized: tuple[str, ...] = ()
    hooks: tuple[Proc, ...] = ()
    hooks_stayed: tuple[Proc, ...] = ()


def ask_to_quit(settings: Settings, panes: list[Pane], table: ProcessTable) -> Farewell:
    """Send each pane's agent its quit keys, then wait (polling, ending early) for those
    agents and their descendants to be gone.

    Keys go only to a pane whose window has `synchronize-panes` off, checked by tmux in the
    command that types them: with it on, tmux would type them into every pane of the window
    (a shell there would run `/exit`), so that window's agents get no keys and are left to
    the signals. No keys at all once an interrupt came."""
    keys_of = dict(QUIT_KEYS)
    asked: list[str] = []
    waiting: list[Proc] = []
    synchronized: list[str] = []
    for pane in panes:
        if interrupts.requested():
            break
        harness, agents = _foreground_agents(pane, table)
        if harness is None:
            continue
        if pane.window_id in synchronized:
            continue
        keys = keys_of[harness]
        typed = tmux.quit_keys(settings, pane.pane_id, keys)
        if typed is not tmux.Typed.SENT:
            if typed is tmux.Typed.SYNCHRONIZED:  # on, or tmux could not say
                synchronized.append(pane.window_id)
            continue
        for proc in agents:
            asked.append(f"{proc.name} ({proc.pid}): {_shown_keys(keys)}")
            waiting.append(proc)
    if not waiting:
        return Farewell(synchronized=tuple(synchronized))
    return _wait(settings, waiting, table, tuple(asked), tuple(synchronized))


def _wait(
    settings: Settings,
    waiting: list[Proc],
    table: ProcessTable,
    asked: tuple[str, ...],
    synchronized: tuple[str, ...],
) -> Farewell:
    """Poll until the agents asked and every descendant of theirs (seen now or at any poll
    since: an exit hook started after the keys, one left behind when its agent exited) are
    gone, or the grace is over, or an interrupt came. Each is known by pid and start time."""
    start = time.monotonic()
    hooks: dict[int, Proc] = {}
    for agent in waiting:
        for proc in table.tree(agent.pid):
            if proc.pid != agent.pid and not proc.zombie:
                hooks.setdefault(proc.pid, proc)
    stayed = list(waiting)
    running: list[Proc] = list(hooks.values())
    while True:
        stayed = [p for p in stayed if processes.same_process(p.pid, p.start_time)]
        for proc in [*stayed, *running]:
            _note_children(proc, hooks)
        running = [p for p in hooks.values() if processes.same_process(p.pid, p.start_time)]
        grace = settings.quit_hook_grace if hooks else settings.quit_grace
        over = time.monotonic() - start >= grace
        if (not stayed and not running) or over or interrupts.requested():
            break
        time.sleep(0.02)
    left = tuple(p for p in waiting if p not in stayed)
    now = {p.pid: _named_now(p) for p in running}
    return Farewell(
        asked,
        left,
        tuple(stayed),
        time.monotonic() - start,
        synchronized,
        tuple(now.get(p.pid, p) for p in hooks.values()),
        tuple(now.values()),
    )


def _note_children(proc: Proc, seen: dict[int, Proc]) -> None:
    """Add `proc`'s children running now (and theirs) to `seen`, each with its start time."""
    todo = [proc.pid]
    while todo and len(seen) < _MAX_HOOKS:
        for pid in processes.children(todo.pop()):
            if pid in seen:
                continue
            ident = processes.identity(pid)
            if ident is None or ident[1]:
                continue
            name = processes.stat_name(pid) or "?"
            seen[pid] = Proc(pid, proc.pid, name, processes.read_cmdline, None, ProcStat(ident[0]))
            todo.append(pid)


def _named_now(proc: Proc) -> Proc:
    """`proc` under the name it runs as now: a hook seen between its fork and its exec was
    noted under its parent's name (`claude`), and "still running" names what is running."""
    name = processes.stat_name(proc.pid)
    if not name or name == proc.name or not processes.same_process(proc.pid, proc.start_time):
        return proc
    return Proc(proc.pid, proc.ppid, name, processes.read_cmdline, None, ProcStat(proc.start_time))


# Descendants followed at most (a fork bomb of hooks must not make the wait unbounded in memory).
_MAX_HOOKS = 256


def hung_up(
    panes: list[Pane], table: ProcessTable, spared: frozenset[int] = frozenset()
) -> list[Proc]:
    """The processes of the panes a kill ends, read right before the kill: closing a pane's
    terminal hangs up (SIGHUP) its own process and its terminal's foreground process group,
    and the rest of the pane's processes lose their terminal with it. The journal lists
    them all as signalled by the run (`spared`: fm's own, never listed)."""
    out: list[Proc] = []
    for pane in panes:
        for proc in table.tree(pane.pane_pid):
            if not proc.zombie and proc.pid not in spared:
                out.append(proc)
    return out
