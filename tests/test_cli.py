"""The CLI's start-up path: completion and --help load nothing heavy; typer's own completion
path (`_FM_COMPLETE`, what completion scripts of older installs call) answers from the state
dir and the line. The static scripts of completions/ are tested in test_completion.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet import python_in

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return python_in(REPO, env, *args, timeout=60)


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


def test_the_help_of_expect_plan_says_what_a_changed_plan_exits() -> None:
    r = run("-m", "fm_teardown", "teardown", "--help")
    # The option's own help: from its line to the next option's, wrapped as the terminal is.
    text = " ".join(r.stdout.split("--expect-plan", 1)[1].split("--no-journal", 1)[0].split())
    assert "A changed plan refuses: 4 when it now has a live owner, else 5" in text, text
    assert "(fm runbook plan-changed)" in text, text


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
    from fm_teardown import cli
    from fm_teardown.commands import completion

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


def fm_in(cwd: Path, *args: str, script: str = "fm_teardown") -> subprocess.CompletedProcess[str]:
    """`fm ARGS` (or `fm-teardown` with script="fm_teardown.commands.firstmate") run from
    `cwd`, with no FM_HOME: what an operator in that directory sees."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FM_")}
    module = "fm_teardown.cli" if script == "fm_teardown" else script
    code = f"from {module} import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**env, "NO_COLOR": "1", "PYTHONPATH": str(REPO)},
        check=False,
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "see"),
    [
        (["restore"], "fm restore --help"),
        (["runbook", "--bogus"], "fm runbook --help"),
        (["demo", "--bogus"], "fm demo --help"),
        (["teardown", "--bogus"], "fm teardown --help"),
        (["--bogus"], "fm --help"),
        (["bogus"], "fm --help"),
    ],
)
def test_a_usage_error_hints_at_the_help_of_the_command_used(
    tmp_path: Path, args: list[str], see: str
) -> None:
    r = fm_in(tmp_path, *args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[1] == f"hint: see `{see}`", r.stderr


@pytest.mark.parametrize(
    ("args", "task"),
    [
        (["--expect-plan", "plan1", "--bogus"], None),
        (["--min-age", "5", "--bogus"], None),
        (["--discard-live-owner", "other", "t1", "--bogus"], "t1"),
        (["--state-dir", "somewhere", "--min-age=5", "t1", "--bogus"], "t1"),
    ],
)
def test_a_json_usage_error_names_the_task_never_an_options_value(
    tmp_path: Path, args: list[str], task: str | None
) -> None:
    import json

    r = fm_in(tmp_path, "teardown", *args, "--json")
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["verdict"], doc["task"]) == ("invalid", task), doc


@pytest.mark.parametrize("plan", ["abc", "t1=abc"])
@pytest.mark.parametrize("mode", [[], ["--dry-run"]])
def test_expect_plan_without_a_task_says_it_needs_one(
    tmp_path: Path, plan: str, mode: list[str]
) -> None:
    (tmp_path / "state").mkdir()
    r = fm_in(tmp_path, "teardown", "--expect-plan", plan, *mode)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[0] == "fm: --expect-plan needs a TASK", r.stderr
    assert list((tmp_path / "state").iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus"],  # a line typer cannot parse
        ["--force"],
        ["--min-age", "xyz"],
        ["--expect-plan", "abc"],
    ],
)
def test_every_refusal_of_an_audit_line_is_in_the_audits_shape(
    tmp_path: Path, args: list[str]
) -> None:
    import json

    (tmp_path / "state").mkdir()
    r = fm_in(tmp_path, "teardown", "--dry-run", "--json", *args)
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["audit"], doc["exit_code"], doc["verdict"]) == (True, 2, "invalid"), doc
    assert (doc["tasks"], doc["shared_slots"], doc["orphans"]) == ([], [], []), doc
    assert "task" not in doc, doc
    # Not an audit's line (a TASK, or --landed): one task's (or the batch's) shape.
    for other in (["t1", "--dry-run"], ["--landed", "--dry-run"]):
        r = fm_in(tmp_path, "teardown", *other, "--json", "--bogus")
        assert r.returncode == 2, r.stderr
        assert "audit" not in json.loads(r.stdout), r.stdout


def test_fm_teardown_help_prints_its_usage(tmp_path: Path) -> None:
    r = fm_in(tmp_path, "--help", script="fm_teardown.commands.firstmate")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.startswith("usage: fm-teardown <task-id> [--force]\n")


def test_a_missing_state_dir_hints_at_cd_fm_home_and_state_dir(tmp_path: Path) -> None:
    for args in (["teardown", "--dry-run"], ["teardown", "t1"]):
        r = fm_in(tmp_path, *args)
        assert r.returncode in (2, 5), r.stderr
        assert f"the state dir {tmp_path}/state does not exist" in r.stderr.splitlines()[0]
        hint = r.stderr.splitlines()[1]
        assert all(w in hint for w in ("cd ", "FM_HOME", "--state-dir")), r.stderr


@pytest.mark.parametrize("typed", ["OLD", "old.meta", "Old.meta", "oldd"])
def test_a_typo_of_case_or_a_meta_suffix_suggests_the_task(tmp_path: Path, typed: str) -> None:
    (tmp_path / "state").mkdir()
    for name in ("old", "other-task"):
        (tmp_path / "state" / f"{name}.meta").write_text("")
    r = fm_in(tmp_path, "teardown", typed, "--dry-run")
    assert r.returncode == 2, r.stderr
    assert "hint: did you mean: old?" in r.stderr.splitlines(), r.stderr


def test_restore_suggests_the_near_task_id_of_a_save(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "data").mkdir()
    line = '{"task": "old", "discarded_ref": "refs/fm/discarded/old/20260101T000000Z"}\n'
    (tmp_path / "data" / "teardown-log.jsonl").write_text(line)
    r = fm_in(tmp_path, "restore", "OLD")
    assert r.returncode == 2, r.stderr
    assert "hint: did you mean: old? (fm restore old)" in r.stderr.splitlines(), r.stderr


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("teardown", "Usage: fm teardown [OPTIONS] [TASK]..."),
        ("restore", "Usage: fm restore [OPTIONS] TASK"),
        ("runbook", "Usage: fm runbook [OPTIONS] [NAME]"),
    ],
)
def test_help_shows_no_python_types_and_no_braces(command: str, usage: str) -> None:
    r = run("-m", "fm_teardown", command, "--help", env={**os.environ, "COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == usage
    assert not re.search(r"<(list\[)?str\]?>|\{|\}", r.stdout), r.stdout


def test_the_exit_code_rows_are_aligned() -> None:
    r = run("-m", "fm_teardown", "teardown", "--help", env={**os.environ, "COLUMNS": "100"})
    rows = [ln for ln in r.stdout.splitlines() if re.match(r"\s+(\d+)\s+\S", ln)]
    assert [ln.split()[0] for ln in rows] == ["0", "1", "2", "3", "4", "5", "130"]
    assert len({re.match(r"\s+\d+\s+", ln).end() for ln in rows}) == 1, rows  # type: ignore[union-attr]
