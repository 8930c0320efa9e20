"""The audit with many records on ONE slot against as many records on distinct slots.

    python3 benchmarks/shared_slot.py                 # N = 500, 1000, 2000
    python3 benchmarks/shared_slot.py --sizes 10000   # the target size (slow while quadratic)

For each N it builds two state dirs in a temp dir: N records naming one slot directory, and
N records naming N slot directories (plain directories: the audit never runs git on a slot
whose task is not `proceed`), with a private, empty tmux server (every endpoint `missing`).
It times `fm teardown --dry-run --json` (the audit) on each and prints both times side by
side and their ratio: an audit linear in the records per slot keeps the ratio near 1.
Nothing here touches the user's tmux server, HOME or pool.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
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


def timed(fm_home: Path, socket: Path, timeout: float) -> tuple[float | None, int]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(fm_home.parent),
        "FM_HOME": str(fm_home),
        "FM_TMUX_SOCKET": str(socket),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
    }
    start = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-m", "fm_teardown", "teardown", "--dry-run", "--json"],
            env=env,
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
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    root = Path(tempfile.mkdtemp(prefix="fm-shared-slot-"))
    socket = root / "tmux.sock"
    subprocess.run(["tmux", "-S", str(socket), "new-session", "-d", "-s", "idle"], check=True)
    try:
        print(f"{'N':>6}  {'one slot':>10}  {'N slots':>10}  {'ratio':>6}")
        for n in sizes:
            base = root / str(n)
            one, _ = timed(build(base, n, True), socket, args.timeout)
            many, _ = timed(build(base, n, False), socket, args.timeout)

            def show(t: float | None) -> str:
                return f"{t:9.2f}s" if t is not None else f">{args.timeout:g}s".rjust(10)

            ratio = f"{one / many:6.1f}" if one is not None and many else "     -"
            print(f"{n:>6}  {show(one)}  {show(many)}  {ratio}", flush=True)
            shutil.rmtree(base, ignore_errors=True)
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], check=False)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
