"""The plan token: a full-length digest of what a decision rests on, and the fields that changed.

A dry run prints it (`plan: <token>`, JSON `"plan_id"`); `--expect-plan TOKEN` makes a real
run refuse when its first decision gives another token (spec §13.9, §14.5, §14.8).

The token is 96 hex digits: a 128-bit digest of every field's own 256-bit digest (32 hex
digits), then one 32-bit tag per field (8 hex digits each, in `FIELDS` order). A real run
compares the whole token, so any change to any field refuses, whatever the tags say: the
tags only name the fields that changed and let a refusal find the approved values again
(`recover`); a change whose tag stays the same is still refused, as one the token cannot
name. No field is truncated before it is digested, and the comparison never rests on a tag.

The fields: the verdict; the owners of the slot and their liveness; the slot's HEAD; the dirty
paths; the lease the pool return is conditional on; TASK's window ids; the processes that
would be signalled (pid and start time); the steps (name and target). Nothing else goes in,
and nothing that moves while the fleet stands still: fm's own processes (it, its ancestors,
its pane, what it started) are never in it, and start times are counted from pid 1's (the
boot time they are reckoned from moves with the wall clock), so two dry runs of an unchanged
fleet give the same token.

The owners are combined without order (a sum of per-owner digests): the records sharing a
slot share one sum, worked out once per slot, and each record's owners are that sum minus
itself, so the audit's tokens cost k, not k squared, for k records on one slot.

`words` says each field in words for people (processes by name and pid, windows by name,
owners by id, HEAD by short hash): what a refusal shows as `before → now`, the before found
by `recover`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fm_teardown.decide.ownership import Excluding
from fm_teardown.model.causes import Cause, FieldChanged, NoFieldNamed
from fm_teardown.model.step_actions import EndProcesses

__all__ = [
    "FIELDS",
    "LENGTH",
    "TAG",
    "changed",
    "describe",
    "digests",
    "problem",
    "recover",
    "token",
    "words",
]

try:
    # blake2 without `hashlib`, whose OpenSSL binding costs a dry run ~3 ms to import.
    from _blake2 import blake2b, blake2s
except ImportError:  # not CPython
    from hashlib import blake2b, blake2s

if TYPE_CHECKING:
    from fm_teardown.model.plan import Decision, LandedLike, Owner
    from fm_teardown.model.world import Endpoint, Observation, Proc

# (field, what a person calls it), in token order.
FIELDS: tuple[tuple[str, str], ...] = (
    ("verdict", "the verdict"),
    ("owners", "the owners of the slot or their liveness"),
    ("head", "the slot's HEAD"),
    ("dirty", "the slot's uncommitted or untracked paths"),
    ("lease", "the pool lease"),
    ("windows", "TASK's windows"),
    ("processes", "the processes to signal"),
    ("steps", "the steps"),
)
DIGEST = 32  # hex digits of the whole plan's digest: 128 bits, compared in full
TAG = 8  # hex digits of each field's tag: names the field and finds its approved value
LENGTH = DIGEST + TAG * len(FIELDS)
_HEX = frozenset("0123456789abcdef")
# The owners' sum: 512-bit digests added modulo 2**512, so that finding two owner sets with
# the same sum is out of reach (a generalised birthday search needs far more owners than a
# fleet has).
_MOD = 1 << 512


def _h(name: str, text: str) -> bytes:
    # blake2s's default digest is 32 bytes: the field's full 256 bits.
    return blake2s(f"{name}\0{text}".encode("utf-8", "surrogateescape")).digest()


def digests(
    d: Decision, obs: Observation, facts: LandedLike | None, *, fm_pid: int
) -> dict[str, bytes]:
    """Each field's 256-bit digest, from the decision and what it was made from. `fm_pid`:
    fm's own pid (what it started is left out)."""
    head = facts.head if facts is not None and facts.head else "-"
    dirty = sorted(facts.dirty) if facts is not None else []
    ep = obs.endpoints.get(d.task)
    return {
        "verdict": _h("verdict", str(d.verdict)),
        "owners": _owners_digest(d.owners, obs),
        "head": _h("head", head),
        "dirty": _h("dirty", "\n".join(dirty)),  # sorted: as `_Items` joins them
        "lease": _h("lease", _lease(d)),
        "windows": _h("windows", " ".join(sorted(ep.window_ids) if ep is not None else ())),
        "processes": _h(
            "processes", " ".join(sorted(_pid_at(p, obs) for p in _processes(d, obs, ep, fm_pid)))
        ),
        "steps": _h("steps", "\n".join([f"{s.step}|{s.target}" for s in d.plan])),
    }


