"""The process adapter: one scan of the process table, and signalling by identity.

A process is identified by pid AND start time: a pid seen during observation is only ever
signalled if the process now holding that pid started at the same moment.
"""

from __future__ import annotations

from fm_teardown.world import Proc, ProcessTable


def scan() -> ProcessTable:
    """pid, ppid, name, argv[0], cwd and start time of every visible process, in one pass."""
    import psutil

    procs: dict[int, Proc] = {}
    children: dict[int, list[int]] = {}
    try:
        for p in psutil.process_iter(
            ["pid", "ppid", "name", "cmdline", "cwd", "create_time", "status"]
        ):
            info = p.info
            if info.get("create_time") is None:
                continue
            cmdline = info.get("cmdline") or []
            cwd = info.get("cwd") or None
            proc = Proc(
                pid=int(info["pid"]),
                ppid=int(info.get("ppid") or 0),
                name=str(info.get("name") or ""),
                argv0=str(cmdline[0]) if cmdline else "",
                # The kernel already reports the resolved cwd; no further realpath needed.
                cwd=cwd,
                start_time=float(info["create_time"]),
                zombie=info.get("status") == psutil.STATUS_ZOMBIE,
            )
            procs[proc.pid] = proc
            children.setdefault(proc.ppid, []).append(proc.pid)
    except (psutil.Error, OSError) as exc:
        return ProcessTable({}, error=f"the process table could not be read: {exc}")
    return ProcessTable(procs, None, {k: tuple(v) for k, v in children.items()})
