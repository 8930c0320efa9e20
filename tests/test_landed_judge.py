"""The judge of rule 5 (decide/landed.py) over random fact sets: what git and gh could say
about a slot, including everything they could not tell. The properties are the rules of
proof of landing (spec §14.6), stated without the ladder's code."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from fm_teardown.decide.landed import judge, proofs
from fm_teardown.model.landing import (
    BaseFacts,
    HomeFacts,
    LandedRung,
    PrFacts,
    ScoutFacts,
    ShipFacts,
    SlotProblem,
    SlotProblemKind,
    SlotStatus,
)
from fm_teardown.model.not_landed import BranchNotLanded, Unpushed
from fm_teardown.report.messages import landed_text

LADDER = [
    LandedRung.REACHABLE,
    LandedRung.PATCHES,
    LandedRung.SQUASH,
    LandedRung.MERGE_TREE,
    LandedRung.PR_HEAD,
]
# Patch ids from a small alphabet, so that matches happen; "ws" ids stand for the same
# change with other whitespace: another id, byte for byte.
PIDS = st.sampled_from(["p1", "p2", "p3", "ws1", "ws2"])
COMMITS = st.sampled_from(["c" * 40, "d" * 40, "e" * 40])
MAYBE_BOOL = st.sampled_from([True, False, None])


@st.composite
def bases(draw: st.DrawFn) -> BaseFacts:
    gathered = draw(st.booleans())
    label = draw(st.sampled_from(["origin/main", "local main"]))
    head_patches = (
        tuple(draw(st.lists(st.one_of(PIDS, st.none()), max_size=3))) if gathered else None
    )
    base_patches = (
        tuple((pid, c) for pid, c in draw(st.lists(st.tuples(PIDS, COMMITS), max_size=4)))
        if draw(st.booleans())
        else None
    )
    # HEAD's commits (h0, h1, ...) and the matches by patch id replay confirmed: any of the
    # pairs, mostly all of them (the common case: a real landing).
    ours = tuple(f"h{i}" for i in range(len(head_patches or ())))
    pairs = [(mine, c) for mine in ours for _, c in base_patches or ()]
    everything = draw(st.booleans())
    replayed = (
        frozenset(pairs if everything else draw(st.sets(st.sampled_from(pairs))))
        if pairs
        else frozenset()
    )
    theirs = sorted({c for _, c in base_patches or ()})
    squashed = (
        frozenset(theirs if everything else draw(st.sets(st.sampled_from(theirs))))
        if theirs
        else frozenset()
    )
    return BaseFacts(
        label=label,
        commit=draw(COMMITS),
        counts_as_merged=draw(st.booleans()),
        contains_head=draw(st.sampled_from([False, False, None, True])),
        merge_base="f" * 40 if gathered else None,
        head_patches=head_patches,
        head_merges=draw(st.integers(0, 1)),
        base_patches=base_patches,
        cumulative=draw(st.one_of(st.none(), st.just(""), PIDS)),
        merge_unchanged=draw(MAYBE_BOOL),
        head_commits=ours if gathered else None,
        replayed=replayed,
        squash_replayed=squashed,
        local=label.startswith("local "),
    )


@st.composite
def ships(draw: st.DrawFn) -> ShipFacts:
    total = draw(st.integers(0, 2))
    status = SlotStatus(
        tuple(f"f{i}" for i in range(total)),
        total,
        (),
        draw(st.sampled_from(["a" * 40, None])),
        draw(st.sampled_from(["fm/t1", None])),
    )
    pr = draw(
        st.one_of(
            st.none(),
            st.builds(
                PrFacts,
                st.just("#7"),
                st.sampled_from(["MERGED", "merged", "OPEN", "CLOSED", None]),
                st.sampled_from(["b" * 40, None]),
                MAYBE_BOOL,
            ),
        )
    )
    return ShipFacts(
        slot="/pool/1/project",
        status=status,
        default=draw(st.sampled_from(["main", None])),
        origin=draw(st.booleans()),
        on_remote=draw(MAYBE_BOOL),
        unpushed_total=draw(st.integers(0, 3)),
        unpushed=("abc1234 work",),
        bases=tuple(draw(st.lists(bases(), max_size=2))),
        pr=pr,
        notes=tuple(draw(st.lists(st.just("could not tell"), max_size=1))),
        remote_error=draw(st.sampled_from([None, None, None, "rev-list failed"])),
        fetched=draw(st.booleans()),
    )


@st.composite
def ships_with_branches(draw: st.DrawFn) -> ShipFacts:
    """A slot whose task's branch `fm/t1` has commits beyond HEAD (a clean tip)."""
    facts = draw(ships())
    tip = draw(ships())
    clean = SlotStatus((), 0, (), "b" * 40, "fm/t1")
    return replace(facts, branch_tip=replace(tip, status=clean, fetched=facts.fetched))


GATHERED = st.one_of(
    ships(),
    st.builds(ScoutFacts, st.just("/d/t1/report.md"), st.booleans(), st.sampled_from([None, "x"])),
    st.builds(
        HomeFacts,
        st.just("/h"),
        st.just("/h/state"),
        st.lists(st.sampled_from(["a.meta", "b.meta"]), max_size=2).map(tuple),
        st.sampled_from([None, "denied"]),
    ),
    st.builds(SlotProblem, st.sampled_from(list(SlotProblemKind)), st.just("/s"), st.just("")),
)


@settings(max_examples=400, deadline=None)
@given(GATHERED)
def test_a_rung_is_named_iff_landed_and_merged_implies_landed(facts: object) -> None:
    verdict = judge(facts)  # type: ignore[arg-type]
    assert (verdict.rung is not None) == verdict.landed
    assert (verdict.merge_rung is not None) == verdict.merged
    assert not verdict.merged or verdict.landed


