"""Every refusal, warning, not-selected reason and owner has a stable code, and every code is
documented: `docs/codes.md` says what it means and names its runbook section.

The codes are gathered from the values themselves: every kind of cause, why-not-landed and
warning (the pinned samples of their words' tests, which fail when a kind has none), every
member of the enums a code is read from, every error and note code. A new cause, warning,
reason or owner kind without a code fails mypy (`code_of`, `warning_code`) or this test; one
with a code but no line in `docs/codes.md`, or a line naming a runbook section that does not
exist, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from fm_teardown.model.causes import (
    INVENTORY_DOUBT_CODES,
    AlsoClaimed,
    AtRiskKind,
    Cause,
    ForeignLock,
    Listed,
    NotLanded,
    ObservedKind,
    OwnFile,
    PoolProblem,
    code_of,
)
from fm_teardown.model.errors import ErrorCode
from fm_teardown.model.not_landed import (
    HomeProblemKind,
    NotLandedWhy,
    OwnWork,
    SlotUninspectedKind,
    UnlandedDiscarded,
)
from fm_teardown.model.notes import NoteCode
from fm_teardown.model.outcome import Skipped
from fm_teardown.model.plan import OwnerKind
from fm_teardown.model.reasons import FinishedWhy, NotSelectedWhy
from fm_teardown.model.results import BranchResult, BranchWhat, ClaimResult, ClaimWhat
from fm_teardown.model.step_warnings import (
    BRANCH_KEPT_CODES,
    CLAIM_KEPT_CODES,
    BranchKept,
    ClaimKept,
    StepWarning,
    warning_code,
)
from fm_teardown.model.world import InventoryDoubt
from tests.fleet import Fleet, tid
from tests.test_cause_words import CAUSES
from tests.test_messages import WARNINGS
from tests.test_not_landed_words import WHYS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "codes.md"
RUNBOOKS = ROOT / "fm_teardown" / "runbooks"
KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# A row of the table: | `code` | what it means | `fm runbook NAME` § Section |
ROW = re.compile(r"^\| `(?P<code>[^`]+)` \| (?P<means>[^|]+) \| `fm runbook (?P<book>[a-z-]+)`"
                 r"(?: § (?P<section>[^|]+?))? \|$")  # fmt: skip


def every_code() -> dict[str, str]:
    """Every code the values can carry, each with where it comes from."""
    codes: dict[str, str] = {}

    def add(code: str, source: str) -> None:
        codes.setdefault(str(code), source)

    for cause, _ in CAUSES:
        add(code_of(cause), f"cause {type(cause).__name__}")
    for why, _ in WHYS:
        add(why.code, f"not landed {type(why).__name__}")
    for warning, _ in WARNINGS:
        add(warning_code(warning), f"warning {type(warning).__name__}")
    for live_owner in (False, True):
        add(UnlandedDiscarded("t", None, live_owner).code, "warning UnlandedDiscarded")
    # The codes a value reads from one of its enums or flags, each way it can be.
    for kinds in (AtRiskKind, ObservedKind, PoolProblem, OwnFile, SlotUninspectedKind,
                  HomeProblemKind):  # fmt: skip
        for member in kinds:
            add(member.code, f"{kinds.__name__}.{member.name}")
    add(NotLanded("t", None).code, "cause NotLanded")
    for stale in (False, True):
        add(AlsoClaimed(Listed(("u",)), "why", stale).code, "cause AlsoClaimed")
    for nested in (None, "lib/"):
        add(ForeignLock("/p/1", "", nested=nested).code, "cause ForeignLock")
    for total in (0, 1):
        add(OwnWork(total, (), commits=1).code, "not landed OwnWork")
    for doubt in InventoryDoubt:
        add(INVENTORY_DOUBT_CODES[doubt], f"inventory doubt {doubt}")
    for what in BranchWhat:  # every result of the branch step that warns has its own code
        if BranchResult(what).warns:
            add(BRANCH_KEPT_CODES[what], f"branch kept {what}")
    add(BranchKept(BranchResult(BranchWhat.DELETED)).code, "branch kept, no code of its own")
    add(ClaimKept(ClaimResult(ClaimWhat.REMOVED, "/c")).code, "claim kept, no code of its own")
    for claim in ClaimWhat:
        if ClaimResult(claim, "/p/1/.fm-slot-owner").warns:
            add(CLAIM_KEPT_CODES[claim], f"claim kept {claim}")
    for kind in OwnerKind:
        add(kind.code, f"owner {kind}")
    for finished in FinishedWhy:
        add(finished.code, f"finished {finished}")
    for not_selected in NotSelectedWhy:
        add(not_selected.code, f"not selected {not_selected}")
    add(Skipped("t", failed="u").code, "skipped")
    add(Skipped("t").code, "skipped")
    for error in ErrorCode:
        add(error.value, f"error {error.name}")
    for note in NoteCode:
        add(note.value, f"note {note.name}")
    return codes


def documented() -> dict[str, re.Match[str]]:
    rows: dict[str, re.Match[str]] = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m is not None:
            assert m["code"] not in rows, f"{m['code']} is listed twice in docs/codes.md"
            rows[m["code"]] = m
    return rows


def test_every_kind_of_value_is_sampled() -> None:
    """The samples cover every kind of cause, why and warning: a new kind is coded here."""
    assert set(get_args(Cause)) <= {type(c) for c, _ in CAUSES}
    assert set(get_args(NotLandedWhy)) <= {type(w) for w, _ in WHYS}
    assert set(get_args(StepWarning)) <= {type(w) for w, _ in WARNINGS}


def test_every_code_is_kebab_case() -> None:
    bad = {code: source for code, source in every_code().items() if not KEBAB.fullmatch(code)}
    assert not bad


def test_every_code_is_documented_with_its_runbook() -> None:
    rows = documented()
    missing = {code: source for code, source in every_code().items() if code not in rows}
    assert not missing, f"codes with no line in docs/codes.md: {missing}"


def test_the_docs_list_no_code_that_is_not_given() -> None:
    """A line for a code no value gives is a stale line (a renamed code must stay given)."""
    assert set(documented()) <= set(every_code())


@pytest.mark.parametrize("code", sorted(every_code()))
def test_each_codes_runbook_section_exists(code: str) -> None:
    row = documented().get(code)
    if row is None:
        pytest.fail(f"{code} is not in docs/codes.md")
    book = RUNBOOKS / f"{row['book']}.md"
    assert book.is_file(), f"{code}: no runbook {row['book']}"
    section = row["section"]
    if section is not None:
        headings = {
            line[3:].strip() for line in book.read_text(encoding="utf-8").splitlines()
            if line.startswith("## ")
        }  # fmt: skip
        assert section.strip() in headings, f"{code}: {row['book']} has no section {section!r}"


def test_the_json_gives_each_reason_warning_and_owner_its_code(fleet: Fleet) -> None:
    """A live-owner refusal's reasons, headline and owners, an audit row's, a stale slot's
    warning and an error before deciding carry their codes beside their words."""
    mine, busy, old = tid("cj-mine"), tid("cj-busy"), tid("cj-old")
    slot = fleet.slot(1, holder=mine)
    fleet.task(mine, slot, "dead")
    fleet.task(busy, slot, "alive")
    code, doc = fleet.fm_json("teardown", mine, "--dry-run")
    assert (code, doc["verdict"]) == (4, "live-owner"), doc
    assert doc["reason_codes"] == ["slot-owned", "record-claim"], doc
    assert doc["reasons"][0].startswith("REFUSED: slot ") and len(doc["reasons"]) == 2
    assert (doc["headline"], doc["headline_code"]) == (
        f"{busy} is working in this slot",
        "live-owner",
    )
    assert [(o["id"], o["kind"], o["code"]) for o in doc["owners"]] == [
        (busy, "record", "record-claim")
    ]

    new = tid("cj-new")
    stale = fleet.slot(2, holder=new)  # the pool lease is new's: the slot is stale for old
    fleet.task(old, stale, "dead")
    fleet.task(new, stale, "dead")
    code, doc = fleet.fm_json("teardown", old, "--dry-run")
    assert (code, doc["verdict"], doc["headline_code"]) == (0, "stale", "stale-slot"), doc
    assert (
        len(doc["warning_codes"]) == len(doc["warnings"])
        and "stale-slot-left" in doc["warning_codes"]
    ), doc

    code, audit = fleet.fm_json("teardown", "--dry-run")
    row = next(r for r in audit["tasks"] if r["task"] == mine)
    assert (row["headline_code"], row["owner_codes"], row["owners"]) == (
        "live-owner",
        ["record-claim"],
        [busy],
    ), row
    assert row["reason_codes"] == ["slot-owned", "record-claim"]
    assert row["finished"]["code"] == "refused", row

    code, doc = fleet.fm_json("teardown", tid("cj-nosuch"), "--dry-run")
    assert (code, doc["reason_codes"]) == (2, ["no-such-task"]), doc


def test_an_error_without_a_code_of_its_own_has_its_verdicts() -> None:
    from fm_teardown.model.errors import FmError, Verdict

    assert FmError(Verdict.INVALID, "x").code == "invalid-request"
    assert FmError(Verdict.LIVE_OWNER, "x").code == "live-owner"  # refused at the pool step
    assert FmError(Verdict.FAILED, "x").code == "failed"
    assert FmError(Verdict.UNSAFE, "x").code == "unsafe"
    gate = FmError(Verdict.UNSAFE, "x", code=ErrorCode.NO_MISTAKES_GATE)
    assert (gate.code, gate.gate, FmError(Verdict.UNSAFE, "x").gate) == (
        "no-mistakes-gate",
        True,
        False,
    )
    assert gate.note.code == "no-mistakes-gate" and gate.note.text == "x"
