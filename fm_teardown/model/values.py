"""`@value`: the immutable records fm passes between its stages, at a quarter of the cost.

A `@dataclass(frozen=True)` compiles six small functions when its module is imported
(`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`), about 0.5-1 ms
per class, and a one-task dry run imports some forty of them: a tenth of its time (issue 14).
`@value` compiles only `__init__` (from the class's annotations, without the introspection
`dataclasses` spends most of its time on, at half its cost) and shares one `__eq__`, `__hash__` and
`__repr__` between all classes (the same semantics: by field values, in field order, same class
only). Immutability is checked statically: `dataclass_transform(frozen_default=True)` makes
mypy (strict, in CI) reject any assignment to a field, so the instances need no runtime guard,
which also makes them four times cheaper to create. Even that `__init__` is compiled only once
the class has made a few instances (`COMPILE_AFTER`; a generic one binds the arguments till
then): a dry run imports some sixty of these classes, makes instances of about half, and
many of those only a handful. `dataclasses.replace` and `field(default_factory=...)` work as for any
dataclass, and so does a `__post_init__`; `dataclasses.fields` once an instance of the class
was made.
"""

from __future__ import annotations

import dataclasses
import threading
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
    out: Any = cls
    out.__value__ = True  # the classes whose annotations are fields (`_fields_made`)
    if not cls.__doc__:
        cls.__doc__ = cls.__name__  # else dataclasses computes a signature for it
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


# Made under a lock: the first instances of a class may be made by several threads at once
# (the audit gathers landed facts from a few), and making a class edits it (its `__init__`,
# the class attributes of its fields). Without it one thread saw `object.__init__` while
# another made the class ("BaseFacts() takes no arguments"); the class always has an
# `__init__` now: its first one, then the generic one, then its compiled one.
_MAKING = threading.Lock()


def _first_init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls: Any = type(self)
    with _MAKING:
        for klass in reversed(cls.__mro__):  # bases first: a subclass's fields extend theirs
            if klass.__dict__.get("__init__") is _first_init:
                _made(klass)
    init: Any = cls.__init__
    init(self, *args, **kwargs)


def _made(cls: type[Any]) -> None:
    """The class's `__init__` for its fields (generic, compiled once the class has made a few
    instances; eq, hash and repr are shared, frozen is checked statically), and the
    `__dataclass_fields__` that `dataclasses.replace` and `dataclasses.fields` read. What
    `dataclasses.dataclass` would make, without the introspection it spends most of its time
    on (a dry run makes some forty of these)."""
    field_type = getattr(dataclasses, "_FIELD", None)
    if field_type is None:  # another dataclasses than CPython's 3.11-3.13: its own way
        dataclasses.dataclass(cls, eq=False, repr=False)
        names = tuple(f.name for f in dataclasses.fields(cls))
    else:
        names = _fields_made(cls, field_type)
    out: Any = cls
    out.__value_fields__ = names


def _fields_made(cls: type[Any], field_type: object) -> tuple[str, ...]:
    """The class's fields, set as `__dataclass_fields__`, and its `__init__`: the generic one
    (`_generic_init`) until the class has made `COMPILE_AFTER` instances, then its own."""
    fields: dict[str, dataclasses.Field[Any]] = {}
    for klass in reversed(cls.__mro__):
        own = klass.__dict__
        if "__value__" not in own:
            continue  # only value classes hold fields (object, a Protocol hold none)
        if klass is not cls and "__dataclass_fields__" in own:
            # A base made already: its fields as made (a field with a default factory is no
            # class attribute of it any more).
            fields.update(own["__dataclass_fields__"])
            continue
        for name, kind in own.get("__annotations__", {}).items():
            if str(kind).startswith(("ClassVar", "typing.ClassVar")):
                continue
            default = own.get(name, dataclasses.MISSING)
            if isinstance(default, dataclasses.Field):
                f = default
                if f.default is dataclasses.MISSING:
                    if klass is cls and name in own:
                        delattr(cls, name)  # as dataclasses leaves it: no class attribute
                else:
                    setattr(klass, name, f.default)
            else:
                f = dataclasses.field(default=default)
            f.name, f.type = name, kind
            f._field_type = field_type  # type: ignore[attr-defined]
            fields[name] = f
    out: Any = cls
    out.__dataclass_fields__ = fields
    if cls.__dict__.get("__init__", _first_init) is _first_init:
        out.__init__ = _generic_init(cls, fields)  # a class's own __init__ stays
    return tuple(fields)


