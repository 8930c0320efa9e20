"""The hints of the rules' refusals: task ids listed up to a bound, what to do about live
owners (safe first, the destructive last resort last), about what blocks the pool's return,
and how a task's unlanded work lands. Pure. The refusals' reasons and headlines are causes
(`model/causes.py`), worded by `report/cause_words.py`.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Sequence

from fm_teardown.decide.case import Case
from fm_teardown.decide.sparing import Blocker
from fm_teardown.model.causes import LISTED
from fm_teardown.model.leases import holder_tasks
from fm_teardown.model.plan import LandedLike, Owner, OwnerKind
from fm_teardown.model.records import RecordKind
from fm_teardown.model.world import InventoryStatus, Spared, Terminal

__all__ = [
    "NOT_SAVED",
    "blocked_hints",
    "inventory_hint",
    "listed",
    "live_owner_hints",
    "not_saved",
    "shell_where",
    "unlanded_hints",
]


# What a save before a discard never holds (`act/discard.py`: git's view of the tree; a
# nested repository makes `--force` refuse), said wherever a hint promises one (spec §15.10).
NOT_SAVED = "ignored files and repositories nested in the slot are not saved"


def not_saved(c: Case) -> str:
    """`NOT_SAVED`, for TASK's kind: a secondmate's save holds its task records' bytes."""
    if c.record.kind == RecordKind.SECONDMATE:
        return (
            "ignored files (its task records aside) and repositories nested in the home are "
            "not saved"
        )
    return NOT_SAVED


# -- words a decision's plan shares with a run's results (report/ reads them here) --


def shell_where(t: Terminal) -> str:
    """Where a shell no task's endpoint holds runs: `a shell in terminal /dev/pts/3`."""
    if t.pane:
        return f"a shell in tmux pane {t.pane}" + (f" on {t.tty}" if t.tty else "")
    return f"a shell in terminal {t.tty}" if t.tty else "a shell in a terminal"


def listed(ids: Sequence[str], sep: str = ", ") -> str:
    """`ids` joined, the first `LISTED` of them and how many more (a warning's: a reason's
    are `causes.Listed`, worded by report/)."""
    if len(ids) <= LISTED:
        return sep.join(ids)
    return f"{sep.join(itertools.islice(ids, LISTED))} and {len(ids) - LISTED} more"


def blocked_hints(blocked: list[Blocker]) -> list[str]:
    """What to do about what blocks the pool's return (a tmux server started in the slot)."""
    hints = []
    if any(b.why.kind in (Spared.TMUX_SERVER, Spared.TMUX) for b in blocked):
        hints.append(
            "a tmux server keeps the directory it was started in: detach, end that server "
            "when its windows may go (tmux kill-server), and start it again from outside the "
            "pool (cd ~ && tmux); then re-run"
        )
    return hints


def _secondmate_landing(c: Case, landed: LandedLike) -> str:
    """How a secondmate's work lands: its home's own work committed and pushed, its task
    records' tasks finished (or torn down from the home)."""
    prefix = f"{c.task}/"
    kids = any(k.startswith(prefix) for k in c.fleet.children)
    todo = []
    if landed.dirty or landed.unpushed:
        todo.append(f"commit and push the work in its home {c.slot}, or copy it out")
    if kids:
        todo.append("let its child tasks finish, or tear them down first")
    return "land it: " + ("; ".join(todo) or "see the reasons above")


