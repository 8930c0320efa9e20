"""The process table of a look that reads each process only when asked (`LazyProcs`).

Deciding one task needs every process's directory (who works in its slot: the census), but
the rest of a process (its parent, name, start time, terminal) only for the few that work
there, their ancestors up to a pane, and the process trees of a few endpoints. Reading
`/proc/<pid>/stat` for every process of a machine (thousands) cost more than the rest of a
one-task dry run's look together. So the look lists every pid with its directory, and a
process's `Proc` is read the first time it is asked for (`LazyProcs`); an endpoint's tree
is walked through the kernel's list of each process's children (`LazyChildren`) instead of
every process's parent. The audit, which asks for every endpoint, reads every process up
front (the scan's eager form): this module is for the look that asks about a few.

A process read later than it was listed may be gone: it is then not in the table (what
the eager scan would have said had it started a moment later), never a process of another
start time under the same pid (a pid recycled since is read as the process it is now).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from fm_teardown.model.world import ByPid

if TYPE_CHECKING:
    from fm_teardown.model.world import Proc

__all__ = ["LazyChildren", "LazyProcs"]

_GONE = None


class LazyProcs(ByPid["Proc"]):
    """pid -> `Proc`, each read on first use by `read` (None: gone by then).

    Its keys are the pids listed (`__iter__`, `len`), but a key is `in` it, and `[pid]`
    answers, only when the process could be read: iterate with `values` or `items`, which
    skip the ones gone. `working` gives each listed pid's directory as listed, without
    reading the rest: the census's first pass."""

    def __init__(self, cwds: Mapping[int, str | None], read: Callable[[int], Proc | None]):
        self._cwds = cwds
        self._read = read
        self._seen: dict[int, Proc | None] = {}

    def listed(self, pid: int) -> bool:
        """Was `pid` in the listing (whether or not it is still there)?"""
        return pid in self._cwds

    def working(self) -> list[tuple[int, str]]:
        """(pid, directory) of every listed process whose directory could be read."""
        return [(pid, cwd) for pid, cwd in self._cwds.items() if cwd]

    def _look(self, pid: int) -> Proc | None:
        seen = self._seen
        if pid in seen:
            return seen[pid]
        proc = seen[pid] = self._read(pid) if pid in self._cwds else _GONE
        return proc

    def __iter__(self) -> Iterator[int]:
        return iter(self._cwds)

    def __len__(self) -> int:
        return len(self._cwds)

    def values(self) -> Iterator[Proc]:  # type: ignore[override]
        """Every process listed that is still there (each read: the whole table's cost)."""
        return (p for pid in self._cwds if (p := self._look(pid)) is not None)

    def items(self) -> Iterator[tuple[int, Proc]]:  # type: ignore[override]
        return ((p.pid, p) for p in self.values())


class LazyChildren(ByPid[tuple[int, ...]]):
    """pid -> its children's pids, read on first use by `read` (the kernel's own list of
    each of its threads' children: a child a thread started is that thread's), kept to the
    processes of `procs` (a process started after the listing is not in the table)."""

    def __init__(self, procs: LazyProcs, read: Callable[[int], tuple[int, ...] | None]):
        self._procs = procs
        self._read = read
        self._seen: dict[int, tuple[int, ...]] = {}

    def _look(self, pid: int) -> tuple[int, ...] | None:
        """Its children (None: it has none, as a parent absent from the whole table's)."""
        found = self._seen.get(pid)
        if found is None:
            listed = self._procs.listed
            read = self._read(pid) if listed(pid) else None
            found = self._seen[pid] = tuple(c for c in read or () if listed(c))
        return found or None

    def __iter__(self) -> Iterator[int]:
        # Every parent: each process read (the whole table's cost; nothing in a look asks).
        parents = {p.ppid for p in self._procs.values()}
        return (pid for pid in sorted(parents) if self._look(pid))

    def __len__(self) -> int:
        return sum(1 for _ in self)
