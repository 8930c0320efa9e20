"""fm at a base revision against fm as checked out, on the same fleets: same answers, and
paired times against the floor with the mandated imports.

    python3 benchmarks/compare.py --base REV [--sizes 100,500,2000] [--runs 10] [--no-timing]

For each N it builds the benchmark's fleet (`fleetgen.py`), then:

1. **Same output.** Runs both versions of fm on commands that only read (the one-task dry
   run of several tasks, human and `--json`, and the audit, human and `--json`) and compares
   stdout, stderr and the exit code byte for byte. Any difference is printed and makes the
   exit code 1.
2. **Paired times.** In rounds, order rotating (the first round warms the caches and is not
   counted): fm before, fm after and `floor.py --mandated-imports`, for the one-task dry run
   and the audit. Each ratio is taken within a round and printed as `median [lowest-highest]`.
   Both wall time and CPU time (user + system of fm and the children it waited for: tmux's
   client, git) are paired; on a busy machine the CPU ratio is the steadier one. The peak
   resident set size of each command (median over the rounds) is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench import prepare
from fleetgen import built, mixed_layout
from plan_token import checkout

IDLE = 200


# Linux counts into a process's peak RSS the memory of the process it was forked from (the
# forked image, until exec, is its own): started from this harness (some 25 MiB), every
# command would read at least that. So the peak is taken of a command started by a small
# interpreter without site (a few MiB), which reports its child's peak.
_PEAK = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.argv[1], sys.argv[1:])\n"
    "_, _, usage = os.wait4(pid, 0)\n"
    "print(usage.ru_maxrss)\n"
)


def peak_rss(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> float:
    """The peak resident set size of one run of `argv` (MiB; with the children it waited
    for), started from a small process (see `_PEAK`)."""
    _, out, _ = _run([sys.executable, "-S", "-c", _PEAK, *argv], env, cwd)
    return int(out.split()[-1]) / 1024


def time_once(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path, *, peak: bool = True
) -> tuple[float, float, float]:
    """Wall time, CPU time (user + system, the process and the children it waited for) and
    peak resident set size (MiB, of a run started from a small process: `peak_rss`) of one
    whole process (nan when not `peak`). On a busy machine the CPU time is the steadier of
    the two times."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # wait4 gives this one process's usage (its own waited children included), where
    # RUSAGE_CHILDREN's peak would be the largest of every child so far.
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above: keep Popen from waiting again
    wall = time.perf_counter() - start
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, peak_rss(argv, env, cwd) if peak else float("nan")


def ratios(a: list[float], b: list[float]) -> str:
    r = [x / y for x, y in zip(a, b, strict=True)]
    return f"{statistics.median(r):.3f}x [{min(r):.3f}-{max(r):.3f}]"