def live_owner_hints(c: Case, live: list[Owner]) -> list[str]:
    """What to do about live owners: see the tmux server first when fm cannot, what the flags
    given do not lift, let them finish, and (one owner, seen) the last resort that discards
    it."""
    wanted = c.flags.discard_live_owner
    names = ", ".join(o.id for o in live)
    hints: list[str] = []
    inventory = c.obs.inventory
    blind = inventory.status == InventoryStatus.ERROR
    if blind:
        # An owner may only look live because fm cannot see the tmux server: fix that first,
        # never discard someone on a view that is known to be blind.
        hints.append(
            f"the tmux inventory could not be read ({inventory.error or 'unknown error'}): "
            "point fm at the fleet's tmux server (FM_TMUX_SOCKET or FM_TMUX_SOCKET_NAME), "
            "then re-run"
        )
    if wanted is not None and not c.flags.force:
        hints.append("--discard-live-owner takes effect only together with --force")
    elif wanted is not None and len(live) > 1:
        hints.append(f"more than one live owner ({names}): one flag cannot discard them all")
    elif wanted is not None:
        hints.append(f"--discard-live-owner={wanted} does not name the live owner ({names})")
    elif c.flags.force:
        hints.append("--force does not lift this: it discards only this task's own work")
    hints.append(f"let {names} finish (or end it), then re-run")
    if len(live) == 1 and not blind and _in_tasks_name(c, live[0]):
        # A lease held in TASK's own name (`<id>` or `fm-<id>`) under another lease id than
        # the record's: not provably TASK's, but never worded as someone else's live work.
        hints.append(
            f"{live[0].id} is held in {c.task}'s own name, under another lease id than its "
            f"record names ({c.record.lease_id}): if it is {c.task}'s own lease, return it "
            f"with this task: fm teardown {c.task} --force --discard-live-owner={live[0].id}"
        )
    elif len(live) == 1 and not blind:
        owner = live[0]
        if owner.kind in (OwnerKind.PROCESS, OwnerKind.TERMINAL):
            hints.append(_discard_process(c, owner))
            return hints
        # The save is the discarded task's, or under TASK's name for a lease no task holds
        # (`plan_builder`: `save_as`); a scout's slot is not saved at all.
        whose = owner.id if owner.id in c.fleet.records else c.task
        saved = (
            f"; its uncommitted work is saved first under refs/fm/discarded/{whose}/<time>, "
            f"but {not_saved(c)}"
            if c.force_saves
            else "; nothing of it is saved first"
        )
        hints.append(
            f"last resort, destroys {owner.id}'s live work in this slot (its processes there "
            f"are ended and the tree is reset{saved}): "
            f"fm teardown {c.task} --force --discard-live-owner={owner.id}"
        )
    return hints


def _discard_process(c: Case, owner: Owner) -> str:
    """The last resort against a `pid:` owner (an agent, a person's terminal), saying what is
    saved and what is not: what its processes hold only in memory is lost; the tree's files
    are saved (under TASK's name) only where the forced plan saves them."""
    memory = (
        "an editor's unsaved buffers, a shell's or REPL's session"
        if owner.kind == OwnerKind.TERMINAL
        else "the agent's session"
    )
    tree = (
        f"files written to the tree and its commits are saved first under "
        f"refs/fm/discarded/{c.task}/<time> when they hold work not landed ({not_saved(c)}), then "
        "the tree is reset"
        if c.force_saves
        else "the tree is reset and nothing of it is saved"
    )
    return (
        f"last resort, destroys {owner.id}'s live work in this slot: its processes there are "
        f"ended and what they hold only in memory is lost ({memory}); {tree}: "
        f"fm teardown {c.task} --force --discard-live-owner={owner.id}"
    )


def _in_tasks_name(c: Case, owner: Owner) -> bool:
    """A lease owner whose holder names TASK (its id, or firstmate's spawn's `fm-<id>`)."""
    return (
        owner.kind == OwnerKind.LEASE
        and owner.id.startswith("lease:")
        and (c.task in holder_tasks(owner.id[len("lease:") :]))
    )


def unlanded_hints(c: Case, landed: LandedLike) -> list[str]:
    """How TASK's own work lands (by the kind of task and the state of its HEAD), then, last,
    the forced teardown and whether it saves the work first."""
    if c.record.kind == RecordKind.SCOUT:
        # The report's full path is in the reasons above (the data dir may be anywhere).
        land = (
            "land it: the scout's work product is its report (its path is above): have it written"
        )
    elif c.record.kind == RecordKind.SECONDMATE:
        land = _secondmate_landing(c, landed)
    elif landed.branch:
        land = f"land it: commit and push the branch {landed.branch}, or merge its PR"
    elif landed.head:
        land = (
            "land it: HEAD is detached, so put the work on a branch first "
            f"(git -C {shlex.quote(c.slot)} switch -c <name>), then commit and push it, or "
            "merge its PR"
        )
    else:
        land = "land it: commit and push it, or merge its PR"
    # The promise matches the forced plan: a save step only where it has one (spec §14.7).
    kept = (
        f"it is saved first under refs/fm/discarded/{c.task}/<time>, but {not_saved(c)}; "
        f"`fm restore {c.task}` brings back what was saved"
        if c.force_saves
        else "nothing is saved first: it is lost"
    )
    return [land, f"or, last, discard it: fm teardown {c.task} --force ({kept})"]


def inventory_hint(error: str) -> str:
    """What to do when the tmux inventory cannot be read: the refusal of one task and of the
    audit and `--landed` alike."""
    return (
        f"point fm at the fleet's tmux server: set FM_TMUX_SOCKET (the socket path) or "
        f"FM_TMUX_SOCKET_NAME (as for tmux -L); what fm found: {error}; then re-run"
    )
