"""Every refusal and failure names an existing runbook (spec §11): as its last hint line
`hint: runbook: fm runbook NAME`, and as `"runbook"` in its JSON; `fm runbook` prints them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fm_teardown.commands.completion import RUNBOOKS
from fm_teardown.model.errors import Verdict
from fm_teardown.model.outcome import Outcome
from fm_teardown.report import render as report
from tests.fleet import Fleet, git, tid
from tests.test_decide import CASES
from tests.test_runbooks_text import text

ID_DIRTY = tid("dirty")
ID_DONE = tid("done")
ID_F1 = tid("f1")
ID_G1 = tid("g1")
ID_LIVE = tid("live")
ID_LOOSE = tid("loose")
ID_NEW = tid("new")
ID_OLD = tid("old")


@pytest.mark.parametrize("name", list(CASES))
def test_every_decided_refusal_names_an_existing_runbook(name: str) -> None:
    case = CASES[name]
    d = case.world().decide(case.task, force=case.force, discard=case.discard, landed=case.landed)
    for dry_run in (True, False):
        book = report.runbook_for(Outcome.of_decision(d, dry_run=dry_run))
        if d.verdict == Verdict.PROCEED:
            assert book is None
        else:
            assert book in RUNBOOKS, (name, d.verdict, book)


# What each runbook's "## Never" section forbids: (words of that section, a pattern no hint
# that names the runbook may match). The words tie each pattern to the runbook's own text.
NEVER = {
    "unsafe": [
        ("Never `--force` or `--discard-live-owner` against exit 5", r"--force|--discard-live"),
        ("Never delete or rename another task's record", r"\b(delete|remove|rename)\b[^;]*record"),
        (
            "Never `treehouse return`, `git reset` or `rm -rf` the slot by hand",
            r"\breturn\b[^;]*by hand|treehouse return|git reset|rm -rf",
        ),
        ("`chmod 777` a state dir", r"chmod 777|FM_GATE_REFUSE_BYPASS=1"),
    ],
    "live-owner": [
        ("Never `treehouse return` the slot by hand", r"\breturn\b[^;]*by hand|treehouse return"),
        ("Never delete or move ID's record", r"\b(delete|move|remove)\b[^;]*record"),
        ("Never `git reset`, `git clean` or `git checkout`", r"git (reset|clean|checkout)"),
    ],
    "stale-slot": [
        ("Never `treehouse return` the slot by hand", r"\breturn\b[^;]*by hand|treehouse return"),
        ("Never re-create TASK's record", r"re-?create"),
        ("Never edit or delete another task's slot claim", r"\b(edit|delete)\b[^;]*(claim|record)"),
    ],
    "unlanded": [("Never `git reset --hard` or `git clean`", r"git reset --hard|git clean")],
    "failed": [
        ("Never delete TASK's record", r"\b(delete|remove)\b[^;]*record"),
        ("Never `treehouse return` the slot by hand", r"\breturn\b[^;]*by hand|treehouse return"),
        ("Never `kill -9`", r"kill -9"),
    ],
    "git-lock": [
        ("Never `treehouse return` the slot by hand", r"\breturn\b[^;]*by hand|treehouse return"),
        ("Never `git reset`, `git checkout` or `git stash`", r"git (reset|checkout|stash)"),
    ],
    "invalid": [("Never rename or delete a record", r"\b(rename|delete)\b[^;]*record")],
}


def test_the_never_patterns_are_the_runbooks_own_words() -> None:
    for name, rules in NEVER.items():
        never = text(name).split("## Never", 1)[1]
        for words, _ in rules:
            assert words in " ".join(never.split()), (name, words)


@pytest.mark.parametrize("name", list(CASES))
def test_no_hint_recommends_what_its_runbook_forbids(name: str) -> None:
    """Each decided refusal's hints against the runbook it names (e.g. never "return the slot
    by hand" under `fm runbook unsafe`, whose Never section forbids exactly that)."""
    case = CASES[name]
    d = case.world().decide(case.task, force=case.force, discard=case.discard, landed=case.landed)
    book = report.runbook_for(Outcome.of_decision(d, dry_run=True))
    if book is None:
        return
    for hint in d.hints:
        for words, pattern in NEVER.get(book, []):
            assert not re.search(pattern, hint), f"{name}: hint {hint!r} vs {book}: {words}"


