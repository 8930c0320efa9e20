"""Canonical slot paths (spec §4): symlinks and `..` resolved, trailing slashes dropped, a
path that no longer exists resolved through its deepest existing ancestor; containment is by
component, never by string prefix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fm_teardown.model.paths import (
    Canonicalizer,
    ancestors,
    canonical,
    is_ancestor_or_same,
    is_within,
)

# -- canonical -----------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """`real/1/proj` (a slot), `alias` -> `real`, `alias1` -> `real/1` (a relative link)."""
    root = Path(os.path.realpath(tmp_path))
    (root / "real" / "1" / "proj").mkdir(parents=True)
    (root / "real" / "10").mkdir()
    (root / "alias").symlink_to(root / "real")
    (root / "alias1").symlink_to("real/1")
    return root


def test_canonical_of_a_real_path_is_itself(tree: Path) -> None:
    slot = str(tree / "real" / "1" / "proj")
    assert canonical(slot) == slot


def test_canonical_resolves_symlinked_aliases(tree: Path) -> None:
    slot = str(tree / "real" / "1" / "proj")
    assert canonical(str(tree / "alias" / "1" / "proj")) == slot
    assert canonical(str(tree / "alias1" / "proj")) == slot


def test_canonical_resolves_dotdot_and_dot(tree: Path) -> None:
    slot = str(tree / "real" / "1" / "proj")
    assert canonical(str(tree / "real" / "10" / ".." / "1" / "." / "proj")) == slot
    # `..` after a symlink applies to the link's target, not to the spelling
    assert canonical(str(tree / "alias1" / ".." / "10")) == str(tree / "real" / "10")


@pytest.mark.parametrize("suffix", ["/", "//", "/.", "/./"])
def test_canonical_drops_trailing_slashes(tree: Path, suffix: str) -> None:
    slot = str(tree / "real" / "1" / "proj")
    assert canonical(slot + suffix) == slot
    assert canonical(str(tree / "alias" / "1" / "proj") + suffix) == slot


def test_canonical_collapses_repeated_slashes(tree: Path) -> None:
    assert canonical(str(tree) + "//real///1/proj") == str(tree / "real" / "1" / "proj")


def test_canonical_of_a_gone_path_appends_the_rest(tree: Path) -> None:
    gone = tree / "real" / "2" / "proj"
    assert canonical(str(gone)) == str(gone)
    assert canonical(str(gone) + "/") == str(gone)


def test_canonical_of_a_gone_path_under_a_symlinked_ancestor(tree: Path) -> None:
    assert canonical(str(tree / "alias" / "2" / "proj")) == str(tree / "real" / "2" / "proj")
    assert canonical(str(tree / "alias1" / "gone" / "x")) == str(tree / "real" / "1" / "gone/x")


def test_canonical_of_a_gone_path_with_dotdot(tree: Path) -> None:
    assert canonical(str(tree / "alias" / "2" / ".." / "3")) == str(tree / "real" / "3")


def test_canonical_of_a_removed_slot_equals_its_former_canonical(tree: Path) -> None:
    slot = tree / "real" / "1" / "proj"
    before = canonical(str(tree / "alias" / "1" / "proj"))
    slot.rmdir()
    assert canonical(str(tree / "alias" / "1" / "proj")) == before == str(slot)


def test_canonical_refuses_relative_paths() -> None:
    with pytest.raises(ValueError):
        canonical("pool/1/proj")
    with pytest.raises(ValueError):
        canonical("")


def test_canonical_root() -> None:
    assert canonical("/") == "/"
    assert canonical("//") == "/"
    assert canonical("/..") == "/"


# -- containment ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("child", "parent", "inside"),
    [
        ("/p/1", "/p/1", True),
        ("/p/1/x", "/p/1", True),
        ("/p/1/x/y", "/p/1", True),
        ("/p/10", "/p/1", False),
        ("/p/1", "/p/10", False),
        ("/p/10/x", "/p/1", False),
        ("/p", "/p/1", False),
        ("/p/1", "/", True),
        ("/", "/", True),
        ("/", "/p", False),
        ("/p-1", "/p", False),
        ("/p.1", "/p", False),
    ],
)
def test_is_within(child: str, parent: str, inside: bool) -> None:
    assert is_within(child, parent) is inside
    assert is_ancestor_or_same(parent, child) is inside


def test_is_ancestor_or_same() -> None:
    assert is_ancestor_or_same("/home", "/home/op")
    assert is_ancestor_or_same("/home/op", "/home/op")
    assert is_ancestor_or_same("/", "/home/op")
    assert not is_ancestor_or_same("/home/op/pool", "/home/op")
    assert not is_ancestor_or_same("/home/o", "/home/op")


def test_ancestors_nearest_first() -> None:
    assert ancestors("/a/b/c") == ["/a/b/c", "/a/b", "/a", "/"]
    assert ancestors("/") == ["/"]


# -- properties ----------------------------------------------------------------------------

# Few distinct names, so that one path is often a prefix (by string or by component) of another.
NAMES = st.sampled_from(["1", "10", "p", "p1", "p.1", "a b", "x-y", ".", ".."])
COMPONENTS = st.lists(NAMES, max_size=6)
ROOTS = st.sampled_from(["/", "/fm-test-no-such-root"])


def build(root: str, parts: list[str]) -> str:
    return canonical(os.path.join(root, *parts)) if parts else canonical(root)


@settings(max_examples=500, deadline=None)
@given(ROOTS, COMPONENTS, COMPONENTS, COMPONENTS)
def test_is_within_agrees_with_pathlib(
    root: str, shared: list[str], a_tail: list[str], b_tail: list[str]
) -> None:
    a = build(root, shared + a_tail)
    b = build(root, shared + b_tail)
    assert is_within(a, b) == Path(a).is_relative_to(b)
    assert is_within(b, a) == Path(b).is_relative_to(a)
    assert is_ancestor_or_same(b, a) == is_within(a, b)
    assert is_within(a, b) == (b in ancestors(a))


@settings(max_examples=300, deadline=None)
@given(ROOTS, COMPONENTS)
def test_canonical_is_idempotent_and_slash_insensitive(root: str, parts: list[str]) -> None:
    path = os.path.join(root, *parts)
    c = canonical(path)
    assert c.startswith("/")
    assert c == "/" or not c.endswith("/")
    assert "//" not in c
    assert canonical(c) == c
    assert canonical(path + "/") == c
    assert all(p not in (".", "..") for p in c.split("/"))


# A real tree with symlinks, shared by the examples (hypothesis forbids function-scoped fixtures).
TREE_NAMES = st.sampled_from(["real", "1", "proj", "alias", "up", "gone", "x", ".", ".."])


@pytest.fixture(scope="module")
def linked_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("canon")))
    (root / "real" / "1" / "proj").mkdir(parents=True)
    (root / "alias").symlink_to(root / "real")
    (root / "real" / "1" / "up").symlink_to("..")
    (root / "real" / "1" / "proj" / "x").symlink_to(root / "alias" / "1")
    return root


WARM = Canonicalizer()  # shared by the examples below: its cache only grows


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(TREE_NAMES, max_size=7))
def test_canonical_through_symlinks_matches_the_contract(
    linked_tree: Path, parts: list[str]
) -> None:
    path = os.path.join(str(linked_tree), *parts)
    c = canonical(path)
    # The memoised canonicaliser used for whole fleets agrees, fresh or warm.
    assert Canonicalizer()(path) == c
    assert WARM(path) == c
    if os.path.exists(path):
        assert c == str(Path(path).resolve(strict=True))
        return
    # Deepest existing ancestor resolved, the rest appended (when the rest is plain names).
    k = len(parts)
    while k > 0 and not os.path.exists(os.path.join(str(linked_tree), *parts[:k])):
        k -= 1
    rest = parts[k:]
    if any(p in (".", "..") for p in rest):
        return
    head = str(Path(os.path.join(str(linked_tree), *parts[:k])).resolve(strict=True))
    assert c == os.path.join(head, *rest)
