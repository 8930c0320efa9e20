"""The right tmux server, and the right vantage point, on real tmux servers and processes.

Servers are found by what they do (a listening socket, the processes of their panes), whatever
their binary and terminal: an operator's server whose socket file was removed, a `tmux -D`
server in the foreground of a terminal. Doubt is evidence that the fleet is elsewhere (another
server holds the records' windows: every command refuses alike); a server that is gone is
gone. fm and the fleet's server must see the same files; a process's cwd is in a slot when its
directory is, whatever path its own mount namespace shows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil
import pytest

from fm_teardown.model.world import (
    InventoryStatus,
    Pane,
    Proc,
    ProcessTable,
    ProcStat,
    TmuxInventory,
)
from fm_teardown.observe.servers import named_server, vantage_problem
from tests.fleet import Fleet, gone, other_tmux, pane_agent, private_env, tid, wait_for

OLD = {"spawn_gen": "s1000.1.a"}  # launched long ago (epoch 1000)


def fm_in(fleet: Fleet, wrapper: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`fm` run under `wrapper` (unshare, ...)."""
    return subprocess.run(
        [*wrapper, sys.executable, "-m", "fm_teardown", *args],
        capture_output=True,
        text=True,
        cwd=fleet.fm_home,
        env=fleet.env(),
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def dead_task(fleet: Fleet, name: str, n: int = 1) -> tuple[str, Path]:
    t = tid(name)
    slot = fleet.slot(n, holder=t)
    fleet.task(t, slot, "dead", extra={"treehouse_lease_holder": t})
    return t, slot


# -- servers fm must find -----------------------------------------------------------------------


def test_an_agent_under_a_server_whose_socket_file_was_removed_is_doubt(fleet: Fleet) -> None:
    """An operator's server (`tmux -S …/op.sock`) has `claude` in a pane in the slot; a /tmp
    cleaner removes its socket file. Nobody can list that server's panes any more: the agent
    is in a pane nobody can name, never "in no pane", and the teardown refuses (5)."""
    t, slot = dead_task(fleet, "sv-unlinked")
    operator = other_tmux(fleet)
    _, agent = pane_agent(fleet, operator, "ops", "desk", slot)
    os.unlink(operator.socket)
    before = fleet.snapshot(slot)
    code, doc = fleet.fm_json("teardown", t, "--dry-run")
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    said = " ".join(doc["reasons"])
    assert f"claude ({agent})" in said and "socket file" in said and "kill -USR1" in said, said
    r = fleet.fm("teardown", t)
    assert r.returncode == 5, r.stdout + r.stderr
    assert not gone(agent) and fleet.snapshot(slot) == before


def _foreground_server(fleet: Fleet) -> tuple[Path, subprocess.Popen[bytes]]:
    """`tmux -D` (no daemon) in the foreground of a terminal of its own (a pty)."""
    home = Path(tempfile.mkdtemp(prefix="fmfg", dir="/tmp"))
    socket = home / "fg.sock"
    spawn = "import pty, sys; pty.spawn(sys.argv[1:])"
    proc = subprocess.Popen(
        [sys.executable, "-c", spawn, "tmux", "-D", "-S", str(socket), "-f", "/dev/null"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=fleet.root,
        env=fleet.tmux.env,
    )
    fleet.procs.append(proc)
    wait_for(socket.exists, what="the foreground tmux server's socket")

    def answers() -> bool:
        # Listening, not only bound: a `new-session` that found the socket refusing would
        # start a server of its own there (a daemon, with no terminal).
        r = subprocess.run(
            ["tmux", "-S", str(socket), "-f", "/dev/null", "list-sessions"],
            env=fleet.tmux.env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        return "error connecting" not in r.stderr and "no server running" not in r.stderr

    wait_for(answers, what="the foreground tmux server answering")
    return socket, proc


def test_an_agent_in_a_pane_of_a_foreground_server_is_in_that_pane(fleet: Fleet) -> None:
    """A server started with `tmux -D` from a terminal has that terminal itself: its pane's
    agent is still in a pane (someone's: a live owner, 4), never "in no pane"."""
    t, slot = dead_task(fleet, "sv-fg")
    socket, proc = _foreground_server(fleet)
    tmux = ["tmux", "-S", str(socket), "-f", "/dev/null"]
    try:
        command = f"bash --norc --noprofile -c '{fleet.bin}/claude 100000; exec bash'"
        subprocess.run(
            [*tmux, "new-session", "-d", "-s", "ops", "-n", "desk", "-c", str(slot), command],
            env=fleet.tmux.env, check=True, capture_output=True,
        )  # fmt: skip
        answer = subprocess.run(
            [*tmux, "display-message", "-p", "#{pid}"],
            env=fleet.tmux.env,
            check=True,
            capture_output=True,
            text=True,
        )
        server = int(answer.stdout)
        # A terminal of its own (read by a poll: a loaded machine may show the server before
        # psutil's map of terminals has its pty).
        wait_for(
            lambda: psutil.Process(server).terminal() is not None,
            what="the foreground server's own terminal",
        )

        def agent() -> int | None:
            kids = [c for c in psutil.Process(server).children(recursive=True)]
            return next((c.pid for c in kids if c.name() == "claude"), None)

        wait_for(lambda: agent() is not None, what="claude in the foreground server's pane")
        pid = agent()
        assert pid is not None
        fleet.tracked.add(pid)
        before = fleet.snapshot(slot)
        code, doc = fleet.fm_json("teardown", t)
        assert (code, doc["verdict"]) == (4, "live-owner"), doc
        assert f"pid:{pid}" in [o["id"] for o in doc["owners"]], doc["owners"]
        assert "ops:desk" in json.dumps(doc) and str(socket) in json.dumps(doc)
        assert not gone(pid) and fleet.snapshot(slot) == before
    finally:
        subprocess.run([*tmux, "kill-server"], env=fleet.tmux.env, capture_output=True)
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=30)
        shutil.rmtree(socket.parent, ignore_errors=True)


# -- which server is the fleet's ----------------------------------------------------------------


def test_a_socket_name_naming_the_operators_own_server_is_refused_by_every_command(
    fleet: Fleet, tmux_tmpdir: Path
) -> None:
    """FM_TMUX_SOCKET_NAME names a running server (the operator's own) that holds none of
    the fleet's windows, while the fleet's server holds them: the one-task dry run, the real
    run, the audit and `--landed` all refuse (5), naming the fleet's server and the variable
    that selects it; nothing changes."""
    env = private_env(fleet, tmux_tmpdir, FM_TMUX_SOCKET_NAME="operator")
    subprocess.run(
        ["tmux", "-L", "operator", "-f", "/dev/null", "new-session", "-d", "-s", "mine",
         "bash --norc --noprofile"],
        env=env, check=True, capture_output=True, cwd=fleet.root,
    )  # fmt: skip
    t = tid("sv-named")
    slot = fleet.slot(1, holder=t)
    task = fleet.task(t, slot, "alive")
    before = fleet.snapshot(slot)
    for args in (
        ["teardown", t, "--dry-run"],
        ["teardown", t],
        ["teardown", "--dry-run"],
        ["teardown", "--landed"],
    ):
        r = fleet.fm(*args, env=env)
        out = r.stdout + r.stderr
        assert r.returncode == 5, (args, out)
        assert "FM_TMUX_SOCKET_NAME=operator" in out, (args, out)
        assert f"FM_TMUX_SOCKET={fleet.tmux.socket}" in out and f"fm-{t}" in out, (args, out)
    assert fleet.snapshot(slot) == before and not any(gone(p) for p in task.pids)


def test_the_fleets_server_gone_after_a_reboot_is_gone(fleet: Fleet, tmux_tmpdir: Path) -> None:
    """A reboot: the fleet's server and its socket file are gone; the user runs another
    server for other work. Every endpoint is `missing` and the teardowns proceed, with the
    socket variable set and without it."""
    named, _ = dead_task(fleet, "sv-boot")
    default, _ = dead_task(fleet, "sv-boot2", 2)
    other_tmux(fleet)  # someone's server, for other work: no record's window
    fleet.tmux.stop()
    os.unlink(fleet.tmux.socket)
    code, doc = fleet.fm_json("teardown", named, "--dry-run")
    assert (code, doc["verdict"], doc["endpoint"]) == (0, "proceed", "missing"), doc
    code, doc = fleet.fm_json("teardown", named)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    # No variable: the (private) default socket has no server either.
    code, doc = fleet.fm_json("teardown", default, env=private_env(fleet, tmux_tmpdir))
    assert (code, doc["verdict"], doc["endpoint"]) == (0, "proceed", "missing"), doc
    assert not (fleet.state / f"{named}.meta").exists()
    assert not (fleet.state / f"{default}.meta").exists()


def test_the_fleets_own_server_with_its_socket_file_removed_is_not_gone(fleet: Fleet) -> None:
    """The fleet's server still runs, its socket file removed: no server answers on the
    socket fm reads, yet the server bound to it runs and cannot be listed. Not gone: 5."""
    t = tid("sv-lost")
    slot = fleet.slot(1, holder=t)
    task = fleet.task(t, slot, "alive")
    os.unlink(fleet.tmux.socket)
    code, doc = fleet.fm_json("teardown", t, "--dry-run")
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    assert "kill -USR1" in doc["hints"][0] and fleet.tmux.socket in doc["hints"][0], doc
    r = fleet.fm("teardown", "--dry-run")
    assert r.returncode == 5, r.stdout + r.stderr
    assert not any(gone(p) for p in task.pids) and (fleet.state / f"{t}.meta").exists()


# -- vantage ------------------------------------------------------------------------------------


def _can_unshare_mounts() -> bool:
    try:
        r = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def test_fm_in_another_mount_namespace_than_the_fleets_server_refuses(fleet: Fleet) -> None:
    if not _can_unshare_mounts():
        pytest.skip("needs a mount namespace of its own (unshare -m)")
    t, _ = dead_task(fleet, "sv-ns")
    r = fm_in(fleet, ["unshare", "-m"], "teardown", t, "--json")
    doc = json.loads(r.stdout)
    assert (r.returncode, doc["verdict"]) == (5, "unsafe"), doc
    hint = doc["hints"][0]
    mine = os.readlink(f"/proc/{fleet.tmux.server_pid()}/ns/mnt")
    assert "mount namespace" in hint and mine in hint, hint
    assert (fleet.state / f"{t}.meta").exists() and t in " ".join(fleet.tmux.windows())


def _inventory(server: int, panes: list[int]) -> TmuxInventory:
    return TmuxInventory(
        InventoryStatus.OK,
        tuple(Pane("s", f"w{p}", "@1", f"%{p}", p, False, server) for p in panes),
    )


def _table(*procs: tuple[int, int]) -> ProcessTable:
    return ProcessTable({pid: Proc(pid, ppid, "x", "x", "/", ProcStat(1.0)) for pid, ppid in procs})


def test_the_vantage_comparison() -> None:
    inv = _inventory(10, [11])
    table = _table((10, 1), (11, 10))
    same: dict[int | str, str] = {"self": "mnt:[1]", 10: "mnt:[1]"}
    assert vantage_problem(inv, table, same.get) is None
    other: dict[int | str, str] = {"self": "mnt:[1]", 10: "mnt:[2]"}
    said = vantage_problem(inv, table, other.get)
    assert said is not None and "mnt:[1]" in said and "mnt:[2]" in said and "pid 10" in said
    unreadable: dict[int | str, str] = {"self": "mnt:[1]"}
    assert "cannot be told" in (vantage_problem(inv, table, unreadable.get) or "")
    # The server calls itself a pid fm does not see serving its panes: another PID namespace.
    assert "PID namespaces" in (vantage_problem(inv, _table((11, 1)), same.get) or "")
    assert "PID namespaces" in (vantage_problem(inv, _table((10, 1), (11, 3)), same.get) or "")
    assert vantage_problem(TmuxInventory(InventoryStatus.NO_SERVER), table, other.get) is None


def test_a_server_is_told_by_its_name_whatever_its_binary() -> None:
    for name in ("tmux", "tmux: server", "mux: server", "my-long-tmux: s", "build-of-tm: se"):
        assert named_server(name), name
    for name in ("bash", "server", "sshd: root@pts/0", "node", "tmux-like: client"):
        assert not named_server(name), name


# -- a cwd in the slot by its directory ---------------------------------------------------------


def test_an_agent_in_a_container_working_in_the_slot_keeps_the_task_unfinished(
    fleet: Fleet,
) -> None:
    """An agent in a mount namespace of its own, where the slot is bind-mounted at another
    path: its cwd shows that path, yet its directory is the slot's. `--landed` does not
    select the task: someone is still working there."""
    if not _can_unshare_mounts():
        pytest.skip("needs a mount namespace of its own (unshare -m)")
    t = tid("sv-bind")
    slot = fleet.slot(1, holder=t)
    fleet.task(t, slot, "dead", extra={"treehouse_lease_holder": t, **OLD})
    selected = json.loads(fleet.fm("teardown", "--landed", "--dry-run", "--json").stdout)
    assert t in [r["task"] for r in selected["results"]], selected  # finished, as it is
    alias = fleet.root / "workspace"
    (alias / "src").mkdir(parents=True)
    (slot / "src").mkdir()
    script = f"mount --bind {slot} {alias} && cd {alias}/src && exec {fleet.bin}/claude 100000"
    agent = fleet.spawn(["unshare", "-m", "sh", "-c", script], fleet.root)

    def cwd() -> str:
        try:
            return os.readlink(f"/proc/{agent.pid}/cwd")
        except OSError:
            return ""

    wait_for(lambda: cwd() == f"{alias}/src", what="the agent in the bind-mounted slot")
    assert psutil.Process(agent.pid).name() == "claude"
    doc: dict[str, Any] = json.loads(fleet.fm("teardown", "--landed", "--dry-run", "--json").stdout)
    assert t not in [r["task"] for r in doc["results"]], doc
    why = {n["task"]: n["reason"] for n in doc["not_selected"]}[t]
    assert f"claude ({agent.pid})" in why, why
    # The one-task look (which reads a process only when asked) finds it there too.
    one = json.loads(fleet.fm("teardown", t, "--dry-run", "--json").stdout)
    ends = {s["step"]: s["detail"] for s in one["steps"]}["processes"]
    assert f"claude ({agent.pid}) [an agent in no pane" in ends, ends


def test_the_processes_step_ends_by_directory_what_works_in_the_slot_from_a_container(
    fleet: Fleet,
) -> None:
    """The processes step finds what it ends as the census places it: a worker in a mount
    namespace of its own, cd'd into the slot bind-mounted at another path, is in the slot
    (ended with the task); one whose cwd merely reads like the slot's path, on a directory
    of its own namespace mounted there, is not fm's to signal."""
    if not _can_unshare_mounts():
        pytest.skip("needs a mount namespace of its own (unshare -m)")
    t = tid("sv-step")
    slot = fleet.slot(1, holder=t)
    fleet.task(t, slot, "dead", extra={"treehouse_lease_holder": t, **OLD})
    alias = fleet.root / "workspace"
    alias.mkdir()
    inside = fleet.spawn(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind {slot} {alias} && cd {alias} && exec sleep 100000",
        ],
        fleet.root,
    )
    lookalike = fleet.spawn(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount -t tmpfs none {slot} && cd {slot} && exec sleep 100000",
        ],
        fleet.root,
    )

    def cwd(pid: int) -> str:
        try:
            return os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return ""

    wait_for(lambda: cwd(inside.pid) == str(alias), what="the worker in the bind-mounted slot")
    wait_for(lambda: cwd(lookalike.pid) == str(slot), what="the worker on a look-alike path")
    code, doc = fleet.fm_json("teardown", t)
    assert code == 0, doc
    [step] = [s for s in doc["steps"] if s["step"] == "processes"]
    assert f"({inside.pid}" in str(step), step
    assert f"({lookalike.pid}" not in str(step), step
    wait_for(lambda: gone(inside.pid), what="the worker in the slot ended")
    # (The pool's return then ends by path what works there, the look-alike included: that
    # is the pool's own rule, not fm's signal.)
