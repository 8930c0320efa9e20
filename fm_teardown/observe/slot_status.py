"""One `git status` of a slot (or of a repository nested in it, or of a secondmate's home) as
rule 5 reads it: the uncommitted and untracked paths (scaffold files aside), HEAD, the branch,
and the untracked directories that are repositories of their own. Gathering only, for
`observe/landed.py`; every git call goes through `runner`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Sequence

from fm_teardown.adapters import runner
from fm_teardown.model.landing import SlotProblem, SlotProblemKind, SlotStatus
from fm_teardown.model.scaffold import SCAFFOLD_BYTES

__all__ = [
    "MAX_LISTED",
    "MAX_NESTED_LISTED",
    "WORKERS",
    "git_status",
    "parse_status",
    "status_entries",
    "statuses",
    "unreadable",
]

# How many dirty paths and unlanded commits a refusal names.
MAX_LISTED = 10
# Nested repositories taken from one status (the inspection has its own bound).
MAX_NESTED_LISTED = 64
# Slots inspected at once: git is mostly I/O, and a 2-core machine must stay usable.
WORKERS = 4

_HEX_OID = runner.HEX_OID
_git = runner.git


def _display(path: bytes) -> str:
    # Paths are bytes on POSIX; show undecodable ones escaped rather than crash a printer.
    return path.decode("utf-8", "backslashreplace")


def statuses(
    wts: Sequence[str], *, also: Sequence[tuple[str, Sequence[str]]] = ()
) -> tuple[list[SlotStatus | SlotProblem], list[runner.Result]]:
    """Each slot's status, one git call per slot, `WORKERS` at a time, or what keeps it from
    being read (gone, unreadable); and the results of `also`, git calls (repository, args) of
    the caller's that need no status, run first in the same batch (a dry run's project refs:
    read meanwhile rather than after).

    `--untracked-files=all` on the command line beats a `status.showUntrackedFiles=no` in the
    repo's config, and lists every untracked file (not a folded directory), so a scaffold file
    is matched by its exact path and its neighbours still count.
    """
    out: list[SlotStatus | SlotProblem | None] = [unreadable(wt) for wt in wts]
    readable = [i for i, found in enumerate(out) if found is None]
    calls = [*also, *((wts[i], _STATUS_ARGS) for i in readable)]
    ran = runner.git_many(calls, width=WORKERS)
    for i, r in zip(readable, ran[len(also) :], strict=True):
        out[i] = (
            parse_status(r.out)
            if r.ok
            else SlotProblem(SlotProblemKind.STATUS_FAILED, wts[i], r.why())
        )
    return [found for found in out if found is not None], ran[: len(also)]


def unreadable(wt: str) -> SlotProblem | None:
    """What keeps a slot from being read before git runs: gone, not a directory, unreadable."""
    try:
        st = os.stat(wt)
    except (FileNotFoundError, NotADirectoryError):
        return SlotProblem(SlotProblemKind.GONE, wt)
    except OSError as exc:
        # Not os.path.exists: it says False for "permission denied", which is not "gone".
        return SlotProblem(SlotProblemKind.UNREADABLE, wt, exc.strerror or str(exc))
    if not stat.S_ISDIR(st.st_mode):
        return SlotProblem(SlotProblemKind.NOT_A_DIRECTORY, wt)
    return None


# `git status` as rule 5 reads it: every untracked file, submodules too, the branch header,
# NUL-separated.
_STATUS_ARGS = (
    "-c",
    "status.showUntrackedFiles=all",
    "status",
    "--porcelain=v2",
    "--branch",
    "--no-ahead-behind",
    "-z",
    "--untracked-files=all",
    "--ignore-submodules=none",
)


def git_status(wt: str) -> runner.Result:
    """`git status` of a slot (or a secondmate's home) as rule 5 reads it: every untracked
    file, submodules too, the branch header, NUL-separated."""
    return _git(wt, *_STATUS_ARGS)


def status_entries(
    out: bytes, *, is_work: Callable[[bytes], bool]
) -> Iterator[tuple[bytes, bytes, bool]]:
    """`git status --porcelain=v2 --branch -z`, entry by entry: ("#", the header line, False)
    for a header, else ("path", the changed path, untracked?) for each changed path that
    `is_work` counts. A rename is also a change to its source, so moving work onto a name
    that is not work (a scaffold file, a marker) still counts, under the source's name."""
    entries = out.split(b"\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if entry.startswith(b"#"):
            yield b"#", entry, False
            continue
        if len(entry) < 3:
            continue
        kind = entry[:1]
        if kind == b"?":
            path = entry[2:]
        elif kind == b"1":  # 1 XY sub mH mI mW hH hI path
            path = entry.split(b" ", 8)[-1]
        elif kind == b"u":  # u XY sub m1 m2 m3 mW h1 h2 h3 path
            path = entry.split(b" ", 10)[-1]
        elif kind == b"2":  # 2 XY sub mH mI mW hH hI Xscore path, then the source path
            path = entry.split(b" ", 9)[-1]
            source = entries[i] if i < len(entries) else b""
            i += 1
            if not is_work(path) and source:
                path = source
        else:
            continue  # `!` (ignored) is not listed without --ignored
        if is_work(path):
            yield b"path", path, kind == b"?"


def parse_status(out: bytes) -> SlotStatus:
    """`git status --porcelain=v2 --branch -z`: the changed paths and HEAD."""
    head: str | None = None
    branch: str | None = None
    paths: list[str] = []
    untracked: list[str] = []
    nested: list[str] = []
    total = untracked_total = 0
    for what, entry, new in status_entries(out, is_work=lambda p: p not in SCAFFOLD_BYTES):
        if what == b"#":
            if entry.startswith(b"# branch.oid "):
                oid = entry[len(b"# branch.oid ") :].decode("ascii", "replace")
                head = oid if _HEX_OID.fullmatch(oid) else None  # "(initial)": unborn
            elif entry.startswith(b"# branch.head "):
                name = entry[len(b"# branch.head ") :].decode("utf-8", "surrogateescape")
                branch = None if name == "(detached)" else name
            continue
        total += 1
        untracked_total += new
        if new and entry.endswith(b"/") and len(nested) < MAX_NESTED_LISTED:
            # With every untracked file listed, a directory is shown only when it holds a
            # repository of its own, which git does not look into.
            nested.append(_display(entry))
        if len(paths) < MAX_LISTED:
            paths.append(_display(entry))
            if new:
                untracked.append(_display(entry))
    return SlotStatus(
        tuple(paths), total, tuple(untracked), head, branch, untracked_total, tuple(nested)
    )
