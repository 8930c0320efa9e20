"""Is a task's own work landed? The judge of rule 5 (spec §5 rule 5, §14.6): a pure function
of the facts `observe/landed.py` gathered.

Uncommitted or untracked work (scaffold files aside) is never landed. Otherwise the work is
landed when any rung of the ladder holds, tried in this order, and the verdict names it:

1. **reachable**: HEAD is in the default branch (origin's or the local one) or on another
   remote-tracking ref;
2. **patches**: every commit of HEAD since the merge base has its patch on the default branch
   since the merge base, each match confirmed by replay (the commit replayed onto its match's
   parent gives exactly its match's tree);
3. **squash**: the branch's whole diff (merge base -> HEAD) is the patch of one commit of the
   default branch since the merge base (a squash merge, also after later edits of the same
   files), confirmed by replay (the branch's changes replayed onto that commit's parent give
   exactly its tree);
4. **merge-tree**: merging HEAD into the default branch changes nothing;
5. **pr-head**: the recorded PR is reported merged and its head is HEAD or has HEAD as an
   ancestor (a PR merged while the branch moved on does not land the newer commits).

Patches are compared byte for byte (`git patch-id --verbatim`): whitespace is content. A
patch id ignores line numbers, so a change to one of two identical blocks matches the same
change to the other: only the replay tells them apart, and a match it does not confirm does
not hold. A commit that changes nothing has no patch to find: rungs 2-4 never land it, only
reachability does. A merge commit of the branch has no patch of its own: rung 2 does not hold
over it. Anything the facts do not tell is not proof.

TASK's work is its HEAD and its branch: when the task's branch (`fm/<id>`) has commits beyond
HEAD, they must be landed too (the same ladder, on the branch's tip). The repositories nested
in the slot are untracked work of the slot (never landed); the verdict carries them, for the
refusal to name their work and for `--force`, which cannot save them.

A verdict that rests on remote-tracking refs this look did not fetch (a dry run's) names them
(`unfetched`): the real run fetches first, and may decide otherwise.

Merged (finished, `--landed`) is the same ladder against origin's default branch (the local
one for local-only mode) and the merged PR: a HEAD on another remote-tracking ref only is
landed, not merged.
"""

from __future__ import annotations

from dataclasses import replace

from fm_teardown.model.landing import (
    BaseFacts,
    Gathered,
    HomeFacts,
    LandedFacts,
    LandedRung,
    Proof,
    ScoutFacts,
    ShipFacts,
    SlotProblem,
    SlotProblemKind,
)
from fm_teardown.model.not_landed import (
    BranchNotLanded,
    HomeInFlight,
    HomeRecordsUnknown,
    NoHead,
    NotLandedWhy,
    NotMerged,
    OwnWork,
    RemoteUnknown,
    ScoutMissing,
    ScoutUnknown,
    SlotUninspected,
    SlotUninspectedKind,
    Unpushed,
)

__all__ = ["MAX_CHILDREN_NAMED", "judge", "proofs"]

MAX_CHILDREN_NAMED = 5


def judge(facts: Gathered) -> LandedFacts:
    """The verdict on one task's gathered facts."""
    if isinstance(facts, ScoutFacts):
        return _scout(facts)
    if isinstance(facts, HomeFacts):
        return _home(facts)
    if isinstance(facts, SlotProblem):
        return _slot_problem(facts)
    return _ship(facts)


def _settled(rung: LandedRung, why: str) -> LandedFacts:
    """Landed and merged, proven by what was found (`why`: the words of the proof)."""
    proof = Proof(rung, why, merged=True)
    return LandedFacts(True, None, (), (), merged=True, proof=proof, merge_proof=proof)


def _scout(f: ScoutFacts) -> LandedFacts:
    if f.error is not None:
        return LandedFacts(
            False,
            ScoutUnknown(f.report, f.error),
            (),
            (),
            (f"cannot read {f.report}: {f.error}",),
        )
    if f.found:
        return _settled(LandedRung.SCOUT_REPORT, f"scout report {f.report} exists")
    return LandedFacts(False, ScoutMissing(f.report), (), ())


