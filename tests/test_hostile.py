"""The hostile input corpus: every case in `tests/hostile/cases/*.json` (schema: README there).

Each case builds a real fleet, plants its hostile input, runs `fm teardown` as a dry run and/or
as a real run, and asserts what spec §3, §5, §6 and §7 promise for any input: the
documented exit code, one clear error line on stderr and no traceback, stdout empty-or-a-report
(or exactly one JSON object with `--json`), no hang, exactly one journal line for a real run of
a valid task id (none for an invalid request) and otherwise NOTHING changed: the fleet's files
(slots, state dir, pool state, project tree, data dir), git refs and worktrees, tmux windows,
the processes the test started, and no pool command was run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.fleet import RUN_TAG, Fleet, git, tid
from tests.reliability.figures import count

CASES_DIR = Path(__file__).resolve().parent / "hostile" / "cases"
MODES = ("dry", "dry+json", "real", "real+json")
DEFAULT_MODES = ("dry+json", "real")
CHECKS = (
    "exit",
    "traceback",
    "stderr",
    "stdout",
    "message",
    "json",
    "unchanged",
    "journal",
    "time",
)
CASE_KEYS = {
    "name",
    "why",
    "task",
    "argv",
    "argv_extra",
    "slot",
    "meta",
    "endpoint",
    "other_records",
    "setup",
    "env",
    "tmux",
    "modes",
    "expect_exit",
    "expect_message",
    "expect_json",
    "expect_journal",
    "max_seconds",
    "xfail",
}
META_KEYS = {
    "kind",
    "file",
    "lines",
    "set",
    "drop",
    "add",
    "newline",
    "prefix_hex",
    "suffix_hex",
    "pad_bytes",
    "target",
}
OTHER_KEYS = {"id", "meta", "endpoint", "slot"}
SETUP_OPS = {"write", "mkdir", "mkfifo", "symlink", "rmtree"}
# The harness's timeout: a hang FAILS the test instead of hanging CI.
RUN_TIMEOUT = 60.0
TASK_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
JOURNAL = "teardown-log.jsonl"


def valid_id(task: str | None) -> bool:
    """spec §3's task-id rule, restated independently of the tool."""
    return task is not None and bool(TASK_ID.fullmatch(task)) and not task.startswith(".")


# -- the corpus ---------------------------------------------------------------------------------


def run_unique(case: dict[str, Any]) -> dict[str, Any]:
    """The case with its task ids `t1`..`t9` made unique to this run (`t1` -> `t1-<tag>`, as
    `tid` does; `.t7` and `t1.meta` stay as hostile as they were): two runs on one machine
    must never meet at `/tmp/fm-<id>`."""
    text = re.sub(r"(?<![A-Za-z0-9])(t[1-9])(?![0-9])", rf"\1-{RUN_TAG}", json.dumps(case))
    return dict(json.loads(text), name=case["name"], why=case["why"])


