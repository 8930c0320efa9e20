"""A closed stdout (`fm teardown X | head -0`, a reader gone before fm writes) never changes
the exit code, never stops a batch and never prints a traceback. Real pipes: the reading
end is closed before fm starts, so its first write meets EPIPE. The same for stderr and for
streams closed before fm starts (`2>&1 | head -0`, `>&-`, `2>&-`), through real shell
pipelines, for every command and for `fm-teardown` (spec §15.9)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.fleet import Fleet, tid

ID_MINE = tid("cs-mine")
ID_GONE = tid("cs-gone")
ID_WORKER = tid("cs-worker")
ID_LATER = tid("cs-later")


def closed_reader(fleet: Fleet, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run argv with stdout a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", *argv],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=fleet.fm_home,
            env=fleet.env(),
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    finally:
        os.close(write)


def recycled(fleet: Fleet) -> None:
    """ID_GONE's slot now belongs to a live worker (exit 4); ID_MINE and ID_LATER are done."""
    fleet.task(ID_MINE, fleet.slot(1, holder=ID_MINE), "dead")
    slot = fleet.slot(2, holder=ID_WORKER, lease_id=f"{ID_WORKER:>032}")
    fleet.task(ID_GONE, slot, "dead", extra={"spawn_gen": "s100.1.a"})
    fleet.task(ID_WORKER, slot, "alive", extra={"spawn_gen": "s900.1.b"})
    fleet.task(ID_LATER, fleet.slot(3, holder=ID_LATER), "dead")


@pytest.mark.parametrize("json_out", [False, True])
def test_a_refusal_into_a_closed_pipe_keeps_its_exit_code(fleet: Fleet, json_out: bool) -> None:
    recycled(fleet)
    args = ["fm_teardown", "teardown", ID_GONE, *(["--json"] if json_out else [])]
    r = closed_reader(fleet, *args)
    assert r.returncode == 4, r.stderr  # was 1: BrokenPipeError at exit
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr
    for args in (["--dry-run"], ["--dry-run", "--json"]):
        r = closed_reader(fleet, "fm_teardown", "teardown", ID_GONE, *args)
        assert r.returncode == 4, r.stderr


def test_a_batch_into_a_closed_pipe_tears_down_every_task(fleet: Fleet) -> None:
    recycled(fleet)
    r = closed_reader(fleet, "fm_teardown", "teardown", ID_MINE, ID_GONE, ID_LATER)
    assert r.returncode == 4, r.stderr
    assert "Traceback" not in r.stderr
    # The pipe closed at the first task's output; the batch went on to the last one.
    assert not (fleet.state / f"{ID_MINE}.meta").exists()
    assert (fleet.state / f"{ID_GONE}.meta").exists()
    assert not (fleet.state / f"{ID_LATER}.meta").exists()


def test_the_dropin_into_a_closed_pipe_keeps_its_exit_codes(fleet: Fleet) -> None:
    recycled(fleet)
    refused = closed_reader(fleet, "fm_teardown.commands.firstmate", ID_GONE)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    done = closed_reader(fleet, "fm_teardown.commands.firstmate", ID_MINE)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and not (fleet.state / f"{ID_MINE}.meta").exists()


# -- stdout and stderr, broken or closed, through real shell pipelines (spec §15.9) ----------

ID_CHARLIE = tid("cs-charlie")
ID_ALPHA = tid("cs-alpha")


def charlie_and_alpha(fleet: Fleet) -> None:
    """charlie's own work is not landed (exit 3); alpha is finished (exit 0)."""
    charlie = fleet.task(ID_CHARLIE, fleet.slot(1, holder=ID_CHARLIE), "dead")
    (charlie.slot / "wip.txt").write_text("not landed\n")
    fleet.task(ID_ALPHA, fleet.slot(2, holder=ID_ALPHA), "dead")