def test_the_missing_executable_hint_names_fm_treehouse_bin() -> None:
    case = CASES["no-treehouse-bin"]
    d = case.world().decide(case.task)
    assert any("FM_TREEHOUSE_BIN=" in h for h in d.hints), d.hints
    assert "FM_TREEHOUSE_BIN=" in text("unsafe")


def last_hint(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line][-1]


def check(fleet: Fleet, args: list[str], want: str, env: dict[str, str] | None = None) -> None:
    r = fleet.fm(*args, env=env)
    assert last_hint(r.stderr) == f"hint: runbook: fm runbook {want}", (args, r.stderr)
    r = fleet.fm(*args, "--json", env=env)
    doc = json.loads(r.stdout)
    assert doc["runbook"] == want, (args, doc)
    assert want in RUNBOOKS


def test_refusals_and_failures_on_a_real_fleet_name_their_runbook(fleet: Fleet) -> None:
    shared = fleet.slot(1, holder=ID_LIVE)
    fleet.task(ID_DONE, shared, "dead")
    fleet.task(ID_LIVE, shared, "alive", extra={"treehouse_lease_holder": ID_LIVE})
    check(fleet, ["teardown", ID_DONE, "--dry-run"], "live-owner")
    check(fleet, ["teardown", ID_DONE], "live-owner")
    dirty = fleet.slot(2, holder=ID_DIRTY)
    fleet.task(ID_DIRTY, dirty, "dead")
    (dirty / "x.txt").write_text("x\n")
    check(fleet, ["teardown", ID_DIRTY, "--dry-run"], "unlanded")
    check(fleet, ["teardown", "nosuch"], "invalid")
    check(fleet, ["teardown", "../bad", "--dry-run"], "invalid")
    check(fleet, ["teardown", "a", "b", "--force"], "invalid")
    unmanaged = fleet.slot(3, managed=False)
    fleet.task(ID_LOOSE, unmanaged, "dead")
    check(fleet, ["teardown", ID_LOOSE, "--dry-run"], "unsafe")
    (fleet.state / "broken.meta").write_text("window=firstmate:fm-broken\n")
    check(fleet, ["teardown", "broken", "--dry-run"], "unsafe")
    (fleet.state / "broken.meta").unlink()
    stale = fleet.slot(4, leased=False)
    fleet.task(ID_OLD, stale, "dead", extra={"spawn_gen": "s1.1.a"})
    fleet.record(ID_NEW, stale, extra={"spawn_gen": "s2.1.b"})
    check(fleet, ["teardown", ID_OLD, "--dry-run"], "stale-slot")
    r = fleet.fm("teardown", "--dry-run", "--json", env=fleet.env(FM_STATE_OVERRIDE="/nonexistent"))
    assert json.loads(r.stdout)["runbook"] == "unsafe"


def test_a_failed_run_and_a_git_lock_name_theirs(fleet: Fleet) -> None:
    fleet.task(ID_F1, fleet.slot(1, holder=ID_F1), "dead")
    env = fleet.env(TREEHOUSE_STANDIN_FAULT="survivor")
    r = fleet.fm("teardown", ID_F1, "--json", env=env)
    assert (r.returncode, json.loads(r.stdout)["runbook"]) == (1, "failed")
    slot = fleet.slot(2, holder=ID_G1)
    fleet.task(ID_G1, slot, "dead")
    lock = Path(git(slot, "rev-parse", "--path-format=absolute", "--git-path", "index.lock"))
    lock.write_text("")  # fresh: not provably stale
    env = fleet.env(
        FM_TREEHOUSE_RETURN_LOCK_RETRIES="1", FM_TREEHOUSE_RETURN_LOCK_RETRY_WAIT_SECS="0"
    )
    r = fleet.fm("teardown", ID_G1, env=env)
    assert r.returncode == 1
    assert last_hint(r.stderr) == "hint: runbook: fm runbook git-lock"


def fm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fm_teardown", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
        timeout=60,
    )


def test_fm_runbook_lists_and_prints_them() -> None:
    r = fm("runbook")
    assert r.returncode == 0
    assert [line.split()[0] for line in r.stdout.splitlines()[1:]] == list(RUNBOOKS)
    for name in RUNBOOKS:
        r = fm("runbook", name)
        assert r.returncode == 0 and r.stdout.startswith(f"# {name}")
    r = fm("runbook", "live-ownr")
    assert r.returncode == 2 and "did you mean live-owner?" in r.stderr


def test_the_runbooks_ship_inside_the_package() -> None:
    from importlib import resources

    for name in RUNBOOKS:
        assert (resources.files("fm_teardown.runbooks") / f"{name}.md").is_file()
