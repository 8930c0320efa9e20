"""What a stage below report/ says in its own words, with the stable code of what it says.

Most of what fm says is a value report/ words (a cause, a step's result, a warning of a run).
Some words are still made where the fact is found: the decide stage's warnings (a stray
record, a live owner discarded as asked, a stale slot left alone) and an error's message
(`FmError`). A `Note` carries those words as they are, with their code, so that every
warning and every refusal in `--json` has a code a program can rely on (`docs/codes.md`).
"""

from __future__ import annotations

from enum import StrEnum

from fm_teardown.model.errors import ErrorCode
from fm_teardown.model.values import value

__all__ = ["Note", "NoteCode"]


class NoteCode(StrEnum):
    """The codes of the words said where the fact was found (the decide stage's own warnings,
    the pipeline's reasons for a task already torn down): kebab-case, never changed."""

    STRAY_RECORD = "stray-record"  # a `.meta` that is no record names TASK's slot
    DISCARD_UNUSED = "discard-live-owner-unused"  # --discard-live-owner, no live owner
    DISCARDING_LIVE_OWNER = "discarding-live-owner"  # --discard-live-owner, as asked
    RECORDS_NAME_RETURNED_SLOT = "records-name-returned-slot"  # non-live claimants stay
    STALE_SLOT_LEFT = "stale-slot-left"  # the tree and the pool slot are someone else's
    HOME_RECORDS_GO = "home-records-go"  # --force: a secondmate's records go with its home
    HOME_NOT_REMOVED = "secondmate-home-not-removed"  # a home that is not its slot
    DISCARDED_RECORD_KEPT = "discarded-owner-record-kept"
    UNFINISHED_TEARDOWN = "unfinished-teardown"  # the journal: an earlier run ended partway
    # A task with no record the journal says was torn down (its teardown's result journalled,
    # or, unfinished, its record step the last one it may have done).
    ALREADY_TORN_DOWN = "already-torn-down"
    ALREADY_TORN_DOWN_UNFINISHED = "already-torn-down-unfinished"
    INTERRUPTED_DECIDING = "interrupted-deciding"


@value
class Note:
    """Words said where the fact was found, with their code: the decide stage's (`NoteCode`)
    or an error's (`ErrorCode`, `FmError.code`). report/ shows `text` as it is."""

    code: NoteCode | ErrorCode
    text: str
