"""The pool adapter: lease facts from `<pool>/treehouse-state.json`, and the slot return.

Deciding only ever READS the pool's state file (never `treehouse status`, which rewrites it).
A slot `<pool>/<N>/<repo>` has its state file two levels up.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable

from fm_teardown.adapters import runner
from fm_teardown.model.paths import canonical
from fm_teardown.model.values import value
from fm_teardown.model.world import PoolEntry, PoolView

__all__ = [
    "MAX_STATE_BYTES",
    "STATE_FILE",
    "PoolReader",
    "ReturnResult",
    "changes_in",
    "fresh_view",
    "read_state",
    "reusable_as_is",
    "run_return",
]

STATE_FILE = "treehouse-state.json"
MAX_STATE_BYTES = 16 * 1024 * 1024


def _state_file_candidates(recorded: str, slot: str) -> list[str]:
    """Where the pool's state file for this slot may be: beside the canonical slot and beside
    the recorded spelling (a symlinked alias may live in another tree)."""
    out = []
    for p in (slot, os.path.abspath(recorded)):
        candidate = os.path.join(os.path.dirname(os.path.dirname(p)), STATE_FILE)
        if candidate not in out:
            out.append(candidate)
    return out


def read_state(
    path: str, canon: Callable[[str], str] = canonical
) -> tuple[list[PoolEntry] | None, str | None]:
    """The entries of one state file; (None, None) if it does not exist; (None, why) if bad."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_STATE_BYTES + 1)
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror}"
    if len(data) > MAX_STATE_BYTES:
        return None, f"{path} is implausibly large"
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None, f"{path} is not valid JSON (corrupt or truncated)"
    if not isinstance(doc, dict) or not isinstance(doc.get("worktrees", []), (list, type(None))):
        return None, f"{path} does not have the pool's schema"
    entries = []
    for item in doc.get("worktrees") or []:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            return None, f"{path} has an entry without a path"
        stored = item["path"]
        try:
            resolved = canon(stored)
        except ValueError:
            return None, f"{path} has a relative slot path {stored!r}"
        entries.append(
            PoolEntry(
                name=str(item.get("name", "")),
                path=stored,
                canonical=resolved,
                leased=bool(item.get("leased", False)),
                lease_id=str(item.get("lease_id") or ""),
                lease_holder=str(item.get("lease_holder") or ""),
                destroying=bool(item.get("destroying", False)),
                owner_pid=_int(item.get("owner_pid")),
                owner_started_at=_int(item.get("owner_started_at")),
            )
        )
    return entries, None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class PoolReader:
    """Reads each state file at most once per run (many slots share one pool)."""

    def __init__(self, canon: Callable[[str], str] = canonical) -> None:
        self._cache: dict[str, tuple[list[PoolEntry] | None, str | None]] = {}
        # Each state file's entries by canonical slot: a pool of k slots is looked up k
        # times, so matching a slot must not scan all k entries each time.
        self._by_slot: dict[str, dict[str, list[PoolEntry]]] = {}
        self._canon = canon

    def _read(self, path: str) -> tuple[list[PoolEntry] | None, str | None]:
        if path not in self._cache:
            self._cache[path] = read_state(path, self._canon)
            index: dict[str, list[PoolEntry]] = {}
            for e in self._cache[path][0] or ():
                index.setdefault(e.canonical, []).append(e)
            self._by_slot[path] = index
        return self._cache[path]

    def entries(self) -> tuple[PoolEntry, ...]:
        """Every entry of every state file read so far."""
        return tuple(e for entries, _ in self._cache.values() for e in entries or ())

    def view(self, recorded: str, slot: str) -> PoolView:
        first_file: str | None = None
        for path in _state_file_candidates(recorded, slot):
            entries, error = self._read(path)
            if error:
                return PoolView(path, None, error)
            if entries is None:
                continue
            first_file = first_file or path
            matches = self._by_slot[path].get(slot, [])
            if len(matches) > 1:
                return PoolView(path, None, f"{path} lists the slot {slot} more than once")
            if matches:
                return PoolView(path, matches[0])
        return PoolView(first_file, None)


# The message git (and treehouse, which passes git's text on) prints for a held index lock.
_LOCK_ERROR = re.compile(r"""Unable to create ['"](?P<path>.*?index\.lock)['"]: File exists""")


@value
class ReturnResult:
    returncode: int | None  # None: it did not finish in time (or could not be started)
    output: str

    @property
    def aborted(self) -> bool:
        # treehouse exits 0 after "Aborted." when it would have prompted: not a return.
        return "Aborted." in self.output

    @property
    def git_lock_held(self) -> bool:
        """The return failed on a held git index lock (git's words, passed on by treehouse)."""
        return self.returncode != 0 and _LOCK_ERROR.search(self.output) is not None

    @property
    def not_leased(self) -> bool:
        # treehouse refuses a conditional return of a slot no one leases: someone (an earlier
        # run of this task, or the pool itself) already returned it.
        return "is not leased" in self.output

    @property
    def last_line(self) -> str:
        """treehouse's last line, what a failed return shows the operator."""
        return self.output.splitlines()[-1] if self.output else ""


