"""`fm runbook [NAME]`: the operator runbooks, shipped inside the package (spec §11).

One per verdict and refusal cause; every refusal and failure names the one to read in its
last hint line (`hint: runbook: fm runbook NAME`) and in its JSON (`"runbook"`). The texts
live in `fm_teardown/runbooks/<NAME>.md` (`docs/runbooks/` indexes them).
"""

from __future__ import annotations

import difflib
import sys
from importlib import resources

from fm_teardown.commands.completion import RUNBOOKS
from fm_teardown.model.errors import ExitCode

__all__ = ["runbook", "text", "title"]


def text(name: str) -> str:
    return (resources.files("fm_teardown.runbooks") / f"{name}.md").read_text(encoding="utf-8")


def title(name: str) -> str:
    """The runbook's first line without its `# ` (what it is for)."""
    first = text(name).split("\n", 1)[0]
    return first[2:] if first.startswith("# ") else first


def runbook(name: str | None) -> int:
    if name is None:
        width = max(len(n) for n in RUNBOOKS)
        sys.stdout.write("runbooks (fm runbook NAME prints one):\n")
        for n in RUNBOOKS:
            sys.stdout.write(f"  {n:<{width}}  {title(n)}\n")
        return 0
    if name not in RUNBOOKS:
        close = difflib.get_close_matches(name, RUNBOOKS, n=3)
        sys.stderr.write(f"fm: no runbook named '{name}'\n")
        sys.stderr.write(
            f"hint: {'did you mean ' + ' or '.join(close) + '? ' if close else ''}"
            "`fm runbook` lists them\n"
        )
        return int(ExitCode.INVALID)
    sys.stdout.write(text(name))
    return 0