# How many instances a class makes through the generic `__init__` before its own is
# compiled. Compiling one costs about 60 us (the source made and `exec`'d); most classes
# make a handful of instances in a run (an audit compiled 64 classes, 4 ms, for few), and
# the generic one costs a microsecond or two more per instance than a compiled one.
COMPILE_AFTER = 16


def _generic_init(cls: type[Any], fields: dict[str, dataclasses.Field[Any]]) -> Any:
    """An `__init__` for the class's fields that binds its arguments as a compiled one would
    (the same defaults, factories, `__post_init__` and errors), until the class's
    `COMPILE_AFTER`th instance: that one compiles the class's own."""
    names = tuple(fields)
    count = len(names)
    missing = dataclasses.MISSING
    defaults: dict[str, tuple[bool, Any]] = {}
    for name, f in fields.items():
        if f.default_factory is not missing:
            defaults[name] = (True, f.default_factory)
        elif f.default is not missing:
            defaults[name] = (False, f.default)
    post_init = hasattr(cls, "__post_init__")
    qualname = f"{cls.__qualname__}.__init__"
    made = [0]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        made[0] += 1
        if made[0] >= COMPILE_AFTER:
            _compiled(cls, fields, __init__)  # for the instances after this one
        if len(args) > count:
            raise TypeError(
                f"{qualname}() takes {count + 1} positional arguments but {len(args) + 1} "
                "were given"
            )
        # Written to the instance's dict, as `self.x = x` would (no field is a descriptor and
        # no value class sets attributes its own way): a third of the cost of setattr.
        into = self.__dict__
        for name, given in zip(names, args, strict=False):
            if name in kwargs:
                raise TypeError(f"{qualname}() got multiple values for argument '{name}'")
            into[name] = given
        for name in names[len(args) :]:
            if name in kwargs:
                into[name] = kwargs.pop(name)  # (a dict of this call's own)
                continue
            default = defaults.get(name)
            if default is None:
                raise TypeError(f"{qualname}() missing 1 required argument: '{name}'")
            into[name] = default[1]() if default[0] else default[1]
        if kwargs:
            name = next(iter(kwargs))
            raise TypeError(f"{qualname}() got an unexpected keyword argument '{name}'")
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = qualname
    return __init__


def _compiled(cls: type[Any], fields: dict[str, dataclasses.Field[Any]], generic: Any) -> None:
    """The class's own `__init__`, compiled from its fields, in place of `generic`."""
    params: list[str] = []
    body: list[str] = []
    where: dict[str, Any] = {"MISSING": dataclasses.MISSING}
    for name, f in fields.items():
        if f.default_factory is not dataclasses.MISSING:
            where[f"_f_{name}"] = f.default_factory
            params.append(f"{name}=MISSING")
            body.append(f"self.{name} = _f_{name}() if {name} is MISSING else {name}")
            continue
        if f.default is dataclasses.MISSING:
            params.append(name)
        else:
            where[f"_d_{name}"] = f.default
            params.append(f"{name}=_d_{name}")
        body.append(f"self.{name} = {name}")
    if hasattr(cls, "__post_init__"):  # a class's own check of its fields, as in dataclasses
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n " + "\n ".join(body or ["pass"])
    exec(source, where)
    init = where["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    out: Any = cls
    with _MAKING:
        if cls.__dict__.get("__init__") is generic:
            out.__init__ = init
