"""Is a task's own work landed? The facts git and gh give (gathered by `observe/landed.py`),
the ladder's rungs, and the verdict (`LandedFacts`, judged by `decide/landed.py`).

The facts are raw: refs, merge bases, patch ids, a simulated merge's tree, a PR's state and
head. Whatever could not be told is `None` (or a note), never a guess: the judge counts it as
"not proven", so anything unclear is not landed.
"""

from __future__ import annotations

from enum import Enum

from fm_teardown.model.causes import Cause
from fm_teardown.model.not_landed import NestedRepo, NotLandedWhy
from fm_teardown.model.notes import Note
from fm_teardown.model.values import value

__all__ = [
    "BaseFacts",
    "Gathered",
    "HomeFacts",
    "LandedFacts",
    "LandedRung",
    "PrFacts",
    "Proof",
    "ProofLine",
    "Reason",
    "ScoutFacts",
    "ShipFacts",
    "SlotProblem",
    "SlotProblemKind",
    "SlotStatus",
    "said",
]


class LandedRung(Enum):
    """What proves the work landed: the ladder's rungs in the order they are tried (spec
    §14.6), then the proofs of the tasks that have no git work to land."""

    REACHABLE = "reachable"  # HEAD is in the default branch or on a remote-tracking ref
    PATCHES = "patches"  # every commit's patch is on the default branch since the merge base
    SQUASH = "squash"  # the branch's whole diff is one commit of the default branch
    MERGE_TREE = "merge-tree"  # merging HEAD into the default branch changes nothing
    PR_HEAD = "pr-head"  # a merged PR whose head is HEAD or has HEAD as an ancestor
    SLOT_GONE = "slot-gone"  # the slot no longer exists: nothing to lose
    SCOUT_REPORT = "scout-report"  # a scout's product is its report
    EMPTY_HOME = "empty-home"  # a secondmate home without task records


@value
class Proof:
    """One rung that holds, against what (`origin/main`, `local main`, a PR; for the tasks
    without git work to land, what was found), and whether it proves the work merged too.
    `report/messages.py` words it (`proof_text`)."""

    rung: LandedRung
    where: str
    merged: bool = False


@value
class ProofLine:
    """A line of the decide stage's words around a proof of landing: `before`, the proof in
    report/'s words, `after` (`own work: reachable: HEAD is in origin/main`)."""

    before: str
    proof: Proof
    after: str = ""


# A decision's reason or headline: the decide stage's words, a line naming a proof, the
# cause of a refusal (`model/causes.py`), worded by report/, or words with their code (an
# error's message, a task already torn down: `model/notes.py`).
Reason = str | ProofLine | Cause | Note


def said(before: str, proof: Proof | None, words: str, after: str = "") -> Reason:
    """`before`, the proof (or, without one, `words` as they are), `after`."""
    return f"{before}{words}{after}" if proof is None else ProofLine(before, proof, after)


@value
class LandedFacts:
    """The verdict: landed or not, why, and what would be lost."""

    landed: bool
    summary: NotLandedWhy | None  # why it is not landed (None when landed: `proof` says why)
    dirty: tuple[str, ...]  # first dirty paths (at most 10), scaffold files excluded
    unpushed: tuple[str, ...]  # "<short sha> <subject>" for commits not landed (at most 10)
    notes: tuple[str, ...] = ()  # what could not be told (inconclusive fetch, gh failure, ...)
    untracked: tuple[str, ...] = ()  # those of `dirty` that git does not track
    head: str | None = None  # the slot's HEAD commit when it was inspected
    branch: str | None = None  # the local branch checked out there (None: detached)
    default_branch: str | None = None  # the project's default branch (never deleted)
    # Finished, not merely landed (`--landed`): the work is in origin's default branch (in
    # local main for local-only), or its recorded PR merged; a scout's report or a
    # secondmate's empty home counts too. Pushed alone is not merged.
    merged: bool = False
    merge_summary: NotLandedWhy | None = None  # why not merged (None: `merge_proof` says why)
    # False when HEAD is already in the default branch: nothing of the task's own is there
    # (a fresh slot, or a fast-forwarded merge: only a gone endpoint tells them apart).
    own_commits: bool = True
    proof: Proof | None = None  # the rung that proves it landed (None: not landed)
    merge_proof: Proof | None = None  # the rung that proves it merged (None: not merged)
    # The remote-tracking refs the verdict rests on that this look did not fetch (a dry run:
    # the real run fetches first and may decide otherwise), as shown (`origin/main`).
    unfetched: tuple[str, ...] = ()
    # The repositories nested in the slot: their work is the slot's, and `--force` cannot
    # save them with their history.
    nested: tuple[NestedRepo, ...] = ()

    @property
    def rung(self) -> LandedRung | None:
        return self.proof.rung if self.proof is not None else None

    @property
    def merge_rung(self) -> LandedRung | None:
        return self.merge_proof.rung if self.merge_proof is not None else None


# --------------------------------------------------------------------------- the facts


