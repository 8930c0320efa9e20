"""Where fm's time goes: import times (`-X importtime`) and a profile (`cProfile`) of the
one-task dry run and the audit on the largest fleet. Hints for making fm faster, not targets.
"""

from __future__ import annotations

import pstats
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class HasTools(Protocol):
    @property
    def py(self) -> str: ...
    @property
    def fm(self) -> str: ...


@dataclass(frozen=True)
class Hotspots:
    total_ms: float
    fm: list[tuple[str, float, float]]  # fm's functions: (name, own ms, cumulative ms)
    own: list[tuple[str, float, float]]  # every function, by its own time


@dataclass(frozen=True)
class Profile:
    imports: list[tuple[str, float]]  # top-level package, import ms (own times summed)
    import_total_ms: float
    one: Hotspots
    audit: Hotspots


def import_times(py: str, argv: list[str], env: Mapping[str, str], cwd: Path) -> dict[str, float]:
    """Import ms per top-level package, summed over its modules' own (self) times, so that
    nothing is counted twice (`-X importtime`)."""
    r = subprocess.run(
        [py, "-X", "importtime", *argv],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    out: dict[str, float] = {}
    for line in r.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        package = parts[2].strip().split(".")[0]
        out[package] = out.get(package, 0.0) + int(parts[0]) / 1000
    return out


def _label(file: str, func: str) -> str:
    if "fm_teardown" in file:
        stem = Path(file).stem
        return f"import fm_teardown.{stem}" if func == "<module>" else f"{stem}.{func}"
    if func.startswith("<"):
        return func.strip("<>").removeprefix("built-in method ").removeprefix("method ")
    return f"{Path(file).parent.name}/{Path(file).stem}.{func}"


def profiled(py: str, argv: list[str], env: Mapping[str, str], cwd: Path) -> Hotspots:
    """One run under cProfile: fm's own functions by cumulative time, everything by own time."""
    with tempfile.TemporaryDirectory(prefix="fmbprof") as tmp:
        out = Path(tmp) / "run.prof"
        subprocess.run(
            [py, "-m", "cProfile", "-o", str(out), *argv],
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        raw = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    fm_rows: list[tuple[str, float, float]] = []
    all_rows: list[tuple[str, float, float]] = []
    total = 0.0
    for (file, _line, func), (_, _, own, cumulative, _) in raw.items():
        total = max(total, cumulative)
        row = (_label(file, func), own * 1000, cumulative * 1000)
        all_rows.append(row)
        if "fm_teardown" in file:
            fm_rows.append(row)
    fm_rows.sort(key=lambda r: -r[2])
    all_rows.sort(key=lambda r: -r[1])
    return Hotspots(total * 1000, fm_rows[:12], all_rows[:10])


def profile_fm(tools: HasTools, env: Mapping[str, str], cwd: Path, target: str) -> Profile:
    one = [tools.fm, "teardown", target, "--dry-run", "--json"]
    audit = [tools.fm, "teardown", "--dry-run", "--json"]
    imports = import_times(tools.py, one, env, cwd)
    top = sorted(imports.items(), key=lambda kv: -kv[1])[:10]
    return Profile(
        top,
        sum(imports.values()),
        profiled(tools.py, one, env, cwd),
        profiled(tools.py, audit, env, cwd),
    )
