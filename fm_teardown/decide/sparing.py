"""What fm never signals, whatever its cwd (spec §7a). Pure.

- a tmux server (the listing's `#{pid}`, a pane's parent) and any process named tmux: ending
  the server ends every window of the fleet;
- the processes of ANOTHER task's endpoint (its panes' process trees), except, under
  `--force --discard-live-owner=ID`, ID's;
- fm itself, its ancestors, and the processes of the pane fm runs in.

The processes step spares them. A plan that returns the slot must not meet a tmux process in
the slot at all, because the pool's return ends every process whose cwd is in the slot (only
its own ancestors are spared, and fm is one of them).
"""

from __future__ import annotations

from collections.abc import Mapping

from fm_teardown.model.process_kind import is_tmux
from fm_teardown.model.values import value
from fm_teardown.model.world import Observation, Proc, Spared, Why

__all__ = ["Blocker", "NeverSignalled", "blocking_the_return", "never_signalled", "to_signal"]


class NeverSignalled:
    """What fm never signals when tearing TASK down: the observation's spared processes, less
    TASK's own endpoint and (under --discard-live-owner) the discarded owner's.

    Precedence: fm and its pane, then tmux, then another task's endpoint (a tmux client in
    the discarded owner's pane is still tmux). Asked per process: only of the processes fm
    might signal, so a one-task run never judges the whole process table."""

    def __init__(self, obs: Observation, task: str, discarded: str | None) -> None:
        self._obs = obs
        self._base: Mapping[int, Why] = obs.spared
        self._mine = (task, discarded)

    def get(self, pid: int) -> Why | None:
        why = self._base.get(pid)
        if why is not None:
            return why
        if _is_tmux(self._obs, pid):
            proc = self._obs.processes.procs.get(pid)
            server = pid in self._obs.inventory.server_pids or (
                proc is not None and "server" in proc.name
            )
            return Why(Spared.TMUX_SERVER if server else Spared.TMUX)
        owner = self._obs.endpoint_owner.get(pid)
        if owner is None or owner in self._mine:
            return None
        return Why(Spared.OTHER_ENDPOINT, owner)

    def __contains__(self, pid: object) -> bool:
        return isinstance(pid, int) and self.get(pid) is not None

    def __getitem__(self, pid: int) -> Why:
        why = self.get(pid)
        if why is None:
            raise KeyError(pid)
        return why


def _is_tmux(obs: Observation, pid: int) -> bool:
    """A tmux server (the listing's `#{pid}`) or a process named tmux. Asked per process
    (only of the processes fm might signal), so argv[0] is read only for those."""
    if pid in obs.inventory.server_pids:
        return True
    proc = obs.processes.procs.get(pid)
    return proc is not None and is_tmux(proc.name, proc.argv0)


def never_signalled(obs: Observation, task: str, discarded: str | None) -> NeverSignalled:
    return NeverSignalled(obs, task, discarded)


@value
class Blocker:
    """A process in the slot that fm never ends and that the pool's return would end."""

    proc: Proc
    why: Why

    def __str__(self) -> str:
        name = f"{self.proc.name or self.proc.argv0} ({self.proc.pid})"
        if self.why.task:
            return f"{name} of {self.why.task}'s endpoint"
        return f"{self.why.kind} {name}"


def blocking_the_return(procs: tuple[Proc, ...], spared: NeverSignalled) -> list[Blocker]:
    """tmux processes in the slot (spec §7a: the return would end a server, and every
    window of the fleet with it).

    Another task's endpoint in the slot does not block: a live one made that task a live
    owner already (rule 3); a dead one is only shells, which fm does not signal but the pool's
    return ends like any process in the slot. fm's own ancestry is spared by the pool too."""
    out = []
    for p in procs:
        why = spared.get(p.pid)
        if why is not None and why.kind in (Spared.TMUX_SERVER, Spared.TMUX):
            out.append(Blocker(p, why))
    return out


def to_signal(procs: tuple[Proc, ...], spared: NeverSignalled) -> list[Proc]:
    return [p for p in procs if p.pid not in spared and not p.zombie]
