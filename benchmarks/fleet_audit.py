"""Benchmark: the fleet audit and a single dry run over a large fleet, and the CLI start-up.

    python3 benchmarks/fleet_audit.py [--records 500] [--repeat 7] [--write]

Builds a synthetic fleet in a temp dir: N task records over N slot directories laid out as a
treehouse pool (`<pool>/<N>/project` + `treehouse-state.json`), and N tmux windows (each
running `sleep`) on a private tmux server. Then times, as separate processes:
- `fm teardown --dry-run --json` (the audit: one tmux listing, one process scan);
- `fm teardown t0 --dry-run --json` (one task; rule 5 runs git on its slot only);
- `python3 -c "import fm_teardown.cli"` and `fm --help` (start-up path).
The project's modules are precompiled first (PYTHONDONTWRITEBYTECODE is set on these
machines, so an editable install would otherwise recompile on every run). `--write` stores
the table in benchmarks/results.md.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sh(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    return subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout


def build(root: Path, n: int) -> dict[str, str]:
    project = root / "project"
    project.mkdir()
    sh("git", "init", "-q", "-b", "main", cwd=project)
    sh("git", "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-q", "--allow-empty",
       "-m", "init", cwd=project)
    pool = root / "pool" / ".treehouse" / "project-000000"
    state = root / "fleet" / "state"
    state.mkdir(parents=True)
    entries = []
    for i in range(n):
        slot = pool / str(i + 1) / "project"
        slot.mkdir(parents=True)
        entries.append({"name": str(i + 1), "path": str(slot), "created_at": "2026-12-01T00:00:00Z",
                        "leased": True, "lease_id": f"{i:032x}", "lease_holder": f"t{i}"})
        # Every tenth slot is shared by two records, as in a fleet with stale records.
        worktree = pool / str(i // 10 * 10 + 1) / "project" if i % 10 == 9 else slot
        (state / f"t{i}.meta").write_text(
            f"window=bench:fm-t{i}\nworktree={worktree}\nproject={project}\n"
            f"tasktmp=/tmp/fm-t{i}\nspawn_gen=s{1000 + i}.1.x\n"
        )
    (pool / "treehouse-state.json").write_text(json.dumps({"worktrees": entries}, indent=2))
    sock = Path(tempfile.mkdtemp(prefix="fmbench", dir="/tmp")) / "s"
    tmux = ["tmux", "-S", str(sock), "-f", "/dev/null"]
    sh(*tmux, "new-session", "-d", "-s", "bench", "-n", "keep", "sleep 100000")
    for i in range(n):
        sh(*tmux, "new-window", "-d", "-t", "=bench:", "-n", f"fm-t{i}", "sleep 100000")
    return {"FM_HOME": str(root / "fleet"), "FM_TMUX_SOCKET": str(sock),
            "FM_TREEHOUSE_BIN": "/bin/true", "HOME": str(root), "SOCK": str(sock)}


def timed(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    compileall.compile_dir(str(REPO / "fm_teardown"), quiet=1)
    root = Path(tempfile.mkdtemp(prefix="fmbench"))
    try:
        extra = build(root, args.records)
        env = {**os.environ, **extra, "NO_COLOR": "1"}
        py = sys.executable
        rows = [
            (f"audit, {args.records} records / {args.records} windows",
             timed([py, "-m", "fm_teardown", "teardown", "--dry-run", "--json"], env,
                   args.repeat)),
            ("one task dry run (same fleet)",
             timed([py, "-m", "fm_teardown", "teardown", "t0", "--dry-run", "--json"], env,
                   args.repeat)),
            ("python3 -c 'import fm_teardown.cli'",
             timed([py, "-c", "import fm_teardown.cli"], env, args.repeat)),
            ("fm --help", timed([py, "-m", "fm_teardown", "--help"], env, args.repeat)),
            ("python3 -c 'pass' (interpreter floor)", timed([py, "-c", "pass"], env, args.repeat)),
        ]
        check = subprocess.run([py, "-m", "fm_teardown", "teardown", "--dry-run", "--json"],
                               env=env, capture_output=True, text=True, check=False)
        doc = json.loads(check.stdout)
        assert len(doc["tasks"]) == args.records, "the audit did not see every record"
    finally:
        subprocess.run(["tmux", "-S", extra["SOCK"], "kill-server"], check=False,
                       capture_output=True)
        shutil.rmtree(Path(extra["SOCK"]).parent, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    table = "\n".join(
        ["| what | median (s) | best (s) |", "|---|---|---|"]
        + [f"| {name} | {med:.3f} | {best:.3f} |" for name, (med, best) in rows]
    )
    print(table)
    if args.write:
        (REPO / "benchmarks" / "results.md").write_text(
            "# Benchmark results\n\n"
            f"`python3 benchmarks/fleet_audit.py --records {args.records} --repeat "
            f"{args.repeat} --write`, {time.strftime('%Y-%m-%d', time.gmtime())}, "
            f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, modules precompiled "
            "(editable install). Each figure is a whole process, interpreter start included.\n\n"
            + table + "\n"
        )


if __name__ == "__main__":
    main()
