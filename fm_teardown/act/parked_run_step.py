"""The parked-run step (the order and why: `act/steps.py`): a ship task's own no-mistakes run
parked at a gate is aborted before anything of TASK's is destroyed (spec §15.5b).

firstmate's script does this first of its pre-teardown cleanup ("Fix 1",
`conclude_task_no_mistakes_run`): a run parked at a gate (awaiting approval, a fix review, an
agent) whose worker is removed is never answered, and holds a fleet slot for good. In fm's
terms:

1. `no-mistakes axi status` in the slot (the operator's `no-mistakes`, found on PATH when
   deciding: the step's action, `AbortParkedRun`; never one that lies in the slot), bounded by
   `FM_TEARDOWN_NM_TIMEOUT` (10 s). A query that does not answer (it cannot run, times out,
   exits non-zero) looks at no run: nothing is aborted and the teardown goes on, as the script
   does (aborting nothing is how things stood), with a warning that says so.
2. The run it names is TASK's only when its branch and its head match the slot
   (`decide/parked_run.py`, read right here, right before the abort: the slot's branch and
   code identity through the git door). A run that is not TASK's, has an outcome or has an
   autonomous step under way is left alone.
3. TASK's parked run: `no-mistakes axi abort --run <id>`, then `axi status --run <id>` must
   read it back stopped (a terminal outcome, or the CLI's exact not-found error). Otherwise
   the step fails: nothing of TASK's has been touched yet (the step runs before its window
   is killed), the record is kept, and a re-run reads the run again (an aborted run reads
   back terminal and is left alone then).
"""

from __future__ import annotations

from fm_teardown.act.run_state import Run
from fm_teardown.adapters import no_mistakes, runner
from fm_teardown.decide.parked_run import (
    attribute,
    commit_id,
    confirmation,
    names_branch,
)
from fm_teardown.model.parked_run import (
    Attribution,
    CodeIdentity,
    ParkedRunResult,
    ParkedRunWhat,
    RunUnasked,
)
from fm_teardown.model.paths import canonical, is_within
from fm_teardown.model.plan import Step, StepName
from fm_teardown.model.step_actions import AbortParkedRun

__all__ = ["act", "code_identity", "conclude", "slot_branch"]


def act(run: Run, step: Step) -> None:
    """The parked-run step of the plan: its result noted; a run not read back stopped fails
    it (the run stops, nothing more done); a CLI that could not be asked only warns."""
    abort = step.action
    assert isinstance(abort, AbortParkedRun), step
    slot = abort.slot
    result = conclude(abort.binary, slot, run.settings.nm_timeout)
    if result.what == ParkedRunWhat.UNCONFIRMED:
        raise run.fail(StepName.PARKED_RUN, slot, result)
    run.note(StepName.PARKED_RUN, slot, result)
    if result.what in (ParkedRunWhat.UNANSWERED, ParkedRunWhat.IN_SLOT):
        run.warnings.append(RunUnasked(run.task, slot, result))


def conclude(binary: str, slot: str, timeout: float) -> ParkedRunResult:
    """Abort TASK's own parked run in `slot`, if there is one, and say what was done."""
    if is_within(canonical(binary), canonical(slot)):
        # Found on PATH, but inside the very tree being torn down: a program the task's own
        # work could have put there. Never run; nothing is aborted.
        return ParkedRunResult(ParkedRunWhat.IN_SLOT, binary)
    asked = no_mistakes.status(binary, slot, timeout)
    if not asked.answered:
        return ParkedRunResult(ParkedRunWhat.UNANSWERED, binary, problem=asked.problem)
    status = asked.status
    branch = slot_branch(slot) if status is not None and status.id else None
    code = None
    if status is not None and names_branch(status, branch):
        code = code_identity(slot, status.head)
    said = attribute(status, branch, code)
    if status is None or said != Attribution.PARKED:
        return ParkedRunResult(
            ParkedRunWhat.NOT_PARKED,
            binary,
            said,
            run_id=status.id if status else "",
            branch=status.branch if status else "",
            status=status.status if status else "",
            head=status.head if status else "",
            ended_as=status.outcome if status else "",
        )
    run_id = status.id
    sent = no_mistakes.abort(binary, slot, run_id, timeout)
    after = no_mistakes.status_of(binary, slot, run_id, timeout)
    confirmed = confirmation(after, run_id)
    return ParkedRunResult(
        ParkedRunWhat.ABORTED if confirmed is not None else ParkedRunWhat.UNCONFIRMED,
        binary,
        said,
        run_id=run_id,
        branch=status.branch,
        status=status.status,
        head=status.head,
        confirmed=confirmed,
        ended_as=after.status.outcome if confirmed is not None and after.status else "",
        after=after if confirmed is None else None,
        abort_problem=sent.problem,
    )


def slot_branch(slot: str) -> str | None:
    """The branch the slot has checked out (`git symbolic-ref --short HEAD`), None when it is
    detached or git cannot tell."""
    r = runner.git(slot, "symbolic-ref", "--quiet", "--short", "HEAD")
    return (r.text or None) if r.ok else None


def code_identity(slot: str, head: str) -> CodeIdentity:
    """The slot's HEAD, the commit the run's head names in the slot (only a head that reads
    as a commit id is looked up), and whether that commit descends from HEAD."""
    local = runner.rev(slot, "HEAD")
    run_commit = runner.rev(slot, head) if commit_id(head) else None
    descends = False
    if local is not None and run_commit is not None and run_commit != local:
        r = runner.git(slot, "merge-base", "--is-ancestor", local, run_commit)
        descends = r.rc == 0
    return CodeIdentity(local, run_commit, descends)
