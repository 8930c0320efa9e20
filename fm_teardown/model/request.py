"""What `fm teardown` (and the `fm-teardown` drop-in) was asked: one value, parsed once.

The command line as typer hands it over (`CommandLine`, one field per option) is parsed and
checked in one place (`commands/teardown.py`, `parse`) into a `Request`: what is asked (one
task, a batch of named tasks, `--landed`, the audit), each task's `Flags` and the `--landed`
opt-ins (`Options`). The request is then passed down whole, as pipx passes its dispatch
context, instead of a parameter per flag; a flag combination the spec forbids is refused
when the request is built, never later.

Pairs of options that only make sense together are one enum (worktrunk's deletion mode):
`--force` and `--discard-live-owner=ID` are a `Discard` and the owner named; a dry or a real
run is a `RunMode`; `fm` and its drop-in are a `Caller`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from enum import StrEnum

from fm_teardown.model.values import value

__all__ = [
    "DEFAULT_MIN_AGE",
    "Asked",
    "Caller",
    "CommandLine",
    "Discard",
    "Flags",
    "Options",
    "Request",
    "RunMode",
]

# `--min-age`'s default, in seconds: an hour.
DEFAULT_MIN_AGE = 3600.0


class Asked(StrEnum):
    """What `fm teardown` was asked to do."""

    ONE = "one"  # `fm teardown TASK`
    NAMED = "named"  # `fm teardown A B C`: a batch of the launches named (spec §9)
    LANDED = "landed"  # `fm teardown --landed`: a batch of every finished task (spec §9)
    AUDIT = "audit"  # `fm teardown --dry-run`: the fleet audit (spec §8)


class Discard(StrEnum):
    """What a run may discard beyond what is TASK's own and landed: `--force` and
    `--discard-live-owner=ID` as one value. `--discard-live-owner=ID` without `--force` lifts
    nothing (`NOTHING`, the owner still named: the refusal's hint says why)."""

    NOTHING = "nothing"
    OWN_WORK = "own-work"  # --force: this task's own unlanded work, saved first
    LIVE_OWNER = "live-owner"  # --force --discard-live-owner=ID: and the one live owner ID

    @classmethod
    def of(cls, force: bool, owner: str | None) -> Discard:
        """The discard the two options ask for."""
        if not force:
            return cls.NOTHING
        return cls.OWN_WORK if owner is None else cls.LIVE_OWNER


class RunMode(StrEnum):
    REAL = "real"
    DRY_RUN = "dry-run"  # --dry-run: decide and say, change nothing


class Caller(StrEnum):
    """Whose command line the run answers."""

    FM = "fm"
    # The drop-in for firstmate's script (spec §10): a journal that cannot be written only
    # warns (the script had none), and a task with no record is the script's `no meta` error,
    # never `already torn down`.
    DROP_IN = "fm-teardown"


@value
class Flags:
    """One task's run as asked; what decide, act and the journal read of the request."""

    discard: Discard = Discard.NOTHING
    # `--discard-live-owner=ID` as given: lifts a live owner's refusal only with
    # `Discard.LIVE_OWNER`; without `--force` it is carried for the hint that says so.
    discard_live_owner: str | None = None
    mode: RunMode = RunMode.REAL
    no_journal: bool = False  # `--no-journal`: run without the journal (no intent, no result)
    caller: Caller = Caller.FM
    # The plan token the operator approved (`--expect-plan`): the first decision must give it.
    expect_plan: str | None = None

    def __post_init__(self) -> None:
        # Forced, the owner is named exactly when it is discarded: no other pair is a request.
        named = self.discard_live_owner is not None
        if self.force and (self.discard == Discard.LIVE_OWNER) != named:
            raise ValueError(f"{self.discard} with discard_live_owner={self.discard_live_owner!r}")

    @classmethod
    def given(
        cls,
        *,
        force: bool = False,
        discard_live_owner: str | None = None,
        dry_run: bool = False,
        no_journal: bool = False,
    ) -> Flags:
        """The flags as `fm teardown`'s options give them."""
        return cls(
            discard=Discard.of(force, discard_live_owner),
            discard_live_owner=discard_live_owner,
            mode=RunMode.DRY_RUN if dry_run else RunMode.REAL,
            no_journal=no_journal,
        )

    @property
    def force(self) -> bool:
        """`--force` was given: this task's own unlanded work may be discarded (saved first)."""
        return self.discard != Discard.NOTHING

    @property
    def dry_run(self) -> bool:
        return self.mode == RunMode.DRY_RUN


@value
class Options:
    """The opt-ins of `--landed`, each lifting exactly one condition (`decide/finished.py`)."""

    include_live: bool = False
    include_pushed: bool = False
    min_age: float = DEFAULT_MIN_AGE


@value
class CommandLine:
    """`fm teardown`'s options as typer parsed them, one field each, before they are checked:
    what `commands/teardown.py` parses into a `Request`."""

    tasks: tuple[str, ...] = ()
    dry_run: bool = False
    force: bool = False
    discard_live_owner: str | None = None
    landed: bool = False
    include_live: bool = False
    include_pushed: bool = False
    min_age: str | None = None
    json: bool = False
    state_dir: str | None = None
    expect_plan: tuple[str, ...] = ()
    no_journal: bool = False


@value
class Request:
    """`fm teardown` as asked, checked: built once (`commands/teardown.py`, `parse`)."""

    asked: Asked
    tasks: tuple[str, ...]  # ONE: the task; NAMED: the tasks named; LANDED, AUDIT: none
    flags: Flags  # every task's run (its approved token is added at its turn: `flags_for`)
    select: Options = field(default_factory=Options)  # what --landed selects (the audit too)
    # `--expect-plan`: each task's approved plan token; None when none was given.
    plans: Mapping[str, str] | None = None
    json: bool = False  # --json: one JSON object on stdout
    state_dir: str | None = None  # --state-dir as given (a command finishing a batch repeats it)

    def flags_for(self, task: str) -> Flags:
        """TASK's flags, with its approved token when tokens were given. A task with none (a
        `--landed` selection the tokens do not name) gets "": it refuses, its plan was never
        approved."""
        if self.plans is None:
            return self.flags
        return replace(self.flags, expect_plan=self.plans.get(task, ""))
