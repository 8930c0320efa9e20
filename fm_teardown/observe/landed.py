"""What git and gh say about a task's own work: the facts rule 5 judges (spec §5 rule 5, §8,
§14.6). Gathering only: `decide/landed.py` judges them.

For one record (`fm teardown TASK`) or a whole fleet's (the audit) with the same code, so an
audit row and the one-task dry run agree by construction. Whatever cannot be told is left
unknown (`None`) or said in a note, never guessed: the judge counts it as not landed.

A scout's facts are whether its report exists; a secondmate's, the task records in its
home; a ship task's, its slot:

- one `git status` (`observe/slot_status.py`): uncommitted and untracked paths (scaffold
  files aside), HEAD, branch, and the untracked directories that are repositories of their
  own; each of those is inspected like the slot (`observe/nested.py`);
- for what the slots of one project share, at most 4 git calls: its refs (with the default
  branches' trees; a dry run reads them in the batch of the slots' `git status`, a real run
  after its fetch) and default branch; one `rev-list` that tells, for every slot's HEAD (and
  every task branch `fm/<id>`'s tip) at once, whether a remote-tracking ref has it; one
  whether origin's default branch has it; one whether the local default branch has it.
  `remote.origin.url` is asked only when no ref of origin is there
  (`observe/landed_project.py`). A real run first fetches, with prune, origin and the
  remotes that have the work, and counts only the refs those fetches write
  (`observe/remote_refs.py`); a dry run never fetches and says what its verdict rests on;
- for a HEAD in no default branch, against each default branch ref (origin's, fetched once
  for the project on a real run; the local one): the merge base, the commits on both sides
  since it (at most `MAX_COMPARED`: beyond that no content rung is proven, and the note says
  so), their `git patch-id --verbatim` and that of the branch's whole diff, each match by
  patch id confirmed by replay (`observe/replay.py`), and one `git merge-tree
  --write-tree`; its commits on no remote; the recorded PR's state and head (`gh`, and a
  fetch of the PR head on a real run when it is missing);
- the task's branch `fm/<id>` when its tip is neither HEAD nor in HEAD's history: the same
  facts for that tip, which must be landed too.

Slots and projects are inspected a few at a time. Every git call goes through `runner`.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
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
    SlotStatus,
)
from fm_teardown.model.landing import LandedFacts as LandedFacts  # the verdict's type, as before
from fm_teardown.model.records import Mode, Record, RecordKind, shown
from fm_teardown.model.values import value
from fm_teardown.observe import slot_status
from fm_teardown.observe.landed_project import REFS_ARGS, ProjectFacts, fetch_ref, project_facts
from fm_teardown.observe.nested import inspect as inspect_nested
from fm_teardown.observe.replay import Replay, replay
from fm_teardown.observe.slot_status import MAX_LISTED

__all__ = ["MAX_COMPARED", "WORKERS", "gather", "gather_beside", "gather_many"]

# Commits compared patch by patch, both sides of the merge base together: beyond this no
# content rung holds (fail closed: its commits are not told apart), and a note says why.
MAX_COMPARED = 2000
# Slots and projects inspected at once, as many as the slots' statuses read at once.
WORKERS = slot_status.WORKERS

_HEX_OID = runner.HEX_OID
_PR_NUMBER = re.compile(r"(?:^#?|/pull/)(\d+)(?:[/?#].*)?$")
_SCOUT_REPORT = "report.md"
# The same diff for a commit and for the branch's whole change, byte for byte: no external
# diff or textconv, binary files in full, renames as a deletion and an addition.
_DIFF_OPTS = ("--no-ext-diff", "--no-textconv", "--no-color", "--binary", "--no-renames")

_git = runner.git


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
    return gather_beside(
        records, data_dir, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin
    )[0]


def gather_beside(
    records: Iterable[Record],
    data_dir: Path,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None = None,
    also: Sequence[tuple[str, Sequence[str]]] = (),
) -> tuple[dict[str, Gathered], list[runner.Result]]:
    """`gather_many`, and the results of `also`: git calls (repository, args) of the
    caller's that need no status, run in the batch of the slots' statuses rather than after
    it (the audit's listing of task branches)."""
    out: dict[str, Gathered] = {}
    ships: list[Record] = []
    for record in records:
        if record.kind == RecordKind.SCOUT:
            out[record.task_id] = _scout(record, data_dir)
        elif record.kind == RecordKind.SECONDMATE:
            out[record.task_id] = _secondmate(record)
        else:
            ships.append(record)
    # A dry run's project refs need no status: read in the statuses' batch, not after it (a
    # real run reads them after its fetch).
    projects = [] if fetch else sorted({r.project for r in ships})
    statuses, ran = slot_status.statuses(
        [r.worktree for r in ships], also=[*((p, REFS_ARGS) for p in projects), *also]
    )
    read = dict(zip(projects, ran, strict=False))
    by_project: dict[str, list[tuple[Record, SlotStatus]]] = {}
    for record, st in zip(ships, statuses, strict=True):
        if isinstance(st, SlotProblem):
            out[record.task_id] = st
        else:
            by_project.setdefault(record.project, []).append((record, st))
    groups = list(by_project.items())

    def shared_by(group: tuple[str, list[tuple[Record, SlotStatus]]]) -> ProjectFacts:
        project, slots = group
        tasks = [r.task_id for r, _ in slots]
        return project_facts(
            project,
            [st for _, st in slots],
            fetch_timeout,
            fetch=fetch,
            tasks=tasks,
            refs=read.get(project),
        )

    shared = _pmap(shared_by, groups)
    work = [
        (record, st, facts)
        for facts, (_, slots) in zip(shared, groups, strict=True)
        for record, st in slots
    ]

    asking = _Asking(fetch, fetch_timeout, gh_bin)

    def one(item: tuple[Record, SlotStatus, ProjectFacts]) -> ShipFacts:
        record, st, facts = item
        ship = _ship(record, st, facts, asking)
        tip = _branch_tip(record, st, facts, asking)
        nested = inspect_nested(record.worktree, st.nested) if st.nested else ()
        return _with(ship, branch_tip=tip, nested=nested)

    # The slots whose facts may need git or gh of their own a few at a time, in threads; the
    # others (most of an audit's: HEAD on a remote and in origin's default branch) here, where
    # a thread would cost more than their facts do.
    asked = [fetch or _may_ask(record, st, facts) for record, st, facts in work]
    slow = iter(_pmap(one, [item for item, ask in zip(work, asked, strict=True) if ask]))
    for item, ask in zip(work, asked, strict=True):
        out[item[0].task_id] = next(slow) if ask else one(item)
    return out, ran[len(projects) :]


def _may_ask(record: Record, st: SlotStatus, project: ProjectFacts) -> bool:
    """Whether a dry run's facts of this slot may need a git or gh call of their own (`_ship`,
    `_branch_tip`, `inspect_nested`), or are told by its status and its project's facts alone.
    Only which thread gathers them depends on it: a wrong answer costs time, never a fact."""
    if st.nested or record.pr or record.mode == Mode.LOCAL_ONLY:
        return True
    if record.task_id in project.tips:
        return True  # its branch's tip may need its own look
    if st.head is None or project.refs_error is not None or project.unpushed_error is not None:
        return False  # said from the status alone
    if st.head in project.unpushed:
        return True  # its commits on no remote are listed
    return not st.total and project.in_origin is None


@value
class _Asking:
    """How this look asks the remotes: whether it fetches (a real run) or not (a dry run),
    how long one network call may take, and the `gh` to ask (None: the one on PATH)."""

    fetch: bool
    timeout: float
    gh_bin: str | None


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


def _unpushed(
    wt: str, head: str, local: str | None, project: ProjectFacts
) -> tuple[int, tuple[str, ...]] | str:
    """(how many commits of `head` are on no counted remote-tracking ref nor the local default
    branch, the first of them), or why git could not tell."""
    args, stdin = project.beyond_remotes([head], [local] if local else [])
    log = runner.run(
        ["git", "-C", wt, "-c", "log.showSignature=false", "log", "--format=%h %s", *args, "--"],
        timeout=runner.LOCAL_GIT_TIMEOUT,
        stdin=stdin,
    )
    if not log.ok:
        return log.why()
    lines = [line for line in log.out.decode("utf-8", "replace").splitlines() if line]
    return len(lines), tuple(shown(line, 100) for line in lines[:MAX_LISTED])


def _ship(record: Record, st: SlotStatus, project: ProjectFacts, asking: _Asking) -> ShipFacts:
    wt, repo, branch = record.worktree, record.project, project.default
    notes: list[str] = list(project.confirmed.notes) if project.confirmed is not None else []
    facts = ShipFacts(wt, st, branch, bool(project.refs) and project.has_origin(), None)
    facts = _with(facts, fetched=asking.fetch)
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
        listed = _unpushed(wt, head, local, project)
        if isinstance(listed, str):
            note = f"git log {head[:12]} --not --remotes failed in {wt}: {listed}"
            return _with(facts, notes=tuple(notes), remote_error=note)
        unpushed = listed
    facts = _with(facts, on_remote=on_remote, unpushed_total=unpushed[0], unpushed=unpushed[1])
    if st.total:
        # Uncommitted work is never landed ("dirty always wins"): nothing more to gather.
        return _with(facts, notes=tuple(notes))

    bases: list[BaseFacts] = []
    if branch is not None and facts.origin:
        bases += _origin_base(record, head, on_remote, project, asking.fetch, notes)
    if branch is not None:
        bases += _local_base(record, head, bases, project, notes)
    if not on_remote and not any(b.contains_head and b.counts_as_merged for b in bases):
        # Not settled by reachability: the content rungs, against each default branch.
        bases = [
            b if b.contains_head is not False else _content(wt, head, b, project, notes)
            for b in bases
        ]
    pr = None
    if record.pr and not any(b.contains_head and b.counts_as_merged for b in bases):
        pr = _pr(record.pr, wt, head, asking, notes)
    return _with(facts, bases=tuple(bases), pr=pr, notes=tuple(notes))


def _origin_base(
    record: Record,
    head: str,
    on_remote: bool,
    project: ProjectFacts,
    fetch: bool,
    notes: list[str],
) -> list[BaseFacts]:
    """HEAD against origin's default branch (none when that branch cannot be used)."""
    wt, repo, branch = record.worktree, record.project, project.default
    label = f"origin/{branch}"
    ref = f"refs/remotes/origin/{branch}"
    if project.in_origin is not None and head in project.in_origin:
        return [BaseFacts(label, project.refs[ref], True, True)]
    if on_remote and project.in_origin is not None:
        # Pushed: nothing would be lost, so no fetch and no per-slot call; whether it is
        # merged all the same is the project's one merge-tree for every pushed HEAD.
        unchanged = head in project.squashed
        return [BaseFacts(label, project.refs[ref], True, False, merge_unchanged=unchanged)]
    if fetch:
        ok, why = project.fetched()
        if not ok:
            # A stale ref could miss a merge that happened since: do not judge on it.
            notes.append(f"fetch of {label} failed, so it is inconclusive: {why}")
            return []
    commit = project.refs.get(ref)
    if commit is None:
        notes.append(f"{label} does not exist in {repo}")
        return []
    # Whether origin's default branch has HEAD was read after any fetch of it.
    fresh = project.in_origin is not None and (
        project._fetched is None or project.confirmed is not None
    )
    contains = False if fresh else _contains(wt, head, commit, notes, label)
    return [BaseFacts(label, commit, True, contains)]


def _local_base(
    record: Record, head: str, bases: list[BaseFacts], project: ProjectFacts, notes: list[str]
) -> list[BaseFacts]:
    """HEAD against the local default branch, when it says something `bases` (origin's) do
    not, or local-only mode names it."""
    wt, repo, branch = record.worktree, record.project, project.default
    local = project.refs.get(f"refs/heads/{branch}")
    local_only = record.mode == Mode.LOCAL_ONLY
    if local is None:
        if local_only:
            notes.append(f"local branch {branch} does not exist in {repo}")
        return []
    if not local_only and any(b.commit == local for b in bases):
        return []  # the same commit as origin's tells nothing new, but local-only names its own
    contains = project.in_local.get(head)
    if contains is None and local_only:
        contains = _contains(wt, head, local, notes, f"local {branch}")
    return [BaseFacts(f"local {branch}", local, local_only, contains, local=True)]


def _branch_tip(
    record: Record, st: SlotStatus, project: ProjectFacts, asking: _Asking
) -> ShipFacts | None:
    """The facts of the task's branch `fm/<id>` when its tip is neither HEAD nor in HEAD's
    history (commits the slot does not have checked out): TASK's work is its branch too. The
    tip is judged like a clean slot's HEAD; its notes name the branch. Not gathered for a
    dirty slot: its work is not landed whatever the branch holds."""
    name = f"fm/{record.task_id}"
    tip = project.tips.get(record.task_id)
    if tip is None or st.head is None or st.total or tip == st.head or st.branch == name:
        return None
    if project.in_origin is None or tip not in project.in_origin:
        # In HEAD's history: HEAD's verdict covers it (one call, only for such a branch).
        inside = _git(record.worktree, "merge-base", "--is-ancestor", tip, st.head)
        if inside.ok:
            return None
    clean = SlotStatus((), 0, (), tip, name)
    facts = _ship(record, clean, project, asking)
    return _with(facts, notes=tuple(f"branch {name}: {n}" for n in facts.notes))


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
    parent: dict[str, str] = {}
    merges = 0
    for row in rows:
        side, oids = row[:1], row[1:].split()
        if not oids:
            continue
        if len(oids) > 2:
            merges += side == "<"
            continue
        if len(oids) == 2:
            parent[oids[0]] = oids[1]
        (ours if side == "<" else theirs).append(oids[0])
    ids = _patch_ids(wt, merge_base, head, ours + theirs)
    if ids is None:
        notes.append(f"cannot compute the patch ids of HEAD and {label}")
        return out
    zero = "0" * len(head)
    facts = _with_base(
        out,
        head_patches=tuple(ids.get(c) for c in ours),
        head_merges=merges,
        base_patches=tuple((ids[c], c) for c in theirs if c in ids),
        cumulative=ids.get(zero, ""),
        head_commits=tuple(ours),
    )
    return _replayed(wt, head, facts, parent, notes)


def _replayed(
    wt: str, head: str, b: BaseFacts, parent: dict[str, str], notes: list[str]
) -> BaseFacts:
    """The matches by patch id that replay confirms (`observe/replay.py`): each commit of
    HEAD onto each of its matches' parents, when every commit has a match and none is a merge;
    the branch's whole diff onto the parent of each commit matching it."""
    ours, pids = b.head_commits or (), b.head_patches or ()
    matches: dict[str, list[str]] = {}
    for pid, commit in b.base_patches or ():
        if commit in parent:
            matches.setdefault(pid, []).append(commit)
    patches: list[Replay] = []
    if ours and not b.head_merges and all(p in matches for p in pids):
        patches = [
            Replay(parent[mine], parent[theirs], mine, theirs)
            for mine, pid in zip(ours, pids, strict=True)
            if pid is not None and mine in parent
            for theirs in matches[pid]
        ]
    squash = [
        Replay(b.merge_base, parent[theirs], head, theirs)
        for theirs in matches.get(b.cumulative or "", [])
        if b.merge_base is not None
    ]
    if not patches and not squash:
        return b
    held, why = replay(wt, [*patches, *squash])
    if why is not None:
        notes.append(f"cannot replay the matches of HEAD and {b.label}, so none holds: {why}")
    return _with_base(
        b,
        replayed=frozenset((r.change, r.want) for r in patches if r in held),
        squash_replayed=frozenset(r.want for r in squash if r in held),
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


def _pr(pr: str, wt: str, head: str, asking: _Asking, notes: list[str]) -> PrFacts:
    """The recorded PR's state and head, and whether its head is HEAD or has HEAD as an
    ancestor (a gh problem is only a note)."""
    gh = asking.gh_bin or shutil.which("gh")
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
        timeout=asking.timeout,
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
        if not asking.fetch or number is None:
            why = "a dry run does not fetch" if not asking.fetch else "no PR number to fetch"
            notes.append(f"PR {label} head {pr_head[:12]} is not in the repository ({why})")
            return PrFacts(label, state, pr_head, None)
        got = fetch_ref(wt, f"refs/pull/{number.group(1)}/head", asking.timeout)
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
