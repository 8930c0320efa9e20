"""The memoised canonicaliser agrees with os.path.realpath on real trees with symlinks."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fm_teardown.model import settings as settings_of
from fm_teardown.model.errors import Verdict
from fm_teardown.model.paths import Canonicalizer, ancestors
from fm_teardown.model.request import Flags
from fm_teardown.observe import observation
from fm_teardown.pipeline import stages as pipeline
from tests.fleet import Fleet, tid

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


def test_one_look_at_the_fleet_resolves_each_directory_once(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the fleet, observing it and reading its slots' git dirs share one canonicaliser:
    a one-task decision makes exactly one, and a slot's path resolved while loading (the slot
    a stray `.meta` names) is not resolved again while observing."""
    task = tid("canon")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    (fleet.state / "bad id.meta").write_text(f"window=firstmate:fm-x\nworktree={slot}\n")
    made: list[Canonicalizer] = []
    resolved: list[str] = []

    class Counted(Canonicalizer):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

        def __call__(self, path: str) -> str:
            if path not in self._cache:
                resolved.append(path)
            return super().__call__(path)

    monkeypatch.setattr(pipeline, "Canonicalizer", Counted)
    monkeypatch.setattr(observation, "Canonicalizer", Counted)
    monkeypatch.setenv("FM_HOME", str(fleet.fm_home))
    for key, val in fleet.env().items():
        monkeypatch.setenv(key, val)
    planned = pipeline.plan(settings_of.load(None), task, Flags.given(dry_run=True))
    assert planned.decision.verdict == Verdict.PROCEED, planned.decision
    assert len(made) == 1
    assert resolved.count(str(slot)) == 1, resolved
    # The slot's git dir and its `.git` were resolved through it too (no realpath each).
    assert any("/.git/worktrees/" in p for p in resolved), resolved
    assert str(slot / ".git") in resolved, resolved


@given(st.lists(st.text(alphabet="ab. -", min_size=1, max_size=4), max_size=6))
def test_ancestors_are_the_dirname_chain(parts: list[str]) -> None:
    """`ancestors` cuts at the last `/`: the same chain as `os.path.dirname` up to `/`."""
    path = "/" + "/".join(parts)
    want = [path]
    while want[-1] != "/":
        want.append(os.path.dirname(want[-1]))
    assert ancestors(path) == want
