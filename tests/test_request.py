"""The request (`model/request.py`): `fm teardown`'s options parsed once, in one place
(`commands/teardown.py`, `parse`), into one value with modes as enums; a pair of options
that only makes sense together cannot be built into a request that contradicts itself."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fm_teardown.commands.teardown import BadRequest, parse
from fm_teardown.model.errors import ExitCode
from fm_teardown.model.request import (
    Asked,
    CommandLine,
    Discard,
    Flags,
    Options,
    RunMode,
)

TOKEN = "0" * 96


@pytest.mark.parametrize(
    ("force", "owner", "want"),
    [
        (False, None, Discard.NOTHING),
        (True, None, Discard.OWN_WORK),
        (True, "bravo", Discard.LIVE_OWNER),
        # Named without --force: lifts nothing (the refusal's hint says so); still named.
        (False, "bravo", Discard.NOTHING),
    ],
)
def test_force_and_discard_live_owner_are_one_discard(
    force: bool, owner: str | None, want: Discard
) -> None:
    flags = Flags.given(force=force, discard_live_owner=owner)
    assert (flags.discard, flags.force, flags.discard_live_owner) == (want, force, owner)


@pytest.mark.parametrize(
    "contradiction",
    [
        {"discard": Discard.LIVE_OWNER},  # a live owner discarded, none named
        {"discard": Discard.OWN_WORK, "discard_live_owner": "bravo"},  # named, not discarded
    ],
)
def test_a_discard_that_contradicts_its_owner_cannot_be_built(
    contradiction: dict[str, object],
) -> None:
    with pytest.raises(ValueError):
        Flags(**contradiction)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        replace(Flags.given(force=True), discard_live_owner="bravo")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("FM_HOME", "FM_STATE_OVERRIDE", "FM_ROOT_OVERRIDE", "FM_AGENT_NAMES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("line", "asked"),
    [
        (CommandLine(tasks=("a",)), Asked.ONE),
        (CommandLine(tasks=("a", "b")), Asked.NAMED),
        (CommandLine(landed=True), Asked.LANDED),
        (CommandLine(dry_run=True), Asked.AUDIT),
    ],
)
def test_what_is_asked(home: Path, line: CommandLine, asked: Asked) -> None:
    s, request = parse(line)
    assert request.asked == asked
    assert request.tasks == line.tasks
    assert s.state_dir == home / "state"


def test_the_request_carries_every_option(home: Path) -> None:
    _, one = parse(
        CommandLine(
            tasks=("a",),
            dry_run=True,
            force=True,
            discard_live_owner="bravo",
            json=True,
            state_dir="sd",
            expect_plan=(TOKEN,),
            no_journal=True,
        )
    )
    assert one.flags == Flags(
        discard=Discard.LIVE_OWNER,
        discard_live_owner="bravo",
        mode=RunMode.DRY_RUN,
        no_journal=True,
    )
    assert (one.plans, one.json, one.state_dir) == ({"a": TOKEN}, True, "sd")
    assert one.flags_for("a").expect_plan == TOKEN
    _, landed = parse(
        CommandLine(
            landed=True,
            include_live=True,
            include_pushed=True,
            min_age="10m",
            expect_plan=(f"b={TOKEN}",),
        )
    )
    assert landed.select == Options(include_live=True, include_pushed=True, min_age=600.0)
    # A task --landed selects that no approved token names refuses: its plan was never seen.
    assert (landed.flags_for("b").expect_plan, landed.flags_for("c").expect_plan) == (TOKEN, "")
    _, batch = parse(CommandLine(tasks=("a", "b")))
    assert batch.plans is None and batch.flags_for("a") == batch.flags == Flags()


@pytest.mark.parametrize(
    ("line", "said", "audit"),
    [
        (CommandLine(landed=True, tasks=("a",)), "--landed selects the tasks itself", False),
        (CommandLine(landed=True, force=True), "--landed cannot be combined", False),
        (CommandLine(tasks=("a", "b"), force=True), "take one task at a time", False),
        (CommandLine(tasks=("a", "a")), "a task is named more than once", False),
        (CommandLine(tasks=("a",), min_age="soon"), "--min-age takes a duration", False),
        (CommandLine(tasks=("a",), include_live=True), "choose what --landed selects", False),
        (CommandLine(tasks=("a", "b"), expect_plan=(TOKEN,)), "TASK=TOKEN per task", False),
        (CommandLine(), "give a TASK to tear down", True),
        (CommandLine(dry_run=True, force=True), "need a TASK", True),
        (CommandLine(tasks=("a",), discard_live_owner=""), "needs the id of the", False),
    ],
)
def test_what_the_spec_forbids_is_refused_when_the_request_is_built(
    home: Path, line: CommandLine, said: str, audit: bool
) -> None:
    with pytest.raises(BadRequest) as refused:
        parse(line)
    assert said in refused.value.err.message
    assert refused.value.err.exit_code == ExitCode.INVALID
    assert refused.value.audit == audit
    assert not (home / "state").exists() and not (home / "data").exists()
