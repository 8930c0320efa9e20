"""The decide stage's own warnings, each in its words with its stable code (`model/notes.py`):
a stray record, a live owner discarded as asked (or a flag that discards no one), records and
a home the run leaves behind, a stale slot left alone. Pure; `rules.py` says when each is
given."""

from __future__ import annotations

from collections.abc import Sequence

from fm_teardown.model.notes import Note, NoteCode

__all__ = [
    "discard_unused",
    "discarded_record_kept",
    "discarding",
    "home_not_removed",
    "home_records_go",
    "records_name_returned_slot",
    "stale_slot_left",
    "stray_record",
]


def stray_record(name: str, why: str) -> Note:
    return Note(NoteCode.STRAY_RECORD, f"{name} in the state dir: {why}; not counted as an owner")


def discard_unused(wanted: str) -> Note:
    return Note(
        NoteCode.DISCARD_UNUSED,
        f"--discard-live-owner={wanted}: the slot has no live owner; the flag has no effect",
    )


def discarding(wanted: str | None) -> Note:
    return Note(
        NoteCode.DISCARDING_LIVE_OWNER,
        f"discarding live owner {wanted} as asked (--force --discard-live-owner): its "
        "processes in the slot will be ended and the slot returned",
    )


def records_name_returned_slot(names: str) -> Note:
    return Note(
        NoteCode.RECORDS_NAME_RETURNED_SLOT, f"{names}'s record(s) will name a returned slot"
    )


def stale_slot_left(slot: str, task: str, who: str, why: str) -> Note:
    return Note(
        NoteCode.STALE_SLOT_LEFT,
        f"slot {slot} is stale for {task}: it belongs to {who} ({why}); "
        "the tree, its processes and the pool slot are left alone",
    )


def home_records_go(task: str, kids: Sequence[str], saved: str) -> Note:
    return Note(
        NoteCode.HOME_RECORDS_GO,
        f"--force: the records in {task}'s home ({', '.join(kids)}) go with the "
        f"home{saved}; their slots are left as they are (`fm teardown --dry-run` lists "
        "orphans)",
    )


def home_not_removed(task: str, home: str | None) -> Note:
    return Note(
        NoteCode.HOME_NOT_REMOVED,
        f"{task} is a secondmate whose home {home} is not its slot: fm does not "
        "remove a secondmate home (firstmate's script did); remove it by hand once "
        "nothing uses it",
    )


def discarded_record_kept(task: str) -> Note:
    return Note(
        NoteCode.DISCARDED_RECORD_KEPT,
        f"{task}'s record is kept and its window is not killed by name; "
        "it now names a returned slot",
    )
