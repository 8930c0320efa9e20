"""The memoised canonicaliser agrees with os.path.realpath on real trees with symlinks."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fm_teardown.model.paths import Canonicalizer

NAMES = ["a", "b", "c", "link", "up", "loop", "gone", "..", "."]


def make_tree(root: Path) -> None:
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "b").mkdir()
    os.symlink(root / "a" / "b", root / "link")  # absolute link
    os.symlink("..", root / "a" / "up")  # relative link to the parent
    os.symlink("loop", root / "b" / "loop")  # a loop
    os.symlink(root / "nowhere", root / "b" / "gone")  # dangling


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(NAMES), min_size=0, max_size=6), min_size=1, max_size=8),
    st.booleans(),
)
def test_agrees_with_realpath(paths: list[list[str]], trailing: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        make_tree(root)
        canon = Canonicalizer()  # one instance across paths: the cache must not go stale
        for parts in paths:
            path = "/".join([str(root), *parts]) + ("/" if trailing else "")
            assert canon(path) == os.path.realpath(path), path
