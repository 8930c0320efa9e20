"""The one-task look's process scan reads every process's directory and the rest of a process
only when asked (`processes.scan(lazy=True)`): it must say what the whole scan says of every
process it is asked about, and of who works in a slot.

Real processes: a shell in a slot directory with a child, a zombie, one that ends between the
listing and its read, fm's own tmux client."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fm_teardown.adapters import processes
from fm_teardown.model.lazy_procs import LazyProcs
from fm_teardown.model.world import ProcessTable
from fm_teardown.observe.cwd_identity import Directories
from fm_teardown.observe.observation import SlotProcs, procs_by_slot
from tests.fleet import wait_for

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task"), reason="a Linux /proc is what the lazy scan reads"
)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes], int]]:
    """A shell working in `slot/sub` whose child sleeps there; its pid and the child's."""
    slot = tmp_path / "slot"
    (slot / "sub").mkdir(parents=True)
    pidfile = tmp_path / "child"
    # After its child ends, the shell starts another (not in a scan taken before).
    shell = subprocess.Popen(
        ["sh", "-c", f'sleep 300 & echo $! > "{pidfile}"; wait; sleep 300'],
        cwd=slot / "sub",
        start_new_session=True,
    )
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", what="child")
        child = int(pidfile.read_text())
        wait_for(lambda: processes.stat_name(child) == "sleep", what="child exec'd sleep")
        yield slot, shell, child
    finally:
        os.killpg(shell.pid, signal.SIGKILL)  # the shell and every child it started
        shell.wait()
        wait_for(lambda: processes.group_gone(shell.pid), what="the shell's children reaped")


def _seen(table: ProcessTable, pid: int) -> tuple[object, ...]:
    p = table.procs[pid]
    return (p.pid, p.ppid, p.name, p.argv0, p.cwd, p.start_time, p.zombie, p.tty)


def test_a_lazy_scan_says_what_the_whole_scan_says(
    tree: tuple[Path, subprocess.Popen[bytes], int],
) -> None:
    slot, shell, child = tree
    lazy = processes.scan(lazy=True)
    whole = processes.scan()
    assert isinstance(lazy.procs, LazyProcs), "this kernel lists children: the scan is lazy"
    assert not isinstance(whole.procs, LazyProcs)
    for pid in (shell.pid, child, os.getpid(), 1):
        assert _seen(lazy, pid) == _seen(whole, pid)
    assert lazy.children.get(shell.pid) == whole.children.get(shell.pid) == (child,)
    assert lazy.tree(shell.pid) == whole.tree(shell.pid)
    slot_dir = os.path.realpath(slot)
    assert {p.pid for p in SlotProcs(lazy, [slot_dir]).get(slot_dir)} == {shell.pid, child}
    assert {p.pid for p in SlotProcs(whole, [slot_dir]).get(slot_dir)} == {shell.pid, child}
    by_slot = procs_by_slot({slot_dir}, lazy)
    assert {p.pid for p in by_slot[slot_dir]} == {shell.pid, child}
    assert (child, os.path.join(slot_dir, "sub")) in set(lazy.working())


def test_a_process_gone_before_it_is_read_is_not_in_the_table(
    tree: tuple[Path, subprocess.Popen[bytes], int],
) -> None:
    slot, shell, child = tree
    lazy = processes.scan(lazy=True)
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: processes.stat_name(child) is None, what="the child reaped by its shell")
    assert lazy.listed(child)
    assert child not in lazy.procs
    assert lazy.procs.get(child) is None
    wait_for(lambda: len(processes.children(shell.pid)) == 1, what="the shell's next child")
    assert lazy.children.get(shell.pid, ()) == ()  # its new child came after the listing
    slot_dir = os.path.realpath(slot)
    assert {p.pid for p in SlotProcs(lazy, [slot_dir]).get(slot_dir)} == {shell.pid}
    assert child not in {p.pid for p in lazy.procs.values()}


def test_a_zombie_is_in_the_table_and_works_nowhere(tmp_path: Path) -> None:
    p = subprocess.Popen([shutil.which("true") or "true"], cwd=tmp_path)
    try:
        wait_for(lambda: (processes.stat_fields(p.pid) or [b""])[0] == b"Z", what="a zombie")
        for table in (processes.scan(lazy=True), processes.scan()):
            assert table.procs[p.pid].zombie
            assert p.pid not in dict(table.working())
    finally:
        p.wait()


def test_fm_s_own_tmux_client_is_left_out(tmp_path: Path) -> None:
    """A child of fm named tmux (its listing, running while the scan reads /proc) works in
    fm's directory, which may be a slot: no one's work, in neither form of the scan."""
    fake = tmp_path / "tmux"
    shutil.copy("/bin/sleep", fake)
    p = subprocess.Popen([str(fake), "300"], cwd=tmp_path)
    try:
        wait_for(lambda: processes.stat_name(p.pid) == "tmux", what="the client started")
        for table in (
            processes.scan(without_children=True, lazy=True),
            processes.scan(without_children=True),
        ):
            assert not table.listed(p.pid)
            assert p.pid not in dict(table.working())
        assert processes.scan(lazy=True).listed(p.pid)
    finally:
        p.kill()
        p.wait()


def test_without_the_kernel_s_children_lists_the_whole_table_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(processes, "_CHILDREN", [False])
    table = processes.scan(lazy=True)
    assert not isinstance(table.procs, LazyProcs)
    assert os.getpid() in table.procs


def test_the_namespaces_read_with_the_directories_are_the_census_s() -> None:
    """Both scans read each process's mount namespace with its directory; the census
    (`cwd_identity.Directories`) reads them itself from a table that holds none: the same
    processes."""
    lazy = processes.scan(lazy=True)
    whole = processes.scan()
    assert lazy.other_namespace is not None
    assert whole.other_namespace is not None
    bare = ProcessTable(whole.procs, None, whole.children)
    assert Directories(lazy).foreign == Directories(whole).foreign == Directories(bare).foreign
