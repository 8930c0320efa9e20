"""Reproduce the figures of docs/reliability.md.

    python3 -m tests.reliability [--soak N] [--write]


Runs the reliability tests (model-based property tests, crash injection, races, hostile
inputs) with counters on, then prints the figures; `--write` also replaces the figures block
in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.reliability.figures import KEYS

REPO = Path(__file__).resolve().parents[2]
TESTS = [
    "tests/test_decide_properties.py",
    "tests/reliability",
    "tests/test_hostile.py",
]
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


def main() -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.reliability")
    ap.add_argument("--soak", type=int, default=1, help="multiply iteration counts (default 1)")
    ap.add_argument("--write", action="store_true", help="update docs/reliability.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        counts_file = os.path.join(tmp, "figures.jsonl")
        junit = os.path.join(tmp, "junit.xml")
        env = {**os.environ, "FM_RELIABILITY_FIGURES": counts_file, "FM_SOAK": str(args.soak)}
        started = time.monotonic()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={junit}",
                *[t for t in TESTS if (REPO / t).exists()],
            ],
            cwd=REPO,
            env=env,
            check=False,
        )
        elapsed = time.monotonic() - started
        counts = dict.fromkeys(KEYS, 0)
        if os.path.exists(counts_file):
            for line in Path(counts_file).read_text().splitlines():
                item = json.loads(line)
                counts[item["key"]] = counts.get(item["key"], 0) + int(item["n"])
        suite = ET.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        tests = int(suite.get("tests", 0))
        violations = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    rows = [
        ("decision-core examples tried (hypothesis)", counts["examples"]),
        ("whole-pipeline examples tried (real tmux, git, processes)", counts["pipeline_examples"]),
        ("audit fleets checked row by row against one-task dry runs", counts["audit_examples"]),
        ("crashes injected (SIGKILL at a step boundary, then a re-run)", counts["crashes"]),
        ("races run (concurrent teardowns, claims during a teardown)", counts["races"]),
        ("hostile inputs (each as dry run and, where it refuses, real run)", counts["hostile"]),
        ("tests run", tests),
        ("violations found (failed or erroring tests)", violations),
    ]
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    table = "\n".join(
        [
            f"Last run: {stamp}, `python3 -m tests.reliability --soak {args.soak}`, "
            f"{elapsed:.0f} s on a machine with {os.cpu_count()} CPUs.",
            "",
            "| figure | count |",
            "|---|---|",
        ]
        + [f"| {k} | {v} |" for k, v in rows]
    )
    print(table)
    if args.write:
        doc = REPO / "docs" / "reliability.md"
        text = doc.read_text()
        block = f"{BEGIN}\n{table}\n{END}"
        text = re.sub(
            re.escape(BEGIN) + r".*?" + re.escape(END), lambda _m: block, text, flags=re.S
        )
        doc.write_text(text)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
