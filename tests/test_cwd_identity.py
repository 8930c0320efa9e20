"""Which mounts may show a slot's directory under another name (`cwd_identity`'s aliases):
every mount of the slot's filesystem but the one the slot lies under and `/`. The slot's own
mount is the nearest of its ancestors that is a mount point; checked against that definition
spelt the plain way (the longest mount point the slot lies within), on mount tables made up
for the purpose."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fm_teardown.model.paths import is_within
from fm_teardown.model.world import ProcessTable
from fm_teardown.observe import cwd_identity
from fm_teardown.observe.cwd_identity import Directories

NAMES = st.sampled_from(["a", "b", "pool", "srv", "x y"])
PATHS = st.lists(NAMES, min_size=0, max_size=4).map(lambda parts: "/" + "/".join(parts))
DEVICES = st.sampled_from(["8:1", "8:2", "0:45"])
MOUNTS = st.lists(st.tuples(DEVICES, PATHS), min_size=1, max_size=8)


def plainly(mounts: list[tuple[str, str]], slot: str, device: str) -> tuple[str, ...]:
    under = [point for _, point in mounts if is_within(slot, point)]
    own = max(under, key=len) if under else None
    return tuple(p for d, p in mounts if d == device and p not in (own, "/"))


def _directories(monkeypatch: pytest.MonkeyPatch, mounts: list[tuple[str, str]]) -> Directories:
    monkeypatch.setattr(cwd_identity, "_mounts", lambda: list(mounts))
    return Directories(ProcessTable({}, None, {}, frozenset()))


@settings(max_examples=300, deadline=None)
@given(mounts=MOUNTS, slots=st.lists(st.tuples(PATHS, DEVICES), min_size=1, max_size=6))
def test_a_slots_aliases_are_its_filesystems_other_mounts(
    mounts: list[tuple[str, str]], slots: list[tuple[str, str]]
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        found = _directories(monkeypatch, mounts)
        for slot, device in slots:  # one Directories asked of several slots, as an audit does
            major, minor = (int(n) for n in device.split(":"))
            assert found._aliases(slot, os.makedev(major, minor)) == plainly(
                mounts, slot, device
            ), (mounts, slot, device)


def test_a_bind_mount_of_the_pool_is_an_alias_of_its_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mounts = [("8:1", "/"), ("8:2", "/data"), ("8:2", "/data/pool"), ("8:2", "/mnt/view")]
    found = _directories(monkeypatch, mounts)
    assert found._aliases("/data/pool/p/1/project", os.makedev(8, 2)) == ("/data", "/mnt/view")
    assert found._aliases("/home/op/slot", os.makedev(8, 1)) == ()