def load_case(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    unknown = set(case) - CASE_KEYS
    assert not unknown, f"{path.name}: unknown keys {sorted(unknown)}"
    assert case.get("name") == path.stem, f"{path.name}: name must be the file's stem"
    assert case.get("why"), f"{path.name}: say why the case is there"
    assert "expect_exit" in case, f"{path.name}: expect_exit is required"
    modes = case.get("modes", DEFAULT_MODES)
    assert modes and set(modes) <= set(MODES), f"{path.name}: bad modes {modes}"
    for spec in [case.get("meta") or {}] + [
        o.get("meta") or {} for o in case.get("other_records", [])
    ]:
        assert set(spec) <= META_KEYS, f"{path.name}: unknown meta keys {set(spec) - META_KEYS}"
    for other in case.get("other_records", []):
        assert set(other) <= OTHER_KEYS, f"{path.name}: unknown other_records keys"
    for op in case.get("setup", []):
        assert op.get("op") in SETUP_OPS, f"{path.name}: unknown setup op {op}"
    xf = case.get("xfail")
    if xf is not None:
        assert str(xf.get("reason", "")).startswith("BUG: "), f"{path.name}: xfail needs a BUG"
        assert set(xf.get("checks", [])) <= set(CHECKS), f"{path.name}: bad xfail checks"
    return case


def all_cases() -> list[dict[str, Any]]:
    return [load_case(p) for p in sorted(CASES_DIR.glob("*.json"))]


class KnownBug(AssertionError):
    """A check a case's `xfail` names failed, as the case says it does (spec mismatch)."""


def xfail_for(case: dict[str, Any], mode: str) -> dict[str, Any] | None:
    xf: dict[str, Any] | None = case.get("xfail")
    if xf is None:
        return None
    modes = xf.get("modes") or case.get("modes") or MODES
    return xf if mode in modes else None


def params() -> list[Any]:
    out = []
    for case in all_cases():
        marks = []
        xf = case.get("xfail")
        if xf is not None:
            # Only a KnownBug counts as the expected failure: any other failed assertion of the
            # same case (another check, or another mode) is still a real failure.
            marks.append(pytest.mark.xfail(reason=xf["reason"], strict=True, raises=KnownBug))
        out.append(pytest.param(case, id=case["name"], marks=marks))
    return out


def per_mode(value: Any, mode: str) -> Any:
    """A value that may be given per mode: {"dry": x, "real": y} (keys: dry, real, or a mode)."""
    if isinstance(value, dict) and set(value) <= {*MODES}:
        if mode in value:
            return value[mode]
        return value.get(mode.split("+")[0])
    return value


# -- building the fleet -------------------------------------------------------------------------


@dataclass
class Built:
    fleet: Fleet
    task: str | None
    places: dict[str, str]
    slots: list[Path] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    pidfile: Path | None = None


def expand(text: str, places: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: places.get(m.group(1), m.group(0)), text)


def default_lines(rid: str) -> list[str]:
    return [
        f"window=firstmate:fm-{rid}",
        f"endpoint_task_id={rid}",
        "worktree={slot}",
        "project={project}",
        "harness=claude",
        "kind=ship",
        f"tasktmp=/tmp/fm-{rid}",
    ]


def meta_bytes(spec: dict[str, Any], rid: str, places: dict[str, str]) -> bytes:
    if spec.get("lines") == []:
        return b""  # an empty file: no lines at all, not even a newline
    lines = list(spec["lines"] if "lines" in spec else default_lines(rid))
    drop = set(spec.get("drop", []))
    lines = [ln for ln in lines if ln.partition("=")[0] not in drop]
    for key, value in spec.get("set", {}).items():
        at = [i for i, ln in enumerate(lines) if ln.partition("=")[0] == key]
        if at:
            lines[at[0]] = f"{key}={value}"
        else:
            lines.append(f"{key}={value}")
    lines += spec.get("add", [])
    if spec.get("pad_bytes"):
        lines.append("note=" + "x" * int(spec["pad_bytes"]))
    nl = spec.get("newline", "\n")
    text = expand(nl.join(lines) + nl, {**places, "id": rid})
    return (
        bytes.fromhex(spec.get("prefix_hex", ""))
        + text.encode("utf-8")
        + bytes.fromhex(spec.get("suffix_hex", ""))
    )


def plant_meta(state: Path, rid: str, spec: dict[str, Any], places: dict[str, str]) -> None:
    kind = spec.get("kind", "text")
    if kind == "none":
        return
    path = state / expand(spec.get("file", "{id}.meta"), {**places, "id": rid})
    if kind == "text":
        path.write_bytes(meta_bytes(spec, rid, places))
    elif kind == "symlink":
        os.symlink(expand(spec["target"], {**places, "id": rid}), path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
        (path / "window").write_text("x\n")
    elif kind == "socket":
        # bind() takes at most ~108 bytes of path: bind by a relative name from the state dir.
        here = os.getcwd()
        os.chdir(path.parent)
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path.name)
            s.close()
        finally:
            os.chdir(here)
    else:
        raise AssertionError(f"unknown meta kind {kind}")


def make_slot(fleet: Fleet, spec: Any, holder: str) -> Path:
    """TASK's slot: `pool` (slot 1 of the fleet's pool, leased to TASK), `none` (a path that
    does not exist), or {"path", "register", "holder"}: a real `git worktree` at a custom path,
    entered in a pool state file two levels up when `register` is true."""
    if spec == "pool":
        return fleet.slot(1, holder=holder)
    if spec == "none":
        return fleet.root / "pool" / "gone" / "9" / "project"
    path = Path(expand(spec["path"], {"root": str(fleet.root)}))
    path.parent.mkdir(parents=True, exist_ok=True)
    git(fleet.project, "worktree", "add", "-q", "--detach", str(path), "main")
    if spec.get("register", False):
        pool = path.parent.parent
        entry = {
            "name": path.parent.name,
            "path": str(path),
            "created_at": "2026-12-01T00:00:00Z",
            "leased": True,
            "lease_id": "c" * 32,
            "lease_holder": spec.get("holder", holder),
            "leased_at": "2026-12-01T00:00:00Z",
        }
        (pool / "treehouse-state.json").write_text(json.dumps({"worktrees": [entry]}))
    return path


# A tmux that never answers: the process itself hangs (under tmux's name), as a wedged tmux
# client does. It writes its pid, so that the test can end it if the tool did not.
HUNG_TMUX = '#!/bin/bash\necho $$ >> "{pids}"\nexec -a "$0" sleep 20\n'


def build(fleet: Fleet, case: dict[str, Any]) -> Built:
    task: str | None = case.get("task")
    rid = task if valid_id(task) else tid("t1")
    assert rid is not None
    places = {
        "root": str(fleet.root),
        "project": str(fleet.project),
        "home": str(fleet.home),
        "fm_home": str(fleet.fm_home),
        "state": str(fleet.state),
        "data": str(fleet.data),
        "pool": str(fleet.pool),
        "task": task or "",
        "origin": str(fleet.origin),
    }
    slot = make_slot(fleet, case.get("slot", "pool"), rid)
    places["slot"] = str(slot)
    built = Built(fleet, task, places, env={})
    if slot.exists():
        built.slots.append(slot)
    if "{other_slot}" in json.dumps(case) or any(
        o.get("slot") == "other" for o in case.get("other_records", [])
    ):
        other = fleet.slot(2, holder=tid("t2"))
        places["other_slot"] = str(other)
        built.slots.append(other)
    # TASK's record (when the task id can name a file), then the others.
    if (task is not None and valid_id(task)) or case.get("meta"):
        plant_meta(fleet.state, rid, case.get("meta") or {}, places)
    for other in case.get("other_records", []):
        oplaces = dict(places)
        if other.get("slot") == "other":
            oplaces["slot"] = places["other_slot"]
        plant_meta(fleet.state, other["id"], other.get("meta") or {}, oplaces)
    # Windows: TASK's own (dead by default when its id is valid), and the others'.
    endpoint = case.get("endpoint", "dead" if valid_id(task) else "missing")
    if endpoint != "missing":
        fleet.tracked.update(fleet.endpoint(rid, slot, endpoint))
    for other in case.get("other_records", []):
        state = other.get("endpoint", "missing")
        if state != "missing":
            cwd = Path(places["other_slot"] if other.get("slot") == "other" else slot)
            fleet.tracked.update(
                fleet.endpoint(other["id"], cwd if cwd.exists() else fleet.root, state)
            )
    for op in case.get("setup", []):
        run_op(op, places)
    env = {k: expand(v, places) for k, v in case.get("env", {}).items()}
    if case.get("tmux") is not None:
        assert case["tmux"] == "hang", f"unknown tmux stand-in {case['tmux']}"
        fake = fleet.root / "hung-tmux"
        fake.mkdir()
        built.pidfile = fake / "pids"
        script = fake / "tmux"
        script.write_text(HUNG_TMUX.replace("{pids}", str(built.pidfile)))
        script.chmod(0o755)
        env["PATH"] = f"{fake}:{fleet.env()['PATH']}"
    built.env = fleet.env(**env)
    return built


def run_op(op: dict[str, Any], places: dict[str, str]) -> None:
    path = Path(expand(op["path"], places))
    kind = op["op"]
    if kind == "write":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(expand(op.get("text", ""), places))
    elif kind == "mkdir":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "mkfifo":
        os.mkfifo(path)
    elif kind == "symlink":
        os.symlink(expand(op["to"], places), path)
    elif kind == "rmtree":
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def reap_hung_tmux(built: Built) -> None:
    """End what the hung stand-in left behind (only the pids it wrote, only if still ours)."""
    if built.pidfile is None or not built.pidfile.exists():
        return
    for pid in {int(x) for x in built.pidfile.read_text().split()}:
        try:
            proc = psutil.Process(pid)
            if proc.name() == "sleep" and "tmux" in " ".join(proc.cmdline()):
                proc.kill()
        except psutil.Error:
            continue


# -- "nothing changed" --------------------------------------------------------------------------


def digest(root: Path, skip: set[Path]) -> str:
    """Every path's name, mode and (regular files only: never opens a FIFO) content below
    `root`, links not followed; `skip`ped paths left out."""
    h = hashlib.sha256()
    if not os.path.lexists(root):
        return "absent"
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode):
        h.update(str(st.st_mode).encode())
        if stat.S_ISREG(st.st_mode):
            h.update(root.read_bytes())
        elif stat.S_ISLNK(st.st_mode):
            h.update(os.readlink(root).encode())
        return h.hexdigest()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if Path(dirpath, d) not in skip)
        for name in sorted(filenames + dirnames):
            p = os.path.join(dirpath, name)
            if Path(p) in skip:
                continue
            st = os.lstat(p)
            h.update(os.path.relpath(p, root).encode() + b"\0" + str(st.st_mode).encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(p).encode())
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def journal_path(fleet: Fleet) -> Path:
    return fleet.data / JOURNAL


