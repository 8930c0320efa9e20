"""`fm demo` (issue 13): it plays the incident against a sandbox of its own, checks what it
claims, and leaves nothing behind — or, with `keep`, leaves it all and says how to remove it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
DEMO_TIMEOUT = 240
FM_COMMANDS = [
    "$ fm teardown --dry-run",
    "$ fm teardown alpha",
    "$ fm teardown alpha --force",
    "$ fm teardown charlie",
    "$ fm teardown echo",
]


def run_demo(
    *, keep: bool, env: dict[str, str] | None = None, merged: bool = True
) -> subprocess.CompletedProcess[str]:
    """The demo through the entry the lead's CLI calls, stderr merged so the order is kept
    (`merged=False`: stderr on its own)."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            f"from fm_teardown.commands.demo import demo; raise SystemExit(demo(keep={keep}))",
        ],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        timeout=DEMO_TIMEOUT,
        check=False,
    )


def sandbox_of(out: str) -> Path:
    m = re.search(r"^fm demo: a throw-away fleet in (\S+)$", out, re.M)
    assert m, out
    return Path(m.group(1))


def agent_pid(out: str) -> int:
    m = re.search(r"bravo .*its agent \(pid (\d+)\)", out)
    assert m, out
    return int(m.group(1))


def processes_under(root: Path) -> list[str]:
    """Processes that run from, work in, or name the sandbox (the agents, shells, tmux)."""
    prefix = str(root)
    found = []
    for p in psutil.process_iter(["pid", "exe", "cwd", "cmdline"]):
        info = p.info
        if p.pid == os.getpid():
            continue
        texts = [info.get("exe") or "", info.get("cwd") or "", *(info.get("cmdline") or [])]
        if any(prefix in t for t in texts):
            found.append(f"{p.pid} {info.get('cmdline')}")
    return found


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_until_gone(root: Path, timeout: float = 5) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := processes_under(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def section(out: str, command: str) -> str:
    """What the demo printed from `command`'s line up to the next command line."""
    start = out.index(f"\n{command}\n") + 1
    end = out.find("\n$ ", start + len(command))
    return out[start : end if end != -1 else len(out)]


def test_demo_plays_the_incident_and_leaves_nothing_behind() -> None:
    r = run_demo(keep=False, merged=False)
    out = r.stdout
    root = sandbox_of(out)
    try:
        assert r.returncode == 0, out
        # The whole transcript, refusals included, is on stdout (`fm demo > demo.txt`).
        assert r.stderr == "", r.stderr
        assert "REFUSED — live-owner" in section(out, "$ fm teardown alpha")
        lines = out.splitlines()
        for command in FM_COMMANDS:
            assert command in lines, f"{command!r} not printed:\n{out}"
        # The refusals name the live owner, bravo, and so does the audit row of alpha.
        for command in ("$ fm teardown alpha", "$ fm teardown alpha --force"):
            assert "bravo" in section(out, command), section(out, command)
        assert "UNEXPECTED" not in out
        assert "nobody's live work was touched" in out
        # Nothing is left: no sandbox dir, no tmux server on its socket, no agent of it.
        assert not root.exists(), f"{root} left behind"
        assert not alive(agent_pid(out)), "bravo's agent stand-in left running"
        assert wait_until_gone(root) == [], "processes of the sandbox left running"
    finally:
        cleanup_leftovers(root)


def test_demo_keep_leaves_the_sandbox_and_says_how_to_remove_it() -> None:
    r = run_demo(keep=True)
    out = r.stdout
    root = sandbox_of(out)
    try:
        assert r.returncode == 0, out
        export = next(line.strip() for line in out.splitlines() if "export FM_HOME=" in line)
        for var in ("FM_HOME", "FM_TMUX_SOCKET", "FM_TREEHOUSE_BIN", "TREEHOUSE_ROOT"):
            assert f"{var}=" in export
        socket = root / "tmux.sock"
        assert f"tmux -S {socket} attach" in out
        assert root.is_dir()
        assert alive(agent_pid(out)), "bravo's agent should still run with keep"
        has = subprocess.run(["tmux", "-S", str(socket), "has-session"], check=False)
        assert has.returncode == 0, "the sandbox's tmux server should still run with keep"
        # The printed environment is enough to run fm on the sandbox.
        env = dict(os.environ)
        for assignment in export.removeprefix("export ").split():
            key, _, value = assignment.partition("=")
            env[key] = value
        audit = subprocess.run(
            [sys.executable, "-m", "fm_teardown", "teardown", "--dry-run", "--json"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert audit.returncode == 0, audit.stderr
        assert '"bravo"' in audit.stdout
        # ... and the printed commands work as printed, with no `fm` on PATH.
        lines = [line.strip() for line in out.splitlines()]
        dry = lines[lines.index(export) + 1]
        assert not dry.startswith("fm "), dry
        shell = subprocess.run(
            ["sh", "-c", f"{export}; {dry}"],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert shell.returncode == 0 and "bravo" in shell.stdout, shell.stderr
        # The printed clean-up removes it all.
        cleanup = next(line.strip() for line in out.splitlines() if "kill-server; rm -rf" in line)
        subprocess.run(["sh", "-c", cleanup], check=True, timeout=30)
        assert not root.exists()
        assert wait_until_gone(root) == [], "the printed clean-up left processes running"
    finally:
        cleanup_leftovers(root)


def test_demo_names_a_missing_tool_and_exits_5(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git
    (bin_dir / "git").symlink_to(git)
    r = run_demo(keep=False, env={**os.environ, "PATH": str(bin_dir)})
    assert r.returncode == 5, r.stdout
    assert r.stdout.strip().splitlines() == ["fm demo: needs tmux on PATH (not found)"]


def cleanup_leftovers(root: Path) -> None:
    """Whatever a failed run left: its tmux server, its processes, its dir."""
    if not root.name.startswith("fm_demo."):
        return  # never anything but the demo's own sandbox
    socket = root / "tmux.sock"
    if socket.exists():
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], check=False)
    for line in processes_under(root):
        with contextlib.suppress(psutil.Error):
            psutil.Process(int(line.split()[0])).kill()
    shutil.rmtree(root, ignore_errors=True)


def test_the_tree_hash_sees_a_link_to_a_directory_change(tmp_path: Path) -> None:
    """The demo's "the tree is unchanged" check counts a link to a directory too."""
    from fm_teardown.commands.demo import tree_hash

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path / "a")
    before = tree_hash(root)
    (root / "link").unlink()
    (root / "link").symlink_to(tmp_path / "b")
    assert tree_hash(root) != before
