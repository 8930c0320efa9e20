"""The benchmark's floor (benchmarks/floor.py) must judge processes and files as fm does.

It restates fm's lists on purpose: it is timed as a stdlib script that imports nothing of
fm. The benchmark compares the answers before timing, but only on the fleets it builds; this
keeps the lists themselves from drifting apart."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from fm_teardown.model import process_kind, scaffold

FLOOR = Path(__file__).resolve().parent.parent / "benchmarks" / "floor.py"


def floor() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_floor", FLOOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_the_floor_classifies_with_fms_lists() -> None:
    f = floor()
    for name in ("SHELLS", "AGENT_SUBSTRINGS", "AGENT_NAMES", "AGENT_PREFIXES", "HARNESS_DIRS"):
        assert getattr(f, name) == getattr(process_kind, name), name
    assert frozenset(scaffold.SCAFFOLD_PATHS) == f.SCAFFOLD
