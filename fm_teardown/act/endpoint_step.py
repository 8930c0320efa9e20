"""Step 1, the endpoint (the order and why: `act/steps.py`): TASK's own window, its agent
asked to quit first, its panes killed by the ids the decision saw, each time only after the
window was checked to be that one still; an interrupt before the kill kills nothing."""

from __future__ import annotations

from dataclasses import replace

from fm_teardown.act import faults, graceful
from fm_teardown.act.run_state import EndpointChanged, Run, proc_refs, signals
from fm_teardown.adapters import interrupts, processes, tmux
from fm_teardown.model.plan import Step, StepName
from fm_teardown.model.records import Record
from fm_teardown.model.results import (
    WINDOW_KILL_SIGNAL,
    Drift,
    DriftWhat,
    EndpointResult,
    EndpointWhat,
    Signal,
)
from fm_teardown.model.step_warnings import EndpointKept
from fm_teardown.model.world import (
    Endpoint,
    InventoryStatus,
    Pane,
    Proc,
    ProcessTable,
    TmuxInventory,
)

__all__ = ["act", "step_endpoint"]


def act(run: Run, step: Step) -> None:
    """The endpoint step of the plan: TASK's window as the decision saw it (its endpoint in
    the decision's observation), never fm's own processes; what it ran is remembered as
    TASK's."""
    seen = run.decided.observation
    decided = seen.endpoints[run.task]
    run.remembered = tuple(step_endpoint(run, run.record, decided, seen.env.protected))


def step_endpoint(
    run: Run, record: Record, decided: Endpoint, protected: frozenset[int]
) -> list[Proc]:
    """Kill TASK's window's panes by id after snapshotting their process trees; confirm the
    window is gone.

    Only the window ids seen when deciding are killed (in whatever session they are now: a
    moved window is still TASK's). Right before the quit keys and again right before the
    kill, the window is checked to be the one the decision saw (`Seams.window_drift`: the
    same server, by pid and start time; no pane joined; each pane's process and foreground
    process the same): otherwise nothing more is typed or killed and the run decides again
    (`EndpointChanged`). A window of that name that appeared since (a relaunch's) is never
    killed (spec §7a). Returns the snapshot, so that survivors of the kill (SIGHUP ignored)
    are remembered as TASK's own."""
    s = run.settings
    target = record.target
    inv = tmux.list_panes(s)
    if inv.status == InventoryStatus.NO_SERVER:
        run.note(StepName.ENDPOINT, target, EndpointResult(EndpointWhat.NO_SERVER))
        return []
    if inv.status != InventoryStatus.OK:
        raise run.fail(
            StepName.ENDPOINT,
            target,
            EndpointResult(EndpointWhat.INVENTORY_UNREADABLE, error=inv.error),
        )
    _no_new_window(run, record, decided, inv)
    table = processes.scan()
    _same_window(run, record, decided, inv, table, graceful.Farewell())
    panes = _decided_panes(inv, decided, record)
    if not panes:
        run.note(
            StepName.ENDPOINT, target, EndpointResult(EndpointWhat.NO_WINDOW, window=record.window)
        )
        return []
    snapshot = [
        proc
        for pane in panes
        for proc in table.tree(pane.pane_pid)
        if proc.pid not in protected and not proc.zombie
    ]
    window_ids = tuple(sorted({p.window_id for p in panes}))
    # Before any signal (the kill's SIGHUP included): ask TASK's own agent to leave.
    farewell = graceful.ask_to_quit(s, panes, table)
    said = _endpoint_said(EndpointWhat.KILLED, window_ids, record.window, farewell)
    before, now = inv, table
    if farewell.asked:
        # Right before the kill, after the grace: the same window still (an agent leaving
        # is expected). Without keys sent, the check above was right before it already.
        before = tmux.list_panes(s)
        if before.status == InventoryStatus.ERROR:
            raise run.fail(
                StepName.ENDPOINT,
                target,
                replace(said, what=EndpointWhat.INVENTORY_UNREADABLE, error=before.error),
            )
        now = processes.scan()
        _same_window(run, record, decided, before, now, farewell)
    faults.at("before-kill")
    if interrupts.requested():
        # An interrupt never hastens a signal: an agent that got its quit keys is left to
        # quit by itself, and nothing is killed.
        raise run.fail(StepName.ENDPOINT, target, replace(said, what=EndpointWhat.INTERRUPTED))
    # The decided panes, by pane id: a pane joined into the window since the last check is
    # not one of them and is never killed (the window then stays, with it).
    decided_panes = {p.pane_id for p in panes}
    hung_up = _kill([p for p in before.panes if p.pane_id in decided_panes], now, run, protected)
    _confirm_gone(run, record, replace(said, signals=hung_up), decided_panes)
    return snapshot


