"""Before anything is timed: do fm, the floor and the shell baseline give the same answer?

fm's verdicts are the reference. A disagreement is never hidden: it is reported with the
tasks concerned, and for an audit row that differs from the floor, fm's own one-task dry run
of that task is asked too, which tells a slow-but-wrong floor from an audit row that is not
what `fm teardown <task> --dry-run` says (spec §8).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# An answer: verdict, exit code, and the ids of the live owners it names.
Key = tuple[str, int, frozenset[str]]


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str


def run(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=600,
    )


def json_of(r: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one JSON object a program printed; if it printed none (a crash, a half-edited
    file), an answer that says so, so that the comparison shows it instead of stopping."""
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        return doc
    why = (r.stderr.strip().splitlines() or ["no output"])[-1][:160]
    return {"verdict": f"no JSON ({why})", "exit_code": r.returncode, "tasks": []}


def key_of(doc: Mapping[str, Any]) -> Key:
    live = frozenset(str(o["id"]) for o in doc.get("owners") or () if o.get("live"))
    return str(doc.get("verdict")), int(doc.get("exit_code", -1)), live


def show(key: Key) -> str:
    owners = f" naming {', '.join(sorted(key[2]))}" if key[2] else ""
    return f"{key[0]} (exit {key[1]}){owners}"


def shell_rows(stdout: str) -> dict[str, Key]:
    """The baseline's lines: task, verdict, exit code, live owners (comma-separated)."""
    rows = {}
    for line in stdout.splitlines():
        task, verdict, code, owners = [*line.split("\t"), ""][:4]
        rows[task] = (verdict, int(code), frozenset(o for o in owners.split(",") if o))
    return rows


def audit_rows(doc: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    return {str(t["task"]): (str(t["verdict"]), int(t["exit_code"])) for t in doc["tasks"]}


def compare_one(
    fm: Key, exit_code: int, others: Mapping[str, Key], target: str, owner: str
) -> list[Check]:
    """fm's one-task answer against the issue's expectation and each other program's."""
    checks = [
        Check(
            "fm one task = the issue's case",
            fm == ("live-owner", 4, frozenset({owner})) and exit_code == 4,
            f"fm teardown {target} --dry-run: {show(fm)}, process exit {exit_code} "
            f"(expected live-owner (exit 4) naming {owner})",
        )
    ]
    for name, key in others.items():
        checks.append(
            Check(f"{name} one task = fm", key == fm, f"{name}: {show(key)}; fm: {show(fm)}")
        )
    return checks


def compare_rows(
    name: str,
    fm: Mapping[str, tuple[str, int]],
    other: Mapping[str, tuple[str, int]],
    fm_one: Mapping[str, Key] | None = None,
    ref: str = "fm",
) -> Check:
    """Row by row (over the tasks `other` answered) against `ref`'s rows (fm's audit unless
    said otherwise): the patterns of disagreement, with examples."""
    differ: dict[tuple[tuple[str, int] | None, tuple[str, int]], list[str]] = {}
    for task, answer in sorted(other.items()):
        if fm.get(task) != answer:
            differ.setdefault((fm.get(task), answer), []).append(task)
    agree = len(other) - sum(len(v) for v in differ.values())
    if not differ:
        return Check(f"{name} audit = {ref} audit", True, f"all {len(other)} rows agree")
    parts = []
    for (mine, theirs), tasks in differ.items():
        mine_s = f"{mine[0]} ({mine[1]})" if mine else "no row"
        text = f"{len(tasks)} rows {ref} {mine_s} vs {name} {theirs[0]} ({theirs[1]})"
        text += f", e.g. {', '.join(tasks[:3])}"
        one = fm_one.get(tasks[0]) if fm_one else None
        if one is not None:
            text += f"; fm's own `teardown {tasks[0]} --dry-run` says {show(one)}"
            if (one[0], one[1]) == theirs:
                text += " (so fm's audit row is not what its one-task dry run says: spec §8)"
        parts.append(text)
    return Check(
        f"{name} audit = fm audit",
        False,
        f"{agree} of {len(other)} rows agree; " + "; ".join(parts),
    )


def verdict_mix(rows: Mapping[str, tuple[str, int]]) -> str:
    counts = Counter(v for v, _ in rows.values())
    return ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))


def differing(fm: Mapping[str, tuple[str, int]], other: Mapping[str, tuple[str, int]]) -> list[str]:
    """One example task per pattern of disagreement (to ask fm's one-task dry run about)."""
    seen: dict[tuple[tuple[str, int] | None, tuple[str, int]], str] = {}
    for task, answer in sorted(other.items()):
        if fm.get(task) != answer:
            seen.setdefault((fm.get(task), answer), task)
    return list(seen.values())
