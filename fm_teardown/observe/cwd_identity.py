"""A process works inside a slot when its directory does, whatever path it shows.

`/proc/<pid>/cwd` names a directory as the process's own mount namespace reaches it: a process
in a container where the slot is bind-mounted at `/workspace` shows `/workspace/src`, and one
cd'd through a bind mount of the slot in fm's own namespace shows that mount's path. Neither
path lies textually in the slot, yet the directory does. So, where the path cannot tell, the
directory is compared by device and inode with each slot's, walking up through
`/proc/<pid>/cwd/..` (which climbs in the process's own tree, mounts included) to its root.

Kept cheap: only processes of another mount namespace than fm's, and processes of fm's whose
cwd lies under a mount of a slot's filesystem other than the one the slot is reached through,
are walked; everyone else's path tells. A walk stops at the root or after `MAX_DEPTH` levels.
A process of another mount namespace is in a slot only by its directory: its path, even one
that reads like a slot's, names a directory of its own namespace.
"""

from __future__ import annotations

import os

from fm_teardown.adapters.processes import mount_namespace
from fm_teardown.model.paths import ancestors, is_within
from fm_teardown.model.world import Proc, ProcessTable

__all__ = ["MAX_DEPTH", "Directories"]

MAX_DEPTH = 256


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _mounts() -> list[tuple[str, str]]:
    """(device as `major:minor`, mount point) of each mount fm's namespace has."""
    out: list[tuple[str, str]] = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 5:
                    out.append((fields[2], _unescape(fields[4])))
    except OSError:
        pass
    return out


def _working(proc: Proc | None) -> bool:
    """A process still there, as read (a lazy scan reads it after its directory), with a
    directory: not a zombie, not a kernel thread."""
    return proc is not None and bool(proc.cwd) and not proc.zombie


class Directories:
    """Where the processes of one scan work, by directory, worked out once each: which are
    of another mount namespace (one pass over the scan), the directories each walked
    process's cwd lies in (one walk per process, whatever the number of slots asked)."""

    def __init__(self, table: ProcessTable) -> None:
        self._table = table
        self._foreign: frozenset[int] | None = None
        self._mounts: list[tuple[str, str]] | None = None
        self._points: frozenset[str] = frozenset()
        self._alias_lists: dict[tuple[str, str | None], tuple[str, ...]] = {}
        self._chains: dict[int, frozenset[tuple[int, int]]] = {}
        self._by_aliases: dict[tuple[str, ...], list[Proc]] = {}

    @property
    def foreign(self) -> frozenset[int]:
        """The processes of another mount namespace than fm's: their paths tell nothing."""
        if self._foreign is None:
            procs = self._table.procs
            told = self._table.other_namespace
            mine = mount_namespace() if told is None else None
            found: set[int] = set()
            if told is not None:
                found = {pid for pid in told if _working(procs.get(pid))}
            elif mine is not None:
                # One readlink per process of the machine (thousands): inlined.
                readlink = os.readlink
                for pid, _ in self._table.working():
                    try:
                        ns = readlink(f"/proc/{pid}/ns/mnt")
                    except OSError:
                        continue
                    if ns != mine and _working(procs.get(pid)):
                        found.add(pid)
            self._foreign = frozenset(found)
        return self._foreign

    def inside(self, slot: str) -> tuple[Proc, ...]:
        """The processes whose path cannot tell and whose directory is in `slot` (its own,
        or one below it)."""
        try:
            st = os.stat(slot)
        except OSError:
            return ()
        key = (st.st_dev, st.st_ino)
        aliases = self._aliases(slot, st.st_dev)
        return tuple(p for p in self._candidates(aliases) if key in self._chain(p.pid))

    def _candidates(self, aliases: tuple[str, ...]) -> list[Proc]:
        """The processes whose path cannot tell: another mount namespace's, or under one of
        `aliases` (worked out once per set of aliases)."""
        found = self._by_aliases.get(aliases)
        if found is None:
            foreign = self.foreign
            procs = self._table.procs
            found = self._by_aliases[aliases] = [
                p
                for pid, cwd in self._table.working()
                if (pid in foreign or any(is_within(cwd, a) for a in aliases))
                and (p := procs.get(pid)) is not None
                and _working(p)
            ]
        return found

    def _aliases(self, slot: str, dev: int) -> tuple[str, ...]:
        """Mount points of the slot's filesystem other than the one the slot lies under: a
        path below one may be a slot's directory under another name."""
        if self._mounts is None:
            self._mounts = _mounts()
            self._points = frozenset(point for _, point in self._mounts)
        # The mount the slot lies under is the nearest of its ancestors that is a mount
        # point: a few set lookups per slot rather than a path test per mount (an audit of a
        # thousand slots made twenty thousand), and slots under one mount share the answer.
        own = next((a for a in ancestors(slot) if a in self._points), None)
        device = f"{os.major(dev)}:{os.minor(dev)}"
        found = self._alias_lists.get((device, own))
        if found is None:
            found = self._alias_lists[(device, own)] = tuple(
                p for d, p in self._mounts if d == device and p not in (own, "/")
            )
        return found

    def _chain(self, pid: int) -> frozenset[tuple[int, int]]:
        """(device, inode) of `pid`'s cwd and each directory above it, up to its root."""
        chain = self._chains.get(pid)
        if chain is None:
            found: set[tuple[int, int]] = set()
            path = f"/proc/{pid}/cwd"
            last: tuple[int, int] | None = None
            for _ in range(MAX_DEPTH):
                try:
                    st = os.stat(path)
                except OSError:
                    break
                key = (st.st_dev, st.st_ino)
                if key == last:
                    break  # `..` of the root is the root
                found.add(key)
                last = key
                path += "/.."
            chain = self._chains[pid] = frozenset(found)
        return chain
