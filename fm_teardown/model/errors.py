"""Exit codes, verdicts and the one error type the CLI turns into an exit code.

Every refusal the tool can make is named here, so that a reader (and a test) can map a verdict
to its exit code in one place (spec §6, §7).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fm_teardown.model.notes import Note

__all__ = [
    "ErrorCode",
    "ExitCode",
    "FmError",
    "Lead",
    "Verdict",
    "invalid",
    "plan_changed_exit",
    "refused",
    "unsafe",
]


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    INVALID = 2
    UNLANDED = 3
    LIVE_OWNER = 4
    UNSAFE = 5
    INTERRUPTED = 130  # SIGINT or SIGTERM while acting: stopped at a step boundary (spec §7a)


class Verdict(StrEnum):
    PROCEED = "proceed"
    STALE = "stale"
    # No record, and the journal's newest line for the task is a teardown that finished:
    # a re-run has nothing left to do (spec §14.4).
    ALREADY = "already-torn-down"
    UNLANDED = "unlanded"
    LIVE_OWNER = "live-owner"
    UNSAFE = "unsafe"
    INVALID = "invalid"
    FAILED = "failed"
    # `--expect-plan`: the first decision gave another plan than the one approved (spec §14.5).
    # Exit 5, or 4 when the new plan itself refuses for a live owner (`plan_changed_exit`).
    PLAN_CHANGED = "plan-changed"

    @property
    def exit_code(self) -> ExitCode:
        return _VERDICT_EXIT[self]


_VERDICT_EXIT: dict[Verdict, ExitCode] = {
    Verdict.PROCEED: ExitCode.OK,
    Verdict.STALE: ExitCode.OK,
    Verdict.ALREADY: ExitCode.OK,
    Verdict.UNLANDED: ExitCode.UNLANDED,
    Verdict.LIVE_OWNER: ExitCode.LIVE_OWNER,
    Verdict.UNSAFE: ExitCode.UNSAFE,
    Verdict.INVALID: ExitCode.INVALID,
    Verdict.FAILED: ExitCode.FAILED,
    Verdict.PLAN_CHANGED: ExitCode.UNSAFE,
}


def plan_changed_exit(new_plan: Verdict) -> ExitCode:
    """A plan-changed refusal's exit code: 4 only when the plan as it is now has a live owner
    (what exit 4 means), else 5 (nothing lifts it: a new dry run approves a new plan)."""
    return ExitCode.LIVE_OWNER if new_plan == Verdict.LIVE_OWNER else ExitCode.UNSAFE


class Lead(StrEnum):
    """How an error's line starts, as a fact rather than as words: `REFUSED: …` for a
    refusal, `error: …` for the no-mistakes gate (the script's own wording), and for anything
    else `fm: …` (people) or the bare message (JSON). `report/messages.py` writes the words."""

    REFUSED = "refused"
    ERROR = "error"
    PLAIN = "plain"


class ErrorCode(StrEnum):
    """The stable code of an error that ends a run before (or instead of) a decision, in
    `--json` beside its words (`docs/codes.md`): kebab-case, never changed once given. An
    error given no code of its own has its verdict's (`FmError.code`)."""

    INVALID_REQUEST = "invalid-request"  # a request fm cannot carry out as given (exit 2)
    UNSAFE = "unsafe"
    FAILED = "failed"
    # Refused while acting, as the decision's cause of the same name says (the pool step: a
    # lease or an interactive get took the slot since deciding).
    LIVE_OWNER = "live-owner"
    NOT_LANDED = "not-landed"
    PLAN_CHANGED = "plan-changed"
    BAD_TASK_ID = "bad-task-id"
    NO_SUCH_TASK = "no-such-task"
    BAD_SETTING = "bad-setting"  # an FM_* variable that is not what it must be
    BAD_AGENT_NAME = "bad-agent-name"  # an FM_AGENT_NAMES entry that is no name
    STATE_DIR_MISSING = "state-dir-missing"
    STATE_DIR_UNREADABLE = "state-dir-unreadable"
    # TASK's own record (`model/records.py`, `RecordProblem`).
    RECORD_UNREADABLE = "record-unreadable"  # a link, not a file, too big, binary, not UTF-8
    RECORD_EMPTY = "record-empty"  # being written, or left half-written
    RECORD_INVALID = "record-invalid"  # a key missing, repeated, malformed or not this task's
    REMOTE_HOST = "remote-host"  # a task on another host: torn down there
    SPAWN_GEN_NOT_A_TIME = "spawn-gen-not-a-time"
    BACKEND_UNSUPPORTED = "backend-unsupported"
    NO_MISTAKES_GATE = "no-mistakes-gate"
    LIFECYCLE_BUSY = "lifecycle-busy"  # firstmate's lifecycle locks are held
    INVENTORY_UNREADABLE = "inventory-unreadable"  # the audit, --landed: tmux cannot be read
    SLOT_LOCK_BUSY = "slot-lock-busy"  # another teardown of the slot holds its lock
    SLOT_LOCK_INSIDE_WORK = "slot-lock-inside-work"  # the slot lock would go inside a slot


# An error's code when it is given none: its verdict's.
_VERDICT_CODE = {
    Verdict.INVALID: ErrorCode.INVALID_REQUEST,
    Verdict.FAILED: ErrorCode.FAILED,
    Verdict.LIVE_OWNER: ErrorCode.LIVE_OWNER,
    Verdict.UNLANDED: ErrorCode.NOT_LANDED,
    Verdict.PLAN_CHANGED: ErrorCode.PLAN_CHANGED,
}


class FmError(Exception):
    """A refusal or failure that ends the run with a one-line message and an exit code."""

    def __init__(
        self,
        verdict: Verdict,
        message: str,
        hints: tuple[str, ...] = (),
        *,
        unchanged: bool = False,
        lead: Lead = Lead.PLAIN,
        code: ErrorCode | None = None,
    ) -> None:
        super().__init__(message)
        self._code = code
        self.verdict = verdict
        self.message = message
        self.hints = hints
        # A refusal made before anything was done: shown with what the run changed after it
        # (`report/messages.py`, `reasons`), never written into `message`.
        self.unchanged = unchanged
        # The message is kept without its lead; `report/messages.py` (`error_line`) adds it.
        self.lead = lead

    @property
    def exit_code(self) -> ExitCode:
        return self.verdict.exit_code

    @property
    def gate(self) -> bool:
        """The no-mistakes gate's refusal: firstmate's drop-in exits 3 for it, as the script
        did (told by its code, never read back from its words)."""
        return self._code == ErrorCode.NO_MISTAKES_GATE

    @property
    def code(self) -> ErrorCode:
        """Its stable code: the one it was given, else its verdict's."""
        return self._code or _VERDICT_CODE.get(self.verdict, ErrorCode.UNSAFE)

    @property
    def note(self) -> Note:
        """Its message with its code, as a reason or a warning carries it."""
        from fm_teardown.model.notes import Note  # which imports this module

        return Note(self.code, self.message)


def invalid(message: str, *hints: str, code: ErrorCode | None = None) -> FmError:
    return FmError(Verdict.INVALID, message, hints, code=code)


def refused(
    message: str,
    *hints: str,
    verdict: Verdict = Verdict.UNSAFE,
    unchanged: bool = False,
    code: ErrorCode | None = None,
) -> FmError:
    """A refusal before deciding (a record, the state dir): shown as `REFUSED: message`."""
    return FmError(verdict, message, hints, unchanged=unchanged, lead=Lead.REFUSED, code=code)


def unsafe(
    message: str, *hints: str, unchanged: bool = False, code: ErrorCode | None = None
) -> FmError:
    return FmError(Verdict.UNSAFE, message, hints, unchanged=unchanged, code=code)
