"""What the real run's re-checks cost: real teardowns on the benchmark fleet, timed inside.

A real `fm teardown T` looks at the world again under the slot lock (as it always has) and,
since issue 35, right before each later destructive call: the processes step's signals, the
pool's return and the branch delete. This times those looks inside real teardowns of the
tasks the audit says `proceed` on a mixed fleet of N records (`fleetgen.mixed_layout`, the
same fleet the paired comparison uses), and prints, for each teardown, its wall time, the time
spent in grace waits (polling for an agent to quit or for a signalled process to go: those
wait for the processes, not for fm), and the time of the re-checks; the share is

    added re-checks / (wall - grace waits)

and the target is at most 10%. Run: `python3 benchmarks/recheck_cost.py [--sizes 500,2000]
[--tasks 4]`. Each size builds its own fleet (in a temp dir, on a private tmux socket) and
removes it at the end.

Inside the teardown the probe (`--probe`, run by the harness as fm's own interpreter) wraps
`act.arrivals.look_again` (the three added re-checks), `act.steps._recheck` (the one under
the slot lock) and the waits (`act.graceful._wait`, `adapters.processes._poll_gone` and
`wait_reaped`), then runs fm's command line as `fm` would.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _probe(out: str, argv: list[str]) -> None:
    """Run fm's command line with the re-checks and the waits timed; write the times to
    `out` when the process exits (fm ends with SystemExit)."""
    import atexit

    from fm_teardown.act import arrivals, graceful, steps
    from fm_teardown.adapters import processes

    times: dict[str, list[float]] = {"added": [], "locked": [], "waits": []}

    def timed(owner: Any, name: str, key: str) -> None:
        inner: Callable[..., Any] = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                times[key].append(time.perf_counter() - t)

        setattr(owner, name, wrapper)

    timed(arrivals, "look_again", "added")
    timed(steps, "_recheck", "locked")
    timed(graceful, "_wait", "waits")
    timed(processes, "_poll_gone", "waits")
    timed(processes, "wait_reaped", "waits")
    atexit.register(lambda: Path(out).write_text(json.dumps(times)))
    from fm_teardown.cli import main

    sys.argv = ["fm", *argv]
    where = os.environ.get("FM_RECHECK_PROFILE")  # a cProfile of the teardown, for a look
    if where:
        import cProfile

        prof = cProfile.Profile()
        atexit.register(lambda: prof.dump_stats(where))
        prof.enable()
    main()


def _teardown(python: str, env: dict[str, str], cwd: str, task: str) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        argv = [python, str(Path(__file__).resolve()), "--probe", out, "teardown", task]
        t = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t
        inside: dict[str, list[float]] = json.loads(Path(out).read_text())
    finally:
        os.unlink(out)
    return {"task": task, "exit": done.returncode, "wall": wall, **inside}


def _proceeding(fm: str, env: dict[str, str], cwd: str) -> list[str]:
    audit = subprocess.run(
        [fm, "teardown", "--dry-run", "--json"], env=env, cwd=cwd, capture_output=True, text=True
    )
    rows = json.loads(audit.stdout)["tasks"]
    return [r["task"] for r in rows if r["verdict"] == "proceed"]


def measure(n: int, tasks: int) -> list[dict[str, Any]]:
    from fleetgen import built, mixed_layout

    python = sys.executable
    fm = str(Path(python).parent / "fm")
    with built(mixed_layout(n), 200) as fleet:
        env = {**fleet.env(str(Path(python).parent)), "TREEHOUSE_NO_UPDATE_CHECK": "1"}
        env["PYTHONPATH"] = str(HERE.parent)
        if "FM_RECHECK_PROFILE" in os.environ:
            env["FM_RECHECK_PROFILE"] = os.environ["FM_RECHECK_PROFILE"]
        home = str(fleet.fm_home)
        chosen = _proceeding(fm, env, home)
        # Spread over the fleet: early, middle and late records (the census reads them all
        # either way; the slot's place in the pool does not matter to it).
        step = max(len(chosen) // max(tasks, 1), 1)
        return [_teardown(python, env, home, t) for t in chosen[::step][:tasks]]


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--probe":
        _probe(sys.argv[2], sys.argv[3:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,2000")
    ap.add_argument("--tasks", type=int, default=4, help="real teardowns per size")
    args = ap.parse_args()
    print(
        "| N | task | exit | wall ms | grace waits ms | re-check under the lock ms "
        "| added re-checks ms (each) | added / (wall - waits) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    shares: dict[int, list[float]] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        for row in measure(n, args.tasks):
            wall, waits = row["wall"], sum(row["waits"])
            added = sum(row["added"])
            share = added / (wall - waits)
            shares.setdefault(n, []).append(share)
            each = ", ".join(f"{1000 * a:.0f}" for a in row["added"])
            print(
                f"| {n} | {row['task']} | {row['exit']} | {1000 * wall:.0f} | "
                f"{1000 * waits:.0f} | {1000 * sum(row['locked']):.0f} | "
                f"{1000 * added:.0f} ({each}) | {100 * share:.1f}% |"
            )
    for n, s in shares.items():
        print(
            f"N={n}: added re-checks, median share {100 * statistics.median(s):.1f}% "
            f"(highest {100 * max(s):.1f}%; target at most 10%)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
