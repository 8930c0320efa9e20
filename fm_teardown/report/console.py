"""fm's own short lines that are no teardown's outcome: its version, an interrupt or an
unexpected error caught at the entry point, a usage error, a batch's progress. Every line a
command prints is written in report/ (the narrated demo and the completion protocol aside)."""

from __future__ import annotations

import sys

from fm_teardown.report.messages import nothing_changed

__all__ = ["interrupted", "progress", "unexpected", "usage_error", "version"]


def version(number: str) -> None:
    sys.stdout.write(f"fm {number}\n")


def interrupted(while_doing: str | None = None) -> None:
    """Ctrl-C caught at the entry point; `while_doing`: what it stopped, nothing changed."""
    if while_doing is None:
        sys.stderr.write("fm: interrupted\n")
    else:
        sys.stderr.write(nothing_changed(f"fm: interrupted while {while_doing}") + "\n")


def unexpected(exc: BaseException) -> None:
    """The last line of defence: one line, never a traceback."""
    sys.stderr.write(f"fm: unexpected error: {type(exc).__name__}: {exc}\n")


def usage_error(usage: str, see: str) -> None:
    sys.stderr.write(f"fm: {usage}\nhint: {see}\nhint: runbook: fm runbook invalid\n")


def progress(i: int, n: int, task: str) -> None:
    """A batch's line before each task, on a terminal: which one, and how many are left."""
    sys.stderr.write(f"[{i}/{n}] fm teardown {task} ({n - i} left)\n")
