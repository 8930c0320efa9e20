"""`git_files.read`: what the git door reads of a repository's files, whole and bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fm_teardown.adapters import git_files


def test_a_small_file_is_read_whole_with_its_signature(tmp_path: Path) -> None:
    f = tmp_path / "config"
    f.write_bytes(b'[filter "x"]\n\tclean = cat\n')
    got = git_files.read(str(f), 1 << 20)
    assert got is not None
    assert got[0] == b'[filter "x"]\n\tclean = cat\n'
    assert got[1] == git_files.signature(os.stat(f))


def test_a_file_longer_than_its_size_said_is_read_to_its_end_within_the_bound() -> None:
    # /proc's files say a size of 0 and hold more: read on past what the size said.
    whole = Path("/proc/self/status").read_bytes()
    got = git_files.read("/proc/self/status", 1 << 20)
    assert got is not None
    assert got[0].split(b"\n")[0] == whole.split(b"\n")[0]
    assert len(got[0]) > 100
    with pytest.raises(git_files.Unreadable, match="larger than"):
        git_files.read("/proc/self/status", 10)


def test_a_missing_file_is_none_and_a_fifo_is_not_read(tmp_path: Path) -> None:
    assert git_files.read(str(tmp_path / "absent"), 1 << 20) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(git_files.Unreadable, match="not a regular file"):
        git_files.read(str(fifo), 1 << 20)
