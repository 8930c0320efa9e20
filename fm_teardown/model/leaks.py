"""What a teardown ends beyond the slot, as values: the task's headless browser stack and the
remote-job workers whose code root is gone (spec §15.5).

firstmate's spawn names each task's browser session `fm-<home tag>-<id>`
(`CHROME_DEVTOOLS_AXI_SESSION`); chrome-devtools-axi keeps one detached bridge per session name
for the whole machine, registered in `<sessions root>/<session>/bridge.pid`. That bridge and
the stack under it are TASK's and go with it. A stack is ended only when two signals agree
(the registry's pid, and that live process's own argv naming the bridge), and, of the
bridge's process tree, only the processes that carry a browser-stack marker in their argv.

`act/leaks.py` acts and returns these; `report/leak_words.py` words them. Pure values and
pure functions of strings: nothing here reads the world.
"""

from __future__ import annotations

from enum import Enum, auto
from typing import ClassVar

from fm_teardown.model.digest import sha256_hex
from fm_teardown.model.plan import StepOutcome
from fm_teardown.model.values import value

__all__ = [
    "BRIDGE_MARKER",
    "STACK_MARKERS",
    "WORKER_SUFFIX",
    "BrowserLeft",
    "BrowserResult",
    "BrowserWhat",
    "Ended",
    "RemoteJobsResult",
    "Worker",
    "WorkersLeft",
    "browser_session",
    "home_tag",
    "is_bridge",
    "is_stack_member",
    "worker_root",
]

# The argv marker of a chrome-devtools-axi bridge (`node …/chrome-devtools-axi-bridge.js`).
BRIDGE_MARKER = "chrome-devtools-axi-bridge"
# Every genuine member of a stack carries one of these in its argv: the bridge, the
# chrome-devtools-mcp server, and the isolated puppeteer profile every Chrome of the stack is
# launched with. A process in the bridge's tree that carries none is a bystander: never ended.
STACK_MARKERS = (
    "chrome-devtools-axi-bridge",
    "chrome-devtools-mcp",
    "puppeteer_dev_chrome_profile-",
)
# A remote-job worker is `<code root>/bin/fm-remote-job-worker.sh [--serve]`.
WORKER_SUFFIX = "/bin/fm-remote-job-worker.sh"


def home_tag(secondmate_marker: str | None, root_realpath: str) -> str:
    """firstmate's per-installation tag: `firstmate` (or `2ndmate-<id>` for a secondmate's
    home, whose marker file holds its id) and the first 8 hex digits of the sha256 of the
    firstmate root's physical path."""
    marker = "".join((secondmate_marker or "").split())
    prefix = f"2ndmate-{marker}" if marker else "firstmate"
    digest = sha256_hex(root_realpath.encode("utf-8", "surrogateescape"))[:8]
    return f"{prefix}-{digest}"


def browser_session(tag: str, task_id: str) -> str:
    """The chrome-devtools-axi session firstmate's spawn gives TASK: `fm-<tag>-<id>`."""
    return f"fm-{tag}-{task_id}"


def is_bridge(argv: str) -> bool:
    return BRIDGE_MARKER in argv


def is_stack_member(argv: str) -> bool:
    return any(m in argv for m in STACK_MARKERS)


def worker_root(command: str, executable: frozenset[str] = frozenset()) -> str | None:
    """The code root a process's command line (its argv joined by spaces) runs a remote-job
    worker from, as firstmate's sweep reads it: an absolute `<root>/bin/fm-remote-job-worker.sh`
    with at most `--serve` after it, optionally after its interpreter (a leading word that is
    an executable file: `executable` holds those the caller found so). None for anything
    else."""
    if command.endswith(f"{WORKER_SUFFIX} --serve"):
        path = command[: -len(" --serve")]
    elif command.endswith(WORKER_SUFFIX):
        path = command
    else:
        return None
    prefix = path[: -len(WORKER_SUFFIX)]
    if not prefix.startswith("/"):
        return None
    leading = prefix.split(" ", 1)[0]
    if leading != prefix and leading in executable:
        prefix = prefix[len(leading) + 1 :]
    return prefix if prefix.startswith("/") else None


# -- the browser stack --------------------------------------------------------------------------


class BrowserWhat(Enum):
    CLOSED = auto()  # the bridge is gone: by the tool's own stop, or its stack ended by signal
    NOT_RUNNING = auto()  # the registry's pid runs no more: nothing to end
    UNREADABLE = auto()  # the registry record cannot be read as one (a link, no pid, ...)
    NOT_BRIDGE = auto()  # the pid runs, but its argv names no bridge: not provably the stack
    RECYCLED = auto()  # the pid started after the record was written: another process now
    SHARED = auto()  # another session's record names the same pid: whose it is is unclear
    OTHER_SESSION = auto()  # the process's own environment names another session
    SURVIVED = auto()  # signalled, and the bridge still runs


@value
class Ended:
    """A process of the stack (or a worker's group) that was signalled, as `name (pid)`."""

    name: str
    pid: int


@value
class BrowserResult:
    what: BrowserWhat
    session: str
    pid: int = 0  # the registry's bridge pid (0: none could be read)
    by_tool: bool = False  # closed by `chrome-devtools-axi stop`
    ended: tuple[Ended, ...] = ()  # what was signalled when the tool did not close it
    skipped: tuple[Ended, ...] = ()  # in the bridge's tree but no stack member: left alone
    other: str = ""  # OTHER_SESSION: the session its environment names; UNREADABLE: why
    age: float = 0.0  # how long the bridge had run, in seconds

    @property
    def outcome(self) -> StepOutcome:
        if self.what == BrowserWhat.CLOSED:
            return StepOutcome.DONE
        if self.what == BrowserWhat.NOT_RUNNING:
            return StepOutcome.ABSENT
        return StepOutcome.SKIPPED

    @property
    def left(self) -> bool:
        """A stack that may still run and was not ended: the run warns about it."""
        return self.outcome == StepOutcome.SKIPPED


@value
class BrowserLeft:
    """A warning: TASK's browser session was left as it is (`result` says why)."""

    result: BrowserResult
    code: ClassVar[str] = "browser-left"  # as a warning (`docs/codes.md`)


# -- remote-job workers -------------------------------------------------------------------------


@value
class Worker:
    pid: int
    root: str  # the pruned code root its command line names
    group: int = 0  # the process group ended whole (its leader a worker), 0: the lone process


@value
class RemoteJobsResult:
    reaped: tuple[Worker, ...] = ()
    survived: tuple[Worker, ...] = ()
    error: str | None = None  # the process table could not be read

    @property
    def outcome(self) -> StepOutcome:
        if self.survived or self.error:
            return StepOutcome.SKIPPED
        return StepOutcome.DONE if self.reaped else StepOutcome.ABSENT


@value
class WorkersLeft:
    """A warning: remote-job workers of a pruned code root still run (or the sweep could not
    look); `result` says which."""

    result: RemoteJobsResult
    code: ClassVar[str] = "remote-jobs-left"  # as a warning (`docs/codes.md`)
