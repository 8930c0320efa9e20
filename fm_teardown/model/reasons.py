"""Why a task is finished or not, and why a batch's task was not selected at its turn: as
values, an enum of why plus the facts its words need. The words are `report/messages.py`'s.

Each why's value is its stable code in `--json` (`docs/codes.md`): kebab-case, never changed."""

from __future__ import annotations

from enum import StrEnum

from fm_teardown.model.errors import Verdict
from fm_teardown.model.landing import Proof, Reason
from fm_teardown.model.not_landed import NotLandedWhy
from fm_teardown.model.values import value
from fm_teardown.model.world import EndpointState

__all__ = ["Finished", "FinishedWhy", "NotSelectedReason", "NotSelectedWhy"]


class FinishedWhy(StrEnum):
    """The one reason a task is finished, or the first condition it fails."""

    REFUSED = "refused"  # its verdict is a refusal (or its record is refused before deciding)
    OWN_ENDPOINT_LIVE = "own-endpoint-live"
    CANNOT_TELL = "cannot-tell"  # whether someone still works in its slot
    OTHERS_WORKING = "others-working"
    TOO_YOUNG = "too-young"  # launched less than --min-age ago
    STALE = "stale"
    SLOT_GONE = "slot-gone"
    NOTHING_OF_ITS_OWN = "nothing-of-its-own"
    MERGED = "merged"
    PUSHED = "pushed"
    NOT_MERGED = "not-merged"

    @property
    def code(self) -> str:
        return self.value


@value
class Finished:
    finished: bool
    why: FinishedWhy
    opt_in: str | None = None  # the flag that would include it; None: no flag does
    # The facts the words need, each set only where its reason says it.
    verdict: Verdict | None = None
    headline: Reason = ""
    endpoint: EndpointState | None = None
    endpoint_detail: str = ""
    working: tuple[str, ...] = ()  # who else still works in the slot, with where it runs
    doubt: str = ""
    age: float = 0.0  # seconds since launch
    launched_from: str = ""  # what the launch time was read from
    min_age: float = 0.0
    summary: NotLandedWhy | None = None  # why the work is not merged
    proof: Proof | None = None  # what proves the work merged (MERGED)

    @property
    def code(self) -> str:
        return self.why.code


class NotSelectedWhy(StrEnum):
    RELAUNCHED = "relaunched"
    SLOT_RETURNED = "slot-returned"  # returned earlier in the same batch
    NO_LONGER_FINISHED = "no-longer-finished"

    @property
    def code(self) -> str:
        return self.value


@value
class NotSelectedReason:
    """A batch's task that, at its turn, is no longer what was selected."""

    why: NotSelectedWhy
    task: str
    changed: tuple[str, ...] = ()  # the identity fields that changed (relaunched)
    slot: str | None = None  # the slot returned earlier, and by which task
    returned_by: str = ""
    finished: Finished | None = None  # why it is no longer finished

    @property
    def code(self) -> str:
        return self.why.code
