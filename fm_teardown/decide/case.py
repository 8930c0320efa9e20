"""What every rule reads and what a rule says (spec §5). Pure.

`Case` is one decision's inputs: TASK, its record, slot and endpoint, the world observed, and
(rule 5) TASK's landed facts; what several rules read (the owners, the discarded live owner,
whether the slot is returned) is worked out from them once, on first use. A rule's answer is
a `Ruling`: nothing, a `Refusal`, a `Stale` slot, `GoOn` with reasons and warnings, or
`NeedsLanded`. The rules (`decide/rules.py`) and the plan builder (`decide/plan_builder.py`)
both read them, so they live here, below both.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from fm_teardown.decide.ownership import live_of, owners_of
from fm_teardown.decide.sparing import NeverSignalled, never_signalled
from fm_teardown.model.causes import Cause
from fm_teardown.model.errors import Verdict
from fm_teardown.model.landing import Reason
from fm_teardown.model.plan import DecisionWarning, LandedLike, Owner
from fm_teardown.model.records import Fleet, Record, RecordKind
from fm_teardown.model.request import Discard, Flags
from fm_teardown.model.values import value
from fm_teardown.model.world import Endpoint, Observation, SlotFacts

__all__ = [
    "SAVED_KINDS",
    "Case",
    "GoOn",
    "NeedsLanded",
    "Refusal",
    "Ruling",
    "Stale",
]


@value
class Refusal:
    """The decision ends here: this verdict, an empty plan. Its reasons and headline are
    causes (`model/causes.py`): report/ words them."""

    verdict: Verdict
    reasons: tuple[Cause, ...]
    hints: tuple[str, ...]
    headline: Cause  # the one reason that matters


@value
class GoOn:
    """The decision goes on, and says why (reasons) or what to mind (warnings)."""

    reasons: tuple[Reason, ...] = ()
    warnings: tuple[DecisionWarning, ...] = ()


@value
class Stale:
    """The slot is someone else's now: the decision ends with only TASK's own endpoint and
    record cleaned (rule 4)."""

    reasons: tuple[Reason, ...]
    warnings: tuple[DecisionWarning, ...]
    owner: str  # whose slot it is now, as the headline names it


@value
class NeedsLanded:
    """Rule 5 is reached and TASK's landed facts were not given."""


# What a rule says: nothing (None: the decision goes on), or one of the above.
Ruling = Refusal | GoOn | Stale | NeedsLanded | None


@value
class Case:
    """What every rule reads: TASK, its record, slot and endpoint, the world observed, and
    (rule 5) TASK's landed facts when they were gathered. The properties below are worked out
    from these on first use (pure, each once per decision)."""

    task: str
    record: Record
    fleet: Fleet
    obs: Observation
    flags: Flags
    slot: str
    endpoint: Endpoint
    facts: SlotFacts
    landed: LandedLike | None = None

    @staticmethod
    def of(
        task: str, fleet: Fleet, obs: Observation, flags: Flags, landed: LandedLike | None = None
    ) -> Case:
        slot = obs.slot_of[task]
        return Case(
            task,
            fleet.records[task],
            fleet,
            obs,
            flags,
            slot,
            obs.endpoints[task],
            obs.slots[slot],
            landed,
        )

    def with_landed(self, landed: LandedLike) -> Case:
        """This case with TASK's landed facts, keeping what was worked out already: none of
        the properties below reads the landed facts, so a second decision (the rule-5 pass of
        `decide_all`) need not work them out again."""
        out = Case(
            self.task,
            self.record,
            self.fleet,
            self.obs,
            self.flags,
            self.slot,
            self.endpoint,
            self.facts,
            landed,
        )
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k in _WORKED_OUT})
        return out

    @cached_property
    def owners(self) -> Sequence[Owner]:
        return owners_of(self.task, self.fleet, self.obs)

    @cached_property
    def discarded(self) -> str | None:
        """The one live owner that --force --discard-live-owner names, when it does."""
        live = live_of(self.owners)
        wanted = self.flags.discard_live_owner
        if self.flags.discard == Discard.LIVE_OWNER and len(live) == 1 and live[0].id == wanted:
            return wanted
        return None

    @cached_property
    def spared(self) -> NeverSignalled:
        return never_signalled(self.obs, self.task, self.discarded)

    @cached_property
    def not_returned(self) -> str | None:
        """Why the plan neither ends the slot's processes nor returns it (None: it does)."""
        if not self.facts.exists:
            return f"slot directory {self.slot} no longer exists: processes and pool steps skipped"
        entry = self.facts.pool.entry
        assert entry is not None  # pool_not_ready refused otherwise
        recorded_lease = self.record.lease_id is not None or self.record.lease_holder is not None
        if not entry.leased and recorded_lease and self.discarded is None:
            return (
                "the pool shows no lease on the slot although the record names one: it was "
                "already returned; processes and pool steps skipped"
            )
        return None

    @property
    def returns_slot(self) -> bool:
        return self.not_returned is None

    @property
    def work_to_check(self) -> bool:
        """Rule 5 applies: a slot that no longer exists has nothing left to lose (a scout's
        or secondmate's work is not in its slot)."""
        return self.record.kind in (RecordKind.SCOUT, RecordKind.SECONDMATE) or self.facts.exists

    @property
    def work(self) -> LandedLike | None:
        """TASK's landed facts, when rule 5 applies (None: it does not)."""
        return self.landed if self.work_to_check else None

    @property
    def force_saves(self) -> bool:
        """Whether a forced plan saves the slot's work before discarding it: a ship's slot,
        and a secondmate's home (its own work, its task records with it), when it exists. A
        scout's slot is not saved: its work is its report. A hint promises a save only then."""
        return self.record.kind in SAVED_KINDS and self.facts.exists

    @property
    def saves_work(self) -> bool:
        """--force discards unlanded work: saved first when `force_saves`."""
        work = self.work
        return work is not None and not work.landed and self.flags.force and self.force_saves


# `Case`'s properties worked out once per case, none of them from the landed facts (what
# `Case.with_landed` carries over).
_WORKED_OUT = frozenset({"owners", "discarded", "spared", "not_returned"})

# The kinds whose slot `--force` saves before discarding it (`Case.force_saves`).
SAVED_KINDS = (RecordKind.SHIP, RecordKind.SECONDMATE)
