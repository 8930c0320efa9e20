"""A ship task's own no-mistakes run parked at a gate (docs/spec.md §15.5b): how `axi status`
is read, whose a run is, when an abort is confirmed, and the step's work against a stand-in
`no-mistakes` (`tests/nm_fake.py`) in a real git worktree. The teardowns that run it are in
`tests/test_parked_run_teardown.py`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fm_teardown.act.parked_run_step import conclude
from fm_teardown.adapters import no_mistakes
from fm_teardown.decide.parked_run import attribute, confirmation, not_found_error
from fm_teardown.model import settings
from fm_teardown.model.errors import Verdict
from fm_teardown.model.parked_run import (
    Asked,
    Attribution,
    CodeIdentity,
    Confirmation,
    ParkedRunWhat,
    RunStatus,
)
from fm_teardown.model.plan import StepName
from fm_teardown.model.step_actions import AbortParkedRun
from tests.fleet import git
from tests.nm_fake import NmFake, parked_toon, running_toon
from tests.test_decide import S1, World

BRANCH = "fm/task-x1"
SHA = "a" * 40


# -- reading `axi status` -------------------------------------------------------------------------


def test_a_parked_answer_reads_as_firstmate_reads_it() -> None:
    s = no_mistakes.parse(parked_toon(BRANCH, SHA))
    assert s == RunStatus(
        id="01RUN",
        branch=BRANCH,
        head=SHA,
        outcome="",
        status="awaiting_approval",
        awaiting_agent=True,
        gate=True,
    )


def test_each_key_is_its_first_line_at_any_indentation_quotes_stripped_once() -> None:
    text = '  status:   "fix_review" \r\nrun:\n\tid:"""x"""\n  status: running\nbranchy: no\n'
    s = no_mistakes.parse(text)
    assert s is not None
    assert s.status == "fix_review"  # the first line that has the key
    assert s.id == '""x""'  # one pair of quotes stripped
    assert s.branch == ""  # `branchy:` is another key
    assert not s.gate and not s.awaiting_agent
    assert no_mistakes.strip_quotes(' " a " ') == "a"
    assert no_mistakes.strip_quotes('"') == '"'


def test_an_answer_naming_no_key_is_no_run() -> None:
    assert no_mistakes.parse("") is None
    assert no_mistakes.parse("no runs yet\n") is None
    assert attribute(None, BRANCH, None) == Attribution.NO_RUN


# -- whose a run is -------------------------------------------------------------------------------

MATCH = CodeIdentity(SHA, SHA)


def _status(**kw: object) -> RunStatus:
    base: dict[str, object] = {"id": "01RUN", "branch": BRANCH, "head": SHA, "status": "running"}
    base.update(kw)
    return RunStatus(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "branch", "code", "said"),
    [
        (_status(id=""), BRANCH, MATCH, Attribution.NO_RUN),
        (_status(status="awaiting_approval"), None, MATCH, Attribution.NO_BRANCH),
        (
            _status(status="awaiting_approval", branch="fm/other"),
            BRANCH,
            MATCH,
            Attribution.OTHER_BRANCH,
        ),
        (_status(status="awaiting_approval", branch=""), BRANCH, MATCH, Attribution.OTHER_BRANCH),
        (_status(status="awaiting_approval"), BRANCH, None, Attribution.OTHER_CODE),
        (
            _status(status="awaiting_approval"),
            BRANCH,
            CodeIdentity(SHA, None),
            Attribution.OTHER_CODE,
        ),
        (
            _status(status="awaiting_approval"),
            BRANCH,
            CodeIdentity(SHA, "b" * 40),
            Attribution.OTHER_CODE,
        ),
        (
            _status(status="awaiting_approval", outcome="failed"),
            BRANCH,
            MATCH,
            Attribution.CONCLUDED,
        ),
        (_status(), BRANCH, MATCH, Attribution.UNDER_WAY),
        (_status(status="fixing"), BRANCH, MATCH, Attribution.UNDER_WAY),
        (_status(status="awaiting_approval"), BRANCH, MATCH, Attribution.PARKED),
        (_status(status="fix_review"), BRANCH, MATCH, Attribution.PARKED),
        (_status(awaiting_agent=True), BRANCH, MATCH, Attribution.PARKED),
        (_status(gate=True), BRANCH, MATCH, Attribution.PARKED),
        (_status(gate=True), BRANCH, CodeIdentity(SHA, "b" * 40, True), Attribution.PARKED),
    ],
)
def test_a_run_is_the_tasks_only_by_branch_and_code_and_parked_only_at_a_gate(
    status: RunStatus, branch: str | None, code: CodeIdentity | None, said: Attribution
) -> None:
    assert attribute(status, branch, code) == said


def test_an_abort_is_confirmed_only_by_that_run_ended_or_the_exact_not_found() -> None:
    ended = RunStatus(id="01RUN", outcome="cancelled")
    assert confirmation(Asked(True, ended), "01RUN") == Confirmation.TERMINAL
    for outcome in ("failed", "passed", "checks-passed"):
        s = RunStatus(id="01RUN", outcome=outcome)
        assert confirmation(Asked(True, s), "01RUN") == Confirmation.TERMINAL
    # Another run, no outcome, an empty answer: the run may still be parked.
    assert confirmation(Asked(True, RunStatus(id="02RUN", outcome="cancelled")), "01RUN") is None
    assert confirmation(Asked(True, RunStatus(id="01RUN", status="fix_review")), "01RUN") is None
    assert confirmation(Asked(True, None), "01RUN") is None
    # The CLI's exact not-found error, on a failed call; nothing near it.
    said = not_found_error("01RUN")
    assert said == 'error: "run \\"01RUN\\" not found"'
    assert confirmation(Asked(False, said=said), "01RUN") == Confirmation.NOT_FOUND
    assert confirmation(Asked(False, said=not_found_error("02RUN")), "01RUN") is None
    assert confirmation(Asked(False, said="error: run not found"), "01RUN") is None
    assert confirmation(Asked(False, problem="timed out after 1s"), "01RUN") is None
    assert confirmation(Asked(True, said=said), "01RUN") is None


# -- the plan -----------------------------------------------------------------------------------

NM = "/opt/bin/no-mistakes"


def test_a_ship_tasks_plan_looks_for_its_parked_run_first() -> None:
    d = World(no_mistakes_bin=NM).task("a").decide("a")
    first = d.plan[0]
    assert (first.step, first.target, first.action) == (
        StepName.PARKED_RUN,
        S1,
        AbortParkedRun(S1, NM),
    )
    assert d.plan[1].step == StepName.ENDPOINT
    assert "no-mistakes axi status" in first.detail and NM in first.detail


@pytest.mark.parametrize("case", ["no-binary", "scout", "secondmate", "stale", "gone"])
def test_no_parked_run_step_where_no_run_of_the_tasks_slot_is_to_abort(case: str) -> None:
    w = World(no_mistakes_bin=None if case == "no-binary" else NM)
    if case == "stale":  # a newer launch's slot: left to it
        d = w.task("a", mtime_ns=1).task("b", mtime_ns=2).decide("a")
        assert d.verdict == Verdict.STALE
    elif case == "gone":
        d = w.task("a").gone().decide("a")
    elif case == "secondmate":
        d = w.task("a", kind=case, home=S1).decide("a")
    else:
        d = w.task("a", kind="scout" if case == "scout" else "ship").decide("a")
    assert d.plan, d
    assert StepName.PARKED_RUN not in [s.step for s in d.plan]


# -- the timeout knob -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("", 10.0),
        ("3", 3.0),
        ("0", 10.0),
        ("1.5", 10.0),
        ("-1", 10.0),
        ("٣", 10.0),
        ("99999", 10.0),
    ],
)
def test_the_timeout_is_whole_seconds_and_never_none(raw: str, seconds: float) -> None:
    s = settings.load(None, {"FM_TEARDOWN_NM_TIMEOUT": raw, "PATH": "/nonexistent"})
    assert s.nm_timeout == seconds
    assert s.no_mistakes_bin is None


def test_no_mistakes_is_found_on_path_and_made_absolute(tmp_path: Path) -> None:
    fake = NmFake(tmp_path)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        s = settings.load(None, {"PATH": "nm-bin"})  # a relative PATH entry
    finally:
        os.chdir(here)
    assert s.no_mistakes_bin == str(fake.binary)


# -- the step's work, against the stand-in --------------------------------------------------------


class Slot:
    """A project and a linked worktree on TASK's branch, with one commit of its own."""

    def __init__(self, root: Path) -> None:
        self.project = root / "project"
        self.path = root / "wt"
        git(root, "init", "-q", "-b", "main", str(self.project))
        ident = ("-c", "user.name=t", "-c", "user.email=t@example.invalid")
        git(self.project, *ident, "commit", "-q", "--allow-empty", "-m", "base")
        git(self.project, "worktree", "add", "-q", "-b", BRANCH, str(self.path), "main")
        git(self.path, *ident, "commit", "-q", "--allow-empty", "-m", "work")
        self.ident = ident

    @property
    def head(self) -> str:
        return git(self.path, "rev-parse", "HEAD")

    def commit(self) -> str:
        git(self.path, *self.ident, "commit", "-q", "--allow-empty", "-m", "more")
        return self.head


