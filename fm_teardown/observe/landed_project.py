"""What the slots of one project share, read once for all of them (spec §5 rule 5, §14.6):
the project's refs and default branch, and for every slot's HEAD at once whether a remote has
it, whether origin's default branch has it, whether the local one has it, and whether its
content is in origin's default branch all the same (a squash). The same for the tip of each
task's branch (`fm/<id>`), which must be landed too. Gathering only, for
`observe/landed.py`; every git call goes through `runner`.

A real run first fetches, with prune, origin and the remotes that have the work judged, and
counts only the remote-tracking refs those fetches write (`observe/remote_refs.py`); a dry
run counts every remote-tracking ref as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fm_teardown.adapters import runner
from fm_teardown.model.landing import SlotStatus
from fm_teardown.observe.remote_refs import Confirmed, confirm
from fm_teardown.observe.replay import merge_results

__all__ = ["REFS_ARGS", "ProjectFacts", "fetch_ref", "project_facts"]

_HEX_OID = runner.HEX_OID

_git = runner.git
_rev = runner.rev


def fetch_ref(repo: str, refspec: str, timeout: float) -> runner.Result:
    """One bounded, quiet fetch from origin that touches nothing but the named ref."""
    return _git(
        repo,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-recurse-submodules",
        "--no-write-fetch-head",
        "--no-auto-maintenance",
        "origin",
        refspec,
        timeout=timeout,
    )


class ProjectFacts:
    """What the slots of one project share, read once for all of them: filled in as they are
    read (`project_facts`), and by what a slot asks of them later (a fetch, a tree). A plain
    class: a `@dataclass` would cost its import half a millisecond, for an `__init__` alone."""

    def __init__(self, project: str, fetch_timeout: float) -> None:
        self.project = project
        self.fetch_timeout = fetch_timeout
        self.refs: dict[str, str] = {}  # refname -> commit
        self.refs_error: str | None = None  # `for-each-ref` failed: no ref of it is known
        self.default: str | None = None  # the default branch's name
        self.unpushed: frozenset[str] = frozenset()  # slot HEADs no remote-tracking ref has
        self.unpushed_error: str | None = None  # whether they are pushed cannot be told
        # Slot HEADs that origin's default branch has (None: not told); of those neither in
        # it nor on a remote, whether the local default branch has them.
        self.in_origin: frozenset[str] | None = None
        self.in_local: dict[str, bool] = {}
        # Pushed slot HEADs beyond origin's default branch whose content is in it all the
        # same (merging them changes nothing), told for all of them at once.
        self.squashed: frozenset[str] = frozenset()
        self._origin: bool | None = None
        self._fetched: tuple[bool, str] | None = None  # (fetched, why not)
        self._trees: dict[str, str | None] = {}
        # A real run's fetches (with prune): only the remote-tracking refs they write count,
        # and what could not be fetched is said (None: a dry run, every one counts).
        self.confirmed: Confirmed | None = None
        # The tip of each task's branch `fm/<id>`, by task id, when the branch exists.
        self.tips: dict[str, str] = {}

    def counted(self) -> list[str] | None:
        """The remote-tracking refs that count (None: all of them, as they are)."""
        if self.confirmed is None:
            return None
        confirmed = self.confirmed
        return sorted(n for n in self.refs if n.startswith("refs/remotes/") and confirmed.counts(n))

    def beyond_remotes(
        self, commits: Sequence[str], also: Sequence[str] = ()
    ) -> tuple[tuple[str, ...], str]:
        """`git rev-list` (or `git log`) arguments and standard input for what `commits` have
        that no counted remote-tracking ref has, nor any of `also`."""
        counted = self.counted()
        lines = [*commits, *(f"^{a}" for a in also)]
        if counted is None:
            return ("--stdin", "--not", "--remotes"), _lines(lines)
        lines += [f"^{ref}" for ref in counted]
        return ("--stdin",), _lines(lines)

    def has_origin(self) -> bool:
        if self._origin is None:
            # A remote-tracking ref of origin says so without a git call.
            tracked = any(name.startswith("refs/remotes/origin/") for name in self.refs)
            self._origin = tracked or _git(self.project, "config", "--get", "remote.origin.url").ok
        return self._origin

    def fetched(self) -> tuple[bool, str]:
        """A real run fetches origin's default branch once for the project, and reads it
        again; a failure makes the comparison with origin inconclusive."""
        if self._fetched is None:
            assert self.default is not None
            branch = self.default
            r = fetch_ref(self.project, f"+refs/heads/{branch}:refs/remotes/origin/{branch}",
                       self.fetch_timeout)  # fmt: skip
            if r.ok:
                again = _rev(self.project, f"refs/remotes/origin/{branch}")
                ref = f"refs/remotes/origin/{branch}"
                if again is None:
                    self.refs.pop(ref, None)
                else:
                    self.refs[ref] = again
            self._fetched = (r.ok, r.why())
        return self._fetched

    def tree(self, commit: str) -> str | None:
        """The tree of a default branch's commit (read once, for every slot)."""
        if commit not in self._trees:
            r = _git(self.project, "rev-parse", "--verify", "--quiet", f"{commit}^{{tree}}")
            self._trees[commit] = r.text if r.ok and _HEX_OID.fullmatch(r.text) else None
        return self._trees[commit]


def _heads_in(project: str, heads: list[str], commit: str) -> frozenset[str] | None:
    """Which of `heads` `commit` contains, in one rev-list (None: cannot be told)."""
    r = runner.git(
        project, "rev-list", "--stdin", "--not", commit,
        timeout=runner.LOCAL_GIT_TIMEOUT,
        stdin=_lines(heads),
    )  # fmt: skip
    return _contained(heads, r)


def _lines(words: Sequence[str]) -> str:
    """`words` as `--stdin` reads them: one a line."""
    return "".join(f"{w}\n" for w in words)


def _contained(heads: list[str], r: runner.Result) -> frozenset[str] | None:
    """Which of `heads` a `rev-list --stdin --not COMMIT` of them says COMMIT contains (None:
    it failed, so it cannot be told)."""
    if not r.ok:
        return None
    beyond = set(r.out.decode("ascii", "replace").split())
    return frozenset(h for h in heads if h not in beyond)


# How a project's refs are read (`for-each-ref`: each ref's commit, symref target and tree).
REFS_ARGS = (
    "for-each-ref",
    "--format=%(refname)%00%(objectname)%00%(symref)%00%(tree)",
    "refs/remotes",
    "refs/heads",
)


def project_facts(
    project: str,
    slots: list[SlotStatus],
    timeout: float,
    *,
    fetch: bool = False,
    tasks: Sequence[str] = (),
    refs: runner.Result | None = None,
) -> ProjectFacts:
    """What the slots of one project share: its refs and default branch, which slot HEADs
    (and tips of the `tasks`' branches) are on a remote, in origin's default branch, in the
    local one, or squashed into origin's; at most 4 git calls for all of them. `fetch` (a
    real run): first fetch, with prune, origin and the remotes that have them. `refs`: the
    project's `REFS_ARGS` run already (a dry run's, beside the slots' statuses); never with
    `fetch`, whose refs are read after it."""
    assert refs is None or not fetch
    facts = ProjectFacts(project, timeout)
    if fetch:
        judged = [s.head for s in slots if s.head] + [f"refs/heads/fm/{t}" for t in tasks]
        facts.confirmed = confirm(project, judged, timeout)
    symref = _read_refs(facts, refs)
    if facts.refs_error is not None:
        return facts  # no ref is known: every slot's facts say why
    facts.default = _default_branch(facts.refs, symref)
    for task in tasks:
        tip = facts.refs.get(f"refs/heads/fm/{task}")
        if tip is not None:
            facts.tips[task] = tip
    heads = sorted({s.head for s in slots if s.head} | set(facts.tips.values()))
    if heads:
        # Which HEADs a remote has, and which origin's default branch has: two rev-lists that
        # need nothing of each other, run at once (what follows needs both).
        origin = _origin_default(facts)
        args, stdin = facts.beyond_remotes(heads)
        calls: list[tuple[str, Sequence[str]]] = [(project, ("rev-list", *args))]
        stdins = [stdin]
        if origin is not None:
            calls.append((project, ("rev-list", "--stdin", "--not", origin)))
            stdins.append(_lines(heads))
        ran = runner.git_many(calls, width=2, stdins=stdins)
        _on_remotes(facts, heads, ran[0])
        if facts.default is not None:
            in_origin = _contained(heads, ran[1]) if origin is not None else None
            _in_default_branches(facts, heads, origin, in_origin)
    return facts


_ORIGIN = "refs/remotes/origin/"


def _read_refs(facts: ProjectFacts, given: runner.Result | None = None) -> str | None:
    """The project's refs (and the default branches' trees with them) into `facts`, or why
    they cannot be read (`given`: read already); what origin's HEAD points to (None:
    nothing)."""
    refs = given if given is not None else _git(facts.project, *REFS_ARGS)
    if not refs.ok:
        facts.refs_error = refs.why()
        return None
    symref = None
    for line in refs.out.decode("utf-8", "surrogateescape").splitlines():
        name, _, rest = line.partition("\0")
        oid, _, rest = rest.partition("\0")
        target, _, tree = rest.partition("\0")
        facts.refs[name] = oid
        if _HEX_OID.fullmatch(tree):
            facts._trees[oid] = tree  # read with the refs: no call per default branch
        if name == "refs/remotes/origin/HEAD" and target:
            symref = target
    return symref


def _default_branch(refs: Mapping[str, str], symref: str | None) -> str | None:
    """The branch origin's HEAD points to, else `main` or `master` (origin's or local)."""
    prefix = _ORIGIN
    if symref and symref.startswith(prefix) and len(symref) > len(prefix):
        return symref[len(prefix) :]
    for name in ("main", "master"):
        if f"{prefix}{name}" in refs or f"refs/heads/{name}" in refs:
            return name
    return None


def _on_remotes(facts: ProjectFacts, heads: list[str], r: runner.Result) -> None:
    """One rev-list for every slot (`r`, of `beyond_remotes(heads)`): a HEAD is on a
    remote-tracking branch exactly when it is not among the commits reachable from the HEADs
    but from no (counted) remote."""
    if r.ok:
        listed = set(r.out.decode("ascii", "replace").split())
        facts.unpushed = frozenset(h for h in heads if h in listed)
    else:
        facts.unpushed_error = r.why()


def _origin_default(facts: ProjectFacts) -> str | None:
    """The commit of origin's default branch as this run counts it (None: no default branch,
    origin has none, or a real run's fetch did not write it)."""
    if facts.default is None:
        return None
    name = f"{_ORIGIN}{facts.default}"
    origin = facts.refs.get(name)
    if origin is not None and facts.confirmed is not None:
        if facts.confirmed.counts(name):
            facts._fetched = (True, "")  # fetched just now, with prune
        else:
            # Not written by a fetch that succeeded (origin's refspecs may name other
            # branches, or fail on one): the branch is fetched on its own if needed.
            return None
    return origin


def _in_default_branches(
    facts: ProjectFacts, heads: list[str], origin: str | None, in_origin: frozenset[str] | None
) -> None:
    """Which HEADs origin's default branch (`origin`) has (`in_origin`, asked already) and
    which pushed ones it has squashed, then which of the rest the local one has."""
    project = facts.project
    local = facts.refs.get(f"refs/heads/{facts.default}")
    if origin is not None:
        facts.in_origin = in_origin
        if facts.in_origin is not None and facts.unpushed_error is None:
            pushed = sorted(set(heads) - facts.in_origin - facts.unpushed)
            if pushed:
                facts.squashed = _squashed(project, origin, pushed, facts)
    # The local one, for the HEADs neither origin's nor on a remote (the others are
    # landed already; local-only mode asks for its own): one more rev-list at most.
    left = sorted(facts.unpushed - (facts.in_origin or frozenset()))
    if local is not None and left:
        inside = _heads_in(project, left, local)
        if inside is not None:
            facts.in_local = {h: h in inside for h in left}


def _squashed(project: str, base: str, heads: list[str], facts: ProjectFacts) -> frozenset[str]:
    """Which pushed HEADs' content is already in `base` (a squash merge, replayed patches),
    for all of a project's slots in one `git merge-tree --stdin`: merging such a HEAD into
    base changes nothing, so the merged tree is base's own. Anything unclear: not merged."""
    tree = facts.tree(base)
    if tree is None:
        return frozenset()
    r = runner.git(
        project, "merge-tree", "--write-tree", "--no-messages", "--stdin",
        timeout=runner.LOCAL_GIT_TIMEOUT,
        stdin="".join(f"{base} {h}\n" for h in heads),
    )  # fmt: skip
    if not r.ok:
        return frozenset()
    answers = merge_results(r.out, len(heads))
    return frozenset(
        h for h, (clean, merged) in zip(heads, answers, strict=False) if clean and merged == tree
    )
