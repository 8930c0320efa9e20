"""Steps 5 to 7 (the order and why: `act/steps.py`): the slot goes back to the pool. The
fleet's hook files leave it first (`step_hooks`); the pool's state is read again right
before `treehouse return` (`step_pool`); only after a verified return (or a slot the pool
reuses as it is) go TASK's branch (`step_branch`) and TASK's own slot claim (`step_claim`)."""

from __future__ import annotations

import os
from dataclasses import replace

from fm_teardown.act import arrivals, gitlock
from fm_teardown.act.run_state import Run, boundary
from fm_teardown.adapters import interrupts, pool, processes
from fm_teardown.model.errors import FmError, Lead, Verdict
from fm_teardown.model.leases import lease_name, lease_task, unconditional_only
from fm_teardown.model.paths import canonical, is_within
from fm_teardown.model.plan import Step, StepName, StepOutcome
from fm_teardown.model.records import Record, RecordKind
from fm_teardown.model.results import (
    BranchResult,
    BranchWhat,
    HooksWhat,
    PoolResult,
    PoolWhat,
    RecheckAt,
)
from fm_teardown.model.step_actions import BranchDelete, PoolReturn, RemoveClaim, RemoveHooks
from fm_teardown.model.step_warnings import (
    BranchKept,
    ClaimKept,
    HooksUnknown,
    LockRetried,
    LockRetry,
    StaleLockRemoved,
)

__all__ = [
    "act_branch",
    "act_claim",
    "act_hooks",
    "act_pool",
    "step_branch",
    "step_claim",
    "step_hooks",
    "step_pool",
]


def act_hooks(run: Run, step: Step) -> None:
    """The hooks step of the plan: out of the slot before the return."""
    hooks = step.action
    assert isinstance(hooks, RemoveHooks), step
    step_hooks(run, hooks.slot)


def step_hooks(run: Run, slot: str) -> None:
    """The fleet's hook files, before the return: the next task's slot must not fire turn-end
    signals for a dead task. A failure only warns."""
    from fm_teardown.act.duties import remove_hooks

    result = remove_hooks(slot)
    if result.what == HooksWhat.UNTRACKED_UNKNOWN:
        run.warnings.append(HooksUnknown(result))
    run.note(StepName.HOOKS, slot, result)


def act_pool(run: Run, step: Step) -> None:
    """The pool step of the plan: the world looked at again (the locks included), then the
    lease read again right before `treehouse return`."""
    pr = step.action
    assert isinstance(pr, PoolReturn), step
    slot = run.decided.decision.slot
    assert slot is not None
    arrivals.look_again(run, RecheckAt.POOL, StepName.POOL, pr.path)
    step_pool(run, run.record, pr, slot)


def _check_pool_before_return(run: Run, record: Record, pr: PoolReturn, slot: str) -> None:
    """Right before `treehouse return`: the pool's state file read again and the slot path
    resolved again (spec §7a). A lease that is not TASK's stops the run (4, naming it); a path that
    no longer resolves to the decided slot stops it too (1)."""
    if canonical(record.worktree) != slot or canonical(pr.path) != slot:
        raise run.fail(
            StepName.POOL,
            pr.path,
            PoolResult(PoolWhat.PATH_MOVED, slot=slot, now=canonical(pr.path)),
        )
    view = pool.fresh_view(record.worktree, slot)
    entry = view.entry
    if view.error or entry is None:
        raise run.fail(StepName.POOL, pr.path, PoolResult(PoolWhat.STATE_CHANGED, error=view.error))
    if entry.destroying:
        raise run.fail(StepName.POOL, pr.path, PoolResult(PoolWhat.DESTROYING))
    seen = (pr.lease_id, pr.lease_holder)
    if not entry.leased and (pr.lease_id or pr.lease_holder is not None):
        return  # returned meanwhile: the conditional return will say so
    if entry.leased and seen == (None, None):
        owner = lease_task(entry, record.task_id, run.fleet) or lease_name(entry)
        _refused_at_pool(pr.path, owner, "took a lease on the slot since deciding")
    if entry.leased and pr.lease_id and entry.lease_id != pr.lease_id:
        owner = lease_task(entry, record.task_id, run.fleet) or lease_name(entry)
        _refused_at_pool(pr.path, owner, "holds a new lease on the slot since deciding")
    if entry.owner_pid > 0 and not entry.leased:
        proc = processes.scan().procs.get(entry.owner_pid)
        if proc is not None and abs(proc.start_time * 1000 - entry.owner_started_at) < 1000:
            _refused_at_pool(pr.path, f"pid:{proc.pid}", "reserved the slot (an interactive get)")