@pytest.fixture
def nm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> NmFake:
    fake = NmFake(tmp_path)
    monkeypatch.setenv("NM_FAKE_DIR", str(fake.dir))
    return fake


def test_the_tasks_parked_run_is_aborted_by_its_id_and_read_back_stopped(
    tmp_path: Path, nm: NmFake
) -> None:
    slot = Slot(tmp_path)
    nm.set("status", parked_toon(BRANCH, slot.head))
    r = conclude(str(nm.binary), str(slot.path), 10)
    assert r.what == ParkedRunWhat.ABORTED, r
    assert r.confirmed == Confirmation.TERMINAL and r.ended_as == "cancelled"
    assert nm.aborted() == ["01RUN"]
    # Every call in the slot, in firstmate's order.
    assert nm.calls() == [
        (str(slot.path), "axi status"),
        (str(slot.path), "axi abort --run 01RUN"),
        (str(slot.path), "axi status --run 01RUN"),
    ]


def test_a_run_ahead_of_head_on_its_history_is_the_tasks(tmp_path: Path, nm: NmFake) -> None:
    """The pipeline's own fix commits advance the run past the worker's HEAD."""
    slot = Slot(tmp_path)
    base = slot.head
    ahead = slot.commit()
    git(slot.path, "reset", "-q", "--hard", base)
    nm.set("status", parked_toon(BRANCH, ahead[:10]))  # a short id, as no-mistakes may give
    assert conclude(str(nm.binary), str(slot.path), 10).what == ParkedRunWhat.ABORTED
    assert nm.aborted() == ["01RUN"]


