"""Refusals a plan meets after it is decided and before its first destructive step, made
the same way by the dry run (which predicts them) and the real run (which meets them):

- one of fm's own files that a real run writes before it changes anything cannot be written
  where it is (the journal's intent line, the slot lock): `own_file_blocked`;
- a teardown of the same task ended partway (an intent with no result) and was of another
  launch than the one its record names now: `other_launch`.

Pure: the caller finds the facts (what the journal said, what the record names, where fm's
own files would go) and passes them in. Only a plan that would act is refused: a plan that
refuses anyway keeps its own refusal.
"""

from __future__ import annotations

from dataclasses import replace

from fm_teardown.model.causes import OtherLaunch, OwnFile, OwnFileBlocked
from fm_teardown.model.errors import Verdict
from fm_teardown.model.plan import Decision

__all__ = ["acts", "other_launch", "own_file_blocked"]


def acts(d: Decision) -> bool:
    """Would a real run act on this decision (tear down, or clear a stale slot's record)?"""
    return d.verdict in (Verdict.PROCEED, Verdict.STALE) and d.slot is not None


def own_file_blocked(d: Decision, cause: OwnFileBlocked) -> Decision:
    """The plan refuses (exit 5) before anything is destroyed: fm's own file cannot be written
    where it is."""
    if cause.file == OwnFile.SLOT_LOCK:
        hint = "point the state dir (FM_HOME, FM_STATE_OVERRIDE) outside every slot, then re-run"
    else:
        hint = (
            "make the journal a regular file fm can write, outside every slot (FM_HOME, "
            "FM_DATA_OVERRIDE), or run without it: --no-journal"
        )
    return replace(d, verdict=Verdict.UNSAFE, reasons=(cause,), headline=cause, hints=(hint,))


def other_launch(d: Decision, cause: OtherLaunch, *, dry_run: bool) -> Decision:
    """The plan refuses (exit 5): the teardown that ended partway was of another launch, and
    this one is reviewed before anything of it is torn down. The refusal's own journal line
    closes the unfinished teardown, so the next real run decides afresh."""
    task = cause.task
    if dry_run:
        hint = (
            f"a real run refuses once, so that this new launch's plan is reviewed; after that "
            f"refusal, fm teardown {task} --dry-run shows the plan it would carry out"
        )
    else:
        hint = (
            f"review this launch's plan: fm teardown {task} --dry-run; then run fm teardown "
            f"{task} again if it is what you want (this refusal closed the unfinished "
            "teardown in the journal)"
        )
    return replace(d, verdict=Verdict.UNSAFE, reasons=(cause,), headline=cause, hints=(hint,))
