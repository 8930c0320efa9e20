"""What git and gh say about a task's own work: the facts rule 5 judges (spec §5 rule 5, §8,
§14.6). Gathering only: `decide/landed.py` judges them.

For one record (`fm teardown TASK`) or a whole fleet's (the audit) with the same code, so an
audit row and the one-task dry run agree by construction. Whatever cannot be told is left
unknown (`None`) or said in a note, never guessed: the judge counts it as not landed.

A scout's facts are whether its report exists; a secondmate's, the task records in its
home; a ship task's, its slot:

- one `git status`: uncommitted and untracked paths (scaffold files aside), HEAD, branch;
- for what the slots of one project share, at most 4 git calls: its refs (with the default
  branches' trees) and default branch; one `rev-list` that tells, for every slot's HEAD at
  once, whether a remote-tracking ref has it; one whether origin's default branch has it; one
  whether the local default branch has it. `remote.origin.url` is asked only when no ref of
  origin is there (`observe/landed_project.py`);
- for a HEAD in no default branch, against each default branch ref (origin's, fetched once
  for the project on a real run; a dry run never fetches; the local one): the merge base,
  the commits on both sides since it (at most `MAX_COMPARED`: beyond that no content rung is
  proven, and the note says so), their `git patch-id --verbatim` and that of the branch's
  whole diff, and one `git merge-tree --write-tree`; its commits on no remote; the recorded
  PR's state and head (`gh`, and a fetch of the PR head on a real run when it is missing).

Slots and projects are inspected a few at a time. Every git call goes through `runner`.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from fm_teardown.adapters import runner
from fm_teardown.model.landing import (
    BaseFacts,
    Gathered,
    HomeFacts,
    PrFacts,
    ScoutFacts,
    ShipFacts,
    SlotProblem,
    SlotProblemKind,
    SlotStatus,
)
from fm_teardown.model.landing import LandedFacts as LandedFacts  # the verdict's type, as before
from fm_teardown.model.records import Record, shown
from fm_teardown.model.scaffold import SCAFFOLD_BYTES
from fm_teardown.observe.landed_project import ProjectFacts, fetch_ref, project_facts

__all__ = [
    "MAX_COMPARED",
    "MAX_LISTED",
    "WORKERS",
    "gather",
    "gather_many",
    "git_status",
    "status_entries",
]

# How many dirty paths and unlanded commits a refusal names.
MAX_LISTED = 10
# Commits compared patch by patch, both sides of the merge base together: beyond this no
# content rung holds (fail closed: its commits are not told apart), and a note says why.
MAX_COMPARED = 2000
# Slots inspected at once: git is mostly I/O, and a 2-core machine must stay usable.
WORKERS = 4

_HEX_OID = runner.HEX_OID
_PR_NUMBER = re.compile(r"(?:^#?|/pull/)(\d+)(?:[/?#].*)?$")
_SCOUT_REPORT = "report.md"
# The same diff for a commit and for the branch's whole change, byte for byte: no external
# diff or textconv, binary files in full, renames as a deletion and an addition.
_DIFF_OPTS = ("--no-ext-diff", "--no-textconv", "--no-color", "--binary", "--no-renames")

_git = runner.git


def _display(path: bytes) -> str:
    # Paths are bytes on POSIX; show undecodable ones escaped rather than crash a printer.
    return path.decode("utf-8", "backslashreplace")


T = TypeVar("T")
U = TypeVar("U")


def _pmap(fn: Callable[[T], U], items: Sequence[T]) -> list[U]:
    """`fn` over `items`, a few at a time (one item: no thread at all).

    Each worker takes the next item left until none is: a few threads in all, not a task per
    item, since most items of an audit (a slot whose HEAD a remote already has) cost less
    than handing them to a thread would. The first exception a worker meets is raised here,
    once every worker has stopped."""
    if len(items) <= 1:
        return [fn(i) for i in items]
    out: dict[int, U] = {}
    failed: list[BaseException] = []
    taken = itertools.count()
    lock = threading.Lock()

    def worker() -> None:
        try:
            while not failed:
                with lock:
                    i = next(taken)
                if i >= len(items):
                    return
                out[i] = fn(items[i])
        except BaseException as exc:  # raised again in the calling thread
            failed.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(min(WORKERS, len(items)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]
    return [out[i] for i in range(len(items))]


# --------------------------------------------------------------------------- gathering


def gather(
    record: Record,
    data_dir: Path,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None = None,
) -> Gathered:
    """The facts of TASK's own work, for `decide.landed.judge`.

    `fetch=False` is the dry run: no `git fetch` of any kind, the remote-tracking refs are
    used as they are. `gh_bin` overrides the `gh` found on PATH for the merged-PR check.
    """
    facts = gather_many([record], data_dir, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin)
    return facts[record.task_id]


def gather_many(
    records: Iterable[Record],
    data_dir: Path,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None = None,
) -> dict[str, Gathered]:
    """The facts for every record, by task id (what it costs: see the module doc)."""
    out: dict[str, Gathered] = {}
    ships: list[Record] = []
    for record in records:
        if record.kind == "scout":
            out[record.task_id] = _scout(record, data_dir)
        elif record.kind == "secondmate":
            out[record.task_id] = _secondmate(record)
        else:
            ships.append(record)
    statuses = _statuses([r.worktree for r in ships])
    by_project: dict[str, list[tuple[Record, SlotStatus]]] = {}
    for record, st in zip(ships, statuses, strict=True):
        if isinstance(st, SlotProblem):
            out[record.task_id] = st
        else:
            by_project.setdefault(record.project, []).append((record, st))
    groups = list(by_project.items())
    shared = _pmap(lambda g: project_facts(g[0], [st for _, st in g[1]], fetch_timeout), groups)
    work = [
        (record, st, facts)
        for facts, (_, slots) in zip(shared, groups, strict=True)
        for record, st in slots
    ]

    def one(item: tuple[Record, SlotStatus, ProjectFacts]) -> ShipFacts:
        record, st, facts = item
        return _ship(record, st, facts, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin)

    for (record, _, _), facts in zip(work, _pmap(one, work), strict=True):
        out[record.task_id] = facts
    return out


def _scout(record: Record, data_dir: Path) -> ScoutFacts:
    report = data_dir / record.task_id / _SCOUT_REPORT
    try:
        return ScoutFacts(str(report), report.is_file())
    except OSError as exc:  # e.g. a data dir we may not enter: cannot tell
        return ScoutFacts(str(report), False, exc.strerror or str(exc))


def _secondmate(record: Record) -> HomeFacts:
    home = record.home or record.worktree
    state = os.path.join(home, "state")
    try:
        with os.scandir(state) as it:
            children = sorted(e.name for e in it if e.name.endswith(".meta"))
    except (FileNotFoundError, NotADirectoryError):
        children = []
    except OSError as exc:
        return HomeFacts(home, state, (), exc.strerror or str(exc))
    return HomeFacts(home, state, tuple(children))


def _statuses(wts: Sequence[str]) -> list[SlotStatus | SlotProblem]:
    """Each slot's status, one git call per slot, `WORKERS` at a time, or what keeps it from
    being read (gone, unreadable).

    `--untracked-files=all` on the command line beats a `status.showUntrackedFiles=no` in the
    repo's config, and lists every untracked file (not a folded directory), so a scaffold file
    is matched by its exact path and its neighbours still count.
    """
    out: list[SlotStatus | SlotProblem | None] = [_unreadable(wt) for wt in wts]
    readable = [i for i, found in enumerate(out) if found is None]
    ran = runner.git_many([(wts[i], _STATUS_ARGS) for i in readable], width=WORKERS)
    for i, r in zip(readable, ran, strict=True):
        out[i] = (
            _parse_status(r.out)
            if r.ok
            else SlotProblem(SlotProblemKind.STATUS_FAILED, wts[i], r.why())
        )
    return [found for found in out if found is not None]


def _unreadable(wt: str) -> SlotProblem | None:
    """What keeps a slot from being read before git runs: gone, not a directory, unreadable."""
    try:
        st = os.stat(wt)
    except (FileNotFoundError, NotADirectoryError):
        return SlotProblem(SlotProblemKind.GONE, wt)
    except OSError as exc:
        # Not os.path.exists: it says False for "permission denied", which is not "gone".
        return SlotProblem(SlotProblemKind.UNREADABLE, wt, exc.strerror or str(exc))
    if not stat.S_ISDIR(st.st_mode):
        return SlotProblem(SlotProblemKind.NOT_A_DIRECTORY, wt)
    return None


# `git status` as rule 5 reads it: every untracked file, submodules too, the branch header,
# NUL-separated.
_STATUS_ARGS = (
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


def git_status(wt: str) -> runner.Result:
    """`git status` of a slot (or a secondmate's home) as rule 5 reads it: every untracked
    file, submodules too, the branch header, NUL-separated."""
    return _git(wt, *_STATUS_ARGS)


def status_entries(
    out: bytes, *, is_work: Callable[[bytes], bool]
) -> Iterator[tuple[bytes, bytes, bool]]:
    """`git status --porcelain=v2 --branch -z`, entry by entry: ("#", the header line, False)
    for a header, else ("path", the changed path, untracked?) for each changed path that
    `is_work` counts. A rename is also a change to its source, so moving work onto a name
    that is not work (a scaffold file, a marker) still counts, under the source's name."""
    entries = out.split(b"\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if entry.startswith(b"#"):
            yield b"#", entry, False
            continue
        if len(entry) < 3:
            continue
        kind = entry[:1]
        if kind == b"?":
            path = entry[2:]
        elif kind == b"1":  # 1 XY sub mH mI mW hH hI path
            path = entry.split(b" ", 8)[-1]
        elif kind == b"u":  # u XY sub m1 m2 m3 mW h1 h2 h3 path
            path = entry.split(b" ", 10)[-1]
        elif kind == b"2":  # 2 XY sub mH mI mW hH hI Xscore path, then the source path
            path = entry.split(b" ", 9)[-1]
            source = entries[i] if i < len(entries) else b""
            i += 1
            if not is_work(path) and source:
                path = source
        else:
            continue  # `!` (ignored) is not listed without --ignored
        if is_work(path):
            yield b"path", path, kind == b"?"


def _parse_status(out: bytes) -> SlotStatus:
    """`git status --porcelain=v2 --branch -z`: the changed paths and HEAD."""
    head: str | None = None
    branch: str | None = None
    paths: list[str] = []
    untracked: list[str] = []
    total = untracked_total = 0
    for what, entry, new in status_entries(out, is_work=lambda p: p not in SCAFFOLD_BYTES):
        if what == b"#":
            if entry.startswith(b"# branch.oid "):
                oid = entry[len(b"# branch.oid ") :].decode("ascii", "replace")
                head = oid if _HEX_OID.fullmatch(oid) else None  # "(initial)": unborn
            elif entry.startswith(b"# branch.head "):
                name = entry[len(b"# branch.head ") :].decode("utf-8", "surrogateescape")
                branch = None if name == "(detached)" else name
            continue
        total += 1
        untracked_total += new
        if len(paths) < MAX_LISTED:
            paths.append(_display(entry))
            if new:
                untracked.append(_display(entry))
    return SlotStatus(tuple(paths), total, tuple(untracked), head, branch, untracked_total)


def _unpushed(wt: str, local: str | None) -> tuple[int, tuple[str, ...]] | str:
    """(how many commits of HEAD are on no remote-tracking ref nor the local default branch,
    the first of them), or why git could not tell."""
    log = _git(
        wt,
        "-c",
        "log.showSignature=false",
        "log",
        "--format=%h %s",
        "HEAD",
        "--not",
        "--remotes",
        *([local] if local else []),
        "--",
    )
    if not log.ok:
        return log.why()
    lines = [line for line in log.out.decode("utf-8", "replace").splitlines() if line]
    return len(lines), tuple(shown(line, 100) for line in lines[:MAX_LISTED])


def _ship(
    record: Record,
    st: SlotStatus,
    project: ProjectFacts,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None,
) -> ShipFacts:
    wt, repo, branch = record.worktree, record.project, project.default
    notes: list[str] = []
    facts = ShipFacts(wt, st, branch, bool(project.refs) and project.has_origin(), None)
    if project.refs_error is not None:
        # Not "no default branch": the refs themselves could not be read.
        notes.append(f"git for-each-ref failed in {repo}: {project.refs_error}")
    elif branch is None:
        notes.append(
            f"cannot determine the default branch of {repo}: expected origin/HEAD, main or master"
        )
    if st.head is None:
        return _with(facts, notes=tuple(notes))
    head = st.head
    if project.unpushed_error is not None or project.refs_error is not None:
        why = project.unpushed_error or "its refs could not be read"
        note = f"cannot tell whether HEAD of {wt} is on a remote-tracking branch: {why}"
        return _with(facts, notes=tuple(notes), remote_error=note)
    on_remote = head not in project.unpushed
    local = project.refs.get(f"refs/heads/{branch}") if branch else None
    unpushed: tuple[int, tuple[str, ...]] = (0, ())
    if not on_remote:
        listed = _unpushed(wt, local)
        if isinstance(listed, str):
            note = f"git log HEAD --not --remotes failed in {wt}: {listed}"
            return _with(facts, notes=tuple(notes), remote_error=note)
        unpushed = listed
    facts = _with(facts, on_remote=on_remote, unpushed_total=unpushed[0], unpushed=unpushed[1])
    if st.total:
        # Uncommitted work is never landed ("dirty always wins"): nothing more to gather.
        return _with(facts, notes=tuple(notes))

    bases: list[BaseFacts] = []
    if branch is not None and facts.origin:
        label = f"origin/{branch}"
        ref = f"refs/remotes/origin/{branch}"
        if project.in_origin is not None and head in project.in_origin:
            bases.append(BaseFacts(label, project.refs[ref], True, True))
        elif on_remote and project.in_origin is not None:
            # Pushed: nothing would be lost, so no fetch and no per-slot call; whether it is
            # merged all the same is the project's one merge-tree for every pushed HEAD.
            unchanged = head in project.squashed
            bases.append(
                BaseFacts(label, project.refs[ref], True, False, merge_unchanged=unchanged)
            )
        else:
            usable = True
            if fetch:
                ok, why = project.fetched()
                if not ok:
                    # A stale ref could miss a merge that happened since: do not judge on it.
                    notes.append(f"fetch of {label} failed, so it is inconclusive: {why}")
                    usable = False
            commit = project.refs.get(ref)
            if usable and commit is None:
                notes.append(f"{label} does not exist in {repo}")
            elif usable and commit is not None:
                fresh = project._fetched is None and project.in_origin is not None
                contains = False if fresh else _contains(wt, head, commit, notes, label)
                bases.append(BaseFacts(label, commit, True, contains))
    if branch is not None:
        local_only = record.mode == "local-only"
        if local is None:
            if local_only:
                notes.append(f"local branch {branch} does not exist in {repo}")
        elif local_only or not any(b.commit == local for b in bases):
            # The same commit as origin's tells nothing new, but local-only names its own.
            contains = project.in_local.get(head)
            if contains is None and local_only:
                contains = _contains(wt, head, local, notes, f"local {branch}")
            bases.append(BaseFacts(f"local {branch}", local, local_only, contains))
    if not on_remote and not any(b.contains_head and b.counts_as_merged for b in bases):
        # Not settled by reachability: the content rungs, against each default branch.
        bases = [
            b if b.contains_head is not False else _content(wt, head, b, project, notes)
            for b in bases
        ]
    pr = None
    if record.pr and not any(b.contains_head and b.counts_as_merged for b in bases):
        pr = _pr(record.pr, wt, head, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin,
                 notes=notes)  # fmt: skip
    return _with(facts, bases=tuple(bases), pr=pr, notes=tuple(notes))


def _with(facts: ShipFacts, **changes: object) -> ShipFacts:
    return replace(facts, **changes)  # type: ignore[arg-type]


def _contains(wt: str, head: str, commit: str, notes: list[str], label: str) -> bool | None:
    anc = _git(wt, "merge-base", "--is-ancestor", head, commit)
    if anc.ok:
        return True
    if anc.rc != 1:
        notes.append(f"ancestry check against {label} failed: {anc.why()}")
        return None
    return False


def _content(
    wt: str, head: str, base: BaseFacts, project: ProjectFacts, notes: list[str]
) -> BaseFacts:
    """HEAD against one default branch: the merge base, the patches on both sides of it, the
    branch's whole diff, and a simulated merge. What git cannot tell stays None."""
    label, commit = base.label, base.commit
    mb = _git(wt, "merge-base", head, commit)
    if not mb.ok or not _HEX_OID.fullmatch(mb.text):
        why = "they share no history" if mb.rc == 1 else mb.why()
        notes.append(f"no merge base of HEAD and {label}: {why}")
        return base
    merge_base = mb.text
    out = BaseFacts(
        label,
        commit,
        base.counts_as_merged,
        base.contains_head,
        merge_base,
        merge_unchanged=_merge_unchanged(wt, head, commit, project, notes, label),
    )
    walk = _git(
        wt, "rev-list", "--left-right", "--parents", f"--max-count={MAX_COMPARED + 1}",
        f"{head}...{commit}", "--",
    )  # fmt: skip
    if not walk.ok:
        notes.append(f"cannot list the commits of HEAD and {label}: {walk.why()}")
        return out
    rows = walk.text.split("\n") if walk.text else []
    if len(rows) > MAX_COMPARED:
        notes.append(
            f"more than {MAX_COMPARED} commits of HEAD and {label} since their merge base: "
            "their patches were not compared (nor the branch's whole diff and merge)"
        )
        return out
    ours: list[str] = []
    theirs: list[str] = []
    merges = 0
    for row in rows:
        side, oids = row[:1], row[1:].split()
        if not oids:
            continue
        if len(oids) > 2:
            merges += side == "<"
            continue
        (ours if side == "<" else theirs).append(oids[0])
    ids = _patch_ids(wt, merge_base, head, ours + theirs)
    if ids is None:
        notes.append(f"cannot compute the patch ids of HEAD and {label}")
        return out
    zero = "0" * len(head)
    return _with_base(
        out,
        head_patches=tuple(ids.get(c) for c in ours),
        head_merges=merges,
        base_patches=tuple((ids[c], c) for c in theirs if c in ids),
        cumulative=ids.get(zero, ""),
    )


def _with_base(base: BaseFacts, **changes: object) -> BaseFacts:
    return replace(base, **changes)  # type: ignore[arg-type]


def _patch_ids(wt: str, merge_base: str, head: str, commits: list[str]) -> dict[str, str] | None:
    """commit -> `git patch-id --verbatim` of each of `commits` (one without a diff has none),
    and under the all-zero name the branch's whole diff, merge base -> HEAD: byte for byte,
    whitespace included. None when git fails."""
    stdin = b""
    if commits:
        log = runner.git(
            wt, "-c", "log.showSignature=false", "log", "-p", *_DIFF_OPTS,
            "--format=commit %H", "--no-walk=unsorted", "--stdin",
            timeout=runner.LOCAL_GIT_TIMEOUT,
            stdin="".join(f"{c}\n" for c in commits),
        )  # fmt: skip
        if not log.ok:
            return None
        stdin = log.out
    diff = _git(wt, "diff", *_DIFF_OPTS, merge_base, head, "--")
    if not diff.ok:
        return None
    if diff.out:
        stdin += f"\ncommit {'0' * len(head)}\n".encode() + diff.out
    if not stdin.strip():
        return {}
    r = runner.git(
        wt, "patch-id", "--verbatim", timeout=runner.LOCAL_GIT_TIMEOUT, stdin=stdin
    )  # fmt: skip
    if not r.ok:
        return None
    ids: dict[str, str] = {}
    for line in r.out.decode("ascii", "replace").splitlines():
        pid, _, commit = line.partition(" ")
        if pid and commit:
            ids[commit.strip()] = pid
    return ids


def _merge_unchanged(
    wt: str, head: str, commit: str, project: ProjectFacts, notes: list[str], label: str
) -> bool | None:
    """Whether merging HEAD into `commit` changes nothing (`git merge-tree --write-tree`, which
    touches no ref, index or tree): clean, and the merged tree is `commit`'s own."""
    merged = _git(wt, "merge-tree", "--write-tree", "--no-messages", commit, head)
    if merged.rc == 1:
        return False  # conflicts: the content is not (all) there
    if not merged.ok:
        notes.append(f"merge-tree against {label} failed: {merged.why()}")
        return None
    first = merged.out.decode("ascii", "replace").split("\n", 1)[0].strip()
    tree = project.tree(commit)
    if tree is None:
        notes.append(f"cannot read the tree of {label}")
        return None
    return first == tree


def _pr(
    pr: str,
    wt: str,
    head: str,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None,
    notes: list[str],
) -> PrFacts:
    """The recorded PR's state and head, and whether its head is HEAD or has HEAD as an
    ancestor (a gh problem is only a note)."""
    gh = gh_bin or shutil.which("gh")
    label = shown(pr)
    unknown = PrFacts(label, None, None, None)
    if gh is None:
        notes.append(f"PR {label} is recorded but gh is not installed: its state was not checked")
        return unknown
    if pr.startswith("-") or any(c.isspace() for c in pr):
        notes.append(f"recorded PR {label} is not a PR number or URL")
        return unknown
    # The question firstmate's script asks, in its words: `STATE<TAB>HEAD` through gh's own
    # jq filter (a gh that prints the JSON object instead is read too).
    r = runner.run(
        [gh, "pr", "view", pr, "--json", "state,headRefOid", "-q", _GH_FILTER],
        timeout=fetch_timeout,
        cwd=wt,
    )
    if not r.ok:
        notes.append(f"gh pr view {label} failed: {r.why()}")
        return unknown
    answer = _gh_answer(r.out)
    if answer is None:
        notes.append(f"gh pr view {label} did not print the PR's state and head")
        return unknown
    state, pr_head = answer
    state = state if isinstance(state, str) else None
    if state is None or state.upper() != "MERGED":
        return PrFacts(label, state, None, None)  # open or closed unmerged: a fact, not a doubt
    if not isinstance(pr_head, str) or not _HEX_OID.fullmatch(pr_head.lower()):
        notes.append(f"gh reports PR {label} merged but no usable head commit")
        return PrFacts(label, state, None, None)
    pr_head = pr_head.lower()
    if not _git(wt, "cat-file", "-e", f"{pr_head}^{{commit}}").ok:
        number = _PR_NUMBER.search(pr)
        if not fetch or number is None:
            why = "a dry run does not fetch" if not fetch else "no PR number to fetch"
            notes.append(f"PR {label} head {pr_head[:12]} is not in the repository ({why})")
            return PrFacts(label, state, pr_head, None)
        got = fetch_ref(wt, f"refs/pull/{number.group(1)}/head", fetch_timeout)
        if not got.ok:
            notes.append(f"fetch of PR {label} head failed: {got.why()}")
            return PrFacts(label, state, pr_head, None)
    contains = _contains(wt, head, pr_head, notes, f"PR {label} head")
    return PrFacts(label, state, pr_head, contains)


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