def journal_lines(fleet: Fleet) -> list[str]:
    p = journal_path(fleet)
    return p.read_text().splitlines() if p.is_file() else []


def snapshot(built: Built) -> dict[str, Any]:
    fleet = built.fleet
    # git's own bookkeeping may be refreshed by read-only git commands (index stat data) and
    # `git merge-tree` may add objects (spec §5): compare refs and worktrees (with each
    # one's HEAD) instead.
    # The hung tmux stand-in's pid file is the test's own bookkeeping.
    skip = {fleet.project / ".git", journal_path(fleet), fleet.root / "hung-tmux"}
    skip |= {s / ".git" for s in built.slots}
    return {
        "tree": digest(fleet.root, skip),
        "refs": git(fleet.project, "for-each-ref", "--format=%(refname) %(objectname)"),
        "worktrees": git(fleet.project, "worktree", "list", "--porcelain"),
        "windows": fleet.tmux.windows(),
        "live": sorted(p for p in fleet.tracked if psutil.pid_exists(p) and not _zombie(p)),
    }


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- the test -----------------------------------------------------------------------------------


def argv_for(case: dict[str, Any], mode: str, places: dict[str, str]) -> list[str]:
    flags = (["--dry-run"] if mode.startswith("dry") else []) + (
        ["--json"] if mode.endswith("+json") else []
    )
    extra = [expand(a, places) for a in case.get("argv_extra", [])]
    if "argv" in case:
        # An explicit command line; {flags} stands for this mode's flags.
        out: list[str] = []
        for a in case["argv"]:
            out += flags if a == "{flags}" else [expand(a, places)]
        return out
    task = case.get("task")
    return ["teardown", *([task] if task is not None else []), *flags, *extra]