@settings(max_examples=400, deadline=None)
@given(ships())
def test_uncommitted_work_or_an_unknown_head_or_remote_never_lands(facts: ShipFacts) -> None:
    verdict = judge(facts)
    if facts.status.total or facts.status.head is None or facts.remote_error is not None:
        assert not verdict.landed and not verdict.merged


@settings(max_examples=400, deadline=None)
@given(ships())
def test_the_rung_named_is_the_first_that_holds_and_its_words_say_so(facts: ShipFacts) -> None:
    verdict = judge(facts)
    if not verdict.landed:
        return
    assert verdict.rung is not None
    held = [p.rung for p in proofs(facts)]
    assert verdict.rung == held[0]
    assert all(LADDER.index(verdict.rung) <= LADDER.index(r) for r in held)
    assert landed_text(verdict).startswith(f"{verdict.rung.value}: ")


def _whitespace_only(facts: ShipFacts) -> ShipFacts:
    """The same slot, where every patch of HEAD and its whole diff differ from everything on
    the default branch (a whitespace variant of what landed): nothing reachable, the merge
    conflicts, the PR's head does not have HEAD."""
    other = tuple(
        replace(
            b,
            contains_head=False,
            head_patches=None if b.head_patches is None else tuple("ws1" for _ in b.head_patches),
            base_patches=None
            if b.base_patches is None
            else tuple((pid, c) for pid, c in b.base_patches if pid != "ws1"),
            cumulative=None if b.cumulative is None else "ws1",
            merge_unchanged=False,
        )
        for b in facts.bases
    )
    pr = None if facts.pr is None else replace(facts.pr, contains_head=False)
    return replace(facts, bases=other, pr=pr, on_remote=False)


@settings(max_examples=400, deadline=None)
@given(ships())
def test_patches_that_differ_in_whitespace_never_land(facts: ShipFacts) -> None:
    verdict = judge(_whitespace_only(facts))
    assert not verdict.landed and not verdict.merged


def _forget(facts: ShipFacts) -> ShipFacts:
    """The same slot where git and gh told nothing beyond the status."""
    unknown = tuple(
        replace(
            b,
            contains_head=None,
            head_patches=None,
            base_patches=None,
            cumulative=None,
            merge_unchanged=None,
        )
        for b in facts.bases
    )
    pr = None if facts.pr is None else replace(facts.pr, state=None, contains_head=None)
    return replace(facts, bases=unknown, pr=pr, on_remote=None)


@settings(max_examples=400, deadline=None)
@given(ships())
def test_what_could_not_be_told_is_never_proof(facts: ShipFacts) -> None:
    assert not judge(_forget(facts)).landed


@settings(max_examples=400, deadline=None)
@given(ships())
def test_a_commit_without_a_change_lands_only_by_reachability_or_the_pr(
    facts: ShipFacts,
) -> None:
    empty = tuple(
        replace(b, head_patches=(*b.head_patches, None)) if b.head_patches is not None else b
        for b in facts.bases
    )
    verdict = judge(replace(facts, bases=empty))
    if verdict.landed and facts.on_remote is not True:
        assert verdict.rung in (LandedRung.REACHABLE, LandedRung.PR_HEAD), verdict


@settings(max_examples=200, deadline=None)
@given(ships())
def test_a_merged_pr_lands_only_when_its_head_has_head(facts: ShipFacts) -> None:
    verdict = judge(facts)
    if verdict.rung is LandedRung.PR_HEAD:
        assert facts.pr is not None and facts.pr.contains_head is True
        assert (facts.pr.state or "").upper() == "MERGED"


def _unconfirmed(facts: ShipFacts) -> ShipFacts:
    """The same slot where no match by patch id was confirmed by replay (a change to one of
    identical blocks that main made to the other)."""
    bases = tuple(
        replace(b, replayed=frozenset(), squash_replayed=frozenset()) for b in facts.bases
    )
    return replace(facts, bases=bases)


@settings(max_examples=400, deadline=None)
@given(ships())
def test_a_match_by_patch_id_that_replay_did_not_confirm_never_proves(facts: ShipFacts) -> None:
    held = {p.rung for p in proofs(_unconfirmed(facts))}
    assert LandedRung.PATCHES not in held and LandedRung.SQUASH not in held


@settings(max_examples=400, deadline=None)
@given(ships_with_branches())
def test_the_tasks_branch_beyond_head_must_land_too(facts: ShipFacts) -> None:
    verdict = judge(facts)
    assert facts.branch_tip is not None
    alone = judge(replace(facts, branch_tip=None))
    tip = judge(facts.branch_tip)
    assert verdict.landed == (alone.landed and tip.landed), (verdict, alone, tip)
    assert verdict.merged == (alone.merged and tip.merged)
    if alone.landed and not tip.landed:
        assert isinstance(verdict.summary, BranchNotLanded)
        assert verdict.unpushed == tip.unpushed


@settings(max_examples=400, deadline=None)
@given(ships())
def test_a_verdict_names_the_refs_it_did_not_fetch(facts: ShipFacts) -> None:
    verdict = judge(facts)
    if facts.fetched or not facts.origin:
        assert verdict.unfetched == ()
        return
    if verdict.landed:
        # Named when the proof it shows rests on a remote-tracking ref and no other proof
        # (the local branch, the PR) holds without one.
        local = [p for p in proofs(facts) if p.where.startswith(("local ", "PR "))]
        assert (verdict.unfetched == ()) == bool(local), (verdict, local)
    elif isinstance(verdict.summary, Unpushed) and facts.default:
        assert verdict.unfetched == (f"origin/{facts.default}",)
    else:
        assert verdict.unfetched == ()
