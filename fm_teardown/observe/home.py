"""A secondmate's home is its own work (spec §14.8): rule 5's facts for a secondmate.

firstmate's spawn records a standard secondmate with `worktree=`, `project=` and `home=` all
naming its home, a pool slot: retiring it returns that slot, and the pool's reset destroys
whatever the home holds that is not committed and pushed (notes, `data/backlog.md`, a scout's
report, an edit to a tracked file). So the home is checked like any task's slot, on top of
the check of its task records (`landed.py`): uncommitted and untracked paths, and commits on
no remote-tracking branch. Not work: the fleet's scaffold files, firstmate's home markers and
the home's `state/` (its task records are judged, and saved, as records).

Fail closed: a home git cannot read is not landed, and the note says why. The commits are
judged by reachability alone (a ship's squash and PR rungs are a ship's): a home's commit on
no remote-tracking branch is unlanded, and `--force` saves it with the rest.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import replace

from fm_teardown.adapters import runner
from fm_teardown.model.landing import LandedFacts
from fm_teardown.model.not_landed import (
    AndAlso,
    HomeOwnWork,
    HomeProblem,
    HomeProblemKind,
    OwnWork,
)
from fm_teardown.model.records import Record, RecordKind
from fm_teardown.model.scaffold import SCAFFOLD_BYTES
from fm_teardown.observe.nested import inspect as inspect_nested
from fm_teardown.observe.slot_status import MAX_LISTED, git_status, status_entries

__all__ = ["HOME_MARKERS", "HOME_STATE", "with_homes"]

# firstmate's own files in a secondmate's home: the home's marker and its parent's.
HOME_MARKERS = frozenset({b".fm-secondmate-home", b".fm-secondmate-parent"})
# The home's state dir: its task records (judged as records) and their sidecars and locks.
HOME_STATE = b"state/"


def with_homes(
    records: Iterable[Record], verdicts: Mapping[str, LandedFacts]
) -> dict[str, LandedFacts]:
    """Rule 5's verdicts (`landed.gather_many`, judged by `decide.landed.judge`), with every
    secondmate's slot (its home) checked like a slot on top of its task records' verdict."""
    out = dict(verdicts)
    for record in records:
        if record.kind == RecordKind.SECONDMATE and record.task_id in out:
            out[record.task_id] = _with_home(record, out[record.task_id])
    return out


def _not_work(path: bytes) -> bool:
    return path in SCAFFOLD_BYTES or path in HOME_MARKERS or path.startswith(HOME_STATE)


def _with_home(record: Record, records: LandedFacts) -> LandedFacts:
    """The secondmate's facts: its task records' (`records`) and its slot's own work."""
    wt = record.worktree
    try:
        st = os.stat(wt)
    except (FileNotFoundError, NotADirectoryError):
        return records  # no home left: nothing of it to lose
    except OSError as exc:
        why = f"cannot read secondmate home {wt}: {exc.strerror}"
        problem = HomeProblem(HomeProblemKind.UNREADABLE, wt, str(exc.strerror))
        return _not_inspected(records, problem, why)
    if not stat.S_ISDIR(st.st_mode):
        why = f"secondmate home {wt} exists but is not a directory"
        return _not_inspected(records, HomeProblem(HomeProblemKind.NOT_A_DIRECTORY, wt), why)
    uninspected = HomeProblem(HomeProblemKind.GIT_FAILED, wt)
    r = git_status(wt)
    if not r.ok:
        why = f"git status failed in secondmate home {wt}: {r.why()}"
        return _not_inspected(records, uninspected, why)
    head, dirty, untracked = _status(r.out)
    commits: list[str] = []
    if head is not None:
        log = runner.git(
            wt, "-c", "log.showSignature=false", "log", "--format=%h %s", "HEAD", "--not",
            "--remotes", "--",
        )  # fmt: skip
        if not log.ok:
            why = f"git log HEAD --not --remotes failed in secondmate home {wt}: {log.why()}"
            return _not_inspected(records, uninspected, why, head)
        commits = [line for line in log.out.decode("utf-8", "replace").splitlines() if line]
    if not dirty and not commits:
        return replace(records, head=head, branch=None, default_branch=None)
    work = OwnWork(len(dirty), tuple(dirty[:3]), len(untracked), len(commits))
    summary = HomeOwnWork(wt, work)
    untracked_set = set(untracked)
    # A repository nested in the home is its work like a slot's (`observe/nested.py`).
    nested = [p for p in untracked if p.endswith("/")]
    own = LandedFacts(
        False,
        summary,
        dirty=tuple(dirty[:MAX_LISTED]),
        untracked=tuple(p for p in dirty[:MAX_LISTED] if p in untracked_set),
        unpushed=tuple(commits[:MAX_LISTED]),
        head=head,
        nested=inspect_nested(wt, nested) if nested else (),
    )
    return _unlanded(records, own)


def _not_inspected(
    records: LandedFacts, problem: HomeProblem, why: str, head: str | None = None
) -> LandedFacts:
    """The home could not be inspected: not landed, and the note says why."""
    return _unlanded(records, LandedFacts(False, problem, (), (), (why,), head=head))


def _unlanded(records: LandedFacts, home: LandedFacts) -> LandedFacts:
    """Not landed: the home's own facts (`home`: its work, or why it could not be
    inspected), with the task records' why too when they are not landed."""
    summary = home.summary
    if not records.landed and summary is not None:
        summary = AndAlso(summary, records.summary)
    return replace(
        home, summary=summary, merge_summary=summary, notes=(*home.notes, *records.notes)
    )


def _status(out: bytes) -> tuple[str | None, list[str], list[str]]:
    """`git status --porcelain=v2 --branch -z`: HEAD (None: unborn), the changed paths that
    are the home's work, and those of them git does not track."""
    head: str | None = None
    paths: list[str] = []
    untracked: list[str] = []
    for what, entry, new in status_entries(out, is_work=lambda p: not _not_work(p)):
        if what == b"#":
            if entry.startswith(b"# branch.oid "):
                oid = entry[len(b"# branch.oid ") :].decode("ascii", "replace")
                head = oid if runner.HEX_OID.fullmatch(oid) else None
            continue
        shown = entry.decode("utf-8", "backslashreplace")
        paths.append(shown)
        if new:
            untracked.append(shown)
    return head, paths, untracked