def _home(f: HomeFacts) -> LandedFacts:
    if f.error is not None:
        return LandedFacts(
            False,
            HomeRecordsUnknown(f.home, f.error),
            (),
            (),
            (f"cannot read {f.state}: {f.error}",),
        )
    if not f.children:
        return _settled(LandedRung.EMPTY_HOME, f"secondmate home {f.home} has no task records")
    named = f.children[:MAX_CHILDREN_NAMED]
    more = max(len(f.children) - MAX_CHILDREN_NAMED, 0)
    return LandedFacts(False, HomeInFlight(f.home, named, more), (), ())


def _slot_problem(f: SlotProblem) -> LandedFacts:
    if f.kind == SlotProblemKind.GONE:
        # The caller skips the process and pool steps for a vanished slot: nothing is reset.
        return _settled(LandedRung.SLOT_GONE, "slot directory no longer exists: nothing to lose")
    if f.kind == SlotProblemKind.STATUS_FAILED:
        note = f"git status failed in {f.path}: {f.error}"
        why = SlotUninspected(SlotUninspectedKind.STATUS_FAILED)
        return LandedFacts(False, why, (), (), (note,))
    # The note says in its own words what the summary says of the slot.
    if f.kind == SlotProblemKind.NOT_A_DIRECTORY:
        note = f"slot path {f.path} exists but is not a directory"
        kind = SlotUninspectedKind.NOT_A_DIRECTORY
    else:
        note = f"cannot read slot path {f.path}: {f.error}"
        kind = SlotUninspectedKind.UNREADABLE
    return LandedFacts(False, SlotUninspected(kind, f.path, f.error), (), (), (note,))


# --------------------------------------------------------------------------- the ladder


def _content_known(b: BaseFacts) -> bool:
    """The content rungs need HEAD's commits, each with a change of its own."""
    return (
        b.head_patches is not None
        and len(b.head_patches) > 0
        and all(p is not None for p in b.head_patches)
    )


def _patches_hold(b: BaseFacts) -> bool:
    """Every commit of HEAD has a match by patch id that its replay confirmed."""
    if not _content_known(b) or b.base_patches is None or b.head_merges:
        return False
    ours = b.head_commits
    if ours is None or len(ours) != len(b.head_patches or ()):
        return False  # which commit is which cannot be told: no replay can confirm a match
    matches: dict[str | None, list[str]] = {}
    for pid, commit in b.base_patches:
        matches.setdefault(pid, []).append(commit)
    return all(
        any((mine, theirs) in b.replayed for theirs in matches.get(pid, ()))
        for mine, pid in zip(ours, b.head_patches or (), strict=True)
    )


def _squash_commit(b: BaseFacts) -> str | None:
    """The default branch's commit whose patch is the branch's whole diff and whose tree the
    replay of that diff onto its parent gives exactly."""
    if not _content_known(b) or b.base_patches is None or not b.cumulative:
        return None
    return next(
        (c for pid, c in b.base_patches if pid == b.cumulative and c in b.squash_replayed), None
    )


def _merge_tree_holds(b: BaseFacts, pushed: bool) -> bool:
    """A pushed HEAD is landed already: its commits were not listed one by one (that costs a
    call per slot), and the merge alone tells merged from merely pushed."""
    if b.merge_unchanged is not True:
        return False
    return (_content_known(b) and bool(b.cumulative)) or (pushed and b.head_patches is None)


def proofs(f: ShipFacts) -> list[Proof]:
    """Every rung that holds for a clean slot, in the ladder's order."""
    return [p for p, _ in _resting(f)]


def _resting(f: ShipFacts) -> list[tuple[Proof, str | None]]:
    """Every rung that holds, each with the remote-tracking ref it rests on (None: the local
    default branch or the PR, which no fetch changes)."""

    def on(b: BaseFacts) -> str | None:
        return None if b.local else b.label

    out: list[tuple[Proof, str | None]] = []
    out += [
        (Proof(LandedRung.REACHABLE, b.label, b.counts_as_merged), on(b))
        for b in f.bases
        if b.contains_head is True
    ]
    if f.on_remote is True:
        where = "a remote-tracking branch"
        out.append((Proof(LandedRung.REACHABLE, where, False), where))
    out += [
        (Proof(LandedRung.PATCHES, b.label, b.counts_as_merged), on(b))
        for b in f.bases
        if _patches_hold(b)
    ]
    for b in f.bases:
        commit = _squash_commit(b)
        if commit is not None:
            where = f"{b.label} (commit {commit[:12]})"
            out.append((Proof(LandedRung.SQUASH, where, b.counts_as_merged), on(b)))
    out += [
        (Proof(LandedRung.MERGE_TREE, b.label, b.counts_as_merged), on(b))
        for b in f.bases
        if _merge_tree_holds(b, f.on_remote is True)
    ]
    pr = f.pr
    if (
        pr is not None
        and pr.state is not None
        and pr.state.upper() == "MERGED"
        and pr.contains_head is True
    ):
        out.append((Proof(LandedRung.PR_HEAD, f"PR {pr.label}", True), None))
    return out


