"""Is a task's own work landed? The judge of rule 5 (spec §5 rule 5, §14.6): a pure function
of the facts `observe/landed.py` gathered.

Uncommitted or untracked work (scaffold files aside) is never landed. Otherwise the work is
landed when any rung of the ladder holds, tried in this order, and the verdict names it:

1. **reachable**: HEAD is in the default branch (origin's or the local one) or on another
   remote-tracking ref;
2. **patches**: every commit of HEAD since the merge base has its patch on the default branch
   since the merge base;
3. **squash**: the branch's whole diff (merge base -> HEAD) is the patch of one commit of the
   default branch since the merge base (a squash merge, also after later edits of the same
   files);
4. **merge-tree**: merging HEAD into the default branch changes nothing;
5. **pr-head**: the recorded PR is reported merged and its head is HEAD or has HEAD as an
   ancestor (a PR merged while the branch moved on does not land the newer commits).

Patches are compared byte for byte (`git patch-id --verbatim`): whitespace is content. A
commit that changes nothing has no patch to find: rungs 2-4 never land it, only reachability
does. A merge commit of the branch has no patch of its own: rung 2 does not hold over it.
Anything the facts do not tell is not proof.

Merged (finished, `--landed`) is the same ladder against origin's default branch (the local
one for local-only mode) and the merged PR: a HEAD on another remote-tracking ref only is
landed, not merged.
"""

from __future__ import annotations

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
    if not _content_known(b) or b.base_patches is None or b.head_merges:
        return False
    there = {pid for pid, _ in b.base_patches}
    return all(p in there for p in b.head_patches or ())


def _squash_commit(b: BaseFacts) -> str | None:
    if not _content_known(b) or b.base_patches is None or not b.cumulative:
        return None
    return next((c for pid, c in b.base_patches if pid == b.cumulative), None)


def _merge_tree_holds(b: BaseFacts, pushed: bool) -> bool:
    """A pushed HEAD is landed already: its commits were not listed one by one (that costs a
    call per slot), and the merge alone tells merged from merely pushed."""
    if b.merge_unchanged is not True:
        return False
    return (_content_known(b) and bool(b.cumulative)) or (pushed and b.head_patches is None)


def proofs(f: ShipFacts) -> list[Proof]:
    """Every rung that holds for a clean slot, in the ladder's order."""
    out: list[Proof] = []
    out += [
        Proof(LandedRung.REACHABLE, b.label, b.counts_as_merged)
        for b in f.bases
        if b.contains_head is True
    ]
    if f.on_remote is True:
        out.append(Proof(LandedRung.REACHABLE, "a remote-tracking branch", False))
    out += [
        Proof(LandedRung.PATCHES, b.label, b.counts_as_merged) for b in f.bases if _patches_hold(b)
    ]
    for b in f.bases:
        commit = _squash_commit(b)
        if commit is not None:
            out.append(
                Proof(LandedRung.SQUASH, f"{b.label} (commit {commit[:12]})", b.counts_as_merged)
            )
    out += [
        Proof(LandedRung.MERGE_TREE, b.label, b.counts_as_merged)
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
        out.append(Proof(LandedRung.PR_HEAD, f"PR {pr.label}", True))
    return out


def _ship(f: ShipFacts) -> LandedFacts:
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