@pytest.mark.parametrize("case", ["behind", "other-branch", "detached", "not-a-commit", "name"])
def test_a_run_that_is_not_the_tasks_is_never_touched(
    tmp_path: Path, nm: NmFake, case: str
) -> None:
    slot = Slot(tmp_path)
    head = slot.head
    if case == "behind":  # work advanced outside the run
        slot.commit()
    if case == "detached":
        git(slot.path, "checkout", "-q", "--detach")
    branch = "fm/some-other-task" if case == "other-branch" else BRANCH
    if case == "not-a-commit":
        head = "deadbeef"
    if case == "name":
        head = "HEAD"  # a name is no code identity
    nm.set("status", parked_toon(branch, head))
    r = conclude(str(nm.binary), str(slot.path), 10)
    assert r.what == ParkedRunWhat.NOT_PARKED, r
    assert nm.aborted() == []
    assert [c for _, c in nm.calls()] == ["axi status"]


def test_the_tasks_run_under_way_or_ended_is_left_alone(tmp_path: Path, nm: NmFake) -> None:
    slot = Slot(tmp_path)
    nm.set("status", running_toon(BRANCH, slot.head))
    r = conclude(str(nm.binary), str(slot.path), 10)
    assert (r.what, r.attribution) == (ParkedRunWhat.NOT_PARKED, Attribution.UNDER_WAY)
    nm.set("status", parked_toon(BRANCH, slot.head) + "  outcome: passed\n")
    r = conclude(str(nm.binary), str(slot.path), 10)
    assert (r.attribution, r.ended_as) == (Attribution.CONCLUDED, "passed")
    assert nm.aborted() == []


