"""What `fm runbook [NAME]` prints: the index of the runbooks, one runbook, or why there is
none by that name. The texts are shipped in `fm_teardown/runbooks/<NAME>.md`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import resources

__all__ = ["render_index", "render_page", "render_unknown", "text", "title"]


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
    sys.stdout.write(text(name))


def render_unknown(name: str, close: Sequence[str]) -> None:
    sys.stderr.write(f"fm: no runbook named '{name}'\n")
    sys.stderr.write(
        f"hint: {'did you mean ' + ' or '.join(close) + '? ' if close else ''}"
        "`fm runbook` lists them\n"
    )