def _refused_at_pool(path: str, owner: str, what: str) -> None:
    raise FmError(
        Verdict.LIVE_OWNER,
        f"{owner} {what}: slot {path} is owned by another live task: {owner}",
        (f"let {owner} finish, then re-run",),
        lead=Lead.REFUSED,
    )


def step_pool(run: Run, record: Record, pr: PoolReturn, slot: str) -> None:
    """`treehouse return` of the decided slot (`slot`, canonical), conditional on the lease
    seen, then verified in the pool's state and, unforced, by the tree."""
    s = run.settings
    if s.treehouse_bin is None:
        raise run.fail(StepName.POOL, pr.path, PoolResult(PoolWhat.NO_TREEHOUSE))
    project = canonical(record.project)
    cwd = (
        project
        if os.path.isdir(project) and not is_within(project, slot)
        else str(s.state_dir if s.state_dir.is_dir() else "/")
    )
    _check_pool_before_return(run, record, pr, slot)
    if _pool_reuses_as_is(run, record, pr, slot):
        return
    if pr.force and not run.flags.force and record.kind == RecordKind.SECONDMATE:
        # A forced return without fm's --force: the home is looked at again right before
        # it, so that work that appeared there after the decision is preserved, not reset.
        _preserve_late_work(run, record, pr.path)
    # The return ends what runs in the slot and resets it: an interrupt that came during the
    # looks above stops the run here, before it (spec §15.6).
    boundary("before-return")
    result = _return(run, record, pr, slot, cwd)
    _verify_return(run, record, pr, slot, result)


def _return(run: Run, record: Record, pr: PoolReturn, slot: str, cwd: str) -> pool.ReturnResult:
    """`treehouse return`, retried while a git lock is held (the script's retries), then once
    more after removing a lock that is provably stale (a held one fails the step)."""
    s = run.settings
    assert s.treehouse_bin is not None
    bin_ = s.treehouse_bin
    result = pool.run_return(bin_, pr.argv, cwd, s.treehouse_timeout)
    retries = 0
    while result.git_lock_held:
        if retries < s.lock_retries:
            retries += 1
            run.warnings.append(LockRetry(s.lock_retry_wait, retries, s.lock_retries))
            interrupts.sleep(s.lock_retry_wait)
            result = pool.run_return(bin_, pr.argv, cwd, s.treehouse_timeout)
            if result.returncode == 0:
                run.warnings.append(LockRetried(retries))
            continue
        lock = gitlock.index_lock_path(slot)
        if lock is None or not os.path.lexists(lock):
            break
        verdict = gitlock.remove_if_provably_stale(lock, slot, s.stale_lock_age)
        if not verdict.stale:
            raise run.fail(
                StepName.POOL,
                pr.path,
                PoolResult(
                    PoolWhat.LOCK_PERSISTED,
                    lock=lock,
                    retries=retries,
                    wait=s.lock_retry_wait,
                    error=verdict.reason,
                ),
            )
        run.warnings.append(StaleLockRemoved(lock, verdict.reason))
        _recheck_landed(run, record)
        result = pool.run_return(bin_, pr.argv, cwd, s.treehouse_timeout)
        break
    return result


def _verify_return(
    run: Run, record: Record, pr: PoolReturn, slot: str, result: pool.ReturnResult
) -> None:
    """The return verified in the pool's state file (the slot unleased, or leased again
    since), and an unforced one by the tree: one that still holds changes was declined."""
    view = pool.fresh_view(record.worktree, slot)
    last = result.last_line
    entry = view.entry
    said = PoolResult(PoolWhat.RETURNED, command="treehouse " + " ".join(pr.argv))
    if entry is None:
        raise run.fail(
            StepName.POOL, pr.path, replace(said, what=PoolWhat.NOT_IN_STATE, error=last)
        )
    if not pr.force and (result.aborted or (result.returncode == 0 and not entry.leased)):
        # The unforced return, proven: a tree that still holds changes after it was not
        # returned (the pool declined it, its dirty prompt answered by a closed stdin): the
        # work that appeared after the decision is preserved.
        changes = pool.changes_in(slot)
        if result.aborted or changes is None or changes:
            raise run.fail(
                StepName.POOL,
                pr.path,
                replace(said, what=PoolWhat.DECLINED, dirty=changes or (), error=last),
            )
    if result.returncode == 0 and not result.aborted and not entry.leased:
        run.note(StepName.POOL, pr.path, said)
        return
    if (
        result.returncode == 0
        and not result.aborted
        and pr.lease_id
        and entry.leased
        and entry.lease_id != pr.lease_id
    ):
        run.note(StepName.POOL, pr.path, replace(said, what=PoolWhat.RETURNED_RELEASED))
        return
    if result.not_leased and (pr.lease_id or pr.lease_holder is not None):
        run.note(StepName.POOL, pr.path, replace(said, what=PoolWhat.ALREADY_RETURNED))
        return
    # treehouse's own words: its exit 0 after "Aborted." (it would have prompted), or its
    # last line.
    why = "exit 0 with 'Aborted.'" if result.aborted else (last or "no output")
    raise run.fail(StepName.POOL, pr.path, replace(said, what=PoolWhat.NOT_RETURNED, error=why))


