from __future__ import annotations

import atexit
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet import (
    TEST_RUN,
    TEST_RUN_VAR,
    TMUX_PREFIX,
    Fleet,
    Straggler,
    fleet_fixture,
    reap,
    stragglers,
)

# The console scripts (`fm`, `fm-teardown`) live beside the interpreter running the tests
# (the venv's bin): put them on PATH for the commands the tests run through a shell, as an
# activated venv would.
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")

# The tests' own git commands (commits in the repos they build) get their identity and
# configuration here, never from the machine: a fresh machine has no global git identity and
# its HOME may be empty, and a developer's global config (hooks, signing, default branch) must
# not change what a test sees. fm itself runs with the fleet's own empty HOME (`Fleet.env`),
# without any identity.
_GIT_HOME = tempfile.mkdtemp(prefix="fmtests-git-")
atexit.register(shutil.rmtree, _GIT_HOME, ignore_errors=True)
_GIT_CONFIG = os.path.join(_GIT_HOME, "gitconfig")
with open(_GIT_CONFIG, "w", encoding="utf-8") as _f:
    _f.write("[user]\n\tname = Test\n\temail = t@example.invalid\n[init]\n\tdefaultBranch = main\n")
os.environ.update(
    GIT_CONFIG_GLOBAL=_GIT_CONFIG,
    GIT_CONFIG_NOSYSTEM="1",
    GIT_AUTHOR_NAME="Test",
    GIT_AUTHOR_EMAIL="t@example.invalid",
    GIT_COMMITTER_NAME="Test",
    GIT_COMMITTER_EMAIL="t@example.invalid",
)


# The processes the tests start run on no terminal unless a test gives them one (a tmux pane,
# a pty of their own): a process on a terminal in a slot is a person's (docs/spec.md §15.4),
# and running the tests from a terminal must not make every stand-in one. pytest gives up its
# controlling terminal (its output still goes there, and Ctrl-C still reaches its process
# group when a shell leads the terminal's session). Run as the session leader itself (`script
# -c pytest`), giving it up hangs up its own group: that hang-up is ignored for the moment.
def _no_controlling_terminal() -> None:
    import fcntl
    import termios

    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return  # none to give up
    hangup = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        fcntl.ioctl(fd, termios.TIOCNOTTY)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGHUP, hangup)
        os.close(fd)


_no_controlling_terminal()


# This run's id, inherited by every process a test starts (the fleets put it into the
# environments they build too): the session-end check below knows this run's processes by it.
os.environ[TEST_RUN_VAR] = TEST_RUN

# How long processes still running when the last test ends get to exit on their own (a
# teardown's kill may still be landing) before they count as left behind.
_STRAGGLER_GRACE = float(os.environ.get("FM_TEST_STRAGGLER_GRACE", "5"))

_BASETEMP: list[Path] = []

_PYTEST_PID = os.getpid()


def _terminated(signum: int, frame: object) -> None:
    """A run ended with SIGTERM (a time limit, a stop) tears its fixtures down as on Ctrl-C,
    so that the test running then leaves no tmux server or process behind. A child forked by
    a test (multiprocessing) dies of it as it would have."""
    signal.signal(signum, signal.SIG_DFL)  # a second one ends the run at once
    if os.getpid() != _PYTEST_PID:
        os.kill(os.getpid(), signum)
        return
    raise KeyboardInterrupt(f"signal {signum}")


if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _terminated)


@pytest.fixture(scope="session", autouse=True)
def _this_runs_tmp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Where this run's tests make their directories (the check looks for processes there)."""
    _BASETEMP.append(tmp_path_factory.getbasetemp())


def _left_behind() -> list[Straggler]:
    roots: list[Path | str] = [*_BASETEMP, TMUX_PREFIX]
    deadline = time.monotonic() + _STRAGGLER_GRACE
    while True:
        left = stragglers(roots, TEST_RUN)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run when a process a test started, or a tmux server of a test, is still
    running once every test and fixture has ended: name each (pid, name, argv, cwd), kill
    it, so that nothing stays behind even then."""
    left = _left_behind()
    for path in glob.glob(glob.escape(TMUX_PREFIX) + "*"):
        shutil.rmtree(path, ignore_errors=True)
    if not left:
        return
    unkillable = {p.pid for p in reap(s.proc for s in left)}
    lines = [
        f"{len(left)} process(es) started by this run's tests still running at its end "
        "(a test or a fixture did not reap them); killed now:",
        *(f"  {s}{'  -- COULD NOT BE KILLED' if s.proc.pid in unkillable else ''}" for s in left),
    ]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", "processes left behind", red=True)
        for line in lines:
            reporter.write_line(line, red=True)
        reporter.stats.setdefault("left behind", []).extend(left)
    else:
        print("\n".join(lines), file=sys.stderr)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "non_root: needs a user the kernel's permission checks apply to (skipped as root; "
        ".ci/run runs these as an unprivileged user too)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.geteuid() != 0:
        return
    skip = pytest.mark.skip(reason="root passes every permission check: run as a non-root user")
    for item in items:
        if item.get_closest_marker("non_root") is not None:
            item.add_marker(skip)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path)


@pytest.fixture
def tmux_tmpdir() -> Iterator[Path]:
    """A private TMUX_TMPDIR (short: a socket path must fit in 108 bytes): fm's default and
    `-L NAME` sockets are the test's own. Every server started there is ended."""
    path = Path(tempfile.mkdtemp(prefix="fmtt", dir="/tmp"))
    try:
        yield path
    finally:
        for sock in sorted((path / f"tmux-{os.getuid()}").glob("*")):
            subprocess.run(
                ["tmux", "-S", str(sock), "kill-server"],
                env={**os.environ, "TMUX_TMPDIR": str(path)},
                capture_output=True,
                check=False,
            )
        shutil.rmtree(path, ignore_errors=True)
