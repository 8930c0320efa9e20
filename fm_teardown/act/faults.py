"""Test-only fault hooks at the act steps' boundaries (`FM_TEST_FAULT`, comma-separated).

- `crash:<boundary>`: the tool SIGKILLs itself there (crash tests re-run the same command);
- `pause:<boundary>:<file>`: creates `<file>.reached` and waits (up to 120 s) until `<file>`
  is removed, so a test can change the world between two steps.

Boundaries: before-endpoint, before-kill (the endpoint step's last check done, its panes
not yet killed), after-endpoint, before-recheck, before-processes (after the re-check under
the slot lock, before the processes step looks again and signals), after-processes,
after-save, before-pool (before the look right before the return), before-return (the
pool's state read again, `treehouse return` next), after-pool, before-branch
(before the look right before the branch delete), in-sweep (after each sidecar removed),
before-meta, after-record. Unset, this costs one environment lookup.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["at", "pauses"]

# How many pauses have held this run so far: a pause is time in which anything may have
# happened, so a look at the world taken before it is not reused after it (`act/arrivals.py`).
_PAUSES = [0]


def pauses() -> int:
    return _PAUSES[0]


def at(boundary: str) -> None:
    spec = os.environ.get("FM_TEST_FAULT")
    if not spec:
        return
    for item in spec.split(","):
        kind, _, rest = item.partition(":")
        where, _, arg = rest.partition(":")
        if where != boundary:
            continue
        if kind == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "pause" and arg:
            _PAUSES[0] += 1
            Path(arg + ".reached").touch()
            deadline = time.monotonic() + 120
            while os.path.exists(arg) and time.monotonic() < deadline:
                time.sleep(0.02)
