"""What `fm runbook [NAME]` prints: the index of the runbooks, one runbook, or why there is
none by that name. The texts are shipped in `fm_teardown/runbooks/<NAME>.md`; the `agents`
page gets the list of agents fm knows, as the code holds it (`process_kind.agent_list`), in
place of its `<!-- the list -->` line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import resources

from fm_teardown.model.process_kind import AgentList, agent_list

__all__ = [
    "LIST_MARK",
    "agents_text",
    "render_bad_setting",
    "render_index",
    "render_page",
    "render_unknown",
    "text",
    "title",
]

# The line of `agents.md` that `fm runbook agents` replaces with the list.
LIST_MARK = "<!-- the list -->"


def text(name: str) -> str:
    return (resources.files("fm_teardown.runbooks") / f"{name}.md").read_text(encoding="utf-8")


def title(name: str) -> str:
    """The runbook's first line without its `# ` (what it is for)."""
    first = text(name).split("\n", 1)[0]
    return first[2:] if first.startswith("# ") else first


def render_index(names: Sequence[str]) -> None:
    width = max(len(n) for n in names)
    sys.stdout.write("runbooks (fm runbook NAME prints one):\n")
    for n in names:
        sys.stdout.write(f"  {n:<{width}}  {title(n)}\n")


def render_page(name: str) -> None:
    body = text(name)
    if name == "agents":
        body = body.replace(LIST_MARK, agents_text(agent_list()).rstrip("\n"))
    sys.stdout.write(body)


def agents_text(a: AgentList) -> str:
    """The agents fm knows, table by table, as `fm runbook agents` prints them."""
    width = max(len(p) for p, _ in a.packages)
    lines = [
        "A process is an agent when its name or argv[0] (or the name of the script an",
        "interpreter runs):",
        f"- contains: {', '.join(a.substrings)}",
        f"- is: {', '.join(a.names)}",
        f"- starts with: {', '.join(a.prefixes)}",
        f"- or a directory of its path is a harness's: {', '.join(a.harness_dirs)}",
        "",
        "An interpreter is judged by the script, module or package it runs:",
        f"- interpreters: {', '.join(a.interpreters)}",
        "- packages and modules of agents:",
        *(f"    {p:<{width}}  {who}" for p, who in a.packages),
        "",
        "Added by FM_AGENT_NAMES here: " + (", ".join(a.extra) if a.extra else "none"),
    ]
    return "\n".join(lines) + "\n"


def render_bad_setting(message: str) -> None:
    sys.stderr.write(f"fm: {message}\n")


def render_unknown(name: str, close: Sequence[str]) -> None:
    sys.stderr.write(f"fm: no runbook named '{name}'\n")
    sys.stderr.write(
        f"hint: {'did you mean ' + ' or '.join(close) + '? ' if close else ''}"
        "`fm runbook` lists them\n"
    )
