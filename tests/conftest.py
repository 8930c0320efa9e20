from __future__ import annotations

import os
import sys
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


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path)
