"""Proof of landing by replay (spec §14.6 rungs 2 and 3, exact): a patch id says that two
diffs read alike, not that they change the same lines. `git patch-id` ignores line numbers,
so a change to one of two identical blocks has the patch id of the same change to the other.
A match by patch id holds only when replaying the change onto the matched commit's parent
gives exactly the matched commit's tree. Gathering only, for `observe/landed.py`; every git
call goes through `runner`.

A replay is a three-way merge (`git merge-tree --write-tree`) of `onto` and `change` whose
merge base is `base`. git 2.40 can be told the merge base (`--merge-base`); git 2.38 and 2.39
cannot, so the merge base is made instead: a commit holding `onto`'s tree whose one parent is
`base` (`git commit-tree`), merged with `change` (which has `base` as an ancestor), has
exactly `base` as its merge base. The same merge either way, on every git that has
`merge-tree --write-tree`. Those commits, like the merged trees, are objects no ref names
(git's garbage collection drops them); nothing else is written. Without `merge-tree
--write-tree` (git older than 2.38) nothing replays: no match holds, and a note says why.
"""

from __future__ import annotations

from collections.abc import Sequence

from fm_teardown.adapters import runner
from fm_teardown.model.values import value

__all__ = ["MAX_REPLAYS", "Replay", "merge_results", "replay"]

# Replays per slot and default branch: one `commit-tree` each, then one `merge-tree` for all.
# Beyond this, no match by patch id holds (fail closed), and a note says why.
MAX_REPLAYS = 256
# Commits made at once (the calls are short; a 2-core machine stays usable).
_WIDTH = 4
# The replay's own commits sign fm's name: no user identity needed (a slot may lack one),
# and never signed (a signing program is a program a repository names).
_COMMIT = (
    "-c",
    "user.name=fm teardown",
    "-c",
    "user.email=fm-teardown@localhost",
    "commit-tree",
    "--no-gpg-sign",
    "-m",
    "fm replay",
)

_HEX_OID = runner.HEX_OID


@value
class Replay:
    """Replay the changes `base` -> `change` onto `onto`; it holds when that gives exactly
    `want`'s tree. A commit matched by patch id: `base` its parent, `onto` the match's parent,
    `want` the match. A squash: `base` the merge base, `change` HEAD, `onto` the squash
    commit's parent, `want` the squash commit."""

    base: str
    onto: str
    change: str
    want: str


def merge_results(out: bytes, count: int) -> list[tuple[bool, str]]:
    """`git merge-tree --write-tree --no-messages --stdin`'s answers, in order: (clean, tree)
    for each of `count` merges (fewer when the output is cut short). Each answer is its
    status, its tree, the conflicted entries, then an empty field, NUL-separated."""
    tokens = out.decode("ascii", "replace").split("\0")
    found: list[tuple[bool, str]] = []
    i = 0
    while len(found) < count and i + 1 < len(tokens):
        clean, tree = tokens[i], tokens[i + 1]
        i += 2
        while i < len(tokens) and tokens[i] != "":  # conflicted entries, up to an empty one
            i += 1
        i += 1
        found.append((clean == "1", tree))
    return found


def replay(wt: str, replays: Sequence[Replay]) -> tuple[frozenset[Replay], str | None]:
    """The replays that hold (each clean, its tree exactly its `want`'s), and why git could not
    tell the others (None: it told them all). At most `MAX_REPLAYS`: beyond, none is tried."""
    todo = list(dict.fromkeys(replays))
    if not todo:
        return frozenset(), None
    if len(todo) > MAX_REPLAYS:
        return frozenset(), f"more than {MAX_REPLAYS} matches to replay"
    wants = list(dict.fromkeys(r.want for r in todo))
    trees = runner.git(wt, "rev-parse", *(f"{w}^{{tree}}" for w in wants))
    names = trees.text.split("\n") if trees.ok else []
    if len(names) != len(wants) or not all(_HEX_OID.fullmatch(n) for n in names):
        return frozenset(), f"cannot read the matched commits' trees: {trees.why()}"
    want_tree = dict(zip(wants, names, strict=True))
    # One commit per (parent, tree): `onto`'s tree on top of `base`.
    starts = list(dict.fromkeys((r.base, r.onto) for r in todo))
    made = runner.git_many(
        [(wt, (*_COMMIT, "-p", base, f"{onto}^{{tree}}")) for base, onto in starts], width=_WIDTH
    )
    start: dict[tuple[str, str], str] = {}
    for key, r in zip(starts, made, strict=True):
        if not r.ok or not _HEX_OID.fullmatch(r.text):
            return frozenset(), f"git commit-tree failed: {r.why()}"
        start[key] = r.text
    merged = runner.run(
        ["git", "-C", wt, "merge-tree", "--write-tree", "--no-messages", "--stdin"],
        timeout=runner.LOCAL_GIT_TIMEOUT,
        stdin="".join(f"{start[(r.base, r.onto)]} {r.change}\n" for r in todo),
    )
    if not merged.ok:
        why = merged.why()
        if merged.rc == 129:  # an unknown option: no `merge-tree --write-tree`
            why = f"git merge-tree --write-tree is not available (git 2.38 or later): {why}"
        return frozenset(), why
    answers = merge_results(merged.out, len(todo))
    if len(answers) != len(todo):
        return frozenset(), "git merge-tree gave fewer answers than merges asked"
    held = frozenset(
        r
        for r, (clean, tree) in zip(todo, answers, strict=True)
        if clean and tree == want_tree[r.want]
    )
    return held, None
