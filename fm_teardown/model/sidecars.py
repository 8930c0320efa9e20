"""The sidecars firstmate writes beside a task's record: which `state/<id>.*` files go with it.

A teardown removes TASK's record and the sidecar files firstmate's own tools write for it
(`docs/firstmate.md` lists them), and nothing else: a file such as `<id>.meta.bak`,
`<id>.meta~` or an editor's copy is someone's, so it is kept, said in the real run's output
and listed by the audit as a loose end. `<id>.backlog-close` is firstmate's too, but another
tool completes it after the teardown: kept, and no loose end.
"""

from __future__ import annotations

from collections.abc import Iterable

from fm_teardown.model.values import value

__all__ = ["FIRSTMATE_SIDECARS", "KEPT_SIDECARS", "Sidecars", "split"]

# The suffixes firstmate's teardown script removed (its state files, turn-end and busy
# markers, PR-poll artifacts, relaunch and session files; `inbox` is a directory).
FIRSTMATE_SIDECARS: frozenset[str] = frozenset(
    {
        "status",
        "turn-ended",
        "pi-ext.ts",
        "grok-turnend-token",
        "kimi-turnend-token",
        "check.sh",
        "pr-poll",
        "pr-poll-registration",
        "pr-poll-retirement",
        "pr-poll-merge-notified",
        "check-trust",
        "busy-gen",
        "busy-state",
        "herdr-presentation",
        "muse-session",
        "muse-session-current",
        "cursor-session",
        "control-relaunch",
        "control-relaunch.meta-prior",
        "control-relaunch.brief-prior",
        "control-relaunch.note",
        "reconcile-nudged",
        "inbox",
        # The agy harness: its turn-end token and its session sidecar.
        "agy-turnend-token",
        "agy-session",
    }
)

# Sidecars that another tool completes after the teardown: never swept (spec §10).
KEPT_SIDECARS: tuple[str, ...] = ("backlog-close",)


@value
class Sidecars:
    """TASK's `state/<id>.*` names in one listing, sorted: what the sweep removes, and what it
    keeps because firstmate does not write it (`foreign`)."""

    swept: tuple[str, ...]
    foreign: tuple[str, ...]


def split(task_id: str, listing: Iterable[str]) -> Sidecars:
    """TASK's `state/<id>.<suffix>` files, judged from this one directory listing: never a
    `.meta` (TASK's own goes last, separately), never a file of a longer task id (`<id>.x.meta`
    in the listing makes every `<id>.x.*` that task's), never a kept sidecar; of the rest,
    only firstmate's sidecar names are swept."""
    names = sorted(listing)
    prefix = f"{task_id}."
    longer = {
        name[: -len(".meta")] + "."
        for name in names
        if name.startswith(prefix) and name.endswith(".meta") and name != f"{task_id}.meta"
    }
    swept: list[str] = []
    foreign: list[str] = []
    for name in names:
        if not name.startswith(prefix) or name.endswith(".meta"):
            continue
        if any(name.startswith(p) for p in longer):
            continue
        suffix = name[len(prefix) :]
        if suffix in KEPT_SIDECARS:
            continue
        (swept if suffix in FIRSTMATE_SIDECARS else foreign).append(name)
    return Sidecars(tuple(swept), tuple(foreign))
