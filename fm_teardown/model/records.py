"""Task records: `state/<id>.meta` (spec §3).

A record is read without ever following a symlink or blocking on a FIFO, parsed as plain
`key=value` lines (last wins, except the identity keys, which must appear exactly once), and
validated. A bad record of TASK is refused; a bad record of ANOTHER task is kept as an
`InvalidRecord`, because it might still be a live owner of TASK's slot.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import field
from enum import StrEnum
from functools import cached_property
from pathlib import Path

from fm_teardown.model.errors import ErrorCode, invalid, refused
from fm_teardown.model.record_files import MAX_RECORD_BYTES, RecordDir, keeping, plain_file
from fm_teardown.model.values import value

__all__ = [
    "IDENTITY_KEYS",
    "KINDS",
    "MAX_EPOCH_DIGITS",
    "MODES",
    "STATE_DIR_HINTS",
    "TASK_ID_MAX",
    "Backend",
    "Fleet",
    "InvalidRecord",
    "Mode",
    "Record",
    "RecordKind",
    "RecordProblem",
    "check_task_id",
    "claimed_slots",
    "load_fleet",
    "load_record",
    "near_ids",
    "own_record_problem",
    "parse_lines",
    "parse_record",
    "quick_record",
    "read_meta",
    "record_refusal",
    "remote_problem",
    "shown",
    "task_id_problem",
]

TASK_ID_MAX = 64
_TASK_ID = re.compile(r"[A-Za-z0-9._-]+")
IDENTITY_KEYS = ("window", "worktree", "project")


class RecordKind(StrEnum):
    """What a task is (`kind=`): its work is judged by what it is (spec §3, §14.6)."""

    SHIP = "ship"  # git work that lands on the default branch
    SCOUT = "scout"  # its product is its report
    SECONDMATE = "secondmate"  # a home of task records of its own


class Mode(StrEnum):
    """How a ship task lands its work (`mode=`)."""

    NO_MISTAKES = "no-mistakes"
    DIRECT_PR = "direct-PR"
    LOCAL_ONLY = "local-only"  # landed on the local default branch counts
    SECONDMATE = "secondmate"


class Backend(StrEnum):
    """The endpoint's backend fm reads (`backend=`). Another task's record may name one fm
    does not know: it is kept as the name it gives (its endpoint is `unreadable`), and TASK's
    own record naming one is refused (`own_record_problem`)."""

    TMUX = "tmux"


# The values a record may give, parsed once here: the rest of fm compares the enums.
KINDS = tuple(k.value for k in RecordKind)
MODES = tuple(m.value for m in Mode)
_KIND = {k.value: k for k in RecordKind}
_MODE = {m.value: m for m in Mode}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# `spawn_gen` is `s<epoch>.<pid>.<rand>`; the launch order reads its epoch (as the `\d`s a
# reader of it matches). An epoch of more digits than a time of any machine has (an int64 of
# seconds has 19), or in digits other than ASCII, is no launch time: the record is invalid,
# for its own task, and never a number fm tries to read (Python refuses to convert a string
# of more than 4300 digits; a float of one is infinite).
_SPAWN_EPOCH = re.compile(r"s(\d+)\.")
MAX_EPOCH_DIGITS = 18


def shown(value: str, limit: int = 80) -> str:
    """A value as it may appear on one line of output: control characters escaped, bounded."""
    text = value if value.isprintable() else repr(value)[1:-1]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def task_id_problem(task_id: str) -> str | None:
    if task_id == "":
        return "the task id is empty"
    if len(task_id) > TASK_ID_MAX:
        return f"the task id is longer than {TASK_ID_MAX} characters"
    if not _TASK_ID.fullmatch(task_id):
        return "the task id may contain only A-Z a-z 0-9 . _ -"
    if task_id.startswith("."):
        return "the task id may not start with '.'"
    return None


def check_task_id(task_id: str) -> None:
    problem = task_id_problem(task_id)
    if problem:
        raise invalid(f"invalid task id '{shown(task_id)}': {problem}", code=ErrorCode.BAD_TASK_ID)


@value
class Record:
    task_id: str
    meta_path: str
    mtime_ns: int
    window: str
    session: str
    worktree: str
    project: str
    # A backend fm does not know stays the name the record gives (see `Backend`).
    backend: Backend | str = Backend.TMUX
    kind: RecordKind = RecordKind.SHIP
    mode: Mode = Mode.NO_MISTAKES
    home: str | None = None
    pr: str | None = None
    tasktmp: str | None = None
    lease_id: str | None = None
    lease_holder: str | None = None
    spawn_gen: str | None = None
    started_at: str | None = None
    # Bookkeeping for the cost-attribution row (spec §10); absent means "default".
    harness: str | None = None
    model: str | None = None
    effort: str | None = None

    @property
    def window_name(self) -> str:
        # `fm-<id>` (checked on parsing); read from the window so a secondmate's child record,
        # keyed `<secondmate>/<id>` in the fleet, still names its own window.
        return self.window.partition(":")[2]

    @property
    def target(self) -> str:
        """The exact tmux target, as the contract prints it."""
        return f"={self.session}:={self.window_name}"


@value
class InvalidRecord:
    """ANOTHER task's record that could not be read or validated.

    `claimed` holds the slot paths it names, or None when that cannot be told; either way it
    may be a live owner, so TASK's verdict fails closed when it might claim TASK's slot.
    """

    task_id: str
    meta_path: str
    problem: str
    claimed: tuple[str, ...] | None
    code: ErrorCode = ErrorCode.RECORD_INVALID  # the problem's stable code


class RecordProblem(Exception):
    def __init__(
        self,
        problem: str,
        claimed: tuple[str, ...] | None = None,
        hints: tuple[str, ...] = (),
        code: ErrorCode = ErrorCode.RECORD_INVALID,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.claimed = claimed
        self.hints = hints  # what to do instead, when TASK's own record is refused for it
        self.code = code  # the problem's stable code (`docs/codes.md`)


_UNREADABLE = ErrorCode.RECORD_UNREADABLE


def read_meta(path: str) -> tuple[str, int]:
    """The record's text and mtime; never follows a symlink, never blocks on a FIFO."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise RecordProblem(f"cannot be read ({exc.strerror})", code=_UNREADABLE) from None
    if stat.S_ISLNK(st.st_mode):
        raise RecordProblem("is a symlink", code=_UNREADABLE)
    if not stat.S_ISREG(st.st_mode):
        raise RecordProblem("is not a regular file", code=_UNREADABLE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise RecordProblem(f"cannot be read ({exc.strerror})", code=_UNREADABLE) from None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            raise RecordProblem("changed while it was being read", code=_UNREADABLE)
        if fst.st_size > MAX_RECORD_BYTES:
            raise RecordProblem(f"is larger than {MAX_RECORD_BYTES} bytes", code=_UNREADABLE)
        data = os.read(fd, MAX_RECORD_BYTES + 1)
    except OSError as exc:
        raise RecordProblem(f"cannot be read ({exc.strerror})", code=_UNREADABLE) from None
    finally:
        os.close(fd)
    if len(data) > MAX_RECORD_BYTES:
        raise RecordProblem(f"is larger than {MAX_RECORD_BYTES} bytes", code=_UNREADABLE)
    if b"\0" in data:
        raise RecordProblem("is binary (contains NUL bytes)", code=_UNREADABLE)
    try:
        return data.decode("utf-8"), fst.st_mtime_ns
    except UnicodeDecodeError:
        raise RecordProblem("is not valid UTF-8 text", code=_UNREADABLE) from None


def parse_lines(text: str) -> list[tuple[str, str]]:
    """`key=value` pairs in file order; the value is everything after the first `=`."""
    pairs = []
    for line in text.split("\n"):
        key, sep, value = line.partition("=")
        if sep:
            pairs.append((key, value))
    return pairs


def claimed_slots(pairs: list[tuple[str, str]]) -> tuple[str, ...] | None:
    """The slots a record names, read leniently (a stray space around the key or the value
    still names one): an invalid record then blocks only the tasks on the slot it names, not
    the whole fleet. None when no slot can be told."""
    values = [v.strip() for k, v in pairs if k.strip() == "worktree"]
    if not values or any(not os.path.isabs(v) or _CONTROL.search(v) for v in values):
        return None
    return tuple(dict.fromkeys(values))


def parse_record(task_id: str, meta_path: str, text: str, mtime_ns: int) -> Record:
    pairs = parse_lines(text)
    claimed = claimed_slots(pairs)
    last: dict[str, str] = {}
    counts: dict[str, int] = {}
    for key, given in pairs:
        last[key] = given
        counts[key] = counts.get(key, 0) + 1

    def problem(message: str) -> RecordProblem:
        return RecordProblem(message, claimed)

    if not text.strip():
        raise RecordProblem(
            "is empty: a record being written, or one left half-written",
            claimed,
            code=ErrorCode.RECORD_EMPTY,
        )
    remote = last.get("remote_host")
    if remote:
        # Before any other check: a record of a task on another host names paths of that
        # host; nothing of it is validated, observed or touched here (spec §15.5).
        raise RecordProblem(*remote_problem(task_id, remote, claimed), code=ErrorCode.REMOTE_HOST)
    for key in IDENTITY_KEYS:
        n = counts.get(key, 0)
        if n != 1:
            raise problem(f"'{key}=' must appear exactly once (found {n})")
        if last[key] == "":
            raise problem(f"'{key}=' is empty")
        if last[key].endswith("\r") and all(v.endswith("\r") for _, v in pairs if v):
            # Every line ends in a CR: the file was saved with Windows line endings.
            raise problem(
                f"'{key}=' contains a control character (a CR at the end of every line: the "
                "record has CRLF line endings; save it with LF endings, e.g. "
                "`sed -i 's/\\r$//' <record>`)"
            )
        if _CONTROL.search(last[key]):
            raise problem(f"'{key}=' contains a control character (newline, CR or tab)")
    if counts.get("endpoint_task_id", 0) > 1:
        raise problem("'endpoint_task_id=' appears more than once")
    if "endpoint_task_id" in last and last["endpoint_task_id"] != task_id:
        raise problem(
            f"endpoint_task_id '{shown(last['endpoint_task_id'])}' does not belong to this task"
        )
    window = last["window"]
    session, colon, name = window.partition(":")
    if not colon or session == "":
        raise problem(f"window '{shown(window)}' is not <session>:fm-{task_id}")
    if name != f"fm-{task_id}":
        raise problem(f"window '{shown(window)}' does not belong to this task (want fm-{task_id})")
    for key in ("worktree", "project"):
        if not os.path.isabs(last[key]):
            raise problem(f"'{key}=' is not an absolute path: '{shown(last[key])}'")
    kind = last.get("kind") or "ship"
    if kind not in KINDS:
        raise problem(f"kind '{shown(kind)}' is not supported (ship, scout or secondmate)")
    mode = last.get("mode") or "no-mistakes"
    if mode not in MODES:
        raise problem(f"mode '{shown(mode)}' is not supported")
    tasktmp = last.get("tasktmp")
    if tasktmp is not None and tasktmp != f"/tmp/fm-{task_id}":
        raise problem(f"tasktmp '{shown(tasktmp)}' is not exactly /tmp/fm-{task_id}")
    home = last.get("home") or None
    if home is not None and (not os.path.isabs(home) or _CONTROL.search(home)):
        raise problem(f"home '{shown(home)}' is not an absolute path")
    spawn_gen = last.get("spawn_gen") or ""
    if _absurd_epoch(spawn_gen):
        raise RecordProblem(
            f"spawn_gen '{shown(spawn_gen, 40)}' does not start with a launch time "
            f"(s<epoch>. with at most {MAX_EPOCH_DIGITS} digits 0-9)",
            claimed,
            code=ErrorCode.SPAWN_GEN_NOT_A_TIME,
        )
    return _record(task_id, meta_path, mtime_ns, last, session)


def _absurd_epoch(spawn_gen: str) -> bool:
    """Does `spawn_gen` start with an epoch that is no launch time (`_SPAWN_EPOCH`)?"""
    m = _SPAWN_EPOCH.match(spawn_gen)
    return m is not None and (not m.group(1).isascii() or len(m.group(1)) > MAX_EPOCH_DIGITS)


def quick_record(task_id: str, meta_path: str, text: str, mtime_ns: int) -> Record | None:
    """The record when it is plainly well formed, else None: then `parse_record` decides,
    with the words of its refusal.

    The same rules as `parse_record`, on one split of the text (no control character at
    all, each identity key on exactly one line), so a record accepted here is the very record
    `parse_record` returns; anything unusual is left to it. This is what a fleet's records
    cost: most of them are read only to know the slots they claim."""
    if not text.replace("\n", "").isprintable():  # no control character (nor anything rare)
        return None
    lined = "\n" + text
    if (
        lined.count("\nwindow=") != 1
        or lined.count("\nworktree=") != 1
        or lined.count("\nproject=") != 1
        or lined.count("\nendpoint_task_id=") > 1
    ):
        return None
    last = dict(line.split("=", 1) for line in text.split("\n") if "=" in line)
    session, _, name = last["window"].partition(":")
    tasktmp = last.get("tasktmp")
    home = last.get("home")
    if (
        not session
        or name != f"fm-{task_id}"
        or last.get("endpoint_task_id", task_id) != task_id
        or not last["worktree"].startswith("/")
        or not last["project"].startswith("/")
        or (last.get("kind") or "ship") not in KINDS
        or (last.get("mode") or "no-mistakes") not in MODES
        or (tasktmp is not None and tasktmp != f"/tmp/fm-{task_id}")
        or (home and not home.startswith("/"))
        or _absurd_epoch(last.get("spawn_gen") or "")
        or last.get("remote_host")
    ):
        return None
    return _record(task_id, meta_path, mtime_ns, last, session)


def _record(
    task_id: str, meta_path: str, mtime_ns: int, last: dict[str, str], session: str
) -> Record:
    """The record of a validated record's last values (`parse_record`, `quick_record`)."""
    return Record(
        task_id=task_id,
        meta_path=meta_path,
        mtime_ns=mtime_ns,
        window=last["window"],
        session=session,
        worktree=last["worktree"],
        project=last["project"],
        # Another task's record with another backend is still well formed: its endpoint is
        # `unreadable` (hence live). Only TASK's own record must be tmux (see load_record).
        backend=_backend(last.get("backend", "tmux")),
        kind=_KIND[last.get("kind") or "ship"],
        mode=_MODE[last.get("mode") or "no-mistakes"],
        home=last.get("home") or None,
        pr=last.get("pr") or None,
        tasktmp=last.get("tasktmp"),
        lease_id=last.get("treehouse_lease") or None,
        lease_holder=last.get("treehouse_lease_holder") or None,
        spawn_gen=last.get("spawn_gen") or None,
        started_at=last.get("started_at") or None,
        harness=last.get("harness") or None,
        model=last.get("model") or None,
        effort=last.get("effort") or None,
    )


def _backend(name: str) -> Backend | str:
    return Backend.TMUX if name == Backend.TMUX else name


def remote_problem(
    task_id: str, host: str, claimed: tuple[str, ...] | None
) -> tuple[str, tuple[str, ...] | None, tuple[str, ...]]:
    """Why a record naming `remote_host=` (a secondmate on another host, as firstmate's spawn
    records one) is not torn down here, and the command that tears it down on its host:
    firstmate's own remote retirement, run from the fleet's firstmate checkout."""
    shown_host = shown(host)
    return (
        f"names remote_host={shown_host}: task {task_id} runs on host {shown_host} and is torn "
        "down there, not here (nothing it names on this host was read or touched)",
        claimed,
        (
            f"tear it down on {shown_host}: bin/fm-on.sh {task_id} "
            f"fm-remote-secondmate-control.sh retire {task_id} (from the fleet's firstmate "
            f"checkout: it runs the teardown on {shown_host} over ssh); then remove "
            f"state/{task_id}.meta and its '- {task_id} ...' line in data/secondmates.md here",
        ),
    )


def own_record_problem(record: Record) -> str | None:
    """Why a record that is well formed (and so a possible owner of a slot) still cannot be
    torn down as TASK by fm, or None."""
    if record.backend != Backend.TMUX:
        return f"names backend '{shown(record.backend)}', which is not supported (only tmux)"
    return None


def record_refusal(meta_path: str, problem: str) -> str:
    """Why TASK's own record is refused, without its lead and tail: the refusal of
    `load_record` and the audit's row alike (report/ adds `REFUSED: ` and what was changed)."""
    return f"record {meta_path} {problem}"


def load_record(state_dir: Path, task_id: str) -> Record:
    """TASK's own record, or the error that refuses it (exit 2 if absent, 5 if unsafe)."""
    meta_path = str(state_dir / f"{task_id}.meta")
    try:
        text, mtime = read_meta(meta_path)
        record = parse_record(task_id, meta_path, text, mtime)
        problem = own_record_problem(record)
        if problem:
            raise RecordProblem(problem, code=ErrorCode.BACKEND_UNSUPPORTED)
        return record
    except FileNotFoundError:
        if not os.path.isdir(state_dir):
            raise invalid(
                f"no such task '{task_id}': the state dir {state_dir} does not exist",
                *STATE_DIR_HINTS,
                code=ErrorCode.STATE_DIR_MISSING,
            ) from None
        close = near_ids(task_id, _list_task_ids(state_dir))
        raise invalid(
            f"no such task '{task_id}' in the state dir {state_dir} (no {meta_path})",
            *([f"did you mean: {', '.join(close)}?"] if close else []),
            "`fm teardown --dry-run` lists the fleet's tasks",
            code=ErrorCode.NO_SUCH_TASK,
        ) from None
    except RecordProblem as exc:
        raise refused(
            record_refusal(meta_path, exc.problem), *exc.hints, unchanged=True, code=exc.code
        ) from None


@value
class Fleet:
    """Every record of the state dir: the valid ones and the ones that could not be used."""

    records: Mapping[str, Record]
    invalid: Mapping[str, InvalidRecord]
    # Names in the state dir that no task can own: `<name>.meta` whose name can never be a
    # task id, and files that are neither a record nor a record's sidecar, each with why.
    # Loose ends, never owners of a slot: no task is ever spawned under such a name.
    strays: tuple[tuple[str, str], ...] = ()
    # The records of secondmates' homes (`<home>/state/*.meta`), keyed `<secondmate>/<id>`:
    # claimants of the slots they name like any record, but not this state dir's tasks.
    children: frozenset[str] = frozenset()
    # For a `.meta` among the strays, the canonical slots it names (read leniently): only a
    # task whose slot it names (or one nested with it) is warned about it.
    stray_slots: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def task_ids(self) -> list[str]:
        return sorted({*self.records, *self.invalid} - self.children)

    @cached_property
    def by_lease(self) -> tuple[Mapping[str, tuple[str, ...]], Mapping[str, tuple[str, ...]]]:
        """(lease id -> the records naming it, holder -> the records with no lease id naming
        it as their holder), in task-id order: who a pool lease belongs to, for every slot of
        the fleet in one pass (the audit asks for every row)."""
        ids: dict[str, list[str]] = {}
        holders: dict[str, list[str]] = {}
        for tid in sorted(self.records):
            r = self.records[tid]
            if r.lease_id:
                ids.setdefault(r.lease_id, []).append(tid)
            elif r.lease_holder:
                holders.setdefault(r.lease_holder, []).append(tid)
        return (
            {k: tuple(v) for k, v in ids.items()},
            {k: tuple(v) for k, v in holders.items()},
        )


# Where fm looks for the state dir, for an operator who ran it from the wrong place.
STATE_DIR_HINTS = (
    "run fm from the fleet's home (cd to the dir that holds state/), "
    "or set FM_HOME=<fleet home>, or pass --state-dir DIR",
)


def near_ids(given: str, ids: list[str]) -> list[str]:
    """The task ids an operator probably meant: the same id in another case, or with a
    `.meta` typed after it, first; then the close spellings."""
    import difflib  # only on an error path: it costs more than the rest of records

    bare = given[:-5] if given.endswith(".meta") else given
    exact = [t for t in ids if t.lower() == bare.lower() and t != given]
    close = difflib.get_close_matches(bare.lower(), [t.lower() for t in ids], n=3, cutoff=0.6)
    by_lower = {t.lower(): t for t in ids}
    return list(dict.fromkeys(exact + [by_lower[c] for c in close if by_lower[c] != given]))[:3]


def _list_task_ids(state_dir: Path) -> list[str]:
    """Task ids with a `.meta` in the state dir (no content read): for completion."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return []
    return sorted(n[:-5] for n in names if n.endswith(".meta") and len(n) > 5)


# The records this process has read, by path, text and mtime: the same text read again (a real
# run looks at the fleet again right before each destructive call) is the same record, so it
# is not parsed again. Only what `quick_record` accepts is kept; the path and the time tell
# two records of the same text apart. Kept only in a real run (`record_files.keep_reads`).
_READ: dict[tuple[str, str, int], Record] = {}


def load_fleet(state_dir: Path, canon: Callable[[str], str] | None = None) -> Fleet:
    """Every record of the state dir and of the secondmates' homes below it.

    `canon`: the run's canonicaliser (`paths.Canonicalizer`), shared with the observation
    that follows, so that a directory resolved here is not resolved again there."""
    canon = canon or _realpath
    try:
        with os.scandir(state_dir) as it:
            listed = sorted((e.name, plain_file(e)) for e in it)
    except FileNotFoundError:
        # A state dir that does not exist is a wrong setting, not an empty fleet (spec §7a).
        raise refused(
            f"the state dir {state_dir} does not exist",
            *STATE_DIR_HINTS,
            code=ErrorCode.STATE_DIR_MISSING,
        ) from None
    except OSError as exc:
        raise refused(
            f"cannot read the state dir {state_dir}: {exc.strerror}",
            code=ErrorCode.STATE_DIR_UNREADABLE,
        ) from None
    records: dict[str, Record] = {}
    bad: dict[str, InvalidRecord] = {}
    strays: list[tuple[str, str]] = []
    stray_slots: dict[str, tuple[str, ...]] = {}
    base = str(state_dir)
    # The path `state_dir / name` spells (a Path is already normalised), without the join.
    prefix = "" if base == "." else base if base.endswith("/") else base + "/"
    keep = keeping()
    with RecordDir(base) as reader:
        for name, plain in listed:
            if not name.endswith(".meta"):
                continue
            task_id = name[:-5]
            meta_path = prefix + name
            id_problem = task_id_problem(task_id)
            if id_problem:
                # Never a claimant: no task is ever spawned under a name that is no task id.
                why = f"no task's record: '{shown(task_id)}' can never be a task id ({id_problem})"
                strays.append((name, why))
                slots = _stray_slots(meta_path, canon)
                if slots:
                    stray_slots[name] = slots
                continue
            got = reader.read(name) if plain else None
            if got is not None:
                seen = (meta_path, *got)
                record = _READ.get(seen) if keep else None
                if record is None:
                    record = quick_record(task_id, meta_path, *got)
                if record is not None:
                    records[task_id] = record
                    if keep:
                        _READ[seen] = record
                    continue
            try:
                text, mtime = got if got is not None else read_meta(meta_path)
            except FileNotFoundError:
                continue  # removed since the listing: no longer a claim
            except RecordProblem as exc:
                bad[task_id] = InvalidRecord(task_id, meta_path, exc.problem, None, exc.code)
                continue
            try:
                records[task_id] = parse_record(task_id, meta_path, text, mtime)
            except RecordProblem as exc:
                bad[task_id] = InvalidRecord(task_id, meta_path, exc.problem, exc.claimed, exc.code)
    ids = {*records, *bad}
    for name, _ in listed:
        # fm's own files (locks) start with a dot; a sidecar is `<id>.<anything>`.
        if name.endswith(".meta") or name.startswith(".") or _sidecar(name, ids):
            continue
        strays.append((name, "neither a task's record nor a record's sidecar"))
    # The homes' records are loaded by their own module, which reads records with this one's
    # readers (imported here, not at the top: it imports this module).
    from fm_teardown.model.homes import load_children

    children = load_children(state_dir, records, bad, canon)
    return Fleet(records, bad, tuple(sorted(strays)), children, stray_slots)


def _realpath(path: str) -> str:
    return os.path.realpath(path)


def _stray_slots(meta_path: str, canon: Callable[[str], str]) -> tuple[str, ...]:
    """The canonical slots a name no task can have names (read leniently), if any: a task
    whose slot it names is warned about it; no other task is (it is never an owner)."""
    try:
        text, _ = read_meta(meta_path)
    except (OSError, RecordProblem):
        return ()
    claimed = claimed_slots(parse_lines(text))
    return tuple(dict.fromkeys(canon(p) for p in claimed)) if claimed else ()


def _sidecar(name: str, ids: set[str]) -> bool:
    """`name` is `<id>.<something>` for a task id with a record (ids may contain dots)."""
    at = name.find(".")
    while at > 0:
        if name[:at] in ids:
            return True
        at = name.find(".", at + 1)
    return False
