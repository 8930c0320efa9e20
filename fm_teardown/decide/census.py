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
(`finished.classify`), and mass cleanup ends none of them. Kinds 3 and 5 are live owners of a
single teardown (`ownership.owners_of`): an agent `pid:<PID>` each; a person's terminal by
its pane, or by its terminal when it is in no pane (`terminals`): one owner for the person working
there, named by the first of its processes to start (the pane's shell, an ssh login's shell).
Where a process runs that cannot be told (a tmux server whose panes cannot be listed), and
whether an interpreter in no pane and on no terminal runs an agent when its command line
cannot be read, are doubt. fm itself and its ancestors are left out: they are never signalled.
"""

from __future__ import annotations

from enum import StrEnum

from fm_teardown.model.process_kind import ProcessClass, classify_proc, named
from fm_teardown.model.values import value
from fm_teardown.model.world import Observation, PaneRef, Placement, Proc

__all__ = [
    "Kind",
    "Member",
    "Person",
    "census",
    "doubts",
    "kind_of",
    "placement",
    "still_working",
    "terminals",
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
        name = named(self.proc)
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
    agent = classify_proc(proc) == ProcessClass.AGENT
    return Placement(agent, obs.endpoint_owner.get(proc.pid), tty=proc.tty)


def kind_of(task: str, place: Placement) -> Kind:
    if place.endpoint is not None:
        return Kind.OWN if place.endpoint == task else Kind.OTHER_ENDPOINT
    if place.agent:
        return Kind.AGENT_IN_PANE if place.pane is not None else Kind.AGENT_NO_PANE
    if place.pane is not None or place.tty:
        return Kind.TERMINAL
    return Kind.OTHER


def census(task: str, obs: Observation) -> tuple[Member, ...]:
    """Every process working in TASK's slot or temp dir, each once, classified.

    Kept in the observation's own memo: an audit asks for a task's census three times (rule
    4's doubts, then its row's workers and doubts), and an observation is an immutable value,
    so each is worked out once. A new observation (another look at the world, or one
    `replace`d) starts afresh, and nothing outlives the observation."""
    key = (census, task)
    found: tuple[Member, ...] | None = obs.memo.get(key)
    if found is None:
        found = obs.memo[key] = _census(task, obs)
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
    """Why where a process in TASK's slot or temp dir runs, or whether it is an agent, cannot
    be told."""
    out = []
    for m in census(task, obs):
        if m.place.doubt and m.kind != Kind.OWN:
            out.append(m.place.doubt)
        elif m.kind == Kind.OTHER and classify_proc(m.proc) == ProcessClass.UNSURE:
            out.append(_unsure(m.proc))
    return tuple(out)


def _unsure(proc: Proc) -> str:
    """An interpreter in no pane and on no terminal whose script cannot be read: an agent in
    no pane is someone's live work unless it is TASK's own leftover, and that cannot be told
    of it (spec §15.4: fail closed)."""
    why = (
        "its command line could not be read"
        if proc.args is None
        else "its command line was cut before what it runs"
    )
    return (
        f"{proc.name or proc.argv0} ({proc.pid}) is an interpreter in no pane and on no "
        f"terminal, and {why}: whether it runs an agent cannot be told"
    )


@value
class Person:
    """A person's terminal working in the slot (kind 5): the processes of one pane, or of
    one terminal in no pane, that no task's endpoint holds; the owner `pid:<PID>` of a single
    teardown, named by the first of them to start."""

    members: tuple[Member, ...]
    pane: PaneRef | None
    tty: str | None

    @property
    def pid(self) -> int:
        return min(self.members, key=lambda m: (m.proc.start_time, m.proc.pid)).proc.pid

    @property
    def names(self) -> str:
        """Its processes in the slot, the first to start first: `bash (12), vim (15)`."""
        ordered = sorted(self.members, key=lambda m: (m.proc.start_time, m.proc.pid))
        shown = [named(m.proc) for m in ordered[:4]]
        more = len(ordered) - len(shown)
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def terminals(task: str, obs: Observation) -> tuple[Person, ...]:
    """Kind 5 in TASK's slot or temp dir, one per pane (or per terminal, for the processes in
    no pane): each a person's work, whatever runs there (a shell, an editor, a REPL)."""
    groups: dict[object, list[Member]] = {}
    for m in census(task, obs):
        if m.kind == Kind.TERMINAL and not m.place.doubt:
            key = m.place.pane if m.place.pane is not None else ("tty", m.place.tty)
            groups.setdefault(key, []).append(m)
    return tuple(
        Person(tuple(ms), ms[0].place.pane, ms[0].place.tty or _first_tty(ms))
        for ms in groups.values()
    )


def _first_tty(members: list[Member]) -> str | None:
    return next((m.place.tty for m in members if m.place.tty), None)
