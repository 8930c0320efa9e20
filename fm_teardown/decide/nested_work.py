"""What rule 5 says of the work its verdict cannot see whole (spec §5 rule 5, §14.6, §14.7):
the repositories nested in TASK's slot, which `--force` cannot save with their history, and
a dry run's verdict resting on remote-tracking refs it did not fetch. Pure: values from the
verdict (`LandedLike`), causes (`model/causes.py`) and hints for `rules.unlanded`.
"""

from __future__ import annotations

from fm_teardown.model import causes
from fm_teardown.model.plan import LandedLike

__all__ = ["forced_hint", "nested_lines", "nested_refusal", "unfetched_lines"]

# Nested repositories named in a refusal's headline.
NAMED = 5


def unfetched_lines(landed: LandedLike, *, dry_run: bool) -> list[causes.Cause]:
    """A dry run's verdict that rests on refs it did not fetch says so (the real run fetches
    first, and may decide otherwise)."""
    return [causes.NotFetched(landed.unfetched)] if dry_run and landed.unfetched else []


def nested_lines(landed: LandedLike) -> list[causes.Cause]:
    """Each nested repository of the slot, with the work it holds."""
    return [causes.NestedWork(n) for n in landed.nested]


def nested_refusal(
    task: str, landed: LandedLike
) -> tuple[list[causes.Cause], list[str], causes.Cause]:
    """`--force` with nested repositories in the slot (exit 5): its save would keep each as a
    commit id only, and nothing would restore its files or history. Lines, hints, headline."""
    paths = tuple(n.path for n in landed.nested[:NAMED])
    unsaved = causes.NestedUnsaved(task, paths, max(len(landed.nested) - NAMED, 0))
    hint = (
        "push the nested repositories' work to their remotes and move them out of the slot "
        f"(or copy them elsewhere), then run fm teardown {task} --force again"
    )
    return [unsaved, *nested_lines(landed)], [hint], unsaved


def forced_hint(task: str, landed: LandedLike, hints: list[str]) -> list[str]:
    """The refusal's hints, whose last (the forced teardown) promises no save while nested
    repositories are in the slot: the forced plan refuses then (spec §14.7)."""
    if not landed.nested:
        return hints
    return [
        *hints[:-1],
        "--force cannot save the nested repositories with their history: push their work and "
        f"move them out of the slot first, then fm teardown {task} --force",
    ]