def _tag(digest: bytes) -> str:
    return digest[: TAG // 2].hex()  # the first TAG hex digits


# Each field's name as the whole digest takes it, before the field's digest.
_PREFIXES = tuple((name, name.encode() + b"\0") for name, _ in FIELDS)


def token(fields: Mapping[str, bytes]) -> str:
    whole = blake2s(digest_size=DIGEST // 2)
    for name, prefix in _PREFIXES:
        whole.update(prefix + fields[name])
    return whole.hexdigest() + "".join([_tag(fields[name]) for name, _ in _PREFIXES])


def problem(text: str) -> str | None:
    """Why `text` is not a plan token, or None."""
    if len(text) != LENGTH or not _HEX.issuperset(text):
        return f"{text!r} is not a plan token ({LENGTH} hex digits, as a dry run prints it)"
    return None


def changed(expected: str, now: str) -> list[str]:
    """The fields whose tag differs between the approved token and the one now; [] when the
    tokens are equal, when the digests differ but no tag does, and when only the tags differ
    (a token altered by hand): `describe` says so."""
    if expected == now or expected[:DIGEST] == now[:DIGEST]:
        # The same digest: the same plan, and tags no dry run printed with it (`describe`).
        return []
    return [
        name
        for i, (name, _) in enumerate(FIELDS)
        if expected[DIGEST + i * TAG : DIGEST + (i + 1) * TAG]
        != now[DIGEST + i * TAG : DIGEST + (i + 1) * TAG]
    ]


# -- the fields ---------------------------------------------------------------------------------


def _lease(d: Decision) -> str:
    r = d.pool_return
    return f"{r.lease_id or ''}|{r.lease_holder or ''}" if r is not None else "-"


def _owner_text(o: Owner) -> str:
    return f"{o.id}\0{o.kind}\0{o.endpoint}\0{'live' if o.live else 'not live'}"


def _owner_value(o: Owner) -> int:
    digest = blake2b(_owner_text(o).encode("utf-8", "surrogateescape"), digest_size=64)
    return int.from_bytes(digest.digest(), "big")


def _owners_digest(owners: Sequence[Owner], obs: Observation) -> bytes:
    """The owners without order: their number and the sum of their digests, the digests of
    a slot's shared owners worked out once for every record of that slot."""
    total = 0
    if isinstance(owners, Excluding):
        # The slot group's owners minus TASK, with TASK's own changes (ownership.Owners): the
        # group's sum is kept in the observation's memo, so each record pays only for what
        # differs. The view's parts are read as ownership.Excluding keeps them.
        items: tuple[Owner, ...] = owners._items
        key = ("fingerprint-owners", id(items))
        kept = obs.memo.get(key)
        if kept is None or kept[0] is not items:
            values = [_owner_value(o) for o in items]
            kept = obs.memo[key] = (items, values, sum(values) % _MOD)
        _, values, total = kept
        skip: int | None = owners._skip
        replaced: Mapping[int, Owner] = owners._replaced
        if skip is not None:
            total -= values[skip]
        for j, o in replaced.items():
            if j != skip:
                total += _owner_value(o) - values[j]
        for o in owners._extra:
            total += _owner_value(o)
    else:
        total = sum(_owner_value(o) for o in owners)
    return _h("owners", f"{len(owners)} {total % _MOD:x}")


def _pid_at(p: Proc, obs: Observation) -> str:
    """`pid@start`, the start in milliseconds after pid 1's. A start time is the kernel's
    clock ticks since boot plus the boot time /proc/stat gives in whole seconds, and that
    boot time is worked out from the wall clock: when the clock is adjusted it moves by a
    second between two runs (it did, on a machine whose boot fell near a second's end), and
    with it every process's start time. Counted from pid 1's start, read in the same scan,
    it does not move. Where pid 1 cannot be seen, the start time is taken as it is."""
    first = obs.processes.procs.get(1)
    since = p.start_time - (first.start_time if first is not None else 0.0)
    return f"{p.pid}@{round(since * 1000)}"


def _processes(d: Decision, obs: Observation, ep: Endpoint | None, fm_pid: int) -> list[Proc]:
    """TASK's endpoint processes and, when the plan ends processes, every process in the slot
    and TASK's tasktmp; never one fm spares (fm, its ancestors, its own pane) nor one fm
    started (a tmux client or git that is still running in the slot): those differ from run
    to run and are never signalled."""
    table = obs.processes.procs
    procs = {p: table[p] for p in (ep.pids if ep is not None else ()) if p in table}
    ends = d.action(EndProcesses)
    if ends is not None:
        if ends.slot is not None and ends.slot in obs.slots:
            procs.update((p.pid, p) for p in obs.slots[ends.slot].procs)
        tmp = obs.tasktmp.get(d.task)
        if tmp is not None:
            procs.update((p.pid, p) for p in tmp.procs)
    spared = obs.spared
    return [
        p
        for p in procs.values()
        if not p.zombie and p.pid not in spared and not _started_by_fm(p, table, fm_pid)
    ]


def _started_by_fm(p: Proc, table: Mapping[int, Proc], me: int) -> bool:
    seen, pid = 0, p.ppid
    while pid > 1 and seen < 64:  # a chain of parents, bounded in case the table loops
        if pid == me:
            return True
        parent = table.get(pid)
        if parent is None:
            return False
        pid, seen = parent.ppid, seen + 1
    return False


# -- in words -----------------------------------------------------------------------------------


def words(
    d: Decision, obs: Observation, facts: LandedLike | None, *, fm_pid: int
) -> dict[str, str]:
    """Each field in words, one item a line (what a refusal shows as `before → now`)."""
    ep = obs.endpoints.get(d.task)
    names = {
        p.window_id: f"{p.session}:{p.window_name} ({p.window_id})" for p in obs.inventory.panes
    }
    r = d.pool_return
    if r is None:
        lease = "no pool return"
    elif r.lease_id or r.lease_holder:
        lease = f"lease {r.lease_id or 'none'} held by '{r.lease_holder or ''}'"
    else:
        lease = "no lease (an unconditional return)"
    procs = sorted(_processes(d, obs, ep, fm_pid), key=lambda p: p.pid)
    return {
        "verdict": str(d.verdict),
        "owners": "\n".join(sorted(_owner_words(o) for o in d.owners)),
        "head": facts.head[:12] if facts is not None and facts.head else "not read",
        "dirty": "\n".join(sorted(facts.dirty) if facts is not None else ()),
        "lease": lease,
        "windows": "\n".join(names.get(w, w) for w in sorted(ep.window_ids if ep else ())),
        "processes": "\n".join(f"{p.name or p.argv0 or '?'} (pid {p.pid})" for p in procs),
        # By name: a step's target (a path) is bound by the token, too long to read here.
        "steps": "\n".join(str(s.step) for s in d.plan),
    }


# -- the approved values, found again ---------------------------------------------------------
#
# A token keeps digests, not words. But a plan that changed is mostly the plan now with one
# thing more, less or different: a process started, a record added, an owner come alive, a
# verdict. So a refusal tries the values the approved field could have had, made from the
# plan now (each item left out, one or two at a time; each owner in another endpoint state;
# every verdict; no lease, no HEAD read), and a candidate whose 32-bit tag is the approved
# one gives the field's words before. What it cannot find is said to be unknown. Nothing is
# kept anywhere: a dry run writes no file.

_PAIRS = 40  # items up to which two left out at once are tried
_FLIPS = 500  # owners up to which each one's other endpoint states are tried


class _Items:
    """A list field's items now, (canonical, words), and how its digest joins them."""

    def __init__(self, name: str, items: list[tuple[str, str]], sep: str, ordered: bool) -> None:
        self.name, self.items, self.sep, self.ordered = name, items, sep, ordered

    def tag(self, keep: list[tuple[str, str]]) -> str:
        canon = [c for c, _ in keep]
        return _tag(_h(self.name, self.sep.join(canon if self.ordered else sorted(canon))))

    def before(self, want: str) -> str | None:
        n = len(self.items)
        candidates: list[list[tuple[str, str]]] = [[]]
        candidates += [self.items[:i] + self.items[i + 1 :] for i in range(n)]
        if n <= _PAIRS:
            candidates += [
                [x for k, x in enumerate(self.items) if k not in (i, j)]
                for i in range(n)
                for j in range(i + 1, n)
            ]
        for keep in candidates:
            if self.tag(keep) == want:
                return "\n".join(w for _, w in keep)
        return None


def _owner_words(o: Owner) -> str:
    return f"{o.id} ({o.kind}, endpoint {o.endpoint}, {'live' if o.live else 'not live'})"


def _owners_before(owners: list[Owner], want: str) -> str | None:
    from dataclasses import replace

    from fm_teardown.model.world import EndpointState

    def tag(n: int, total: int) -> str:
        return _tag(_h("owners", f"{n} {total % _MOD:x}"))

    values = [_owner_value(o) for o in owners]
    total, n = sum(values), len(owners)
    if tag(0, 0) == want:
        return ""
    for i in range(n):
        if tag(n - 1, total - values[i]) == want:
            return "\n".join(sorted(_owner_words(x) for k, x in enumerate(owners) if k != i))
    for i, o in enumerate(owners[:_FLIPS]):
        for state in EndpointState:
            if state == o.endpoint:
                continue
            other = replace(o, endpoint=state, live=state.live)
            if tag(n, total - values[i] + _owner_value(other)) == want:
                rest = [_owner_words(x) for k, x in enumerate(owners) if k != i]
                return "\n".join(sorted([*rest, _owner_words(other)]))
    return None


def recover(
    expected: str, d: Decision, obs: Observation, facts: LandedLike | None, *, fm_pid: int
) -> dict[str, str]:
    """The approved plan's fields in words, for those the plan now lets fm find again."""
    from fm_teardown.model.errors import Verdict

    want = {
        name: expected[DIGEST + i * TAG : DIGEST + (i + 1) * TAG]
        for i, (name, _) in enumerate(FIELDS)
    }
    now = words(d, obs, facts, fm_pid=fm_pid)
    out: dict[str, str] = {}
    for v in Verdict:
        if _tag(_h("verdict", str(v))) == want["verdict"]:
            out["verdict"] = str(v)
    head = facts.head if facts is not None and facts.head else "-"
    for value, said in (("-", "not read"), (head, now["head"])):
        if _tag(_h("head", value)) == want["head"]:
            out["head"] = said
    leases = {"-": "no pool return", "|": "no lease (an unconditional return)"}
    leases[_lease(d)] = now["lease"]
    facts_now = obs.slots.get(d.slot) if d.slot is not None else None
    entry = facts_now.pool.entry if facts_now is not None else None
    if entry is not None and entry.leased:
        leases[f"{entry.lease_id}|{entry.lease_holder}"] = (
            f"lease {entry.lease_id or 'none'} held by '{entry.lease_holder}'"
        )
    for value, said in leases.items():
        if _tag(_h("lease", value)) == want["lease"]:
            out["lease"] = said
    ep = obs.endpoints.get(d.task)
    names = {
        p.window_id: f"{p.session}:{p.window_name} ({p.window_id})" for p in obs.inventory.panes
    }
    procs = sorted(_processes(d, obs, ep, fm_pid), key=lambda p: p.pid)
    lists = (
        _Items("dirty", [(x, x) for x in sorted(facts.dirty)] if facts else [], "\n", False),
        _Items(
            "windows",
            [(w, names.get(w, w)) for w in sorted(ep.window_ids if ep else ())],
            " ",
            False,
        ),
        _Items(
            "processes",
            [(_pid_at(p, obs), f"{p.name or p.argv0 or '?'} (pid {p.pid})") for p in procs],
            " ",
            False,
        ),
        _Items("steps", [(f"{s.step}|{s.target}", str(s.step)) for s in d.plan], "\n", True),
    )
    for field in lists:
        found = field.before(want[field.name])
        if found is not None:
            out[field.name] = found
    owners = _owners_before(list(d.owners), want["owners"])
    if owners is not None:
        out["owners"] = owners
    return out


def describe(
    names: list[str], now: Mapping[str, str], before: Mapping[str, str] | None
) -> list[Cause]:
    """One cause per changed field, its words before and now (`the processes to signal: sleep
    (pid 7) → none` in report/'s words); a field `before` does not hold is not found."""
    if not names:
        return [NoFieldNamed()]
    return [FieldChanged(n, before.get(n) if before is not None else None, now[n]) for n in names]
