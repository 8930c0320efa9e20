"""Counters for docs/reliability.md: how many examples, crashes, races and hostile inputs a
run exercised. Tests call `count(...)`; the counts go to the JSON-lines file named by
FM_RELIABILITY_FIGURES (nothing is written when it is unset, e.g. in a plain pytest run).

`soak()` is the multiplier for iteration counts: 1 in CI, larger under `--soak`.
"""

from __future__ import annotations

import json
import os

KEYS = ("examples", "pipeline_examples", "audit_examples", "crashes", "races", "hostile")


def count(key: str, n: int = 1) -> None:
    assert key in KEYS, key
    path = os.environ.get("FM_RELIABILITY_FIGURES")
    if not path or n == 0:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"key": key, "n": n}) + "\n")


def soak() -> int:
    """How many times longer than CI a run should go (FM_SOAK, default 1)."""
    raw = os.environ.get("FM_SOAK", "1")
    return max(1, int(raw)) if raw.isdigit() else 1