@pytest.mark.parametrize("case", ["noop", "another-run", "empty", "timeout", "error"])
def test_an_abort_not_read_back_stopped_is_unconfirmed(
    tmp_path: Path, nm: NmFake, case: str
) -> None:
    slot = Slot(tmp_path)
    nm.set("status", parked_toon(BRANCH, slot.head))
    if case == "noop":
        nm.set("noop", "")
    elif case == "another-run":
        nm.set("after", parked_toon(BRANCH, slot.head, "02RUN"))
    elif case == "empty":
        nm.set("after", "")
    elif case == "error":
        nm.set("after.err", 'error: "run \\"01RUN\\" is busy"\n')
        nm.set("after.rc", "1")
    elif case == "timeout":  # only the read-back hangs: the abort was sent
        nm.set("after.hang", "30")
    r = conclude(str(nm.binary), str(slot.path), 1 if case == "timeout" else 10)
    assert r.what == ParkedRunWhat.UNCONFIRMED, r
    assert r.outcome == "failed"
    assert "01RUN" in nm.aborted()


def test_the_exact_not_found_confirms(tmp_path: Path, nm: NmFake) -> None:
    slot = Slot(tmp_path)
    nm.set("status", parked_toon(BRANCH, slot.head))
    nm.set("after.err", 'error: "run \\"01RUN\\" not found"\n')
    nm.set("after.rc", "1")
    r = conclude(str(nm.binary), str(slot.path), 10)
    assert (r.what, r.confirmed) == (ParkedRunWhat.ABORTED, Confirmation.NOT_FOUND)


@pytest.mark.parametrize("case", ["timeout", "exit", "garbage"])
def test_a_status_query_that_fails_aborts_nothing(tmp_path: Path, nm: NmFake, case: str) -> None:
    """Fail-open, as firstmate's script: aborting nothing is how things stood. A timed-out
    query is killed with its process group."""
    slot = Slot(tmp_path)
    nm.set("status", parked_toon(BRANCH, slot.head))
    if case == "timeout":
        nm.set("hang", "30")
    elif case == "exit":
        nm.set("status.rc", "2")
    else:
        nm.set("status", "\x00\xff not toon at all\n")
    r = conclude(str(nm.binary), str(slot.path), 1)
    if case == "garbage":
        assert (r.what, r.attribution) == (ParkedRunWhat.NOT_PARKED, Attribution.NO_RUN)
    else:
        assert r.what == ParkedRunWhat.UNANSWERED, r
        assert ("timed out after 1s" if case == "timeout" else "exited 2") in r.problem
    assert nm.aborted() == []


def test_a_no_mistakes_lying_in_the_slot_is_never_run(tmp_path: Path, nm: NmFake) -> None:
    slot = Slot(tmp_path)
    inside = slot.path / "bin" / "no-mistakes"
    inside.parent.mkdir()
    inside.write_bytes(nm.binary.read_bytes())
    inside.chmod(0o755)
    nm.set("status", parked_toon(BRANCH, slot.head))
    r = conclude(str(inside), str(slot.path), 10)
    assert r.what == ParkedRunWhat.IN_SLOT
    assert nm.calls() == []
