from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet import Fleet, fleet_fixture


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path)