def _pool_reuses_as_is(run: Run, record: Record, pr: PoolReturn, slot: str) -> bool:
    """A record without lease facts on a slot the pool shows unleased: the return could only
    be unconditional, and it would clear a lease granted between the re-read and the call.
    When the slot is clean and its HEAD merged into the pool's reset target, the pool's next
    `get` resets and hands it out by itself, so fm does not call the return at all."""
    if not unconditional_only(record, pr, lambda: pool.fresh_view(record.worktree, slot).entry):
        return False
    why_not = pool.reusable_as_is(slot)
    if why_not is not None:
        return False
    run.note(StepName.POOL, pr.path, PoolResult(PoolWhat.REUSED_AS_IS))
    return True


def _back_in_the_pool(run: Run) -> bool:
    """Is the slot back in the pool's hands: returned (verified), already returned, or left to
    the pool as it is (its next `get` resets it)?"""
    done = run.ran(StepName.POOL)
    if done is None:
        return False
    reused = isinstance(done.result, PoolResult) and done.result.what == PoolWhat.REUSED_AS_IS
    return reused or done.outcome in (StepOutcome.DONE, StepOutcome.ABSENT)


def _preserve_late_work(run: Run, record: Record, path: str) -> None:
    """Right before a forced return without fm's --force: TASK's work judged again (rule 5's
    facts, git); work that is not landed now appeared after the decision (which found it
    landed): the return is not made, the tree preserved."""
    facts = run.seams.landed(record)
    if not facts.landed:
        raise run.fail(StepName.POOL, path, PoolResult(PoolWhat.PRESERVED, unlanded=facts.summary))


def _recheck_landed(run: Run, record: Record) -> None:
    """After removing a stale lock, the safety checks run again before the return."""
    if run.flags.force or record.kind == RecordKind.SCOUT:
        return  # a scout's work is its report, not its slot
    facts = run.seams.landed(record)
    if not facts.landed:
        raise run.fail(
            StepName.POOL,
            record.worktree,
            PoolResult(PoolWhat.UNLANDED_AFTER_LOCK, unlanded=facts.summary),
        )


def act_branch(run: Run, step: Step) -> None:
    """The branch step of the plan: only after a verified return."""
    b = step.action
    assert isinstance(b, BranchDelete), step
    step_branch(run, run.record, b, run.decided.decision.slot)


def step_branch(run: Run, record: Record, b: BranchDelete, slot: str | None) -> None:
    """TASK's branch, after a verified return, by compare-and-swap on the commit seen when
    deciding. A failure only warns."""
    from fm_teardown.act.duties import delete_branch

    target = f"refs/heads/{b.name}"
    if not _back_in_the_pool(run):
        run.note(StepName.BRANCH, target, BranchResult(BranchWhat.NOT_RETURNED, b.name, b.commit))
        return
    # Right before the delete: the slot's census taken again (someone who came to work there
    # since stops the run; the branch is kept).
    boundary("before-branch")
    arrivals.look_again(run, RecheckAt.BRANCH, StepName.BRANCH, target)
    result = delete_branch(record.project, b.name, b.commit, b.default, slot, run.seams.branch_held)
    if result.warns:
        run.warnings.append(BranchKept(result))
    run.note(StepName.BRANCH, target, result)


def act_claim(run: Run, step: Step) -> None:
    """The claim step of the plan: after a verified return."""
    claim = step.action
    assert isinstance(claim, RemoveClaim), step
    step_claim(run, claim.path, run.task)


def step_claim(run: Run, path: str, task: str) -> None:
    """TASK's own slot claim, after a verified return (another task's is never touched)."""
    from fm_teardown.act.duties import remove_own_claim

    result = remove_own_claim(path, task, run.seams.claim_names)
    if result.warns:
        run.warnings.append(ClaimKept(result))
    run.note(StepName.CLAIM, path, result)