def run_return(treehouse_bin: str, argv: list[str], cwd: str, timeout: float) -> ReturnResult:
    """`treehouse <argv>` through the one subprocess door: stdin closed, its own session (a
    Ctrl-C at the terminal must not kill the pool halfway through a return), a timeout that
    kills its whole process group, no update check, cwd outside the slot."""
    r = runner.run(
        [treehouse_bin, *argv],
        timeout=timeout,
        cwd=cwd,
        env={"TREEHOUSE_NO_UPDATE_CHECK": "1"},
    )
    if r.timed_out:
        return ReturnResult(None, f"treehouse did not finish within {timeout:g}s")
    if r.rc is None:
        return ReturnResult(None, f"treehouse could not be run: {r.err}")
    return ReturnResult(r.rc, (r.out.decode("utf-8", "replace") + r.err).strip())


def fresh_view(recorded: str, slot: str) -> PoolView:
    """Read the state file again (no cache): for verifying a return."""
    return PoolReader().view(recorded, slot)


# How many of a tree's changed paths a declined return names.
_CHANGES_SHOWN = 5


def changes_in(slot: str) -> tuple[str, ...] | None:
    """The first changed paths of the slot's tree (`git status --porcelain
    --untracked-files=all`, as the pool's dirty prompt reads it): () when it holds none or is
    gone (a return may remove it), None when its status cannot be read. What proves an
    unforced return: a tree still holding changes after it was not returned."""
    if not os.path.isdir(slot):
        return ()
    status = runner.git(slot, "status", "--porcelain", "--untracked-files=all")
    if not status.ok:
        return None
    paths = [line[3:] for line in status.out.decode("utf-8", "replace").splitlines() if line[3:]]
    return tuple(paths[:_CHANGES_SHOWN]) if paths else ()


def _reset_targets(slot: str) -> list[str] | None:
    """The refs the pool may reset the slot to: `refs/heads/<b>` and `origin/<b>` (those that
    exist) of its default branch `<b>` (origin/HEAD's target, else the main checkout's branch,
    else init.defaultBranch), or None when the default branch cannot be told."""
    branch = None
    head = runner.git(slot, "symbolic-ref", "-q", "refs/remotes/origin/HEAD")
    prefix = "refs/remotes/origin/"
    if head.ok and head.text.startswith(prefix) and len(head.text) > len(prefix):
        branch = head.text[len(prefix) :]
    else:
        common = runner.git(slot, "rev-parse", "--path-format=absolute", "--git-common-dir")
        if common.ok and os.path.isabs(common.text):
            main = runner.git(os.path.dirname(common.text), "symbolic-ref", "-q", "--short", "HEAD")
            if main.ok and main.text:
                branch = main.text
        if branch is None:
            init = runner.git(slot, "config", "init.defaultBranch")
            branch = init.text if init.ok and init.text else None
    if not branch:
        return None
    refs = []
    for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"):
        if runner.git(slot, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").ok:
            refs.append(ref)
    return refs or None


def reusable_as_is(slot: str) -> str | None:
    """Would the pool's next `get` hand this slot out by itself (clean, HEAD merged into its
    reset target)? None if so, else why not. Any doubt answers "no": then fm returns it."""
    status = runner.git(slot, "status", "--porcelain", "--untracked-files=all")
    if not status.ok:
        return f"its status cannot be read: {status.why()}"
    if status.out.strip():
        return "it is dirty"
    targets = _reset_targets(slot)
    if targets is None:
        return "its default branch cannot be told"
    ref = _reset_target(slot, targets)
    if not runner.git(slot, "merge-base", "--is-ancestor", "HEAD", ref).ok:
        return f"its HEAD is not merged into {ref}"
    return None


def _reset_target(slot: str, targets: list[str]) -> str:
    """The one the pool resets to (`leases.reset_target`): whichever is ahead of the other."""
    from fm_teardown.model.leases import ResetRef, reset_target

    local = next((t for t in targets if t.startswith("refs/heads/")), None)
    origin = next((t for t in targets if t.startswith("refs/remotes/")), None)

    def behind(a: str | None, b: str | None) -> bool:
        if a is None or b is None:
            return False
        return runner.git(slot, "merge-base", "--is-ancestor", a, b).ok

    which = reset_target(bool(local), bool(origin), behind(local, origin), behind(origin, local))
    picked = local if which is ResetRef.LOCAL else origin
    assert picked is not None  # _reset_targets lists at least one
    return picked
