"""Remote-tracking refs a real run may count (spec §14.6, rung 1, confirmed): a ref counts
only after this run's fetch of its remote, with prune, succeeded. A remote-tracking ref is a
local copy: when its branch is gone from the server it still names the commits, and the next
`git fetch --prune` deletes the only copy. Gathering only, for `observe/landed_project.py`;
every git call goes through `runner`.

Which remotes: origin (its default branch is every slot's first comparison), and each remote
whose remote-tracking refs have one of the commits judged (found with `for-each-ref
--contains`, one call per commit: a real run judges one task). Each is fetched as its own
configuration says (`remote.<name>.fetch`), with `--prune`, and the refs that count are the
ones its refspecs write: a ref no fetched remote writes (a failed fetch, a remote removed, a
ref made by hand) does not count, and a note says so when it has a commit judged.

A dry run fetches nothing and counts the refs as they are; its verdict says so
(`LandedFacts.unfetched`).
"""

from __future__ import annotations

from collections.abc import Iterable

from fm_teardown.adapters import runner
from fm_teardown.model.values import value

__all__ = ["Confirmed", "confirm", "covered"]

# Remotes fetched at once.
_WIDTH = 4
_REMOTES = "refs/remotes/"
# A fetch as the remote's configuration says, pruning what its branches no longer have; quiet,
# no tags, no submodules, no FETCH_HEAD, no maintenance; the remote's name never an option.
_FETCH = (
    "fetch",
    "--quiet",
    "--prune",
    "--no-tags",
    "--no-recurse-submodules",
    "--no-write-fetch-head",
    "--no-auto-maintenance",
    "--end-of-options",
)


@value
class Confirmed:
    """The remotes this run fetched (with prune), each with the refs its refspecs write
    (`refs/remotes/origin/*`), and what could not be fetched or counted, in words."""

    fetched: dict[str, tuple[str, ...]]
    notes: tuple[str, ...] = ()

    def counts(self, ref: str) -> bool:
        """Whether `ref` is written by a remote this run fetched."""
        return any(covered(ref, dst) for dsts in self.fetched.values() for dst in dsts)


def covered(ref: str, dst: str) -> bool:
    """Whether a refspec's destination (`refs/remotes/origin/*`, one `*` at most, which
    matches across `/` as in git's refspecs) names `ref`."""
    head, star, tail = dst.partition("*")
    if not star:
        return ref == dst
    return len(ref) >= len(head) + len(tail) and ref.startswith(head) and ref.endswith(tail)


def _refspecs(project: str) -> dict[str, tuple[str, ...]] | str:
    """Each remote's fetch destinations under `refs/remotes/`, or why they cannot be read."""
    r = runner.git(project, "config", "-z", "--get-regexp", r"^remote\..+\.fetch$")
    if r.rc == 1:
        return {}  # no remote fetches anything
    if not r.ok:
        return r.why()
    out: dict[str, list[str]] = {}
    for item in r.out.split(b"\0"):
        key, _, spec = item.decode("utf-8", "surrogateescape").partition("\n")
        if not key.startswith("remote.") or not key.endswith(".fetch"):
            continue
        name = key[len("remote.") : -len(".fetch")]
        dsts = out.setdefault(name, [])
        spec = spec.removeprefix("+")
        if spec.startswith("^"):
            continue  # a negative refspec writes nothing
        _, colon, dst = spec.partition(":")
        if colon and dst.startswith(_REMOTES):
            dsts.append(dst)
    return {name: tuple(dsts) for name, dsts in out.items()}


def _holding(project: str, commits: Iterable[str]) -> set[str]:
    """The remote-tracking refs that have one of `commits` (a commit git cannot read has
    none: it is judged without them)."""
    found: set[str] = set()
    for commit in commits:
        r = runner.git(
            project, "for-each-ref", "--format=%(refname)", "--contains", commit, _REMOTES
        )
        if r.ok:
            found.update(line for line in r.text.split("\n") if line)
    return found


def confirm(project: str, commits: Iterable[str], timeout: float) -> Confirmed:
    """Fetch, with prune, origin and every remote whose refs have one of `commits`."""
    specs = _refspecs(project)
    if isinstance(specs, str):
        return Confirmed({}, (f"cannot read the remotes of {project}: {specs}",))
    notes: list[str] = []
    holding = _holding(project, commits)
    wanted = {"origin"} & specs.keys()
    for ref in sorted(holding):
        owners = [name for name, dsts in specs.items() if any(covered(ref, d) for d in dsts)]
        if owners:
            wanted.update(owners)
        else:
            notes.append(
                f"{ref} has the work judged but no remote fetches into it: it does not count"
            )
    # A name git would read as an option is never passed on (a hand-edited config).
    names = sorted(n for n in wanted if n and not n.startswith("-"))
    ran = runner.git_many(
        [(project, (*_FETCH, name)) for name in names], width=_WIDTH, timeout=timeout
    )
    fetched: dict[str, tuple[str, ...]] = {}
    for name, r in zip(names, ran, strict=True):
        if r.ok:
            fetched[name] = specs[name]
        else:
            notes.append(f"fetch of remote {name} failed, so its refs do not count: {r.why()}")
    return Confirmed(fetched, tuple(notes))
