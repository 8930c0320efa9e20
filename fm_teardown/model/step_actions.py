"""What each step of a plan will do, as values: a step's action (`Step.action`).

A decision's plan is its steps in the order they run (the order and why: `act/steps.py`); each
step that needs more than the record and the observation to act carries its action: the
processes to end and whose, the save's owner, the hook files' slot, the pool's return
conditional on the lease seen, the branch deleted by compare-and-swap on the commit seen, TASK's
own slot claim, the `no-mistakes` that looks for TASK's parked run. `decide/plan_builder.py`
makes them, the step's act function (found by the step's name in `act/steps.py`'s table)
carries them out, and the plan token reads the pool's
(the lease its return is conditional on). The endpoint step and the record's (the record and
its duties) act from the record and the observation alone: they carry none.

A new step that needs a fact of the decision's to act adds its action here and to
`StepAction`; nothing else in the model names it but its `StepName` and its result
(`model/results.py`).
"""

from __future__ import annotations

from fm_teardown.model.values import value

__all__ = [
    "AbortParkedRun",
    "BranchDelete",
    "EndProcesses",
    "PoolReturn",
    "RemoveClaim",
    "RemoveHooks",
    "SaveWork",
    "StepAction",
]


@value
class EndProcesses:
    """The processes step: every process that is TASK's to end whose cwd is in the slot
    (`slot`, the canonical slot, when the plan returns it; None: TASK's temp dir only, which
    the record step is about to remove) or in TASK's temp dir, the live owner
    `--discard-live-owner` names (`discarded`) included. What starts there as they end is
    ended on a later pass only when TASK is the slot's only claimant (`sole_claimant`)."""

    slot: str | None
    discarded: str | None = None
    sole_claimant: bool = False


@value
class SaveWork:
    """The save-discarded step (`--force`): the slot's unlanded work saved under
    `refs/fm/discarded/<owner>/<time>` before the pool's reset destroys it: TASK's own, or
    the discarded live owner's (`owner`, spec §7a)."""

    owner: str


@value
class RemoveHooks:
    """The hooks step: the fleet's hook files git does not track leave `slot` (canonical)
    before the return (spec §10)."""

    slot: str


@value
class PoolReturn:
    """The pool step: `treehouse return [--force] [--if-lease-id ID] [--if-lease-holder H]
    <path>`.

    `force`: the pool's dirty prompt skipped (`--force`, the tree reset whatever it holds):
    under fm's `--force` (after its save), and for a scout's scratch slot and a secondmate's
    home (fm looks at the home again right before). Otherwise the return is unforced: the pool
    declines a tree that holds changes (`Aborted.`), and work that appeared after the decision
    is preserved, never reset."""

    path: str  # exactly as the pool's state file stores it
    lease_id: str | None
    lease_holder: str | None
    force: bool = True

    @property
    def argv(self) -> list[str]:
        argv = ["return", "--force"] if self.force else ["return"]
        if self.lease_id:
            argv += ["--if-lease-id", self.lease_id]
        if self.lease_holder is not None:
            argv += ["--if-lease-holder", self.lease_holder]
        return [*argv, self.path]


@value
class BranchDelete:
    """The branch step: TASK's branch, deleted after the return only if it still names the
    commit seen (spec §10)."""

    name: str
    commit: str
    default: str | None  # the project's default branch: never deleted


@value
class RemoveClaim:
    """The claim step: TASK's own slot claim (`path`), removed after a verified return if it
    still names TASK (spec §10); another task's is never touched."""

    path: str


@value
class AbortParkedRun:
    """The parked-run step: TASK's own no-mistakes run parked at a gate, aborted with the
    operator's `no-mistakes` (`binary`, as PATH found it when deciding) run in the slot, before
    anything of TASK's goes (spec §15.5b); what runs is known only when it runs."""

    slot: str
    binary: str


StepAction = (
    EndProcesses | SaveWork | RemoveHooks | PoolReturn | BranchDelete | RemoveClaim | AbortParkedRun
)