class Checker:
    """Asserts each check; a check the case's `xfail` names is recorded as a KnownBug."""

    def __init__(self, case: dict[str, Any], mode: str) -> None:
        xf = xfail_for(case, mode)
        self.expected_bugs = set(xf.get("checks", CHECKS)) if xf else set()
        self.bugs: list[str] = []

    def check(self, name: str, ok: bool, message: str) -> None:
        if ok:
            return
        if name in self.expected_bugs:
            self.bugs.append(f"[{name}] {message}")
            return
        raise AssertionError(f"[{name}] {message}")


def stderr_problem(stderr: str, code: int) -> str | None:
    """spec §6: errors are one clear line (plus hints). Lines starting with `hint:` or
    `warning:` may come anywhere; indented lines continue the line above (details such as each
    live owner). Any other line is an error line: exactly one when the exit code is not 0, none
    when it is 0."""
    lines = stderr.splitlines()
    heads = [
        ln for ln in lines if not ln.startswith(("hint:", "warning:")) and not ln[:1].isspace()
    ]
    if code == 0:
        return None if not heads else f"unexpected error line(s) on exit 0: {heads}"
    if len(heads) != 1 or not heads[0].strip():
        return f"want exactly one unindented error line, got {heads!r}"
    if lines and (lines[0][:1].isspace() or lines[0] == ""):
        return f"stderr does not start with its error line: {lines[0]!r}"
    return None


@pytest.mark.parametrize("case", params())
def test_hostile_case(fleet: Fleet, case: dict[str, Any]) -> None:
    """Build the case's fleet once, then run each of its modes in turn (dry runs change
    nothing, refusals change nothing but the journal, so the modes cannot disturb each other);
    every run is checked on its own."""
    count("hostile")
    case = run_unique(case)
    built = build(fleet, case)
    bugs: list[str] = []
    state = snapshot(built)
    try:
        for mode in case.get("modes", DEFAULT_MODES):
            state = run_case(built, case, mode, state, bugs)
    finally:
        reap_hung_tmux(built)
    if bugs:
        raise KnownBug("\n".join(bugs))


