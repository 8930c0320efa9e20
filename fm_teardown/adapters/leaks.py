"""What the leaks duty reads and runs (spec §15.5): a process's whole argv, owner and one
environment variable from /proc; chrome-devtools-axi's session registry record; the tool's own
`stop`. Nothing here decides whose a process is (`act/leaks.py` does, with `model/leaks.py`).
"""

from __future__ import annotations

import os
import re
import shutil
import stat

from fm_teardown.adapters import runner

__all__ = [
    "RegistryRecord",
    "argv_of",
    "environ_value",
    "executable_file",
    "process_group",
    "read_registry",
    "stop_session",
    "uid_of",
]

# /proc/<pid>/cmdline and environ are read up to this many bytes (a bridge's argv is short).
_MAX = 1 << 16
_PID = re.compile(rb'"pid"\s*:\s*(\d+)')
_MAX_RECORD = 4096


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, _MAX)
    except OSError:
        return None
    finally:
        os.close(fd)


def argv_of(pid: int) -> str | None:
    """The process's argv joined by spaces (as `ps -o command=` shows it), or None when it is
    gone or cannot be read. A zombie or kernel thread reads as ""."""
    raw = _read(f"/proc/{pid}/cmdline")
    if raw is None:
        return None
    return " ".join(a.decode("utf-8", "surrogateescape") for a in raw.rstrip(b"\0").split(b"\0"))


def environ_value(pid: int, name: str) -> str | None:
    """The value of `name` in the process's environment, or None (absent, or unreadable)."""
    raw = _read(f"/proc/{pid}/environ")
    if not raw:
        return None
    key = name.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :].decode("utf-8", "surrogateescape")
    return None


def uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def executable_file(path: str) -> bool:
    """A regular file this user may execute (firstmate's `[ -f x ] && [ -x x ]`)."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


class RegistryRecord:
    """`<sessions root>/<session>/bridge.pid` as read: the pid it names and when it was
    written, or why it cannot be used (`problem`). `exists` is False when there is none."""

    def __init__(self, exists: bool, pid: int = 0, mtime: float = 0.0, problem: str = "") -> None:
        self.exists, self.pid, self.mtime, self.problem = exists, pid, mtime, problem


def read_registry(path: str) -> RegistryRecord:
    """The registry record, read without following a link and without blocking: a regular
    file naming a numeric `"pid"` above 1."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return RegistryRecord(False)
    except OSError as exc:
        return RegistryRecord(True, problem=f"cannot be read ({exc.strerror})")
    if stat.S_ISLNK(st.st_mode):
        return RegistryRecord(True, problem="is a symlink")
    if not stat.S_ISREG(st.st_mode):
        return RegistryRecord(True, problem="is not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return RegistryRecord(True, problem=f"cannot be read ({exc.strerror})")
    try:
        raw = os.read(fd, _MAX_RECORD)
    except OSError as exc:
        return RegistryRecord(True, problem=f"cannot be read ({exc.strerror})")
    finally:
        os.close(fd)
    m = _PID.search(raw)
    if m is None or int(m.group(1)) <= 1:
        return RegistryRecord(True, problem="names no pid above 1")
    return RegistryRecord(True, int(m.group(1)), st.st_mtime)


def stop_session(session: str, timeout: float) -> bool:
    """The tool's own supported shutdown (`CHROME_DEVTOOLS_AXI_SESSION=<session>
    chrome-devtools-axi stop`), when the tool is on PATH: stdin closed, output dropped,
    bounded by `timeout`. Whether it ran."""
    tool = shutil.which("chrome-devtools-axi")
    if tool is None:
        return False
    runner.run([tool, "stop"], timeout=timeout, env={"CHROME_DEVTOOLS_AXI_SESSION": session})
    return True