def _run(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[int, str, str]:
    r = subprocess.run(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    return r.returncode, r.stdout, r.stderr


def same_output(
    fms: tuple[str, str],
    tasks: list[str],
    before: Mapping[str, str],
    after: Mapping[str, str],
    cwd: Path,
) -> int:
    """How many read-only commands answer differently before and after (each printed)."""
    commands: list[tuple[str, ...]] = [
        ("teardown", "--dry-run"),
        ("teardown", "--dry-run", "--json"),
    ]
    for task in tasks:
        commands.append(("teardown", task, "--dry-run"))
        commands.append(("teardown", task, "--dry-run", "--json"))
    differ = 0
    for args in commands:
        a, b = _run((fms[0], *args), before, cwd), _run((fms[1], *args), after, cwd)
        if a != b:
            differ += 1
            print(f"  DIFFERS: fm {' '.join(args)}: exit {a[0]} -> {b[0]}")
            for what, x, y in (("stdout", a[1], b[1]), ("stderr", a[2], b[2])):
                if x != y:
                    print(f"    {what} before: {x[:400]!r}\n    {what} after:  {y[:400]!r}")
    print(f"  same output: {len(commands) - differ} of {len(commands)} commands")
    return differ


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--base", required=True, help="the revision to compare against")
    ap.add_argument("--sizes", default="100,500,2000")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-timing", action="store_true", help="only compare the outputs")
    args = ap.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fm-compare") as tmp_s:
        tmp = Path(tmp_s)
        tools = prepare(tmp)
        before = checkout(args.base, tmp / "before")
        for n in [int(x) for x in args.sizes.split(",")]:
            with built(mixed_layout(n), IDLE) as fleet:
                env = fleet.env(tools.bin_dir)
                env_before = {**env, "PYTHONPATH": str(before)}
                env_after = tools.env(env)
                target = fleet.layout.target
                metas = os.listdir(fleet.fm_home / "state")
                ids = sorted(m[:-5] for m in metas if m.endswith(".meta"))
                sample = sorted({target, fleet.layout.target_owner, *ids[:: max(1, len(ids) // 6)]})
                print(f"N={n}: comparing outputs ({len(sample)} tasks and the audit)", flush=True)
                fms = (str(before / "fm"), tools.fm)  # each version's own launcher
                failed += same_output(fms, sample, env_before, env_after, fleet.fm_home)
                if args.no_timing:
                    continue
                one = (tools.fm, "teardown", target, "--dry-run", "--json")
                audit = (tools.fm, "teardown", "--dry-run", "--json")
                one_before, audit_before = (fms[0], *one[1:]), (fms[0], *audit[1:])
                floor = (tools.py, tools.floor, "--mandated-imports")
                cmds = {
                    "one before": (one_before, env_before),
                    "one after": (one, env_after),
                    "one floor": ((*floor, "one", target), env),
                    "audit before": (audit_before, env_before),
                    "audit after": (audit, env_after),
                    "audit floor": ((*floor, "audit"), env),
                }
                times: dict[str, list[float]] = {k: [] for k in cmds}
                cpus: dict[str, list[float]] = {k: [] for k in cmds}
                rss: dict[str, list[float]] = {k: [] for k in cmds}
                names = list(cmds)
                for i in range(args.runs + 1):
                    order = names[i % len(names) :] + names[: i % len(names)]
                    for name in order:
                        cmd, e = cmds[name]
                        # The peak RSS (a second run each) in the first three counted rounds.
                        seconds, cpu, peak = time_once(cmd, e, fleet.fm_home, peak=0 < i <= 3)
                        if i:  # the first round warms the caches up
                            times[name].append(seconds)
                            cpus[name].append(cpu)
                            if i <= 3:
                                rss[name].append(peak)
                med = {k: statistics.median(v) * 1000 for k, v in times.items()}
                print(
                    f"N={n} ({args.runs} paired rounds, load {os.getloadavg()[0]:.2f}): "
                    + ", ".join(f"{k} {v:.0f} ms" for k, v in med.items())
                )
                for what, table in (("wall", times), ("cpu", cpus)):
                    for case in ("one", "audit"):
                        after, before_, floor_ = (
                            table[f"{case} {k}"] for k in ("after", "before", "floor")
                        )
                        print(
                            f"  {case} {what}: after / floor+imports {ratios(after, floor_)}; "
                            f"before / floor+imports {ratios(before_, floor_)}; "
                            f"after / before {ratios(after, before_)}",
                            flush=True,
                        )
                peaks = {k: statistics.median(v) for k, v in rss.items()}
                for case in ("one", "audit"):
                    after_mib, before_mib = peaks[f"{case} after"], peaks[f"{case} before"]
                    floor_mib = peaks[f"{case} floor"]
                    print(
                        f"  {case} peak RSS: after {after_mib:.1f} MiB, before {before_mib:.1f} "
                        f"MiB, floor+imports {floor_mib:.1f} MiB; after - floor+imports "
                        f"{after_mib - floor_mib:+.1f} MiB",
                        flush=True,
                    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
