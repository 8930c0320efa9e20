"""The process adapter: one scan of the process table, and signalling by identity.

A process is identified by pid AND start time: a pid seen during observation is only ever
signalled if the process now holding that pid started at the same moment.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import field

from fm_teardown.adapters import interrupts
from fm_teardown.model.values import value
from fm_teardown.model.world import Cmdline, Proc, ProcessTable, ProcStat, parse_cmdline

__all__ = [
    "REAP_WAIT",
    "Signalled",
    "children",
    "foreground_group",
    "group_gone",
    "identity",
    "leads_group",
    "mount_namespace",
    "read_argv0",
    "read_cmdline",
    "same_process",
    "scan",
    "send",
    "stat_fields",
    "stat_name",
    "terminate",
    "tty_name",
    "wait_reaped",
]


def scan(*, without_children: bool = False, lazy: bool = False) -> ProcessTable:
    """pid, ppid, name, command line (read on first use), cwd, start time, terminal and its
    foreground process group of every visible process, in one pass.

    `lazy`: every pid and its cwd only, the rest of a process read the first time it is asked
    for, and a process's children from the kernel's list of them (`model.lazy_procs`): for a
    look that asks about the processes of a few slots and endpoints. Where the kernel keeps
    no such list, the whole table is read as without it.

    On Linux /proc is read directly (three small reads per process, about four times faster
    than psutil's per-process objects, which matters for a fleet of a thousand panes); start
    times use psutil's formula, so `same_process` (psutil) agrees with them. Elsewhere psutil.

    `without_children`: fm's own tmux clients are left out (its children named tmux), for a
    scan taken while one lists the panes (`tmux.list_panes_started`): it works in fm's
    directory, which may be a slot, and is no one's work.
    """
    if os.path.isdir("/proc/self") and _clock():
        try:
            if lazy and _children_listed():
                return _scan_lazy(os.getpid() if without_children else None)
            return _scan_proc(os.getpid() if without_children else None)
        except OSError as exc:
            return ProcessTable({}, error=f"the process table could not be read: {exc}")
    return _scan_psutil(os.getpid() if without_children else None)


_BOOT: list[float] = []


def _clock() -> tuple[float, int] | None:
    if not _BOOT:
        try:
            with open("/proc/stat", "rb") as f:
                for line in f:
                    if line.startswith(b"btime"):
                        _BOOT.append(float(line.split()[1]))
                        break
        except OSError:
            return None
    return (_BOOT[0], os.sysconf("SC_CLK_TCK")) if _BOOT else None


def _read(path: str) -> bytes | None:
    # os.open/os.read: a third of the cost of open() per file, on thousands of small files.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


# How much of a command line is read: argv[0] and, for an interpreter, the script or package
# it runs come first. A longer one reads as cut (`world.parse_cmdline`): an interpreter whose
# script is not within it is doubt, never "no agent".
CMDLINE_BOUND = 4096


def read_cmdline(pid: int) -> str:
    """`/proc/<pid>/cmdline` as text, up to `CMDLINE_BOUND` bytes, each argument ended by a
    NUL ("" when it cannot be read). One read gives argv[0] and what follows it; a read that
    fills the bound loses its last NUL, so it reads as cut."""
    try:
        fd = os.open(f"/proc/{pid}/cmdline", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        raw = os.read(fd, CMDLINE_BOUND)
    except OSError:
        return ""
    finally:
        os.close(fd)
    if len(raw) >= CMDLINE_BOUND:
        raw = raw.rstrip(b"\0")
    return raw.decode("utf-8", "replace")


def read_argv0(pid: int) -> str:
    """argv[0] of `pid` from /proc ("" when it cannot be read)."""
    return read_cmdline(pid).split("\0", 1)[0]


def tty_name(tty_nr: int) -> str | None:
    """The device of a controlling terminal from /proc's `tty_nr` (major and minor packed
    as the kernel does): pseudo-terminals are majors 136-143, virtual consoles major 4."""
    if tty_nr <= 0:
        return None
    major = (tty_nr >> 8) & 0xFFF
    minor = (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)
    if 136 <= major <= 143:
        return f"/dev/pts/{(major - 136) * 256 + minor}"
    if major == 4 and minor < 64:
        return f"/dev/tty{minor}"
    return f"tty {major}:{minor}"


# The `flags` of /proc/<pid>/stat that marks a kernel thread (include/linux/sched.h).
_PF_KTHREAD = 0x00200000


def _scan_proc(parent: int | None) -> ProcessTable:
    # The loop runs once per process of the machine (thousands), three times per real run:
    # names looked up once, each process's two paths built from one prefix, its stat line
    # split only as far as the fields used, and its `Proc` made in one step.
    clock = _clock() or (0.0, 100)
    procs: dict[int, Proc] = {}
    children: dict[int, list[int]] = {}
    flags = os.O_RDONLY | os.O_CLOEXEC
    open_, read, close, readlink = os.open, os.read, os.close, os.readlink
    made = _made
    mine = mount_namespace()
    other: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        where = "/proc/" + entry
        try:
            fd = open_(where + "/stat", flags)
        except OSError:
            continue  # gone since the listing
        try:
            stat = read(fd, 4096)
        except OSError:
            stat = b""
        finally:
            close(fd)
        # comm is in parentheses and may itself contain ") ": split at the last one.
        rpar = stat.rfind(b")")
        if rpar < 0:
            continue
        # state ppid pgrp session tty_nr tpgid flags ... starttime (the 20th after comm)
        fields = stat[rpar + 2 :].split(None, 20)
        ppid = int(fields[1])
        comm = stat[stat.find(b"(") + 1 : rpar].decode("utf-8", "replace")
        if ppid == parent and comm.startswith("tmux"):
            continue  # fm's own tmux client (see `scan`)
        pid = int(entry)
        cwd: str | None = None
        if not int(fields[6]) & _PF_KTHREAD:  # a kernel thread works in no one's directory
            try:
                cwd = readlink(where + "/cwd") or None
            except OSError:
                cwd = None
            if cwd and mine is not None:
                _other_namespace(where, mine, pid, other)
            if cwd and cwd.endswith(" (deleted)"):
                cwd = _undeleted(cwd)
        procs[pid] = made(pid, ppid, comm, cwd, fields, clock)
        if ppid in children:
            children[ppid].append(pid)
        else:
            children[ppid] = [pid]
    return ProcessTable(
        procs,
        None,
        {k: tuple(v) for k, v in children.items()},
        frozenset(other) if mine is not None else None,
    )


def mount_namespace(pid: int | str = "self") -> str | None:
    """The mount namespace of `pid` (fm's own by default), None when it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _other_namespace(where: str, mine: str, pid: int, other: list[int]) -> None:
    """`pid` (its /proc directory `where`) to `other` when its mount namespace is not `mine`:
    read in the scan's own pass (the census reads every one: where a path tells nothing,
    `cwd_identity`), not in a second pass over thousands. Gone since: not added, as the
    census would not."""
    try:
        if os.readlink(where + "/ns/mnt") != mine:
            other.append(pid)
    except OSError:
        pass


def _undeleted(cwd: str) -> str:
    """A cwd the kernel marks ` (deleted)`, as psutil reports it: without the mark, unless a
    directory of that very name exists (then the mark is part of its name)."""
    return cwd if os.path.lexists(cwd) else cwd[: -len(" (deleted)")]


def _children_listed() -> bool:
    """Does the kernel list each thread's children (`/proc/<pid>/task/<tid>/children`)?"""
    if not _CHILDREN:
        me = os.getpid()
        _CHILDREN.append(os.path.exists(f"/proc/{me}/task/{me}/children"))
    return _CHILDREN[0]


_CHILDREN: list[bool] = []


def _scan_lazy(parent: int | None) -> ProcessTable:
    from fm_teardown.model.lazy_procs import LazyChildren, LazyProcs  # a whole scan needs neither

    # One readlink per process of the machine (thousands); the rest of a process is read by
    # `_proc` when the look asks for it.
    cwds: dict[int, str | None] = {}
    other: list[int] = []
    readlink = os.readlink
    mine = mount_namespace()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        where = "/proc/" + entry
        try:
            cwd: str | None = readlink(where + "/cwd") or None
        except FileNotFoundError:
            # Gone since the listing, or a zombie (it holds no directory): told by its stat.
            if _stat_of(pid) is None:
                continue
            cwd = None
        except OSError:
            cwd = None  # not ours to read: listed, without a directory
        if cwd and mine is not None:
            _other_namespace(where, mine, pid, other)
        if cwd and cwd.endswith(" (deleted)"):
            cwd = _undeleted(cwd)
        cwds[pid] = cwd
    if parent is not None:
        for pid in _children_of(parent) or ():
            proc = _proc(pid)
            if proc is not None and proc.name.startswith("tmux"):
                cwds.pop(pid, None)  # fm's own tmux client (see `scan`)
    procs = LazyProcs(cwds, _proc)
    return ProcessTable(
        procs,
        None,
        LazyChildren(procs, _children_of),
        frozenset(other) if mine is not None else None,
    )


def _stat_of(pid: int) -> bytes | None:
    stat = _read(f"/proc/{pid}/stat")
    return stat if stat and stat.rfind(b")") > 0 else None


def _proc(pid: int) -> Proc | None:
    """The process `pid` as the whole scan reads it (None: gone), its cwd read again with its
    stat so that both are of the process that holds the pid now."""
    stat = _stat_of(pid)
    if stat is None:
        return None
    rpar = stat.rfind(b")")
    fields = stat[rpar + 2 :].split(None, 20)
    cwd: str | None = None
    if not int(fields[6]) & _PF_KTHREAD:
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd") or None
        except OSError:
            cwd = None
        if cwd and cwd.endswith(" (deleted)"):
            cwd = _undeleted(cwd)
    comm = stat[stat.find(b"(") + 1 : rpar].decode("utf-8", "replace")
    return _made(pid, int(fields[1]), comm, cwd, fields, _clock() or (0.0, 100))


def _made(
    pid: int,
    ppid: int,
    comm: str,
    cwd: str | None,
    fields: list[bytes],
    clock: tuple[float, int],
) -> Proc:
    """A process's `Proc` from its stat line's fields after its name (state ppid pgrp session
    tty_nr tpgid flags ... starttime, the 20th), as both scans make it."""
    name = comm
    cmdline: Cmdline = read_cmdline  # read on first use (world.Proc)
    if len(comm) >= 15:
        # The kernel truncates comm to 15 bytes; psutil extends it from argv[0].
        cmdline = parse_cmdline(read_cmdline(pid))
        argv0 = cmdline[0]
        if argv0 and os.path.basename(argv0).startswith(comm):
            name = os.path.basename(argv0)
    tty_nr = int(fields[4])
    tty, tpgid = (tty_name(tty_nr), max(int(fields[5]), 0)) if tty_nr > 0 else (None, 0)
    stated = (float(fields[19]) / clock[1] + clock[0], fields[0] == b"Z", tty, tpgid)
    return Proc.scanned(pid, ppid, name, cmdline, cwd, stated)


def _children_of(pid: int) -> tuple[int, ...] | None:
    """The pids of `pid`'s children, from each of its threads' list (None: gone)."""
    where = f"/proc/{pid}/task"
    try:
        threads = os.listdir(where)
    except OSError:
        return None
    found: list[int] = []
    for tid in threads:
        try:
            fd = os.open(f"{where}/{tid}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # a thread that ended since
        try:
            # A tmux server's list holds thousands of pids: read to its end.
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        except OSError:
            chunks = []
        finally:
            os.close(fd)
        found.extend(int(c) for c in b"".join(chunks).split() if c.isdigit())
    return tuple(found)


def _scan_psutil(parent: int | None) -> ProcessTable:
    import psutil

    procs: dict[int, Proc] = {}
    children: dict[int, list[int]] = {}
    try:
        for p in psutil.process_iter(
            ["pid", "ppid", "name", "cmdline", "cwd", "create_time", "status", "terminal"]
        ):
            info = p.info
            if info.get("create_time") is None:
                continue
            if parent and info.get("ppid") == parent and str(info.get("name")).startswith("tmux"):
                continue  # fm's own tmux client (see `scan`)
            cmdline = info.get("cmdline") or []
            cwd = info.get("cwd") or None
            proc = Proc(
                pid=int(info["pid"]),
                ppid=int(info.get("ppid") or 0),
                name=str(info.get("name") or ""),
                cmdline=(str(cmdline[0]), tuple(str(a) for a in cmdline[1:]), False)
                if cmdline
                else ("", None, False),
                # The kernel already reports the resolved cwd; no further realpath needed.
                cwd=cwd,
                stat=ProcStat(
                    float(info["create_time"]),
                    zombie=info.get("status") == psutil.STATUS_ZOMBIE,
                    tty=info.get("terminal") or None,
                ),
            )
            procs[proc.pid] = proc
            children.setdefault(proc.ppid, []).append(proc.pid)
    except (psutil.Error, OSError) as exc:
        return ProcessTable({}, error=f"the process table could not be read: {exc}")
    return ProcessTable(procs, None, {k: tuple(v) for k, v in children.items()})


def same_process(pid: int, start_time: float) -> bool:
    """True when `pid` is still the process that started at `start_time` (and not a zombie)."""
    import psutil

    try:
        p = psutil.Process(pid)
        if abs(p.create_time() - start_time) > 0.01:
            return False
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def send(target: Proc, sig: signal.Signals) -> str | None:
    """Signal `target` only if it is still the process observed; None if it is gone.

    A pidfd pins the process before its start time is compared, so the pid cannot be
    recycled between the check and the signal.
    """
    try:
        fd = os.pidfd_open(target.pid)
    except ProcessLookupError:
        return None
    except OSError:
        fd = -1  # no pidfd support: fall back to a check right before kill()
    try:
        if not same_process(target.pid, target.start_time):
            return None
        if fd >= 0:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(target.pid, sig)
        return "sent"
    except ProcessLookupError:
        return None
    except PermissionError:
        return "permission denied"
    finally:
        if fd >= 0:
            os.close(fd)


@value
class Signalled:
    """One process a step signalled: by pid and start time, with the signals sent to it in
    order (appended to as they are sent)."""

    pid: int
    start_time: float
    name: str
    signals: list[str] = field(default_factory=list)


def _poll_gone(targets: list[Proc], seconds: float) -> list[Proc]:
    """Wait up to `seconds` (polling, ending early when they are gone or on an interrupt) for
    targets to be gone; the survivors."""
    deadline = time.monotonic() + seconds
    while True:
        alive = [t for t in targets if same_process(t.pid, t.start_time)]
        if not alive or time.monotonic() >= deadline or interrupts.requested():
            return alive
        time.sleep(0.02)


# How long the processes step waits for init to reap what it ended. An orphan's zombie is
# init's to reap, and some inits reap only every second or two: until then the pid still
# answers `kill -0`, and a caller that checks "gone" right after the teardown sees it. A
# zombie holds no cwd and no files, so past this bound the step goes on.
REAP_WAIT = 5.0


def wait_reaped(targets: list[Proc], seconds: float = REAP_WAIT) -> None:
    """Wait up to `seconds` (polling, ending early on an interrupt) until none of `targets` is
    left as a zombie that init (pid 1) has yet to reap. A zombie whose parent is any other
    process is that parent's to reap, and is not waited for."""
    deadline = time.monotonic() + seconds
    while any(_unreaped_orphan(t) for t in targets):
        if time.monotonic() >= deadline or interrupts.requested():
            return
        time.sleep(0.02)


def _unreaped_orphan(target: Proc) -> bool:
    import psutil

    try:
        p = psutil.Process(target.pid)
        if abs(p.create_time() - target.start_time) > 0.01:
            return False
        return p.status() == psutil.STATUS_ZOMBIE and p.ppid() == 1
    except psutil.Error:
        return False


def leads_group(pid: int) -> bool:
    """True when `pid` leads its own process group (None of that if it is gone)."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def group_gone(pgid: int) -> bool:
    """True when every process left in process group `pgid` is a zombie (ended, its parent
    yet to reap it), or none is left. False when /proc cannot be read."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    for name in names:
        fields = stat_fields(int(name)) if name.isdigit() else None
        if fields is not None and len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return False
    return True


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of `/proc/<pid>/stat` after the name (state, ppid, pgrp, session, tty_nr,
    tpgid, ...), or None when it cannot be read. The name is in parentheses and may itself
    hold ") ": the fields start after the last one."""
    raw = _read(f"/proc/{pid}/stat")
    return raw[raw.rfind(b")") + 2 :].split() if raw else None


def foreground_group(pid: int) -> int | None:
    """The foreground process group of the terminal of `pid` (`tpgid`): who gets the keys
    typed into a pane whose process it is. None when it cannot be read or there is none."""
    fields = stat_fields(pid)
    try:
        tpgid = int(fields[5]) if fields is not None else 0
    except (IndexError, ValueError):
        return None
    return tpgid if tpgid > 0 else None


def terminate(
    targets: list[Proc], grace: float, kill_wait: float, log: dict[int, Signalled]
) -> list[Proc]:
    """SIGTERM, poll up to `grace`, SIGKILL the survivors, poll up to `kill_wait`.

    A signal goes only to a pid that still has the observed start time, so a recycled pid is
    never hit. Zombies count as gone. Returns the processes still running at the end.
    """
    for sig, name, wait in (
        (signal.SIGTERM, "SIGTERM", grace),
        (signal.SIGKILL, "SIGKILL", kill_wait),
    ):
        live = [t for t in targets if same_process(t.pid, t.start_time)]
        for t in live:
            # An interrupt never hastens a signal: once asked to stop, no further signal goes
            # out (not the SIGKILL after the grace, nor the SIGTERM of the next target).
            if interrupts.requested():
                return [t for t in live if same_process(t.pid, t.start_time)]
            entry = log.setdefault(t.pid, Signalled(t.pid, t.start_time, t.name))
            outcome = send(t, sig)
            if outcome is not None:
                entry.signals.append(name if outcome == "sent" else f"{name} ({outcome})")
        if not live:
            return live
        targets = _poll_gone(live, wait)
    return [t for t in targets if same_process(t.pid, t.start_time)]


# -- a process's descendants, for the wait after an agent's quit keys -------------------------


def children(pid: int) -> list[int]:
    """The pids of `pid`'s children now, from `/proc/<pid>/task/<tid>/children` (every
    thread's: a child belongs to the thread that forked it); [] when it cannot be read."""
    return list(_children_of(pid) or ())


def identity(pid: int) -> tuple[float, bool] | None:
    """`pid`'s start time (psutil's formula, as the scan's) and whether it is a zombie; None
    when it is gone or cannot be read."""
    clock = _clock()
    fields = stat_fields(pid)
    if clock is None or fields is None or len(fields) < 20:
        return None
    boot, ticks = clock
    try:
        return float(fields[19]) / ticks + boot, fields[0] == b"Z"
    except ValueError:
        return None


def stat_name(pid: int) -> str | None:
    """`pid`'s name (comm) from `/proc/<pid>/stat`, or None when it cannot be read."""
    raw = _read(f"/proc/{pid}/stat")
    if not raw:
        return None
    return raw[raw.find(b"(") + 1 : raw.rfind(b")")].decode("utf-8", "replace")
