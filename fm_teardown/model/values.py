"""`@value`: the immutable records fm passes between its stages, at a quarter of the cost.

A `@dataclass(frozen=True)` compiles six small functions when its module is imported
(`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`), about 0.5-1 ms
per class, and a one-task dry run imports some forty of them: a tenth of its time (issue 14).
`@value` lets `dataclasses` compile only `__init__` and shares one `__eq__`, `__hash__` and
`__repr__` between all classes (the same semantics: by field values, in field order, same class
only). Immutability is checked statically: `dataclass_transform(frozen_default=True)` makes
mypy (strict, in CI) reject any assignment to a field, so the instances need no runtime guard,
which also makes them four times cheaper to create. Even that `__init__` is compiled only when
the class's first instance is made: a dry run imports some sixty of these classes and makes
instances of about half. `dataclasses.replace` and `field(default_factory=...)` work as for any
dataclass; `dataclasses.fields` once an instance of the class was made.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

__all__ = ["value"]

T = TypeVar("T")


def _names(self: Any) -> tuple[str, ...]:
    names: tuple[str, ...] = type(self).__value_fields__
    return names


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented  # type: ignore[no-any-return]
    return all(getattr(self, n) == getattr(other, n) for n in _names(self))


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in _names(self)))


def _repr(self: Any) -> str:
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self))
    return f"{type(self).__qualname__}({inner})"


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def value(cls: type[T]) -> type[T]:
    if not cls.__doc__:
        cls.__doc__ = cls.__name__  # else dataclasses computes a signature for it
    out: Any = cls
    own = cls.__dict__
    if "__eq__" not in own:  # a class's own __eq__ (and its __hash__) stay, as in dataclasses
        out.__eq__ = _eq
        out.__hash__ = _hash
    if "__repr__" not in own:
        out.__repr__ = _repr
    if "__init__" in own:
        _made(cls)
    else:
        # The class is made a dataclass when its first instance is: a run creates instances
        # of a fraction of the classes it imports (a dry run: no step result at all).
        out.__init__ = _first_init
    return cls


def _first_init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls: Any = type(self)
    for klass in reversed(cls.__mro__):  # bases first: a subclass's fields extend theirs
        if klass.__dict__.get("__init__") is _first_init:
            del klass.__init__
            _made(klass)
    init: Any = cls.__init__
    init(self, *args, **kwargs)


def _made(cls: type[Any]) -> None:
    """`dataclasses` compiles the class's `__init__` (and nothing else: eq, hash and repr are
    shared, frozen is checked statically)."""
    dataclasses.dataclass(cls, eq=False, repr=False)
    out: Any = cls
    out.__value_fields__ = tuple(f.name for f in dataclasses.fields(cls))
