"""Rule 5's few-at-a-time map (`observe.landed._pmap`): every item once, results in the
order given, and a failure raised to the caller."""

from __future__ import annotations

import threading

import pytest

from fm_teardown.observe import landed


def test_every_item_once_in_order_on_a_few_threads() -> None:
    seen: list[int] = []
    threads: set[int] = set()

    def square(i: int) -> int:
        seen.append(i)
        threads.add(threading.get_ident())
        return i * i

    assert landed._pmap(square, list(range(200))) == [i * i for i in range(200)]
    assert sorted(seen) == list(range(200))
    assert len(threads) <= landed.WORKERS


def test_a_failure_is_raised_to_the_caller() -> None:
    def fail_on_7(i: int) -> int:
        if i == 7:
            raise ValueError("item 7")
        return i

    with pytest.raises(ValueError, match="item 7"):
        landed._pmap(fail_on_7, list(range(50)))