def run_case(
    built: Built, case: dict[str, Any], mode: str, before: dict[str, Any], bugs: list[str]
) -> dict[str, Any]:
    """One run of `fm` in `mode`; asserts its checks, adds the expected (xfail) failures to
    `bugs`, and returns the state after it (the next run's `before`)."""
    fleet = built.fleet
    c = Checker(case, mode)
    want = int(per_mode(case["expect_exit"], mode))
    real = mode.startswith("real")
    as_json = mode.endswith("+json")
    journal_before = journal_lines(fleet)
    argv = argv_for(case, mode, built.places)

    t0 = time.monotonic()
    try:
        r = fleet.fm(*argv, env=built.env, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"fm {argv} hung for {RUN_TIMEOUT}s") from None
    took = time.monotonic() - t0
    shown = f"argv={argv!r}\nexit={r.returncode}\nstdout={r.stdout!r}\nstderr={r.stderr!r}"

    max_s = case.get("max_seconds")
    if max_s is not None:
        c.check("time", took <= float(max_s), f"took {took:.1f}s > {max_s}s\n{shown}")
    c.check("exit", r.returncode == want, f"want exit {want}\n{shown}")
    c.check(
        "traceback",
        "Traceback" not in r.stderr + r.stdout and "unexpected error" not in r.stderr,
        f"a traceback or an unexpected error reached the operator\n{shown}",
    )
    if not as_json or r.stderr:
        problem = stderr_problem(r.stderr, r.returncode)
        c.check("stderr", problem is None, f"{problem}\n{shown}")

    doc: dict[str, Any] | None = None
    if as_json:
        lines = r.stdout.splitlines()
        try:
            doc = json.loads(r.stdout) if len(lines) == 1 else None
        except ValueError:
            doc = None
        c.check(
            "stdout",
            isinstance(doc, dict)
            and doc.get("schema") == "fm-teardown/1"
            and doc.get("exit_code") == r.returncode
            and (doc.get("audit") is True or doc.get("dry_run") is (not real)),
            f"--json must print exactly one fm-teardown/1 object with the exit code\n{shown}",
        )
    else:
        first = r.stdout.splitlines()[0] if r.stdout else ""
        c.check(
            "stdout",
            r.stdout == ""
            # a go-ahead's first line says it; a refusal's says it on stderr, then stdout
            # starts with where (task, slot, endpoint)
            or bool(re.match(r"(PROCEED|TORN DOWN|STALE|CLEARED) — \S+", first))
            or bool(re.match(r"task \S+( · |$)", first))
            or first.startswith("fleet audit of "),
            f"stdout is neither empty nor a report\n{shown}",
        )

    message = per_mode(case.get("expect_message"), mode)
    if message:
        where = r.stderr
        if doc is not None:
            where += "\n".join(
                doc.get("reasons", []) + doc.get("hints", []) + doc.get("warnings", [])
            )
        c.check("message", expand(message, built.places) in where, f"want {message!r}\n{shown}")

    expect_json = case.get("expect_json")
    if expect_json and isinstance(doc, dict):
        got: dict[str, Any] = {}
        for key in expect_json:
            if key == "steps":
                got[key] = [s["step"] for s in doc.get("steps", [])]
            elif key == "live_owners":
                got[key] = [o["id"] for o in doc.get("owners", []) if o["live"]]
            elif key == "owner_endpoints":
                got[key] = [o["endpoint"] for o in doc.get("owners", [])]
            elif key == "task_verdicts":
                got[key] = {t["task"]: t["verdict"] for t in doc.get("tasks", [])}
            else:
                got[key] = doc.get(key)
        c.check("json", got == expect_json, f"want {expect_json}, got {got}\n{shown}")

    after = snapshot(built)
    changed = sorted(k for k in before if before[k] != after[k])
    c.check("unchanged", not changed, f"changed: {changed}\n{shown}")
    c.check(
        "unchanged",
        fleet.treehouse_calls() == [],
        f"a pool command ran: {fleet.treehouse_calls()}\n{shown}",
    )

    journal_after = journal_lines(fleet)
    wants_line = case.get("expect_journal", real and want != 2 and case.get("task") is not None)
    new = journal_after[len(journal_before) :]
    c.check(
        "journal",
        journal_after[: len(journal_before)] == journal_before,
        f"the journal was rewritten\n{shown}",
    )
    # A real run that acts journals its intent first: the result line is the one counted.
    intents = [x for x in new if json.loads(x).get("phase") == "intent"]
    c.check(
        "journal",
        all(json.loads(x).get("task") == case.get("task") for x in intents) and len(intents) <= 1,
        f"want at most one intent line, of this task, got {intents}\n{shown}",
    )
    new = [x for x in new if x not in intents]
    if wants_line:
        ok = len(new) == 1
        if ok:
            entry = json.loads(new[0])
            ok = entry.get("task") == case.get("task") and entry.get("exit_code") == want
        c.check("journal", ok, f"want exactly one journal line for this run, got {new}\n{shown}")
    else:
        c.check("journal", new == [], f"want no journal line, got {new}\n{shown}")
    bugs += [f"{mode}: {b}" for b in c.bugs]
    return after
