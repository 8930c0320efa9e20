"""The audit with many records on ONE slot against as many records on distinct slots.

    python3 benchmarks/shared_slot.py                 # N = 500, 1000, 2000
    python3 benchmarks/shared_slot.py --sizes 1000,4000 --base REV  # fm at REV beside it

For each N it builds two state dirs in a temp dir: N records naming one slot directory, and
N records naming N slot directories (plain directories: the audit never runs git on a slot
whose task is not `proceed`), with a private, empty tmux server (every endpoint `missing`).
It times `fm teardown --dry-run --json` (the audit) on each and prints both times side by
side and their ratio: an audit linear in the records per slot keeps the ratio near 1. Last,
the growth of the one-slot time from the smallest N to the largest (the target: 4,000
records on one slot within 5x the time of 1,000). With `--base REV`, fm at REV (its
`fm_teardown/` from `git archive`) is timed on the same fleets, side by side.
Nothing here touches the user's tmux server, HOME or pool.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

EPOCH = 1_764_000_000


def build(root: Path, n: int, one_slot: bool) -> Path:
    """A fleet home with N records; returns FM_HOME."""
    home = root / ("one" if one_slot else "many")
    state = home / "fm" / "state"
    state.mkdir(parents=True)
    project = home / "project"
    project.mkdir()
    for i in range(n):
        slot = home / "pool" / ("1" if one_slot else str(i)) / "project"
        slot.mkdir(parents=True, exist_ok=True)
        task = f"s{i:05d}"
        (state / f"{task}.meta").write_text(
            f"window=fleet:fm-{task}\nendpoint_task_id={task}\nworktree={slot}\n"
            f"project={project}\nharness=claude\nkind=ship\ntasktmp=/tmp/fm-{task}\n"
            f"spawn_gen=s{EPOCH + i}.1000.ab12\n"
        )
    return home / "fm"


def checkout(rev: str, into: Path) -> Path:
    """fm's package at `rev`, for PYTHONPATH."""
    repo = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev, "fm_teardown"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def timed(
    fm_home: Path, socket: Path, timeout: float, package: Path | None = None
) -> tuple[float | None, int]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(fm_home.parent),
        "FM_HOME": str(fm_home),
        "FM_TMUX_SOCKET": str(socket),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
    }
    if package is not None:
        env["PYTHONPATH"] = str(package)
    start = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "fm_teardown", "teardown", "--dry-run", "--json"],
            env=env,
            cwd=fm_home,  # `-m` puts the cwd first on sys.path: never the checkout's own copy
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, -1
    return time.monotonic() - start, r.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,1000,2000")
    ap.add_argument("--timeout", type=float, default=180.0, help="per audit, seconds")
    ap.add_argument("--base", help="also time fm at this revision on the same fleets")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    root = Path(tempfile.mkdtemp(prefix="fm-shared-slot-"))
    socket = root / "tmux.sock"
    base_pkg = checkout(args.base, root / "base") if args.base else None
    subprocess.run(["tmux", "-S", str(socket), "new-session", "-d", "-s", "idle"], check=True)

    def show(t: float | None) -> str:
        return f"{t:9.2f}s" if t is not None else f">{args.timeout:g}s".rjust(10)

    ones: dict[str, dict[int, float | None]] = {"fm": {}, "base": {}}
    try:
        head = f"{'N':>6}  {'one slot':>10}  {'N slots':>10}  {'ratio':>6}"
        print(head + (f"  {'base one':>10}  {'base N':>10}" if base_pkg else ""))
        for n in sizes:
            where = root / str(n)
            one_home, many_home = build(where, n, True), build(where, n, False)
            one, _ = timed(one_home, socket, args.timeout)
            many, _ = timed(many_home, socket, args.timeout)
            ones["fm"][n] = one
            ratio = f"{one / many:6.1f}" if one is not None and many else "     -"
            line = f"{n:>6}  {show(one)}  {show(many)}  {ratio}"
            if base_pkg is not None:
                b_one, _ = timed(one_home, socket, args.timeout, base_pkg)
                b_many, _ = timed(many_home, socket, args.timeout, base_pkg)
                ones["base"][n] = b_one
                line += f"  {show(b_one)}  {show(b_many)}"
            print(line, flush=True)
            shutil.rmtree(where, ignore_errors=True)
        lo, hi = sizes[0], sizes[-1]
        for name, by_n in ones.items():
            a, b = by_n.get(lo), by_n.get(hi)
            if a and b and hi != lo:
                print(f"{name}: one slot, N={hi} / N={lo}: {b / a:.1f}x")
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], check=False)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
