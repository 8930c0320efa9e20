"""The CLI's start-up path: completion and --help load nothing heavy; typer's own completion
path (`_FM_COMPLETE`, what completion scripts of older installs call) answers from the state
dir and the line. The static scripts of completions/ are tested in test_completion.py."""

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


def test_typer_task_completion_honours_the_lines_state_dir(tmp_path: Path) -> None:
    for d, names in (("state", ("alpha.meta",)), ("other", ("omega.meta", "oslo.meta"))):
        (tmp_path / d).mkdir()
        for name in names:
            (tmp_path / d / name).write_text("")
    env = {
        **os.environ,
        "FM_HOME": str(tmp_path),
        "_FM_COMPLETE": "complete_bash",
        "COMP_WORDS": f"fm teardown --state-dir {tmp_path / 'other'} o",
        "COMP_CWORD": "4",
    }
    r = run("-m", "fm_teardown", env=env)
    assert r.stdout.split() == ["omega", "oslo"]


@pytest.mark.parametrize(
    ("line", "want"),
    [
        # click stops parsing at the option still lacking its value: TASK is in ctx.args.
        ("fm teardown alpha --discard-live-owner ", (None, "alpha")),
        ("fm teardown alpha --discard-live-owner=", (None, "alpha")),
        ("fm teardown --state-dir /s alpha --discard-live-owner ", ("/s", "alpha")),
        ("fm teardown alpha --state-dir /s --discard-live-owner l", ("/s", "alpha")),
    ],
)
def test_typer_completion_asks_for_the_owners_of_the_typed_task(
    line: str,
    want: tuple[str | None, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from fm_teardown import cli, completion

    seen: list[tuple[str | None, str]] = []

    def fake(state_dir: str | None, task: str) -> list[str]:
        seen.append((state_dir, task))
        return ["bravo", "lease:ci-bot"]

    monkeypatch.setattr(completion, "live_owners", fake)
    words = line.split()
    monkeypatch.setenv("_FM_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", line)
    monkeypatch.setenv("COMP_CWORD", str(len(words) if line.endswith(" ") else len(words) - 1))
    with pytest.raises(SystemExit) as exit_:
        cli.main([])
    assert exit_.value.code == 0
    assert seen == [want]
    out = capsys.readouterr().out.split()
    assert out == (["lease:ci-bot"] if line.endswith(" l") else ["bravo", "lease:ci-bot"])


def test_an_empty_fleet_audit_says_so_and_prints_no_table(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    env = {**os.environ, "FM_HOME": str(tmp_path), "NO_COLOR": "1"}
    r = run("-m", "fm_teardown", "teardown", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    assert "no task records" in r.stdout and "TASK" not in r.stdout