def _no_new_window(run: Run, record: Record, decided: Endpoint, inv: TmuxInventory) -> None:
    """A window of the record's name that the decision did not see (a relaunch's) stops the
    step: it is never killed."""
    named = [
        p for p in inv.panes if p.session == record.session and p.window_name == record.window_name
    ]
    newcomers = sorted({p.window_id for p in named if p.window_id not in decided.window_ids})
    if newcomers:
        raise run.fail(
            StepName.ENDPOINT,
            record.target,
            EndpointResult(EndpointWhat.NEW_WINDOW, tuple(newcomers), record.window),
        )


def _kill(
    panes: list[Pane], now: ProcessTable, run: Run, protected: frozenset[int]
) -> tuple[Signal, ...]:
    """Kill the panes by id; whom each kill hung up (their terminal gone: signalled by this run
    as much as by a kill), never fm's own."""
    hung_up: dict[int, processes.Signalled] = {}
    for pane in panes:
        procs = graceful.hung_up([pane], now, protected)
        if tmux.kill_pane(run.settings, pane.pane_id).returncode != 0:
            continue
        for proc in procs:
            entry = hung_up.setdefault(
                proc.pid, processes.Signalled(proc.pid, proc.start_time, proc.name)
            )
            entry.signals.append(WINDOW_KILL_SIGNAL)
    return signals(hung_up)


def _confirm_gone(run: Run, record: Record, said: EndpointResult, decided_panes: set[str]) -> None:
    """After the kill: the decided windows gone (or, with --force, still there and said so);
    a pane joined since the last check was not killed, and the window is no longer the one
    decided on."""
    target, window_ids = record.target, said.windows
    after = tmux.list_panes(run.settings)
    if after.status == InventoryStatus.NO_SERVER:
        still: list[str] = []
    elif after.status != InventoryStatus.OK:
        raise run.fail(
            StepName.ENDPOINT,
            target,
            EndpointResult(
                EndpointWhat.UNCONFIRMED,
                window_ids,
                record.window,
                after.error,
                signals=said.signals,
            ),
        )
    else:
        still = sorted({p.window_id for p in after.panes if p.window_id in window_ids})
        joined = [
            p for p in after.panes if p.window_id in window_ids and p.pane_id not in decided_panes
        ]
        if joined:
            # Someone's pane joined the window between the last check and the kill: it was
            # not killed, and the window is not the one decided on any more.
            drift = tuple(Drift(DriftWhat.PANE_JOINED, p.pane_id, now=p.pane_pid) for p in joined)
            changed = replace(said, what=EndpointWhat.CHANGED, drift=drift)
            raise EndpointChanged(Step(StepName.ENDPOINT, target, "", changed.outcome, changed))
    if still:
        if not run.flags.force:
            raise run.fail(
                StepName.ENDPOINT,
                target,
                EndpointResult(
                    EndpointWhat.STILL_PRESENT, tuple(still), record.window, signals=said.signals
                ),
            )
        forced = replace(said, what=EndpointWhat.STILL_PRESENT_FORCED, windows=tuple(still))
        run.warnings.append(EndpointKept(forced, target))
        run.note(StepName.ENDPOINT, target, forced)
        return
    run.note(StepName.ENDPOINT, target, said)


def _decided_panes(inv: TmuxInventory, decided: Endpoint, record: Record) -> list[Pane]:
    """The panes of the windows decided on, still under the record's window name, by window
    id and in whatever session they are now: a window moved to another session (spec §14.1)
    is found here, never by the record's session."""
    return [
        p
        for p in inv.panes
        if p.window_id in decided.window_ids and p.window_name == record.window_name
    ]


def _endpoint_said(
    what: EndpointWhat, window_ids: tuple[str, ...], window: str, farewell: graceful.Farewell
) -> EndpointResult:
    return EndpointResult(
        what,
        window_ids,
        window,
        asked=farewell.asked,
        left=proc_refs(farewell.left),
        stayed=proc_refs(farewell.stayed),
        grace=round(farewell.waited, 1),
        synchronized=farewell.synchronized,
        hooks=proc_refs(farewell.hooks),
        hooks_stayed=proc_refs(farewell.hooks_stayed),
    )


def _same_window(
    run: Run,
    record: Record,
    decided: Endpoint,
    inv: TmuxInventory,
    table: ProcessTable,
    farewell: graceful.Farewell,
) -> None:
    """Stop (`EndpointChanged`) when the decided windows are not the ones the decision saw
    (`Seams.window_drift`, asked now: right before the keys, right before the kill)."""
    drift = run.seams.window_drift(decided, inv, table)
    if drift:
        said = _endpoint_said(EndpointWhat.CHANGED, decided.window_ids, record.window, farewell)
        said = replace(said, drift=drift)
        raise EndpointChanged(Step(StepName.ENDPOINT, record.target, "", said.outcome, said))
