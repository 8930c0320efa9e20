from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet import Fleet, fleet_fixture

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
