"""The slot census (docs/spec.md §14.1). Pure.

Every process working in TASK's slot or TASK's temp dir (its cwd there) is one of six kinds,
from observation alone:

1. TASK's endpoint: in the process trees of TASK's own window's panes (a window moved to
   another session included);
2. another task's endpoint;
3. an agent in a pane that is no task's endpoint (an operator's session, another window,
   another tmux server of the user);
4. an agent in no pane;
5. a terminal no task holds: a process with a controlling terminal, or in a pane, that no
   task's endpoint holds (a shell in someone's pane, an ssh login);
6. anything else (servers, builds, watchers).

Kinds 2-5 are someone still working there: a task with any of them is not finished
(`finished.classify`). Where a process runs that cannot be told (a tmux server whose panes
cannot be listed) is doubt. fm itself and its ancestors are left out: they are never signalled.
"""

from __future__ import annotations

from enum import StrEnum

from fm_teardown.model.process_kind import ProcessClass, classify
from fm_teardown.model.values import value
from fm_teardown.model.world import Observation, Placement, Proc

__all__ = [
    "Kind",
    "Member",
    "census",
    "doubts",
    "kind_of",
    "placement",
    "still_working",
    "where_of",
]


class Kind(StrEnum):
    OWN = "its own endpoint"
    OTHER_ENDPOINT = "another task's endpoint"
    AGENT_IN_PANE = "an agent in a pane that is no task's endpoint"
    AGENT_NO_PANE = "an agent in no pane"
    TERMINAL = "a terminal no task holds"
    OTHER = "anything else"

    @property
    def working(self) -> bool:
        """Someone still works there: the task is not finished."""
        return self not in (Kind.OWN, Kind.OTHER)


@value
class Member:
    """One process of the census: what it is, and where it runs."""

    proc: Proc
    kind: Kind
    place: Placement

    def __str__(self) -> str:
        name = f"{self.proc.name or self.proc.argv0} ({self.proc.pid})"
        if self.place.doubt and self.kind != Kind.OTHER_ENDPOINT:
            return f"{name}, where it runs cannot be told"
        where = where_of(self.place)
        if self.kind == Kind.OTHER_ENDPOINT:
            return f"{name}, {self.place.endpoint}'s endpoint"
        return f"{name}, {self.kind}" + (f", {where}" if where else "")


def where_of(place: Placement) -> str:
    """Where a process runs, in words: its pane (and terminal), or its terminal alone."""
    if place.pane is not None:
        return f"in {place.pane}" + (f" ({place.tty})" if place.tty else "")
    return f"on terminal {place.tty}" if place.tty else ""


def placement(obs: Observation, proc: Proc) -> Placement:
    """Where `proc` runs: as observed, or (an observation built without the census) from the
    process table alone."""
    found = obs.placements.get(proc.pid)
    if found is not None:
        return found
    agent = classify(proc.name, proc.argv0) == ProcessClass.AGENT
    return Placement(agent, obs.endpoint_owner.get(proc.pid), tty=proc.tty)


def kind_of(task: str, place: Placement) -> Kind:
    if place.endpoint is not None:
        return Kind.OWN if place.endpoint == task else Kind.OTHER_ENDPOINT
    if place.agent:
        return Kind.AGENT_IN_PANE if place.pane is not None else Kind.AGENT_NO_PANE
    if place.pane is not None or place.tty:
        return Kind.TERMINAL
    return Kind.OTHER


# The last observation censused, by identity, and its censuses by task: an audit asks for a
# task's census three times (rule 4's doubts, then its row's workers and doubts), and an
# observation is an immutable value, so each is worked out once. A new observation (another
# look at the world, or one `replace`d) starts afresh.
_MEMO: list[tuple[Observation, dict[str, tuple[Member, ...]]]] = []


def census(task: str, obs: Observation) -> tuple[Member, ...]:
    """Every process working in TASK's slot or temp dir, each once, classified."""
    if not _MEMO or _MEMO[0][0] is not obs:
        _MEMO[:] = [(obs, {})]
    memo = _MEMO[0][1]
    found = memo.get(task)
    if found is None:
        found = memo[task] = _census(task, obs)
    return found


def _census(task: str, obs: Observation) -> tuple[Member, ...]:
    facts = obs.slots.get(obs.slot_of[task])
    tmp = obs.tasktmp.get(task)
    procs: dict[int, Proc] = {}
    for proc in (*(facts.procs if facts else ()), *(tmp.procs if tmp else ())):
        procs.setdefault(proc.pid, proc)
    protected = obs.env.protected
    out = []
    for proc in procs.values():
        if proc.pid in protected or proc.zombie:
            continue
        place = placement(obs, proc)
        out.append(Member(proc, kind_of(task, place), place))
    return tuple(out)


def still_working(task: str, obs: Observation) -> tuple[str, ...]:
    """Kinds 2-5 in TASK's slot or temp dir, each named with where it runs."""
    return tuple(str(m) for m in census(task, obs) if m.kind.working)


def doubts(task: str, obs: Observation) -> tuple[str, ...]:
    """Why where a process in TASK's slot or temp dir runs cannot be told."""
    return tuple(m.place.doubt for m in census(task, obs) if m.place.doubt and m.kind != Kind.OWN)