@value
class ScoutFacts:
    report: str  # data/<id>/report.md
    found: bool
    error: str | None = None  # why it could not be told


@value
class HomeFacts:
    """A secondmate's home and the task records in its state dir."""

    home: str
    state: str
    children: tuple[str, ...]  # the `.meta` names, sorted
    error: str | None = None  # why the state dir could not be read


class SlotProblemKind(Enum):
    GONE = "gone"  # the slot directory no longer exists
    UNREADABLE = "unreadable"
    NOT_A_DIRECTORY = "not-a-directory"
    STATUS_FAILED = "status-failed"


@value
class SlotProblem:
    kind: SlotProblemKind
    path: str
    error: str = ""


@value
class SlotStatus:
    """One `git status` of a slot: what is uncommitted, and where HEAD is."""

    dirty: tuple[str, ...]  # the first paths, scaffold files excluded
    total: int  # how many there are in all
    untracked: tuple[str, ...]  # those of `dirty` that git does not track
    head: str | None  # None: unborn (no commit yet)
    branch: str | None  # None: detached
    untracked_total: int = 0  # how many of `total` git does not track
    # The untracked directories git shows with a trailing `/` (repositories of their own:
    # git does not look inside them), as the slot's paths; at most `nested_total` of them.
    nested: tuple[str, ...] = ()


@value
class BaseFacts:
    """HEAD against one default branch ref (origin's, or the local one)."""

    label: str  # `origin/main`, `local main`
    commit: str  # what the ref named when compared
    counts_as_merged: bool  # origin's; the local one for local-only mode
    contains_head: bool | None  # HEAD reachable from it (None: cannot tell)
    merge_base: str | None = None
    # HEAD's commits since the merge base, merges aside: each one's `git patch-id --verbatim`
    # (None for a commit without a diff). None: not gathered (or too many to compare).
    head_patches: tuple[str | None, ...] | None = None
    head_merges: int = 0  # merge commits of HEAD since the merge base
    # The default branch's commits since the merge base: (patch id, commit), merges aside.
    # None: not gathered (or too many to compare).
    base_patches: tuple[tuple[str, str], ...] | None = None
    # The patch id of the branch's whole diff, merge base -> HEAD: "" when it changes nothing,
    # None when not gathered.
    cumulative: str | None = None
    # `git merge-tree --write-tree BASE HEAD`: True when clean and the merged tree is BASE's
    # own; False when not; None when it could not be told.
    merge_unchanged: bool | None = None
    # HEAD's commits since the merge base, merges aside, in `head_patches`' order (None: not
    # gathered).
    head_commits: tuple[str, ...] | None = None
    # The matches by patch id confirmed by replay (spec §14.6): (HEAD's commit, the default
    # branch's commit) when replaying the first onto the second's parent gives exactly the
    # second's tree. Only these hold: a patch id ignores where in a file a change goes.
    replayed: frozenset[tuple[str, str]] = frozenset()
    # The default branch's commits whose tree replaying the branch's whole diff (merge base
    # -> HEAD) onto their parent gives exactly: the squash matches that hold.
    squash_replayed: frozenset[str] = frozenset()
    # The local default branch (`local main`), not a remote-tracking ref: no fetch changes it.
    local: bool = False


@value
class PrFacts:
    """The recorded PR as gh reports it."""

    label: str  # the record's PR, shown
    state: str | None  # gh's state (MERGED, OPEN, CLOSED); None: not told
    head: str | None  # the PR's head commit
    contains_head: bool | None  # its head is HEAD or has HEAD as an ancestor (None: not told)


@value
class ShipFacts:
    """A ship task's slot: its status and HEAD against every proof the ladder can use."""

    slot: str
    status: SlotStatus
    default: str | None  # the project's default branch name (None: cannot be told)
    origin: bool  # the project has a remote named origin
    on_remote: bool | None  # HEAD reachable from some remote-tracking ref (None: cannot tell)
    unpushed_total: int = 0  # commits of HEAD on no remote-tracking ref nor default branch
    unpushed: tuple[str, ...] = ()  # the first of them, "<short sha> <subject>"
    bases: tuple[BaseFacts, ...] = ()
    pr: PrFacts | None = None
    notes: tuple[str, ...] = ()  # what the gathering could not tell
    # Whether HEAD's commits are on a remote cannot be told: the one fact without which
    # nothing is judged.
    remote_error: str | None = None
    # This look fetched (with prune) the remotes whose refs it counts: a real run. A dry run
    # takes the remote-tracking refs as they are, and its verdict says so.
    fetched: bool = False
    # The task's branch (`fm/<id>`) when its tip is neither HEAD nor in HEAD's history: the
    # facts of that tip, judged like HEAD's (its `status` is clean; `status.branch` names it).
    branch_tip: ShipFacts | None = None
    # The repositories nested in the slot, inspected (`status.nested`).
    nested: tuple[NestedRepo, ...] = ()


Gathered = ScoutFacts | HomeFacts | SlotProblem | ShipFacts
