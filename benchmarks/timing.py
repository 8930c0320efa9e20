"""Timing whole processes, paired: hyperfine where it is installed, else a small timer.

A round runs every command of a group back to back (hyperfine: one invocation with all of
them; the fallback: the commands interleaved run by run). Several rounds alternate the groups,
so the machine's slow phases hit every command, and a ratio is taken within each round before
it is summarised: paired, not two medians taken minutes apart.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Command:
    name: str
    argv: tuple[str, ...]
    exit_code: int | None = 0  # what every run must exit with (None: not checked)


@dataclass(frozen=True)
class Ratio:
    """a/b per round: the median over rounds, and the lowest and highest round."""

    median: float
    low: float
    high: float
    rounds: int

    def show(self, digits: int = 2) -> str:
        return f"{self.median:.{digits}f}× [{self.low:.{digits}f}–{self.high:.{digits}f}]"


@dataclass
class Samples:
    """Seconds per run, per command, per round. Rounds are numbered: a slow command may be
    timed in fewer rounds than the others, and is paired only with the rounds it shares."""

    rounds: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    bad_exits: dict[str, set[int]] = field(default_factory=dict)

    def add(
        self, name: str, rnd: int, times: list[float], exits: list[int], want: int | None
    ) -> None:
        self.rounds.setdefault(name, {}).setdefault(rnd, []).extend(times)
        wrong = {c for c in exits if want is not None and c != want}
        if wrong:
            self.bad_exits.setdefault(name, set()).update(wrong)

    def put(self, name: str, rnd: int, seconds: float) -> None:
        """A derived figure for a round (an extrapolated one)."""
        self.rounds.setdefault(name, {})[rnd] = [seconds]

    def has(self, name: str) -> bool:
        return bool(self.all(name))

    def all(self, name: str) -> list[float]:
        return [t for r in self.rounds.get(name, {}).values() for t in r]

    def median(self, name: str) -> float:
        return statistics.median(self.all(name))

    def count(self, name: str) -> int:
        return len(self.all(name))

    def per_round(self, name: str) -> dict[int, float]:
        return {k: statistics.median(v) for k, v in self.rounds.get(name, {}).items() if v}

    def ratio(self, a: str, b: str) -> Ratio:
        """a/b, paired round by round."""
        ra, rb = self.per_round(a), self.per_round(b)
        per = [ra[k] / rb[k] for k in sorted(ra.keys() & rb.keys()) if rb[k] > 0]
        if not per:
            return Ratio(float("nan"), float("nan"), float("nan"), 0)
        return Ratio(statistics.median(per), min(per), max(per), len(per))


class Timer:
    """Runs a group of commands for one round, with hyperfine or the fallback."""

    def __init__(self, use_hyperfine: bool = True) -> None:
        self.hyperfine = shutil.which("hyperfine") if use_hyperfine else None

    @property
    def name(self) -> str:
        if not self.hyperfine:
            return "own timer (runs interleaved, order rotated)"
        version = subprocess.run(
            [self.hyperfine, "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        return f"{version} (-N: no shell in between)"

    def round(
        self,
        group: Sequence[Command],
        *,
        runs: int,
        warmup: int,
        env: Mapping[str, str],
        cwd: Path,
        into: Samples,
        rnd: int,
    ) -> None:
        # Rotate the order from round to round: no command always runs first, or right after
        # the same neighbour (a position effect shows up as a ratio that is not 1 in the A/A).
        k = rnd % len(group) if group else 0
        group = [*group[k:], *group[:k]]
        if self.hyperfine:
            self._hyperfine(group, runs, warmup, env, cwd, into, rnd)
        else:
            self._own(group, runs, warmup, env, cwd, into, rnd)

    def _hyperfine(
        self,
        group: Sequence[Command],
        runs: int,
        warmup: int,
        env: Mapping[str, str],
        cwd: Path,
        into: Samples,
        rnd: int,
    ) -> None:
        assert self.hyperfine is not None
        with tempfile.TemporaryDirectory(prefix="fmbhf") as tmp:
            out = Path(tmp) / "round.json"
            argv = [
                self.hyperfine,
                "-N",  # no intermediate shell: the command is exec'd as given
                "--ignore-failure",  # refusals (exit 4) are answers; exits are checked below
                f"--warmup={warmup}",
                f"--runs={runs}",
                "--style=none",
                f"--export-json={out}",
            ]
            for c in group:
                argv += ["--command-name", c.name, shlex.join(c.argv)]
            subprocess.run(
                argv,
                env=dict(env),
                cwd=cwd,
                check=True,
                capture_output=True,
                stdin=subprocess.DEVNULL,
            )
            doc = json.loads(out.read_text())
        for c, result in zip(group, doc["results"], strict=True):
            exits = [int(x) for x in result.get("exit_codes") or []]
            into.add(c.name, rnd, [float(t) for t in result["times"]], exits, c.exit_code)

    def _own(
        self,
        group: Sequence[Command],
        runs: int,
        warmup: int,
        env: Mapping[str, str],
        cwd: Path,
        into: Samples,
        rnd: int,
    ) -> None:
        times: dict[str, list[float]] = {c.name: [] for c in group}
        exits: dict[str, list[int]] = {c.name: [] for c in group}
        for i in range(warmup + runs):
            # Rotate the order run by run, so no command always follows the same one.
            order = list(group[i % len(group) :]) + list(group[: i % len(group)])
            for c in order:
                seconds, code = time_once(c.argv, env, cwd)
                if i >= warmup:
                    times[c.name].append(seconds)
                    exits[c.name].append(code)
        for c in group:
            into.add(c.name, rnd, times[c.name], exits[c.name], c.exit_code)


def time_once(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[float, int]:
    """Wall time of one whole process, stdin from /dev/null, output discarded."""
    start = time.perf_counter()
    r = subprocess.run(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start, r.returncode


def loadavg() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"
