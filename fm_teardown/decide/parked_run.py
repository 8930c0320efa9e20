"""Whose a no-mistakes run is, whether it is parked, and whether its abort is confirmed
(spec §15.5b). Pure: the parked-run step (`act/parked_run_step.py`) gathers the facts (the
CLI's answers, the slot's branch and code identity) and asks these.

The rule is firstmate's (`bin/fm-teardown.sh`, `task_status_is_own_parked_run`, and
`bin/fm-nm-run-lib.sh`'s code identity rule, which firstmate's crew-state report shares): the
run `axi status` names is TASK's only when its branch is the branch the slot has checked out
AND its head is the slot's code (HEAD itself, or a descendant of HEAD: the pipeline's own fix
commits). Anything else (no run, no id, no branch, another branch, a head behind HEAD or on
another history, a head that names no commit) is not TASK's and is never touched. TASK's run
is parked when it has no outcome yet and its status is one of `PARKED_STATUSES` or it names an
agent it awaits or a gate; a run with an autonomous step under way (running, fixing, ci) is
left alone: no-mistakes drives those against its own clone, not the worker's slot.
"""

from __future__ import annotations

import re

from fm_teardown.model.parked_run import (
    PARKED_STATUSES,
    TERMINAL_OUTCOMES,
    Asked,
    Attribution,
    CodeIdentity,
    Confirmation,
    RunStatus,
)

__all__ = ["attribute", "commit_id", "confirmation", "names_branch", "not_found_error"]

# A run's head as no-mistakes gives it: a commit id, short or full (SHA-1 or SHA-256).
_COMMIT_ID = re.compile(r"[0-9a-fA-F]{4,64}")


def commit_id(head: str) -> bool:
    """Whether a run's head reads as a commit id. Only such a head is looked up in the slot:
    a name (a branch, `HEAD`) is no code identity, and is never handed to git."""
    return _COMMIT_ID.fullmatch(head) is not None


def names_branch(status: RunStatus | None, branch: str | None) -> bool:
    """Whether `axi status` names a run of the slot's branch: only then is the slot's code
    identity worth reading (`attribute` needs it)."""
    return status is not None and bool(status.id) and bool(branch) and status.branch == branch


def attribute(
    status: RunStatus | None, branch: str | None, code: CodeIdentity | None
) -> Attribution:
    """Whose the run `axi status` named is, and whether it is parked. `branch`: the branch the
    slot has checked out (None: detached, or unreadable); `code`: the slot's code identity
    against the run's head (None: not read)."""
    if status is None or not status.id:
        return Attribution.NO_RUN
    if not branch:
        return Attribution.NO_BRANCH
    if status.branch != branch:
        return Attribution.OTHER_BRANCH
    if code is None or not code.matches:
        return Attribution.OTHER_CODE
    if status.outcome:
        return Attribution.CONCLUDED
    if status.status in PARKED_STATUSES or status.awaiting_agent or status.gate:
        return Attribution.PARKED
    return Attribution.UNDER_WAY


def not_found_error(run_id: str) -> str:
    """The CLI's exact words for a run it no longer has: `error: "run \\"<id>\\" not found"`."""
    return f'error: "run \\"{run_id}\\" not found"'


def confirmation(after: Asked, run_id: str) -> Confirmation | None:
    """How `axi status --run <id>` read after the abort confirms it, or None when it does not:
    an answer naming that very run with a terminal outcome, or (a non-zero exit) the CLI's
    exact not-found error for it. Anything else (another run, no outcome, an empty answer, a
    timeout, any other error) does not: the run may still be parked."""
    if after.answered:
        s = after.status
        if s is not None and s.id == run_id and s.outcome in TERMINAL_OUTCOMES:
            return Confirmation.TERMINAL
        return None
    if after.said == not_found_error(run_id):
        return Confirmation.NOT_FOUND
    return None
