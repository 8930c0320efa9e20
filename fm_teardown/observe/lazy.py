"""`LazyMap`: the observation's per-key laziness, worked out in `observe` before deciding.

An observation holds every key (every record, every slot) and works out a value, from the
scans already taken, the first time it is asked for. `observe.observation.ready` asks for
every value that deciding a task reads, so `decide` reads values only, while a one-task dry
run still pays only for its own slot and its possible owners.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar, overload

__all__ = ["LazyMap"]

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class LazyMap(Mapping[K, V]):
    """A mapping whose keys are known up front and whose values are worked out on first use.

    Deciding one task needs the endpoints of a few tasks and the facts of one slot; the fleet
    audit needs them all. So an observation holds every key (every record, every slot) and
    computes a value, from the scans already taken, only when it is asked for."""

    def __init__(self, keys: Iterable[K], compute: Callable[[K], V]) -> None:
        self._keys = dict.fromkeys(keys)
        self._compute = compute
        self._values: dict[K, V] = {}

    def __getitem__(self, key: K) -> V:
        if key in self._values:
            return self._values[key]
        if key not in self._keys:
            raise KeyError(key)
        value = self._values[key] = self._compute(key)
        return value

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V | D, /) -> V | D: ...
    def get(self, key: K, default: object = None, /) -> object:
        # Not Mapping's (a `try: self[key]` per call): deciding a fleet asks this thousands of
        # times.
        if key in self._values:
            return self._values[key]
        if key not in self._keys:
            return default
        value = self._values[key] = self._compute(key)
        return value

    def __iter__(self) -> Iterator[K]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys
