"""Is a task's own work landed? (spec §5 rule 5, §8)

This is the git adapter of the landed-work check, for one record (`fm teardown TASK`) or a
whole fleet's (the audit) with the same code, so an audit row and the one-task dry run agree
by construction. It fails closed: anything it cannot tell counts as "not landed", and the
reason goes into `LandedFacts.notes` so the operator learns *why* the tool could not tell.

Ship tasks are judged by their slot (a linked worktree of the project):

(a) uncommitted or untracked changes outside the scaffold files: not landed, always;
(b) HEAD reachable from any remote-tracking ref (a fork counts): landed;
(c) HEAD's content already in origin's default branch (squash merges, replayed patches),
    after a bounded fetch of that one branch on a real run; a dry run uses the refs as they
    are and never fetches;
(d) local-only mode: HEAD's content merged into the local default branch;
(e) a recorded PR that `gh` reports MERGED and whose head contains HEAD, or whose head's
    history holds the patch (`git patch-id --stable`) of every commit of HEAD that is on no
    remote-tracking ref (the commits were replayed onto the PR branch).

A content check ((c), (d)) proves that every change of HEAD is already there; a commit that
changes nothing has no change to find, so it is landed only when reachable ((b), or an
ancestor of the branch compared against).

What it costs (spec §8): one `git status` per slot; for what the slots of one project share, at most
4 git calls per project: its refs (with the default branches' trees) and default branch; one
`rev-list` that tells, for every slot's HEAD at once, whether a remote-tracking ref has it;
one whether origin's default branch has it; one `merge-tree --stdin` whether the content of
the pushed HEADs beyond it is in it all the same (squash-merged). The last two tell merged
from merely pushed, for `--landed`. `remote.origin.url` is asked only when no ref of origin
is there. Further per-slot calls only for a slot whose HEAD is on no remote-tracking branch
(its commits, the content checks, the PR), and for a pushed one with a recorded PR or in
local-only mode. Slots and projects are inspected a few at a time.
Every git call goes through `runner`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

from fm_teardown.adapters import runner
from fm_teardown.model.records import Record, shown
from fm_teardown.model.scaffold import SCAFFOLD_BYTES
from fm_teardown.model.values import value

__all__ = [
    "MAX_CHILDREN_NAMED",
    "MAX_LISTED",
    "WORKERS",
    "LandedFacts",
    "ProjectFacts",
    "SlotStatus",
    "check_landed",
    "check_many",
]

# How many dirty paths, unlanded commits and child records a refusal names.
MAX_LISTED = 10
MAX_CHILDREN_NAMED = 5
# Slots inspected at once: git is mostly I/O, and a 2-core machine must stay usable.
WORKERS = 4

_HEX_OID = runner.HEX_OID
_PR_NUMBER = re.compile(r"(?:^#?|/pull/)(\d+)(?:[/?#].*)?$")
_SCOUT_REPORT = "report.md"


@value
class LandedFacts:
    landed: bool
    summary: str  # one line: why it is or is not landed
    dirty: tuple[str, ...]  # first dirty paths (at most 10), scaffold files excluded
    unpushed: tuple[str, ...]  # "<short sha> <subject>" for commits not landed (at most 10)
    notes: tuple[str, ...] = ()  # what could not be told (inconclusive fetch, gh failure, ...)
    untracked: tuple[str, ...] = ()  # those of `dirty` that git does not track
    head: str | None = None  # the slot's HEAD commit when it was inspected
    branch: str | None = None  # the local branch checked out there (None: detached)
    default_branch: str | None = None  # the project's default branch (never deleted)
    # Finished, not merely landed (`--landed`): the work is in the default branch (squash
    # and replayed patches count), in local main for local-only, or its recorded PR merged;
    # a scout's report or a secondmate's empty home counts too. Pushed alone is not merged.
    merged: bool = False
    merge_summary: str = ""  # why it is or is not merged
    # False when HEAD is already in the default branch: nothing of the task's own is there
    # (a fresh slot, or a fast-forwarded merge: only a gone endpoint tells them apart).
    own_commits: bool = True


# --------------------------------------------------------------------------- git

_git = runner.git
_rev = runner.rev


def _fetch(repo: str, refspec: str, timeout: float) -> runner.Result:
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


def _display(path: bytes) -> str:
    # Paths are bytes on POSIX; show undecodable ones escaped rather than crash a printer.
    return path.decode("utf-8", "backslashreplace")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


T = TypeVar("T")
U = TypeVar("U")


def _pmap(fn: Callable[[T], U], items: Sequence[T]) -> list[U]:
    """`fn` over `items`, a few at a time (one item: no thread at all)."""
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(items))) as pool:
        return list(pool.map(fn, items))


# --------------------------------------------------------------------------- the check


def check_landed(
    record: Record,
    data_dir: Path,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None = None,
) -> LandedFacts:
    """Whether TASK's own work is landed, and if not, what would be lost.

    `fetch=False` is the dry run: no `git fetch` of any kind, the remote-tracking refs are
    used as they are. `gh_bin` overrides the `gh` found on PATH for the merged-PR check.
    """
    facts = check_many([record], data_dir, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin)
    return facts[record.task_id]


def check_many(
    records: Iterable[Record],
    data_dir: Path,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None = None,
) -> dict[str, LandedFacts]:
    """Rule 5's facts for every record, by task id (what it costs: see the module doc)."""
    out: dict[str, LandedFacts] = {}
    ships: list[Record] = []
    for record in records:
        if record.kind == "scout":
            out[record.task_id] = _scout(record, data_dir)
        elif record.kind == "secondmate":
            out[record.task_id] = _secondmate(record)
        else:
            ships.append(record)
    statuses = _pmap(lambda r: _status(r.worktree), ships)
    by_project: dict[str, list[tuple[Record, SlotStatus]]] = {}
    for record, st in zip(ships, statuses, strict=True):
        if isinstance(st, LandedFacts):
            out[record.task_id] = st
        else:
            by_project.setdefault(record.project, []).append((record, st))
    groups = list(by_project.items())
    shared = _pmap(lambda g: _project(g[0], [st for _, st in g[1]], fetch_timeout), groups)
    work = [
        (record, st, facts)
        for facts, (_, slots) in zip(shared, groups, strict=True)
        for record, st in slots
    ]

    def judge(item: tuple[Record, SlotStatus, ProjectFacts]) -> LandedFacts:
        record, st, facts = item
        return _judge(record, st, facts, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin)

    for (record, _, _), facts in zip(work, _pmap(judge, work), strict=True):
        out[record.task_id] = facts
    return out


def _scout(record: Record, data_dir: Path) -> LandedFacts:
    report = data_dir / record.task_id / _SCOUT_REPORT
    try:
        found = report.is_file()
    except OSError as exc:  # e.g. a data dir we may not enter: cannot tell, so not landed
        return LandedFacts(
            False,
            f"cannot tell whether scout report {report} exists ({exc.strerror})",
            (),
            (),
            (f"cannot read {report}: {exc.strerror}",),
        )
    if found:
        why = f"scout report {report} exists"
        return LandedFacts(True, why, (), (), merged=True, merge_summary=why)
    return LandedFacts(False, f"scout task has no report at {report}", (), ())


def _secondmate(record: Record) -> LandedFacts:
    home = record.home or record.worktree
    state = os.path.join(home, "state")
    try:
        with os.scandir(state) as it:
            children = sorted(e.name for e in it if e.name.endswith(".meta"))
    except (FileNotFoundError, NotADirectoryError):
        children = []
    except OSError as exc:
        return LandedFacts(
            False,
            f"cannot tell whether secondmate home {home} has task records ({exc.strerror})",
            (),
            (),
            (f"cannot read {state}: {exc.strerror}",),
        )
    if not children:
        why = f"secondmate home {home} has no task records"
        return LandedFacts(True, why, (), (), merged=True, merge_summary=why)
    named = ", ".join(children[:MAX_CHILDREN_NAMED])
    extra = len(children) - MAX_CHILDREN_NAMED
    more = f" and {extra} more" if extra > 0 else ""
    return LandedFacts(
        False,
        f"secondmate home {home} still has in-flight work: {named}{more}",
        (),
        (),
    )


@value
class SlotStatus:
    """One `git status` of a slot: what is uncommitted, and where HEAD is."""

    dirty: tuple[str, ...]  # the first paths, scaffold files excluded
    total: int  # how many there are in all
    untracked: tuple[str, ...]  # those of `dirty` that git does not track
    head: str | None  # None: unborn (no commit yet)
    branch: str | None  # None: detached
    untracked_total: int = 0  # how many of `total` git does not track


def _status(wt: str) -> SlotStatus | LandedFacts:
    """The slot's status in one git call, or the facts when that settles it (gone, unreadable).

    `--untracked-files=all` on the command line beats a `status.showUntrackedFiles=no` in the
    repo's config, and lists every untracked file (not a folded directory), so a scaffold file
    is matched by its exact path and its neighbours still count.
    """
    try:
        st = os.stat(wt)
    except (FileNotFoundError, NotADirectoryError):
        # The caller skips the process and pool steps for a vanished slot: nothing is reset.
        why = "slot directory no longer exists: nothing to lose"
        return LandedFacts(True, why, (), (), merged=True, merge_summary=why)
    except OSError as exc:
        # Not os.path.exists: it says False for "permission denied", which is not "gone".
        why = f"cannot read slot path {wt}: {exc.strerror}"
        return LandedFacts(False, f"cannot inspect the slot: {why}", (), (), (why,))
    if not stat.S_ISDIR(st.st_mode):
        why = f"slot path {wt} exists but is not a directory"
        return LandedFacts(False, f"cannot inspect the slot: {why}", (), (), (why,))
    r = _git(
        wt,
        "-c",
        "status.showUntrackedFiles=all",
        "status",
        "--porcelain=v2",
        "--branch",
        "--no-ahead-behind",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=none",
    )
    if not r.ok:
        note = f"git status failed in {wt}: {r.why()}"
        return LandedFacts(
            False, "cannot inspect the slot for uncommitted changes", (), (), (note,)
        )
    return _parse_status(r.out)


def _parse_status(out: bytes) -> SlotStatus:
    """`git status --porcelain=v2 --branch -z`: the changed paths and HEAD."""
    entries = out.split(b"\0")
    head: str | None = None
    branch: str | None = None
    paths: list[str] = []
    untracked: list[str] = []
    total = untracked_total = 0
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if entry.startswith(b"# branch.oid "):
            oid = entry[len(b"# branch.oid ") :].decode("ascii", "replace")
            head = oid if _HEX_OID.fullmatch(oid) else None  # "(initial)": unborn
            continue
        if entry.startswith(b"# branch.head "):
            name = entry[len(b"# branch.head ") :].decode("utf-8", "surrogateescape")
            branch = None if name == "(detached)" else name
            continue
        if entry.startswith(b"#") or len(entry) < 3:
            continue
        kind = entry[:1]
        new = kind == b"?"
        if new:
            path = entry[2:]
        elif kind == b"1":  # 1 XY sub mH mI mW hH hI path
            path = entry.split(b" ", 8)[-1]
        elif kind == b"u":  # u XY sub m1 m2 m3 mW h1 h2 h3 path
            path = entry.split(b" ", 10)[-1]
        elif kind == b"2":  # 2 XY sub mH mI mW hH hI Xscore path, then the source path
            path = entry.split(b" ", 9)[-1]
            source = entries[i] if i < len(entries) else b""
            i += 1
            # A rename also changes its source, so moving real work onto a scaffold name
            # still counts as dirty.
            if path in SCAFFOLD_BYTES and entry[2:3] == b"R" and source:
                path = source
        else:
            continue  # `!` (ignored) is not listed without --ignored
        if path in SCAFFOLD_BYTES:
            continue
        total += 1
        untracked_total += new
        if len(paths) < MAX_LISTED:
            paths.append(_display(path))
            if new:
                untracked.append(_display(path))
    return SlotStatus(tuple(paths), total, tuple(untracked), head, branch, untracked_total)


@dataclass
class ProjectFacts:
    """What the slots of one project share, read once for all of them."""

    project: str
    fetch_timeout: float
    refs: dict[str, str] = field(default_factory=dict)  # refname -> commit
    refs_error: str | None = None
    default: str | None = None  # origin's default branch name
    unpushed: frozenset[str] = frozenset()  # slot HEADs that no remote-tracking ref has
    unpushed_error: str | None = None  # whether the HEADs are pushed cannot be told
    # Slot HEADs that origin's default branch does not contain (None: cannot be told).
    beyond_default: frozenset[str] | None = None
    # Pushed slot HEADs beyond it whose content is nevertheless in it (squash-merged).
    squashed: frozenset[str] = frozenset()
    _origin: bool | None = None
    _fetched: tuple[bool, str] | None = None  # (fetched, why not)
    _trees: dict[str, str | None] = field(default_factory=dict)

    def has_origin(self) -> bool:
        if self._origin is None:
            # A remote-tracking ref of origin says so without a git call (one call fewer per
            # project: the budget pays for the default-branch rev-list instead).
            tracked = any(name.startswith("refs/remotes/origin/") for name in self.refs)
            self._origin = tracked or _git(self.project, "config", "--get", "remote.origin.url").ok
        return self._origin

    def fetched(self) -> tuple[bool, str]:
        """A real run fetches origin's default branch once for the project, and reads it
        again; a failure makes the comparison with origin inconclusive."""
        if self._fetched is None:
            assert self.default is not None
            branch = self.default
            r = _fetch(self.project, f"+refs/heads/{branch}:refs/remotes/origin/{branch}",
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


def _project(project: str, slots: list[SlotStatus], timeout: float) -> ProjectFacts:
    facts = ProjectFacts(project, timeout)
    refs = _git(
        project,
        "for-each-ref",
        "--format=%(refname)%00%(objectname)%00%(symref)%00%(tree)",
        "refs/remotes",
        "refs/heads",
    )
    symref = None
    if refs.ok:
        for line in refs.out.decode("utf-8", "surrogateescape").splitlines():
            name, _, rest = line.partition("\0")
            oid, _, rest = rest.partition("\0")
            target, _, tree = rest.partition("\0")
            facts.refs[name] = oid
            if _HEX_OID.fullmatch(tree):
                facts._trees[oid] = tree  # read with the refs: no call per default branch
            if name == "refs/remotes/origin/HEAD" and target:
                symref = target
    else:
        facts.refs_error = refs.why()
    prefix = "refs/remotes/origin/"
    if symref and symref.startswith(prefix) and len(symref) > len(prefix):
        facts.default = symref[len(prefix) :]
    else:
        for name in ("main", "master"):
            if f"{prefix}{name}" in facts.refs or f"refs/heads/{name}" in facts.refs:
                facts.default = name
                break
    heads = sorted({s.head for s in slots if s.head})
    if heads:
        # One rev-list for every slot: a HEAD is on a remote-tracking branch exactly when it
        # is not among the commits reachable from the HEADs but from no remote.
        r = runner.run(
            ["git", "-C", project, "rev-list", "--stdin", "--not", "--remotes"],
            timeout=runner.LOCAL_GIT_TIMEOUT,
            stdin="".join(f"{h}\n" for h in heads),
        )
        if r.ok:
            listed = set(r.out.decode("ascii", "replace").split())
            facts.unpushed = frozenset(h for h in heads if h in listed)
        else:
            facts.unpushed_error = r.why()
        base = f"refs/remotes/origin/{facts.default}" if facts.default else None
        if base is not None and base in facts.refs:
            # One more rev-list for every slot: which HEADs the default branch contains
            # (merged, or never moved from it); the others need the per-slot content checks.
            r = runner.run(
                ["git", "-C", project, "rev-list", "--stdin", "--not", facts.refs[base]],
                timeout=runner.LOCAL_GIT_TIMEOUT,
                stdin="".join(f"{h}\n" for h in heads),
            )
            if r.ok:
                listed = set(r.out.decode("ascii", "replace").split())
                facts.beyond_default = frozenset(h for h in heads if h in listed)
                pushed = sorted(facts.beyond_default - facts.unpushed)
                if facts.unpushed_error is None and pushed:
                    facts.squashed = _squashed(project, facts.refs[base], pushed, facts)
    return facts


def _squashed(project: str, base: str, heads: list[str], facts: ProjectFacts) -> frozenset[str]:
    """Which pushed HEADs' content is already in `base` (a squash merge, replayed patches),
    for all of a project's slots in one `git merge-tree --stdin`: merging such a HEAD into
    base changes nothing, so the merged tree is base's own. Anything unclear: not merged."""
    tree = facts.tree(base)
    if tree is None:
        return frozenset()
    r = runner.run(
        ["git", "-C", project, "merge-tree", "--write-tree", "--no-messages", "--stdin"],
        timeout=runner.LOCAL_GIT_TIMEOUT,
        stdin="".join(f"{base} {h}\n" for h in heads),
    )
    if not r.ok:
        return frozenset()
    tokens = r.out.decode("ascii", "replace").split("\0")
    out: set[str] = set()
    i = 0
    for head in heads:
        if i + 1 >= len(tokens):
            break
        clean, merged = tokens[i], tokens[i + 1]
        i += 2
        while i < len(tokens) and tokens[i] != "":  # conflicted entries, up to an empty one
            i += 1
        i += 1
        if clean == "1" and merged == tree:
            out.add(head)
    return frozenset(out)


def _unpushed(wt: str) -> tuple[int, tuple[str, ...]] | str:
    """(how many commits of HEAD are on no remote-tracking ref, the first of them)."""
    log = _git(
        wt,
        "-c",
        "log.showSignature=false",
        "log",
        "--format=%h %s",
        "HEAD",
        "--not",
        "--remotes",
        "--",
    )
    if not log.ok:
        return log.why()
    lines = [line for line in log.out.decode("utf-8", "replace").splitlines() if line]
    return len(lines), tuple(shown(line, 100) for line in lines[:MAX_LISTED])


def _judge(
    record: Record,
    st: SlotStatus,
    project: ProjectFacts,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None,
) -> LandedFacts:
    wt = record.worktree

    def facts(
        landed: bool,
        summary: str,
        unpushed: tuple[str, ...] = (),
        notes: tuple[str, ...] = (),
        dirty: tuple[str, ...] = st.dirty,
        merged: bool = False,
        merge_summary: str = "",
    ) -> LandedFacts:
        own = project.beyond_default is None or st.head in project.beyond_default
        return LandedFacts(
            landed,
            summary,
            dirty,
            unpushed,
            notes,
            st.untracked,
            st.head,
            st.branch,
            project.default,
            merged,
            merge_summary or summary,
            own,
        )

    if st.head is None:
        note = f"HEAD of {wt} does not name a commit"
        return facts(
            False, "cannot tell whether the work landed: HEAD has no commit", notes=(note,)
        )
    head = st.head
    n_unpushed, unpushed_lines = 0, cast(tuple[str, ...], ())
    failed = project.unpushed_error
    if failed is None and head in project.unpushed:
        listed = _unpushed(wt)
        if isinstance(listed, str):
            failed = listed
        else:
            n_unpushed, unpushed_lines = listed
    if failed is not None:
        note = f"git log HEAD --not --remotes failed in {wt}: {failed}"
        return facts(False, "cannot inspect the slot for commits not on a remote", notes=(note,))

    if st.total:
        # Uncommitted work is never landed, whatever the commits say ("dirty always wins"),
        # so the network checks would not change the verdict: skip them. The commits listed
        # are those on no remote-tracking ref.
        named = ", ".join(st.dirty[:3]) + (", …" if st.total > 3 else "")
        untracked = f", {st.untracked_total} of them untracked" if st.untracked_total else ""
        summary = f"uncommitted changes in {_plural(st.total, 'path')}{untracked} ({named})"
        if n_unpushed:
            summary += f"; {_plural(n_unpushed, 'commit')} on no remote-tracking branch"
        return facts(False, summary, unpushed_lines)

    notes: list[str] = []
    if n_unpushed == 0:
        pushed = f"HEAD {head[:12]} is on a remote-tracking branch"
        if project.beyond_default is not None and head not in project.beyond_default:
            where = f"origin/{project.default}"
            return facts(True, pushed, dirty=(), merged=True, merge_summary=f"HEAD is in {where}")
        # Pushed is landed (nothing would be lost), but finished only once it is merged.
        if head in project.squashed:
            why = f"HEAD's content is already in origin/{project.default}"
            return facts(True, pushed, dirty=(), merged=True, merge_summary=why)
        where = f"origin/{project.default}" if project.default else "the default branch"
        if record.pr or record.mode == "local-only":
            # The recorded PR, or local main: per-slot checks, only for such slots.
            reason, where = _committed_landed(
                record, head, project, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin,
                notes=notes,
            )  # fmt: skip
            if reason is not None:
                return facts(True, pushed, notes=tuple(notes), dirty=(), merged=True,
                             merge_summary=reason)  # fmt: skip
        return facts(True, pushed, notes=tuple(notes), dirty=(),
                     merge_summary=f"pushed but not merged into {where}")  # fmt: skip

    reason, where = _committed_landed(
        record, head, project, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin, notes=notes
    )
    if reason is not None:
        return facts(True, reason, notes=tuple(notes), dirty=(), merged=True)
    summary = f"{_plural(n_unpushed, 'commit')} on no remote-tracking branch and not in {where}"
    if notes:
        summary += " (could not tell everything; see notes)"
    return facts(False, summary, unpushed_lines, tuple(notes), dirty=())


def _committed_landed(
    record: Record,
    head: str,
    project: ProjectFacts,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None,
    notes: list[str],
) -> tuple[str | None, str]:
    """(why HEAD's committed work is landed, or None; what it was compared against)."""
    wt, repo = record.worktree, record.project
    branch = project.default
    if branch is None:
        notes.append(
            f"cannot determine the default branch of {repo}: expected origin/HEAD, main or master"
        )
    where: list[str] = []

    if branch is not None and record.mode == "local-only":
        where.append(f"local {branch}")
        # No network involved: try the cheap local answer before fetching anything.
        local = project.refs.get(f"refs/heads/{branch}")
        if local is None:
            notes.append(f"local branch {branch} does not exist in {repo}")
        elif _content_in(wt, local, head, project, notes, f"local {branch}"):
            return f"HEAD's content is merged into local {branch} (local-only)", ""

    if branch is not None and project.has_origin():
        where.insert(0, f"origin/{branch}")
        usable = True
        if fetch:
            ok, why = project.fetched()
            if not ok:
                # A stale ref could miss a merge that happened since: do not judge on it.
                notes.append(f"fetch of origin/{branch} failed, so it is inconclusive: {why}")
                usable = False
        if usable:
            base = project.refs.get(f"refs/remotes/origin/{branch}")
            if base is None:
                notes.append(f"origin/{branch} does not exist in {repo}")
            elif _content_in(wt, base, head, project, notes, f"origin/{branch}"):
                return f"HEAD's content is already in origin/{branch}", ""

    if record.pr:
        where.append(f"merged PR {shown(record.pr)}")
        reason = _pr_landed(
            record.pr,
            wt,
            head,
            fetch=fetch,
            fetch_timeout=fetch_timeout,
            gh_bin=gh_bin,
            notes=notes,
        )
        if reason is not None:
            return reason, ""
    return None, " or ".join(where) or "any default branch"


def _content_in(
    wt: str, base: str, head: str, project: ProjectFacts, notes: list[str], label: str
) -> bool:
    """True when merging HEAD into `base` would change nothing: HEAD's content is there.

    Ancestry first (cheap, and exact for a fast-forward or a true merge); then a merge
    that touches no ref or index: if the merged tree equals base's tree, every change of
    HEAD since the merge base is already in base (a squash merge or replayed patches).
    A conflict means it is not; an error is noted and counts as not landed.
    """
    anc = _git(wt, "merge-base", "--is-ancestor", head, base)
    if anc.ok:
        return True
    if anc.rc != 1:
        notes.append(f"ancestry check against {label} failed: {anc.why()}")
        return False
    empty = _changes_nothing(wt, base, head)
    if empty is None:
        notes.append(f"cannot list the commits of HEAD not in {label}")
        return False
    if empty:
        return False  # a commit with no change is landed only when reachable
    merged = _git(wt, "merge-tree", "--write-tree", "--no-messages", base, head)
    if merged.rc == 1:
        return False  # conflicts: the content is not (all) there
    if not merged.ok:
        notes.append(f"merge-tree against {label} failed: {merged.why()}")
        return False
    first = merged.out.decode("ascii", "replace").split("\n", 1)[0].strip()
    tree = project.tree(base)
    if tree is None:
        notes.append(f"cannot read the tree of {label}")
        return False
    return first == tree


def _changes_nothing(wt: str, base: str, head: str) -> bool | None:
    """Whether a commit of HEAD not in `base` (merges aside) changes no file (None: cannot
    tell). With a pathspec, git lists only the commits that change something."""
    every = _git(wt, "rev-list", "--count", "--no-merges", head, "--not", base, "--")
    changing = _git(
        wt, "rev-list", "--count", "--no-merges", "--full-history", head, "--not", base, "--", "."
    )
    if not (every.ok and changing.ok and every.text.isdigit() and changing.text.isdigit()):
        return None
    return every.text != changing.text


def _patch_ids(wt: str, *revs: str) -> dict[str, str] | None:
    """commit -> `git patch-id --stable` of the commits `revs` names (a commit without a diff,
    such as a merge or an empty commit, has none); None when git fails."""
    log = _git(
        wt,
        "-c",
        "log.showSignature=false",
        "log",
        "-p",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--format=commit %H",
        *revs,
        "--",
    )
    if not log.ok:
        return None
    if not log.out.strip():
        return {}
    r = runner.run(
        ["git", "-C", wt, "patch-id", "--stable"], timeout=runner.LOCAL_GIT_TIMEOUT, stdin=log.out
    )
    if not r.ok:
        return None
    ids: dict[str, str] = {}
    for line in r.out.decode("ascii", "replace").splitlines():
        pid, _, commit = line.partition(" ")
        if pid and commit:
            ids[commit.strip()] = pid
    return ids


def _replayed_in(wt: str, head: str, pr_head: str, notes: list[str], label: str) -> bool:
    """Every commit of HEAD on no remote-tracking ref has its patch in the PR head's history
    since the two met (the commits were replayed or cherry-picked onto the PR branch)."""
    base = _git(wt, "merge-base", head, pr_head)
    if not base.ok or not _HEX_OID.fullmatch(base.text):
        return False  # no common history: nothing was replayed from here
    theirs = _patch_ids(wt, f"{base.text}..{pr_head}")
    unpushed = _git(wt, "rev-list", head, "--not", "--remotes", "--")
    ours = _patch_ids(wt, head, "--not", "--remotes")
    if theirs is None or ours is None or not unpushed.ok:
        notes.append(f"cannot compare the patches of HEAD with PR {label} head")
        return False
    commits = unpushed.text.split()
    pr_ids = set(theirs.values())
    return bool(commits) and all(ours.get(c) in pr_ids for c in commits)


def _pr_landed(
    pr: str,
    wt: str,
    head: str,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None,
    notes: list[str],
) -> str | None:
    """Why the recorded PR proves HEAD landed, or None (a gh problem is only a note)."""
    gh = gh_bin or shutil.which("gh")
    label = shown(pr)
    if gh is None:
        notes.append(f"PR {label} is recorded but gh is not installed: its state was not checked")
        return None
    if pr.startswith("-") or any(c.isspace() for c in pr):
        notes.append(f"recorded PR {label} is not a PR number or URL")
        return None
    # The question firstmate's script asks, in its words: `STATE<TAB>HEAD` through gh's own
    # jq filter (a gh that prints the JSON object instead is read too).
    r = runner.run(
        [gh, "pr", "view", pr, "--json", "state,headRefOid", "-q", _GH_FILTER],
        timeout=fetch_timeout,
        cwd=wt,
    )
    if not r.ok:
        notes.append(f"gh pr view {label} failed: {r.why()}")
        return None
    answer = _gh_answer(r.out)
    if answer is None:
        notes.append(f"gh pr view {label} did not print the PR's state and head")
        return None
    state, pr_head = answer
    if not isinstance(state, str) or state.upper() != "MERGED":
        return None  # open or closed unmerged: a fact, not a doubt
    if not isinstance(pr_head, str) or not _HEX_OID.fullmatch(pr_head.lower()):
        notes.append(f"gh reports PR {label} merged but no usable head commit")
        return None
    pr_head = pr_head.lower()
    if not _git(wt, "cat-file", "-e", f"{pr_head}^{{commit}}").ok:
        number = _PR_NUMBER.search(pr)
        if not fetch or number is None:
            why = "a dry run does not fetch" if not fetch else "no PR number to fetch"
            notes.append(f"PR {label} head {pr_head[:12]} is not in the repository ({why})")
            return None
        got = _fetch(wt, f"refs/pull/{number.group(1)}/head", fetch_timeout)
        if not got.ok:
            notes.append(f"fetch of PR {label} head failed: {got.why()}")
            return None
    anc = _git(wt, "merge-base", "--is-ancestor", head, pr_head)
    if anc.ok:
        return f"PR {label} is merged and its head contains HEAD {head[:12]}"
    if anc.rc != 1:
        notes.append(f"ancestry check against PR {label} head failed: {anc.why()}")
        return None
    if _replayed_in(wt, head, pr_head, notes, label):
        return f"PR {label} is merged and its head holds the patches of HEAD's unpushed commits"
    return None


_GH_FILTER = '.state + "\\t" + .headRefOid'


def _gh_answer(out: bytes) -> tuple[object, object] | None:
    """(state, head) from `gh pr view --json state,headRefOid -q <filter>`: `STATE<TAB>HEAD`,
    or the JSON object itself."""
    text = out.decode("utf-8", "replace").strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        return (data.get("state"), data.get("headRefOid")) if isinstance(data, dict) else None
    state, tab, pr_head = text.partition("\t")
    return (state, pr_head) if tab else None
