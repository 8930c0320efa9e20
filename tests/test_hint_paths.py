"""Every hint's path is absolute (or valid from the current directory): a hint is a command
the operator runs from wherever they stand, never from the pool or the fleet's home."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.fleet import Fleet, tid

ID_T1 = tid("hint-t1")


def hints(stderr: str) -> list[str]:
    return [x.removeprefix("hint: ") for x in stderr.splitlines() if x.startswith("hint: ")]


def path_words(text: str) -> list[str]:
    """The words of a hint that look like paths (a `/` in them), URLs and refs aside."""
    words = re.findall(r"[^\s();`'\"]+", text)
    return [
        w
        for w in words
        if "/" in w and not w.startswith(("refs/", "http", "fm/", "--")) and "=" not in w
    ]


def test_the_claim_refusals_hint_runs_from_anywhere(fleet: Fleet, tmp_path: Path) -> None:
    slot = fleet.slot(1, leased=False)
    fleet.task(ID_T1, slot, "dead")
    claim = slot.parent / ".fm-slot-owner"
    claim.write_text("owner: who knows\n")
    r = fleet.fm("teardown", ID_T1)
    assert r.returncode == 5, r.stderr
    said = hints(r.stderr)
    look = next(h for h in said if "ls -l" in h)
    for h in said:
        assert all(w.startswith("/") for w in path_words(h)), h
    command = re.search(r"\((ls -l [^)]*)\)", look)
    assert command is not None, look
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = subprocess.run(
        ["sh", "-c", command.group(1)], cwd=elsewhere, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr  # was: ls -l project-<hash>/1/.fm-slot-owner
    assert "owner: who knows" in ran.stdout