def shell(fleet: Fleet, line: str) -> tuple[int, str]:
    """Run `line` in bash (the console scripts `fm` and `fm-teardown` on PATH); the exit code
    of its first command (`PIPESTATUS`), and what bash itself printed besides."""
    r = subprocess.run(
        ["bash", "-c", f'{line}; echo "rc=${{PIPESTATUS[0]}}"'],
        capture_output=True,
        text=True,
        cwd=fleet.fm_home,
        env=fleet.env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    *rest, last = r.stdout.splitlines() or ["rc=?"]
    assert last.startswith("rc="), r.stdout + r.stderr
    return int(last[3:]), "\n".join(rest) + r.stderr


@pytest.mark.parametrize(
    "redirect", ["2>&1 | head -0", "2>&1 >&- | head -0", ">&-", "2>&-", ">&- 2>&-"]
)
def test_a_refusal_keeps_its_code_whatever_its_streams(fleet: Fleet, redirect: str) -> None:
    charlie_and_alpha(fleet)
    code, said = shell(fleet, f"fm teardown {ID_CHARLIE} {redirect}")
    assert code == 3, said  # was 1: BrokenPipeError on stderr, or "unexpected error"
    assert "Traceback" not in said and "unexpected error" not in said
    assert (fleet.state / f"{ID_CHARLIE}.meta").exists()


@pytest.mark.parametrize("redirect", ["2>&1 | head -0", ">&- 2>&-"])
def test_a_batch_goes_on_after_a_refusal_whatever_its_streams(fleet: Fleet, redirect: str) -> None:
    charlie_and_alpha(fleet)
    code, said = shell(fleet, f"fm teardown {ID_CHARLIE} {ID_ALPHA} {redirect}")
    assert code == 3, said
    assert "Traceback" not in said
    assert (fleet.state / f"{ID_CHARLIE}.meta").exists()
    assert not (fleet.state / f"{ID_ALPHA}.meta").exists()  # was: never torn down
    assert [(e["task"], e["exit_code"]) for e in fleet.journal()] == [
        (ID_CHARLIE, 3),
        (ID_ALPHA, 0),
    ]


@pytest.mark.parametrize("redirect", ["2>&1 | head -0", ">&-", "2>&-"])
def test_the_dropin_keeps_its_codes_whatever_its_streams(fleet: Fleet, redirect: str) -> None:
    charlie_and_alpha(fleet)
    code, said = shell(fleet, f"fm-teardown {ID_CHARLIE} {redirect}")
    assert code == 1, said  # the script's code for a refusal
    assert "Traceback" not in said and "unexpected error" not in said
    code, said = shell(fleet, f"fm-teardown {ID_ALPHA} {redirect}")
    assert code == 0, said
    assert not (fleet.state / f"{ID_ALPHA}.meta").exists()


@pytest.mark.parametrize("redirect", ["2>&1 | head -0", ">&-", "2>&-"])
def test_every_command_keeps_its_code_whatever_its_streams(fleet: Fleet, redirect: str) -> None:
    """`fm runbook`, `fm restore`, the audit, the version, completion: each exits as it
    would with a reader (was 1 with `>&-`: "unexpected error" for every command)."""
    charlie_and_alpha(fleet)
    for line in (
        "fm runbook",
        "fm runbook live-owner",
        "fm runbook no-such-runbook",
        f"fm restore {ID_CHARLIE}",
        "fm teardown --dry-run",
        f"fm teardown {ID_CHARLIE} --dry-run --json",
        "fm --version",
        "fm --help",
        "fm --show-completion bash",
        f"fm __complete owners {ID_CHARLIE}",
        "fm teardown --no-such-flag",
    ):
        want, _ = shell(fleet, f"{line} >/dev/null 2>&1")
        code, said = shell(fleet, f"{line} {redirect}")
        assert code == want, (line, said)
        assert "Traceback" not in said and "unexpected error" not in said, (line, said)
