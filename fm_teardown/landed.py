"""Is TASK's own work landed? (CONTRACT §5 rule 5) And, under `--force`, save what is not.

This is the git adapter of the landed-work check. It answers one question per record and
fails closed: anything it cannot tell counts as "not landed", and the reason goes into
`LandedFacts.notes` so the operator learns *why* the tool could not tell.

Ship tasks are judged by their slot (a linked worktree of the project):

(a) uncommitted or untracked changes outside the scaffold files: not landed, always;
(b) HEAD reachable from any remote-tracking ref (a fork counts): landed;
(c) HEAD's content already in origin's default branch (squash merges, replayed patches),
    after a bounded fetch of that one branch on a real run; a dry run uses the refs as they
    are and never fetches;
(d) local-only mode: HEAD's content merged into the local default branch;
(e) a recorded PR that `gh` reports MERGED and whose head contains HEAD.

Every subprocess runs with stdin closed, a timeout, no terminal prompt, the C locale and
`GIT_OPTIONAL_LOCKS=0`, so inspecting a slot never takes its `index.lock` (a dry run must not
write, and a lock held by us could block the very pool return we are preparing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from fm_teardown import runner
from fm_teardown.records import Record, shown
from fm_teardown.scaffold import SCAFFOLD_BYTES

# How many dirty paths, unlanded commits and child records a refusal names.
MAX_LISTED = 10
MAX_CHILDREN_NAMED = 5

_HEX_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_PR_NUMBER = re.compile(r"(?:^#?|/pull/)(\d+)(?:[/?#].*)?$")
_SCOUT_REPORT = "report.md"


@dataclass(frozen=True)
class LandedFacts:
    landed: bool
    summary: str  # one line: why it is or is not landed
    dirty: tuple[str, ...]  # first dirty paths (at most 10), scaffold files excluded
    unpushed: tuple[str, ...]  # "<short sha> <subject>" for commits not landed (at most 10)
    notes: tuple[str, ...] = ()  # what could not be told (inconclusive fetch, gh failure, ...)


# --------------------------------------------------------------------------- git

_git = runner.git


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


def _rev(repo: str, spec: str) -> str | None:
    """The commit `spec` names in `repo`, or None when it does not name one."""
    r = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{spec}^{{commit}}")
    sha = r.text
    return sha if r.ok and _HEX_OID.fullmatch(sha) else None


def _display(path: bytes) -> str:
    # Paths are bytes on POSIX; show undecodable ones escaped rather than crash a printer.
    return path.decode("utf-8", "backslashreplace")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


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
    if record.kind == "scout":
        return _scout(record, data_dir)
    if record.kind == "secondmate":
        return _secondmate(record)
    return _ship(record, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin)


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
        return LandedFacts(True, f"scout report {report} exists", (), ())
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
        return LandedFacts(True, f"secondmate home {home} has no task records", (), ())
    named = ", ".join(children[:MAX_CHILDREN_NAMED])
    extra = len(children) - MAX_CHILDREN_NAMED
    more = f" and {extra} more" if extra > 0 else ""
    return LandedFacts(
        False,
        f"secondmate home {home} still has in-flight work: {named}{more}",
        (),
        (),
    )


def _dirty(wt: str) -> tuple[list[str], int] | str:
    """(first dirty paths, total) outside the scaffold files, or why it cannot be told.

    `--untracked-files=all` on the command line beats a `status.showUntrackedFiles=no` in
    the repo's config, and lists every untracked file (not a folded directory), so a scaffold
    file is matched by its exact path and its neighbours still count.
    """
    r = _git(
        wt,
        "-c",
        "status.showUntrackedFiles=all",
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=none",
    )
    if not r.ok:
        return r.why()
    entries = r.out.split(b"\0")
    paths: list[str] = []
    total = 0
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        xy, path = entry[:2], entry[3:]
        if b"R" in xy or b"C" in xy:
            # A rename or copy entry is followed by its source path. A rename also changes
            # the source, so moving real work onto a scaffold name still counts as dirty.
            source = entries[i] if i < len(entries) else b""
            i += 1
            if path in SCAFFOLD_BYTES and b"R" in xy and source:
                path = source
        if path in SCAFFOLD_BYTES:
            continue
        total += 1
        if len(paths) < MAX_LISTED:
            paths.append(_display(path))
    return paths, total


def _unpushed(wt: str) -> tuple[int, tuple[str, ...]] | str:
    """(how many commits of HEAD are on no remote-tracking ref, the first of them)."""
    count = _git(wt, "rev-list", "--count", "HEAD", "--not", "--remotes")
    if not count.ok or not count.text.isdigit():
        return count.why()
    n = int(count.text)
    if n == 0:
        return 0, ()
    log = _git(
        wt,
        "-c",
        "log.showSignature=false",
        "log",
        f"-n{MAX_LISTED}",
        "--format=%h %s",
        "HEAD",
        "--not",
        "--remotes",
    )
    if not log.ok:
        return log.why()
    lines = log.out.decode("utf-8", "replace").splitlines()
    return n, tuple(shown(line, 100) for line in lines if line)


def _ship(record: Record, *, fetch: bool, fetch_timeout: float, gh_bin: str | None) -> LandedFacts:
    wt = record.worktree
    try:
        st = os.stat(wt)
    except (FileNotFoundError, NotADirectoryError):
        # The caller skips the process and pool steps for a vanished slot: nothing is reset.
        return LandedFacts(True, "slot directory no longer exists: nothing to lose", (), ())
    except OSError as exc:
        # Not os.path.exists: it says False for "permission denied", which is not "gone".
        why = f"cannot read slot path {wt}: {exc.strerror}"
        return LandedFacts(False, f"cannot inspect the slot: {why}", (), (), (why,))
    if not stat.S_ISDIR(st.st_mode):
        why = f"slot path {wt} exists but is not a directory"
        return LandedFacts(False, f"cannot inspect the slot: {why}", (), (), (why,))

    dirty = _dirty(wt)
    if isinstance(dirty, str):
        note = f"git status failed in {wt}: {dirty}"
        return LandedFacts(
            False, "cannot inspect the slot for uncommitted changes", (), (), (note,)
        )
    dirty_paths, dirty_total = dirty

    head = _rev(wt, "HEAD")
    if head is None:
        note = f"HEAD of {wt} does not name a commit"
        return LandedFacts(
            False,
            "cannot tell whether the work landed: HEAD has no commit",
            tuple(dirty_paths),
            (),
            (note,),
        )
    unpushed = _unpushed(wt)
    if isinstance(unpushed, str):
        note = f"git log HEAD --not --remotes failed in {wt}: {unpushed}"
        return LandedFacts(
            False,
            "cannot inspect the slot for commits not on a remote",
            tuple(dirty_paths),
            (),
            (note,),
        )
    n_unpushed, unpushed_lines = unpushed

    if dirty_total:
        # Uncommitted work is never landed, whatever the commits say ("dirty always wins"),
        # so the network checks would not change the verdict: skip them. The commits listed
        # are those on no remote-tracking ref.
        named = ", ".join(dirty_paths[:3]) + (", …" if dirty_total > 3 else "")
        summary = f"uncommitted changes in {_plural(dirty_total, 'path')} ({named})"
        if n_unpushed:
            summary += f"; {_plural(n_unpushed, 'commit')} on no remote-tracking branch"
        return LandedFacts(False, summary, tuple(dirty_paths), unpushed_lines)

    if n_unpushed == 0:
        return LandedFacts(True, f"HEAD {head[:12]} is on a remote-tracking branch", (), ())

    notes: list[str] = []
    reason, where = _committed_landed(
        record, head, fetch=fetch, fetch_timeout=fetch_timeout, gh_bin=gh_bin, notes=notes
    )
    if reason is not None:
        return LandedFacts(True, reason, (), (), tuple(notes))
    summary = f"{_plural(n_unpushed, 'commit')} on no remote-tracking branch and not in {where}"
    if notes:
        summary += " (could not tell everything; see notes)"
    return LandedFacts(False, summary, (), unpushed_lines, tuple(notes))


def _committed_landed(
    record: Record,
    head: str,
    *,
    fetch: bool,
    fetch_timeout: float,
    gh_bin: str | None,
    notes: list[str],
) -> tuple[str | None, str]:
    """(why HEAD's committed work is landed, or None; what it was compared against)."""
    wt, project = record.worktree, record.project
    branch = _default_branch(project)
    if branch is None:
        notes.append(
            f"cannot determine the default branch of {project}: "
            "expected origin/HEAD, main or master"
        )
    where: list[str] = []

    if branch is not None and record.mode == "local-only":
        where.append(f"local {branch}")
        # No network involved: try the cheap local answer before fetching anything.
        local = _rev(project, f"refs/heads/{branch}")
        if local is None:
            notes.append(f"local branch {branch} does not exist in {project}")
        elif _content_in(wt, local, head, notes, f"local {branch}"):
            return f"HEAD's content is merged into local {branch} (local-only)", ""

    if branch is not None and _has_origin(project):
        where.insert(0, f"origin/{branch}")
        usable = True
        if fetch:
            r = _fetch(project, f"+refs/heads/{branch}:refs/remotes/origin/{branch}", fetch_timeout)
            if not r.ok:
                # A stale ref could miss a merge that happened since: do not judge on it.
                notes.append(f"fetch of origin/{branch} failed, so it is inconclusive: {r.why()}")
                usable = False
        if usable:
            base = _rev(project, f"refs/remotes/origin/{branch}")
            if base is None:
                notes.append(f"origin/{branch} does not exist in {project}")
            elif _content_in(wt, base, head, notes, f"origin/{branch}"):
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


def _default_branch(project: str) -> str | None:
    """origin's default branch as the project sees it: origin/HEAD, else main, else master."""
    r = _git(project, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")
    prefix = "refs/remotes/origin/"
    if r.ok and r.text.startswith(prefix) and len(r.text) > len(prefix):
        return r.text[len(prefix) :]
    refs = _git(
        project,
        "for-each-ref",
        "--format=%(refname)",
        "refs/remotes/origin/main",
        "refs/heads/main",
        "refs/remotes/origin/master",
        "refs/heads/master",
    )
    if not refs.ok:
        return None
    found = set(refs.text.splitlines())
    for name in ("main", "master"):
        if f"refs/remotes/origin/{name}" in found or f"refs/heads/{name}" in found:
            return name
    return None


def _has_origin(project: str) -> bool:
    return _git(project, "config", "--get", "remote.origin.url").ok


def _content_in(wt: str, base: str, head: str, notes: list[str], label: str) -> bool:
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
    merged = _git(wt, "merge-tree", "--write-tree", "--no-messages", base, head)
    if merged.rc == 1:
        return False  # conflicts: the content is not (all) there
    if not merged.ok:
        notes.append(f"merge-tree against {label} failed: {merged.why()}")
        return False
    first = merged.out.decode("ascii", "replace").split("\n", 1)[0].strip()
    tree = _git(wt, "rev-parse", "--verify", "--quiet", f"{base}^{{tree}}")
    if not tree.ok:
        notes.append(f"cannot read the tree of {label}: {tree.why()}")
        return False
    return first == tree.text


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
    r = runner.run(
        [gh, "pr", "view", pr, "--json", "state,headRefOid"], timeout=fetch_timeout, cwd=wt
    )
    if not r.ok:
        notes.append(f"gh pr view {label} failed: {r.why()}")
        return None
    try:
        data = json.loads(r.out)
    except ValueError:
        notes.append(f"gh pr view {label} did not print JSON")
        return None
    if not isinstance(data, dict):
        notes.append(f"gh pr view {label} printed unexpected JSON")
        return None
    state, pr_head = data.get("state"), data.get("headRefOid")
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
