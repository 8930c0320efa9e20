"""What the plan token costs a one-task dry run: a quick paired comparison.

    python3 benchmarks/plan_token.py --base REV [--sizes 100,500] [--runs 15]

On the benchmark's own fleets (`fleetgen.py`, the measured one-task case), it times in
rounds, order rotating: fm at REV (before the token), fm as checked out (with it) and the
floor with the mandated imports (`floor.py --mandated-imports`). Each ratio is taken within a
round (paired) and printed as `median [lowest-highest]`. The target: fm within 1.25x of the
floor with the mandated imports.
"""

from __future__ import annotations

import argparse
import compileall
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from bench import launcher, prepare
from fleetgen import REPO, built, mixed_layout
from timing import time_once

IDLE = 200


def checkout(rev: str, into: Path) -> Path:
    """fm's package at `rev`, precompiled, as `bench.snapshot` makes the one checked out."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev, "fm_teardown"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    compileall.compile_dir(str(into / "fm_teardown"), quiet=1)
    pyproject = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:pyproject.toml"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    launcher(into, pyproject)  # `into/fm`: started as that version's console script
    return into


def ratios(a: list[float], b: list[float]) -> str:
    r = [x / y for x, y in zip(a, b, strict=True)]
    return f"{statistics.median(r):.2f}x [{min(r):.2f}-{max(r):.2f}]"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--base", required=True, help="the revision without the plan token")
    ap.add_argument("--sizes", default="100,500")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fm-plan-bench") as tmp_s:
        tmp = Path(tmp_s)
        tools = prepare(tmp)
        before = checkout(args.base, tmp / "before")
        for n in [int(x) for x in args.sizes.split(",")]:
            with built(mixed_layout(n), IDLE) as fleet:
                env = fleet.env(tools.bin_dir)
                target = fleet.layout.target
                one = (tools.fm, "teardown", target, "--dry-run", "--json")
                one_before = (str(before / "fm"), *one[1:])
                cmds = {
                    "fm before": (one_before, {**env, "PYTHONPATH": str(before)}),
                    "fm after": (one, tools.env(env)),
                    "floor+imports": (
                        (tools.py, tools.floor, "--mandated-imports", "one", target),
                        env,
                    ),
                }
                times: dict[str, list[float]] = {k: [] for k in cmds}
                names = list(cmds)
                for i in range(args.runs + 1):
                    order = names[i % 3 :] + names[: i % 3]
                    for name in order:
                        cmd, e = cmds[name]
                        seconds, _ = time_once(cmd, e, fleet.fm_home)
                        if i:  # the first round warms the caches up
                            times[name].append(seconds)
                med = {k: statistics.median(v) * 1000 for k, v in times.items()}
                print(
                    f"N={n} ({args.runs} paired rounds): "
                    + ", ".join(f"{k} {v:.0f} ms" for k, v in med.items())
                )
                print(
                    f"  fm after / floor+imports: "
                    f"{ratios(times['fm after'], times['floor+imports'])} (target <= 1.25x); "
                    f"fm before / floor+imports: "
                    f"{ratios(times['fm before'], times['floor+imports'])}; "
                    f"fm after / fm before: {ratios(times['fm after'], times['fm before'])}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
