"""Exit codes, verdicts and the one error type the CLI turns into an exit code.

Every refusal the tool can make is named here, so that a reader (and a test) can map a verdict
to its exit code in one place (spec §6, §7).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = ["ExitCode", "FmError", "Verdict", "invalid", "unsafe"]


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
    UNLANDED = "unlanded"
    LIVE_OWNER = "live-owner"
    UNSAFE = "unsafe"
    INVALID = "invalid"
    FAILED = "failed"

    @property
    def exit_code(self) -> ExitCode:
        return _VERDICT_EXIT[self]


_VERDICT_EXIT: dict[Verdict, ExitCode] = {
    Verdict.PROCEED: ExitCode.OK,
    Verdict.STALE: ExitCode.OK,
    Verdict.UNLANDED: ExitCode.UNLANDED,
    Verdict.LIVE_OWNER: ExitCode.LIVE_OWNER,
    Verdict.UNSAFE: ExitCode.UNSAFE,
    Verdict.INVALID: ExitCode.INVALID,
    Verdict.FAILED: ExitCode.FAILED,
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
        gate: bool = False,
    ) -> None:
        super().__init__(message)
        self.verdict = verdict
        self.message = message
        self.hints = hints
        # The no-mistakes gate's refusal: firstmate's drop-in exits 3 for it, as the script
        # did (a fact carried with the error, never read back from its words).
        self.gate = gate
        # A refusal made before anything was done: shown with what the run changed after it
        # (`messages.reasons`), never written into `message`.
        self.unchanged = unchanged

    @property
    def exit_code(self) -> ExitCode:
        return self.verdict.exit_code


def invalid(message: str, *hints: str) -> FmError:
    return FmError(Verdict.INVALID, message, hints)


def unsafe(message: str, *hints: str, unchanged: bool = False) -> FmError:
    return FmError(Verdict.UNSAFE, message, hints, unchanged=unchanged)
