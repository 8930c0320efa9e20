"""What kind of process a process is: an agent, a shell, or other; a tmux server or client; a
shell that is someone's terminal (spec §4, §7a, §14.1, §15.4).

The one list of what fm knows as an agent lives here: the names of agents' binaries, the
directories harnesses install into, and the packages and scripts an interpreter runs an
agent from (`node …/node_modules/@google/gemini-cli/dist/index.js`, `python3 -m aider`,
`npx @openai/codex`), extended by `FM_AGENT_NAMES` (`configure`, from `settings.load`).
`fm runbook agents` prints it (`agent_list`).

Pure functions of values: observe classifies endpoints with them, decide the slot census,
the owners and what is never signalled, act the agents asked to quit and the terminals a
run ends. `classify` judges a name and argv[0]; `classify_proc` a scanned process, reading
what an interpreter runs (its arguments, read with argv[0]) only for an interpreter.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from functools import lru_cache

from fm_teardown.model.values import value
from fm_teardown.model.world import Proc, Terminal, TmuxInventory

__all__ = [
    "AGENT_NAMES",
    "AGENT_PACKAGES",
    "AGENT_PREFIXES",
    "AGENT_SUBSTRINGS",
    "HARNESS_DIRS",
    "INTERPRETERS",
    "SHELLS",
    "WRAPPERS",
    "AgentList",
    "ProcessClass",
    "agent_list",
    "bad_agent_name",
    "base_name",
    "classify",
    "classify_proc",
    "configure",
    "is_tmux",
    "is_wrapper",
    "named",
    "runs_agent",
    "terminal_of",
]

SHELLS = frozenset({"zsh", "bash", "sh", "dash", "ash", "ksh", "mksh", "tcsh", "csh", "fish"})
# Matched anywhere in the name: harness binaries come with suffixes and wrappers.
AGENT_SUBSTRINGS = ("claude", "codex", "opencode", "gemini", "aider", "grok", "kimi")
# Whole names only: short or common words. `agy` is Antigravity's CLI (firstmate's agy
# harness), `omp` firstmate's oh-my-pi harness (a Bun script), `copilot` GitHub's CLI.
AGENT_NAMES = frozenset(
    {
        "cursor-agent",
        "pi",
        "pi-signed",
        "pi-launcher",
        "Pi",
        "muse",
        "goose",
        "amp",
        "qwen",
        "agy",
        "omp",
        "copilot",
    }
)
AGENT_PREFIXES = ("muse-bin-", "cursor-agent")
# A harness installed under its own directory (`~/.claude/local/node`,
# `~/.local/share/cursor-agent/versions/<v>/index.js`): the directory names the harness.
HARNESS_DIRS = frozenset({*AGENT_SUBSTRINGS, "cursor-agent", "pi", "muse"})
# Programs a pane runs that only hold what runs under them: firstmate's spawn types
# `treehouse enter <slot>` into the pane, which opens the task's shell in the slot as its
# child. Such a process with a child is seen through (the endpoint is what runs under it);
# without one it is what it is (another program: `other`).
WRAPPERS = frozenset({"treehouse"})

# The runtimes and package runners an agent is run by: what such a process runs (its script,
# module or package) says whether it is an agent. `python3.12`, `pypy3` are python too.
INTERPRETERS = frozenset(
    {
        "node",
        "nodejs",
        "bun",
        "bunx",
        "deno",
        "npx",
        "npm",
        "pnpm",
        "pnpx",
        "yarn",
        "uv",
        "uvx",
        "pipx",
        "python",
        "pypy",
    }
)
# The patterns below are matched through `re`'s own cache of compiled patterns: compiled
# when first used (an interpreter met, an `FM_AGENT_NAMES` entry checked), not when every
# command imports this module (a third of a millisecond).
_VERSIONED = r"(?:python|pypy)\d+(?:\.\d+)*[a-z]?"

# The packages (npm, PyPI) and Python modules agents are run from, and whose they are.
AGENT_PACKAGES: Mapping[str, str] = {
    "@anthropic-ai/claude-code": "Claude Code",
    "@google/gemini-cli": "Gemini CLI",
    "@openai/codex": "Codex",
    "opencode-ai": "OpenCode",
    "aider": "Aider",
    "aider-chat": "Aider",
    "aider-install": "Aider",
    "goose-ai": "Goose",
    "@sourcegraph/amp": "Amp",
    "@github/copilot": "GitHub Copilot CLI",
    "@qwen-code/qwen-code": "Qwen Code",
}

# Of an interpreter's arguments, at most this many are read for its script: a longer run of
# options with no script is doubt, never "no agent".
ARGS_READ = 64


@value
class AgentList:
    """What fm knows as an agent, for `fm runbook agents`: each table as the code holds it."""

    substrings: tuple[str, ...]
    names: tuple[str, ...]
    prefixes: tuple[str, ...]
    harness_dirs: tuple[str, ...]
    interpreters: tuple[str, ...]
    packages: tuple[tuple[str, str], ...]  # (package or module, whose)
    extra: tuple[str, ...]  # from FM_AGENT_NAMES


# The entries `FM_AGENT_NAMES` adds (`configure`): each is a name and a package at once.
_EXTRA: list[frozenset[str]] = [frozenset()]
_ENTRY = r"(?:@[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._+-]*"


def bad_agent_name(entry: str) -> bool:
    """Whether an `FM_AGENT_NAMES` entry is no name: a name is letters, digits and `._+-`
    (a scoped npm package `@scope/name` too), as a process or package is named."""
    return re.fullmatch(_ENTRY, entry) is None


def configure(extra: Iterable[str]) -> None:
    """The agents fm runs with: the built-in list plus `extra` (FM_AGENT_NAMES, each entry
    checked by `bad_agent_name`): each matches a process's name or argv[0], a script's name,
    or a package or module an interpreter runs, exactly. Set once per run, by
    `settings.load`; the answers memoised for the old list are dropped."""
    names = frozenset(extra)
    if names == _EXTRA[0]:
        return
    _EXTRA[0] = names
    for memo in (classify, _is_interpreter, _runs):
        memo.cache_clear()


def agent_list() -> AgentList:
    return AgentList(
        AGENT_SUBSTRINGS,
        tuple(sorted(AGENT_NAMES)),
        AGENT_PREFIXES,
        tuple(sorted(HARNESS_DIRS)),
        (*sorted(INTERPRETERS), "python3.N", "pypy3"),
        tuple(AGENT_PACKAGES.items()),
        tuple(sorted(_EXTRA[0])),
    )


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
        or base in _EXTRA[0]
    )


@lru_cache(maxsize=4096)
def is_tmux(name: str, argv0: str) -> bool:
    """A tmux server or client (`tmux`, `tmux: server`, `tmux: client`), whatever its binary
    is called: tmux names its server process `<binary>: server` (a copy named `mux` runs as
    `mux: server`; the name is cut at 15 bytes, so `my-long-bin: se` says it too). Never
    signalled: ending a tmux server ends every window of the fleet with it."""
    if any(b == "tmux" or b.startswith("tmux:") for b in (base_name(name), base_name(argv0))):
        return True
    head, sep, tail = name.rpartition(": ")
    if not sep or not head:
        return False
    return tail == "server" or (len(name.encode()) >= 15 and "server".startswith(tail))


@lru_cache(maxsize=4096)
def is_wrapper(name: str, argv0: str) -> bool:
    """A program that only holds what runs under it (`treehouse enter`), by name or argv[0]."""
    return base_name(name) in WRAPPERS or base_name(argv0) in WRAPPERS


class ProcessClass(StrEnum):
    AGENT = "agent"
    SHELL = "shell"
    OTHER = "other"
    # An interpreter whose script or package could not be read (its command line unreadable,
    # or cut before it): whether it is an agent cannot be told. Only `classify_proc` says it.
    UNSURE = "unsure"


def _in_harness_dir(path: str) -> bool:
    parts = [p.lstrip(".") for p in path.split("/") if p]
    return any(p in HARNESS_DIRS for p in parts[:-1])


@lru_cache(maxsize=4096)
def classify(name: str, argv0: str) -> ProcessClass:
    """`agent`, `shell` or `other`, by process name, then argv[0] and its path components."""
    if _is_agent_name(name) or _is_agent_name(argv0):
        return ProcessClass.AGENT
    if base_name(name) in SHELLS:
        return ProcessClass.SHELL
    # A harness installed under its own directory (`~/.claude/local/node ...`): the directory
    # names the harness even when the binary is a generic runtime.
    if _in_harness_dir(argv0):
        return ProcessClass.AGENT
    if not name and base_name(argv0) in SHELLS:
        return ProcessClass.SHELL
    return ProcessClass.OTHER


def _family(base: str) -> str | None:
    if base.startswith(("python", "pypy")) and (
        base in INTERPRETERS or re.fullmatch(_VERSIONED, base)
    ):
        return "python"
    if base in ("node", "nodejs", "bun", "deno"):
        return "js"
    if base in INTERPRETERS:
        return "runner"
    return None


@lru_cache(maxsize=4096)
def _is_interpreter(name: str, argv0: str) -> str | None:
    """The interpreter family of a process by its name or argv[0]: `python`, `js` (a runtime
    running a script) or `runner` (a package runner: npx, uvx, pipx, …); None for others."""
    return _family(base_name(name)) or _family(base_name(argv0))


# Per family: the options whose value is the next argument, those that name the package run
# (a candidate), and those after which the program is inline code (no script follows).
_TAKES_VALUE = {
    "python": frozenset({"-W", "-X", "--check-hash-based-pycs"}),
    "js": frozenset(
        {
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "-C",
            "--conditions",
            "--title",
            "--input-type",
            "--env-file",
            "--cwd",
            "--config",
        }
    ),
    "runner": frozenset(
        {"--cache", "--registry", "--userconfig", "--python", "--index-url", "--prefix", "-w"}
    ),
}
_NAMES_PACKAGE = {
    "python": frozenset({"-m"}),
    "js": frozenset(),
    "runner": frozenset({"-p", "--package", "--from", "--with", "--spec"}),
}
_INLINE = {
    "python": frozenset({"-c"}),
    "js": frozenset({"-e", "--eval", "-p", "--print"}),
    "runner": frozenset({"-c", "--call"}),
}
# Words a runtime or runner takes before what it runs (`bun x`, `deno run`, `npm exec`,
# `pnpm dlx`, `uv tool run`, `yarn dlx`).
_SUBCOMMANDS = frozenset({"run", "x", "exec", "dlx", "tool", "--"})


def _candidates(family: str, args: tuple[str, ...]) -> tuple[list[str], bool]:
    """What an interpreter runs, from its arguments: the packages its options name and its
    script (or package) argument; and whether the script argument was found (or inline code
    given instead), i.e. whether nothing else could be what it runs."""
    found: list[str] = []
    takes, names, inline = _TAKES_VALUE[family], _NAMES_PACKAGE[family], _INLINE[family]
    i = 0
    while i < len(args) and i < ARGS_READ:
        arg = args[i]
        if arg in names:
            if i + 1 < len(args):
                found.append(args[i + 1])
            if family == "python":
                return found, True  # `-m MODULE`: the module is what runs
            i += 2
            continue
        if arg in inline:
            return found, True  # inline code: no script
        if arg in takes:
            i += 2
            continue
        if arg.startswith("-") and arg != "--":
            i += 1
            continue
        if arg in _SUBCOMMANDS and family != "python":
            i += 1
            continue
        found.append(arg)
        return found, True
    return found, False


_VERSION = r"(?<=.)@[^/@]*$|[=<>!~\[;].*$"
_REGISTRY = r"^(?:npm|jsr|pypi):"  # deno's `npm:@scope/name`
_SCRIPT_EXT = r"\.(?:c?js|mjs|ts|mts|cts|py|pyz)$"


def _package(path: str, marker: str) -> str | None:
    """The package a path lies in after its last `marker` directory (`node_modules`,
    `site-packages`): `@scope/name` or `name`."""
    parts = path.split("/")
    at = max((i for i, p in enumerate(parts) if p == marker), default=-1)
    if at < 0 or at + 1 >= len(parts):
        return None
    first = parts[at + 1]
    if first.startswith("@") and at + 2 < len(parts):
        return f"{first}/{parts[at + 2]}"
    return re.sub(_SCRIPT_EXT, "", first)


def _names_agent(arg: str) -> bool:
    """A script path, module or package spec that is a known agent."""
    if not arg:
        return False
    known = {*AGENT_PACKAGES, *_EXTRA[0]}
    spec = re.sub(_VERSION, "", re.sub(_REGISTRY, "", arg))
    if spec in known or spec.lower() in known:
        return True
    for marker in ("node_modules", "site-packages", "dist-packages"):
        pkg = _package(arg, marker)
        if pkg is not None and pkg in known:
            return True
    if "/" in arg and _in_harness_dir(arg):
        return True
    script = re.sub(_SCRIPT_EXT, "", base_name(arg)) if not arg.startswith("@") else ""
    return bool(script) and _is_agent_name(script)


@lru_cache(maxsize=4096)
def _runs(family: str, args: tuple[str, ...] | None, cut: bool) -> ProcessClass:
    if args is None:
        return ProcessClass.UNSURE  # no command line: it cannot be told what runs
    found, whole = _candidates(family, args)
    if any(_names_agent(a) for a in found):
        return ProcessClass.AGENT
    if not whole and (cut or len(args) > ARGS_READ):
        return ProcessClass.UNSURE  # what it runs lies past what was read
    return ProcessClass.OTHER


def runs_agent(proc: Proc) -> str | None:
    """The script, module or package a known agent is run from, when `proc` is an
    interpreter running one (`/…/node_modules/@google/gemini-cli/dist/index.js`), so that
    it can be named; None otherwise."""
    if classify(proc.name, proc.argv0) != ProcessClass.OTHER:
        return None
    family = _is_interpreter(proc.name, proc.argv0)
    if family is None or proc.args is None:
        return None
    found, _ = _candidates(family, proc.args[:ARGS_READ])
    return next((a for a in found if _names_agent(a)), None)


def named(proc: Proc) -> str:
    """A process as fm names it: `claude (12)`; an interpreter running an agent with what it
    runs, `node (12, running @google/gemini-cli/dist/index.js)`."""
    name = proc.name or proc.argv0
    script = runs_agent(proc)
    if script is None:
        return f"{name} ({proc.pid})"
    at = script.rfind("node_modules/")
    shown = script[at + len("node_modules/") :] if at >= 0 else script
    return f"{name} ({proc.pid}, running {shown})"


def classify_proc(proc: Proc) -> ProcessClass:
    """`classify` of a scanned process; an interpreter is judged by what it runs: its script,
    module or package (`agent` when it is a known agent's; `unsure` when its command line
    could not be read, or was cut before it). Its arguments are read with argv[0], and only
    an interpreter's are looked at."""
    kind = classify(proc.name, proc.argv0)
    if kind != ProcessClass.OTHER:
        return kind
    family = _is_interpreter(proc.name, proc.argv0)
    if family is None:
        return kind
    args = proc.args
    return _runs(family, args[: ARGS_READ + 1] if args is not None else None, proc.cut)


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
