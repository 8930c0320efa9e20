"""The plan token: a short digest of what a decision rests on, field by field.

A dry run prints it (`plan: <token>`, JSON `"plan_id"`); `--expect-plan TOKEN` makes a real
run refuse when its first decision gives another token. The token is the concatenation of one
short digest per field, in a fixed order, so that a mismatch can be named field by field
without keeping anything but the token the operator approved.

The fields: the verdict; the owners of the slot and their liveness; the slot's HEAD; the dirty
paths; the lease the pool return is conditional on; TASK's window ids; the processes that
would be signalled (pid and start time); the steps (name and target). Nothing else goes in:
two dry runs of an unchanged fleet give the same token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fm_teardown.model.plan import StepName

__all__ = [
    "FIELDS",
    "LENGTH",
    "WIDTH",
    "changed",
    "describe",
    "digest",
    "inputs",
    "problem",
    "token",
]

try:
    # blake2s without `hashlib`, whose OpenSSL binding costs a dry run ~3 ms to import.
    from _blake2 import blake2s
except ImportError:  # not CPython
    from hashlib import blake2s

if TYPE_CHECKING:
    from fm_teardown.model.plan import Decision, LandedLike
    from fm_teardown.model.world import Observation

# (field, what a person calls it), in token order.
FIELDS: tuple[tuple[str, str], ...] = (
    ("verdict", "the verdict"),
    ("owners", "the owners of the slot or their liveness"),
    ("head", "the slot's HEAD"),
    ("dirty", "the slot's uncommitted or untracked paths"),
    ("lease", "the pool lease"),
    ("windows", "TASK's window ids"),
    ("processes", "the processes to signal (pid and start time)"),
    ("steps", "the steps"),
)
WIDTH = 3  # hex digits per field: 8 fields, a 24-character token
LENGTH = WIDTH * len(FIELDS)


def inputs(d: Decision, obs: Observation, facts: LandedLike | None) -> dict[str, str]:
    """Each field's input as a canonical string (what the digest of that field is of)."""
    owners = sorted(
        f"{o.id} ({o.kind}, endpoint {o.endpoint}, {'live' if o.live else 'not live'})"
        for o in d.owners
    )
    head = facts.head if facts is not None and facts.head else "-"
    dirty = sorted(facts.dirty) if facts is not None else []
    lease = (
        f"{d.pool_return.lease_id or ''}|{d.pool_return.lease_holder or ''}"
        if d.pool_return is not None
        else "-"
    )
    ep = obs.endpoints.get(d.task)
    windows = sorted(ep.window_ids) if ep is not None else []
    return {
        "verdict": str(d.verdict),
        "owners": "\n".join(owners),
        "head": head,
        "dirty": "\n".join(dirty),
        "lease": lease,
        "windows": " ".join(windows),
        "processes": " ".join(_processes(d, obs, ep.pids if ep is not None else frozenset())),
        "steps": "\n".join(f"{s.step}|{s.target}" for s in d.plan),
    }


def _processes(d: Decision, obs: Observation, endpoint_pids: frozenset[int]) -> list[str]:
    """pid@start of TASK's endpoint processes and, when the plan ends processes, of every
    process in the slot and TASK's tasktmp; fm's own ancestry never (it differs each run)."""
    table = obs.processes.procs
    protected = obs.env.protected
    procs = {p: table[p] for p in endpoint_pids if p in table}
    if any(s.step == StepName.PROCESSES for s in d.plan):
        if d.end_processes and d.slot is not None and d.slot in obs.slots:
            procs.update((p.pid, p) for p in obs.slots[d.slot].procs)
        tmp = obs.tasktmp.get(d.task)
        if tmp is not None:
            procs.update((p.pid, p) for p in tmp.procs)
    return sorted(
        f"{p.pid}@{p.start_time:.2f}"
        for p in procs.values()
        if not p.zombie and p.pid not in protected
    )


def digest(text: str) -> str:
    return blake2s(text.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()[:WIDTH]


def token(fields: dict[str, str]) -> str:
    return "".join(digest(f"{name}\0{fields[name]}") for name, _ in FIELDS)


def problem(text: str) -> str | None:
    """Why `text` is not a plan token, or None."""
    if len(text) != LENGTH or any(c not in "0123456789abcdef" for c in text):
        return f"{text!r} is not a plan token ({LENGTH} hex digits, as a dry run prints it)"
    return None


def changed(expected: str, fields: dict[str, str]) -> list[str]:
    """The fields whose digest differs between the approved token and these inputs."""
    now = token(fields)
    return [
        name
        for i, (name, _) in enumerate(FIELDS)
        if expected[i * WIDTH : (i + 1) * WIDTH] != now[i * WIDTH : (i + 1) * WIDTH]
    ]


def describe(names: list[str], fields: dict[str, str]) -> str:
    """`the slot's HEAD (now 3fa9c1e07b2d), the steps` for a refusal's reason."""
    words = dict(FIELDS)
    parts = []
    for name in names:
        value = fields[name].replace("\n", ", ")
        if name == "head" and value != "-":
            value = value[:12]
        if len(value) > 80:
            value = value[:77] + "..."
        parts.append(f"{words[name]} (now {value or 'none'})")
    return "; ".join(parts)