def _ship(f: ShipFacts) -> LandedFacts:
    """HEAD's verdict, then the task's branch beyond HEAD, which must be landed too; with the
    refs it rests on that were not fetched, and the slot's nested repositories."""
    verdict, unfetched = _head(f)
    tip = f.branch_tip
    if tip is not None and verdict.landed:
        beyond, also = _head(tip)
        unfetched += also
        branch = tip.status.branch or "the task's branch"
        if not beyond.landed:
            why = BranchNotLanded(branch, beyond.summary)
            verdict = replace(
                verdict,
                landed=False,
                summary=why,
                unpushed=beyond.unpushed,
                notes=verdict.notes + beyond.notes,
                merged=False,
                merge_summary=why,
                proof=None,
                merge_proof=None,
            )
        elif verdict.merged and not beyond.merged:
            why = BranchNotLanded(branch, beyond.merge_summary)
            verdict = replace(verdict, merged=False, merge_summary=why, merge_proof=None)
    fetchable = not f.fetched and f.origin
    return replace(
        verdict,
        unfetched=tuple(dict.fromkeys(unfetched)) if fetchable else (),
        nested=f.nested,
    )


def _head(f: ShipFacts) -> tuple[LandedFacts, tuple[str, ...]]:
    """HEAD's verdict, and the remote-tracking ref it rests on: that of the proof it names
    when every proof rests on one, or origin's default branch when committed work is not
    landed (a fetch may find it merged); none when it is dirty (no fetch lands that)."""
    verdict = _head_verdict(f)
    if verdict.landed:
        found = _resting(f)
        if not found or any(ref is None for _, ref in found):
            return verdict, ()
        first = found[0][1]  # the proof the verdict names
        return verdict, (first,) if first is not None else ()
    if isinstance(verdict.summary, Unpushed) and f.default:
        return verdict, (f"origin/{f.default}",)
    return verdict, ()


def _head_verdict(f: ShipFacts) -> LandedFacts:
    st = f.status
    own = not any(b.contains_head is True and b.counts_as_merged for b in f.bases)

    def facts(
        landed: bool,
        summary: NotLandedWhy | None,
        *,
        notes: tuple[str, ...] = f.notes,
        merged: Proof | None = None,
        merge_summary: NotLandedWhy | None = None,
        proof: Proof | None = None,
    ) -> LandedFacts:
        return LandedFacts(
            landed,
            summary,
            st.dirty,
            () if landed else f.unpushed,
            notes,
            st.untracked,
            st.head,
            st.branch,
            f.default,
            merged is not None,
            merge_summary or summary,
            own,
            proof,
            merged,
        )

    if st.head is None:
        note = f"HEAD of {f.slot} does not name a commit"
        return facts(False, NoHead(), notes=(note,))
    if f.remote_error is not None:
        return facts(False, RemoteUnknown(), notes=(*f.notes, f.remote_error))
    if st.total:
        # Uncommitted work is never landed, whatever the commits say ("dirty always wins").
        work = OwnWork(st.total, st.dirty[:3], st.untracked_total, f.unpushed_total)
        return facts(False, work, notes=())

    found = proofs(f)
    merged = next((p for p in found if p.merged), None)
    if found:
        not_merged = None
        if merged is None:
            not_merged = NotMerged(tuple(b.label for b in f.bases if b.counts_as_merged))
        return facts(True, None, merged=merged, merge_summary=not_merged, proof=found[0])
    compared = [b.label for b in f.bases]
    if f.origin and f.default and f"origin/{f.default}" not in compared:
        compared.insert(0, f"origin/{f.default}")  # named even when it could not be compared
    pr = f.pr.label if f.pr is not None else None
    return facts(False, Unpushed(f.unpushed_total, tuple(compared), pr, bool(f.notes)))
