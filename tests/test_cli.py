"""The CLI's start-up path: completion and --help load nothing heavy; completion answers from
the state dir; the static completion scripts match what the CLI generates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=REPO,
        timeout=60,
    )


def test_importing_the_cli_loads_no_heavy_library() -> None:
    code = (
        "import sys, fm_teardown.cli\n"
        "heavy = {'psutil', 'libtmux', 'rich', 'pydantic'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))"
    )
    r = run("-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_help_exits_0() -> None:
    r = run("-m", "fm_teardown", "teardown", "--help")
    assert r.returncode == 0 and "--discard-live-owner" in r.stdout


def test_task_ids_complete_from_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    for name in ("alpha.meta", "alps.meta", "beta.meta", "alpha.status"):
        (state / name).write_text("")
    env = {
        **os.environ,
        "FM_HOME": str(tmp_path),
        "_FM_COMPLETE": "complete_bash",
        "COMP_WORDS": "fm teardown al",
        "COMP_CWORD": "2",
    }
    r = run("-m", "fm_teardown", env=env)
    assert r.stdout.split() == ["alpha", "alps"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_static_completion_scripts_are_current(shell: str) -> None:
    from typer._completion_shared import get_completion_script

    want = get_completion_script(prog_name="fm", complete_var="_FM_COMPLETE", shell=shell)
    assert (REPO / "completions" / f"fm.{shell}").read_text() == want.rstrip() + "\n"


def test_an_empty_fleet_audit_says_so_and_prints_no_table(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    env = {**os.environ, "FM_HOME": str(tmp_path), "NO_COLOR": "1"}
    r = run("-m", "fm_teardown", "teardown", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    assert "no task records" in r.stdout and "TASK" not in r.stdout
