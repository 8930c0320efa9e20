"""`@value` makes what `dataclasses` would make of a class, the parts fm uses: `__init__`
(positional and by name, defaults, default factories, a base's fields first), fields that
`dataclasses.fields` and `dataclasses.replace` read, equality, hashing and repr by field
values; a class's own `__init__` stays, its `__post_init__` runs, and a `ClassVar` is no
field."""

from __future__ import annotations

import dataclasses
import sys
import threading
from dataclasses import field, replace
from typing import Any, ClassVar

import pytest

from fm_teardown.model.values import value


@value
class Plain:
    name: str
    count: int = 2
    tags: tuple[str, ...] = ()
    seen: dict[str, int] = field(default_factory=dict)
    KIND: ClassVar[str] = "plain"


@value
class Base:
    a: int


@value
class Derived(Base):
    b: str = "b"


@value
class OwnInit:
    x: int

    def __init__(self, text: str) -> None:
        object.__setattr__(self, "x", len(text))


@value
class Checked:
    low: int
    high: int = 10

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low above high")


@dataclasses.dataclass(eq=False, repr=False)
class Reference:
    name: str
    count: int = 2
    tags: tuple[str, ...] = ()
    seen: dict[str, int] = field(default_factory=dict)
    KIND: ClassVar[str] = "plain"


def test_init_fields_and_replace_as_dataclasses_makes_them() -> None:
    p = Plain("n")
    r = Reference("n")
    assert [f.name for f in dataclasses.fields(p)] == [f.name for f in dataclasses.fields(r)]
    assert (p.name, p.count, p.tags, p.seen) == (r.name, r.count, r.tags, r.seen)
    assert Plain("n", 3, ("t",), {"k": 1}).seen == {"k": 1}
    assert Plain(name="n", count=5).count == 5
    assert Plain("a").seen is not Plain("b").seen  # a new one each time, from the factory
    q = replace(p, count=7)
    assert (q.name, q.count, q.seen) == ("n", 7, p.seen)
    assert Plain.KIND == "plain" and "KIND" not in {f.name for f in dataclasses.fields(p)}
    assert dataclasses.is_dataclass(p)
    with pytest.raises(TypeError):
        Plain()  # type: ignore[call-arg]


def test_equality_hash_and_repr_by_field_values() -> None:
    assert Plain("n") == Plain("n", 2) and Plain("n") != Plain("m")
    assert hash(Derived(1)) == hash(Derived(1, "b"))  # hashable when its fields are
    assert Derived(1) != Base(1)  # the same class only
    assert repr(Derived(1)) == "Derived(a=1, b='b')"


def test_a_bases_fields_come_first() -> None:
    d = Derived(1, "c")
    assert (d.a, d.b) == (1, "c")
    assert [f.name for f in dataclasses.fields(d)] == ["a", "b"]
    assert replace(d, a=4) == Derived(4, "c")


def test_a_class_own_init_stays() -> None:
    o = OwnInit("four")
    assert o.x == 4 and [f.name for f in dataclasses.fields(o)] == ["x"]


def test_a_post_init_runs_after_the_fields_are_set() -> None:
    assert Checked(3).high == 10
    with pytest.raises(ValueError):
        Checked(11)
    with pytest.raises(ValueError):
        replace(Checked(3), low=12)  # replace builds through __init__, so it checks too


def _base_and_made() -> tuple[type[Any], type[Any]]:
    """A value class with a default factory and a value subclass of it, new each call (a
    class is made on its first instance)."""

    @value
    class Base:
        a: int
        tags: list[str] = field(default_factory=list)

    @value
    class Made(Base):
        b: str = "x"

    return Base, Made


def test_a_subclass_made_after_its_base_keeps_the_base_s_default_factories() -> None:
    Base, Made = _base_and_made()
    assert Base(1) == Base(1, [])  # the base first: its factory is no class attribute since
    assert Made(2) == Made(2, [], "x")


def test_a_class_first_made_by_several_threads_at_once_is_made_once_for_all() -> None:
    """The audit makes the first instances of some classes from several threads at once (its
    landed facts): each thread gets a whole instance, none the bare `object.__init__` nor an
    `__init__` made from a class half made."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can: the race shows
    try:
        _made_at_once()
    finally:
        sys.setswitchinterval(switch)


def _made_at_once() -> None:
    for _ in range(50):
        _one_round()


def _one_round() -> None:
    _, Made = _base_and_made()
    start = threading.Barrier(8)
    made: list[Any] = []
    errors: list[BaseException] = []

    def make() -> None:
        start.wait()
        try:
            made.append(Made(1, b="y"))
        except BaseException as exc:  # what the test is after: any failure at all
            errors.append(exc)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert made == [Made(1, [], "y")] * 8


def test_the_generic_init_and_the_compiled_one_make_the_same_instances_and_errors() -> None:
    """A class's first instances are made by a generic `__init__`; its `COMPILE_AFTER`th
    compiles its own. Both bind arguments alike and refuse the same mistakes."""
    from fm_teardown.model import values

    @value
    class Pair:
        a: int
        b: str = "b"
        tags: list[str] = field(default_factory=list)

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("a < 0")

    def made() -> list[object]:
        return [Pair(1), Pair(1, "x"), Pair(a=2, tags=["t"]), Pair(3, b="y", tags=[])]

    def refused() -> list[str]:
        out = []
        cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
            ((), {}),
            ((1, "x", [], 4), {}),
            ((1,), {"a": 2}),
            ((1,), {"c": 3}),
        ]
        for args, kwargs in cases:
            with pytest.raises(TypeError) as caught:
                Pair(*args, **kwargs)
            out.append(str(caught.value).split("() ", 1)[1])
        with pytest.raises(ValueError, match="a < 0"):
            Pair(-1)
        return out

    Pair(0)  # its first instance makes the class: the generic `__init__` in place
    generic = Pair.__init__
    first, first_refused = made(), refused()
    assert Pair.__init__ is generic  # these were made by the generic one
    assert first == [Pair(1, "b", []), Pair(1, "x", []), Pair(2, "b", ["t"]), Pair(3, "y", [])]
    assert Pair(1).tags is not Pair(1).tags  # a factory's value per instance
    while Pair.__init__ is generic:
        Pair(0)
    compiled_refused = refused()
    assert made() == first
    assert [w.split(" ")[0] for w in compiled_refused] == [
        w.split(" ")[0] for w in first_refused
    ]  # missing, takes, got, got
    assert Pair.__init__ is not generic and values.COMPILE_AFTER > 10
