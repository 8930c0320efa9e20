"""TASK's per-task temp dir `/tmp/fm-<id>` as found on disk (spec §3, §7a).

/tmp is world-writable: anyone can plant a symlink there (into another task's slot, or to
`/`), and following it would make that tree a root of the processes step. So it is judged
with lstat, never followed: absent, or a real directory owned by fm's user or root. Its
canonical spelling as a root of the processes step is `model/paths.py`'s `tmp_root_of`.
"""

from __future__ import annotations

import os
import stat

from fm_teardown.model.world import TaskTmp

__all__ = ["task_tmp"]


def task_tmp(path: str) -> TaskTmp:
    """`/tmp/fm-<id>` judged with lstat: absent, or a real directory of ours (or root's).

    /tmp is world-writable: anyone can plant a symlink there (into another task's slot, or
    to `/`), and following it would make that tree a root of the processes step."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return TaskTmp(path, False)
    except OSError as exc:
        return TaskTmp(path, True, f"tasktmp {path} cannot be read ({exc.strerror})")
    if stat.S_ISLNK(st.st_mode):
        return TaskTmp(path, True, f"tasktmp {path} is a symlink (to {_link(path)})")
    if not stat.S_ISDIR(st.st_mode):
        return TaskTmp(path, True, f"tasktmp {path} is not a directory")
    if st.st_uid not in (os.geteuid(), 0):
        return TaskTmp(path, True, f"tasktmp {path} is owned by another user (uid {st.st_uid})")
    return TaskTmp(path, True)


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"
