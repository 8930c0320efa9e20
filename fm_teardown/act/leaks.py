"""The leaks firstmate's script ends with a task, beyond its slot (spec §15.5): TASK's
headless browser stack, and remote-job workers whose code root is gone. Run with the record's
duties (`record_step.step_record`, after the auth entries and the cost row), for a stale slot
too: the browser session is TASK's by its name, whoever has the slot now. Best effort: what
cannot be ended, or cannot be told to be what it seems, is left and warned about; the teardown
goes on.

**The browser stack** (firstmate's `bin/fm-browser-reaper.sh --reap <id>`, in fm's terms).
TASK's session is `fm-<home tag>-<id>`; its bridge is the pid chrome-devtools-axi's registry
names (`<sessions root>/<session>/bridge.pid`) only when that live process's own argv names the
bridge (two signals), it started before the record was written (a recycled pid did not), no
other session's record names the same pid and its environment names no other session. The
tool's own `chrome-devtools-axi stop` goes first (when it is on PATH); if the bridge survives
it, the bridge's process tree is ended deepest first, only the processes that carry a
browser-stack marker in their argv (a bystander in the tree is left alone), each by pid and
start time (`processes.terminate`: checked again right before each signal), never a tmux
process nor fm's own ancestry. No other session is ever looked at beyond reading its record.

**Remote-job workers** (firstmate's `bin/fm-remote-job-reap-orphans.sh`). A process of this
user whose command line is `<root>/bin/fm-remote-job-worker.sh [--serve]` (after its
interpreter, perhaps) whose code root is no longer a firstmate checkout (`AGENTS.md` and the
worker script, neither a link) can never run another job: it is ended, with its process group
when the group's leader is itself a worker, else alone. Never fm itself, its ancestry or its
process group, a tmux process or an agent; the command line is read again right before, and
each process is signalled by pid and start time.
"""

from __future__ import annotations

import os

from fm_teardown.act.run_state import Run
from fm_teardown.adapters import leaks as reads
from fm_teardown.adapters import processes
from fm_teardown.model.leaks import (
    WORKER_SUFFIX,
    BrowserLeft,
    BrowserResult,
    BrowserWhat,
    Ended,
    RemoteJobsResult,
    Worker,
    WorkersLeft,
    browser_session,
    home_tag,
    is_bridge,
    is_stack_member,
    worker_root,
)
from fm_teardown.model.plan import StepName, StepOutcome
from fm_teardown.model.process_kind import ProcessClass, classify, is_tmux
from fm_teardown.model.records import Record, RecordKind
from fm_teardown.model.settings import Settings
from fm_teardown.model.world import Proc, ProcessTable

__all__ = ["reap_browser", "session_of", "step_leaks", "sweep_remote_jobs"]

# The tool's own stop gets this long before the stack is ended by signal.
STOP_TIMEOUT = 15.0
# A registry record is written by the bridge once it runs: a process that started this much
# later than the record's mtime is not the bridge the record names (its pid was recycled).
RECORD_SLACK = 2.0
# firstmate's sweep waits up to 5 s after each signal.
WORKER_WAIT = 5.0
_MARKER_BYTES = 4096


def step_leaks(run: Run, record: Record) -> None:
    """TASK's browser stack (not a secondmate's, as in the script), then the remote-job sweep:
    each noted as a step only when there was something to end (or to leave), each leaving a
    warning when something was left."""
    s = run.settings
    try:
        # As the script: a secondmate's browser is its home's business, not its teardown's.
        browser = reap_browser(s, record.task_id) if record.kind != RecordKind.SECONDMATE else None
    except OSError as exc:  # best effort: what could not be read is left, and said
        why = f"could not be read ({exc.strerror or exc})"
        browser = BrowserResult(BrowserWhat.UNREADABLE, session_of(s, record.task_id), other=why)
    if browser is not None:
        run.note(StepName.BROWSER, browser.session, browser)
        if browser.left:
            run.warnings.append(BrowserLeft(browser))
    try:
        swept = sweep_remote_jobs(s.kill_wait)
    except OSError as exc:
        swept = RemoteJobsResult(error=exc.strerror or str(exc))
    if swept is not None:
        run.note(StepName.REMOTE_JOBS, f"*{WORKER_SUFFIX}", swept)
        if swept.outcome == StepOutcome.SKIPPED:
            run.warnings.append(WorkersLeft(swept))


# -- the browser stack --------------------------------------------------------------------------


def session_of(s: Settings, task_id: str) -> str:
    """The chrome-devtools-axi session firstmate's spawn gave TASK in this home."""
    root = s.fm_root or str(s.fm_home)
    marker = None
    try:
        with open(os.path.join(s.fm_home, ".fm-secondmate-home"), "rb") as f:
            marker = f.read(_MARKER_BYTES).decode("utf-8", "replace")
    except OSError:
        marker = None
    return browser_session(home_tag(marker, os.path.realpath(root)), task_id)


def reap_browser(s: Settings, task_id: str) -> BrowserResult | None:
    """End TASK's browser stack; None when its session has no registry record (nothing of it
    to look at)."""
    if not s.browser_sessions_root:
        return None
    session = session_of(s, task_id)
    rec = reads.read_registry(os.path.join(s.browser_sessions_root, session, "bridge.pid"))
    if not rec.exists:
        return None
    if rec.problem:
        return BrowserResult(BrowserWhat.UNREADABLE, session, other=rec.problem)
    pid = rec.pid
    table = processes.scan()
    bridge = table.procs.get(pid)
    argv = reads.argv_of(pid) if bridge is not None and not bridge.zombie else None
    if bridge is None or bridge.zombie or argv is None:
        return BrowserResult(BrowserWhat.NOT_RUNNING, session, pid)
    said = BrowserResult(BrowserWhat.CLOSED, session, pid, age=_age(bridge))
    if not is_bridge(argv):
        return _with(said, BrowserWhat.NOT_BRIDGE)
    if bridge.start_time > rec.mtime + RECORD_SLACK:
        return _with(said, BrowserWhat.RECYCLED)
    if _named_by_another(s.browser_sessions_root, session, pid):
        return _with(said, BrowserWhat.SHARED)
    env_session = reads.environ_value(pid, "CHROME_DEVTOOLS_AXI_SESSION")
    if env_session and env_session != session:
        return BrowserResult(BrowserWhat.OTHER_SESSION, session, pid, other=env_session)
    if reads.stop_session(session, STOP_TIMEOUT) and not _alive(bridge):
        return BrowserResult(BrowserWhat.CLOSED, session, pid, by_tool=True, age=said.age)
    targets, skipped = _stack(processes.scan(), bridge)
    log: dict[int, processes.Signalled] = {}
    processes.terminate(targets, s.browser_reap_grace, s.kill_wait, log)
    ended = tuple(Ended(sig.name, sig.pid) for sig in log.values() if sig.signals)
    what = BrowserWhat.SURVIVED if _alive(bridge) else BrowserWhat.CLOSED
    return BrowserResult(what, session, pid, ended=ended, skipped=skipped, age=said.age)


def _with(r: BrowserResult, what: BrowserWhat) -> BrowserResult:
    return BrowserResult(what, r.session, r.pid, age=r.age)


def _age(proc: Proc) -> float:
    import time

    return max(0.0, time.time() - proc.start_time)


def _alive(proc: Proc) -> bool:
    return processes.same_process(proc.pid, proc.start_time)


def _named_by_another(root: str, session: str, pid: int) -> bool:
    """Does another session's registry record name the same pid? Then whose bridge it is
    cannot be told from the records: it is left alone."""
    try:
        names = os.listdir(root)
    except OSError:
        return False
    for name in names:
        if name == session:
            continue
        other = reads.read_registry(os.path.join(root, name, "bridge.pid"))
        if other.exists and not other.problem and other.pid == pid:
            return True
    return False


def _stack(table: ProcessTable, bridge: Proc) -> tuple[list[Proc], tuple[Ended, ...]]:
    """The bridge's process tree, deepest first and the bridge last: the processes to end
    (stack members, by their argv) and the ones left alone (no marker, a tmux process, fm's
    own ancestry)."""
    if table.procs.get(bridge.pid) is None:
        return [], ()
    depth = {bridge.pid: 0}
    order = [bridge.pid]
    for pid in order:  # breadth first: every parent before its children
        for child in table.children.get(pid, ()):
            if child not in depth and child in table.procs:
                depth[child] = depth[pid] + 1
                order.append(child)
    mine = _ancestry(table)
    targets: list[Proc] = []
    skipped: list[Ended] = []
    for pid in [*sorted(order[1:], key=lambda p: -depth[p]), bridge.pid]:
        proc = table.procs[pid] if pid != bridge.pid else bridge
        if proc.zombie:
            continue
        argv = reads.argv_of(pid)
        if argv is None:
            continue  # gone since the scan
        member = pid == bridge.pid or is_stack_member(argv)
        if not member or is_tmux(proc.name, proc.argv0) or pid in mine or pid <= 1:
            skipped.append(Ended(proc.name, pid))
            continue
        targets.append(proc)
    return targets, tuple(skipped)


def _ancestry(table: ProcessTable) -> set[int]:
    """fm's own process and its ancestors: never signalled."""
    out: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        proc = table.procs.get(pid)
        if proc is None:
            break
        pid = proc.ppid
    return out


# -- remote-job workers -------------------------------------------------------------------------


def _root_live(root: str) -> bool:
    """firstmate's `fm_remote_job_root_is_live`: the root is still a firstmate checkout."""

    def plain(path: str, isdir: bool = False) -> bool:
        ok = os.path.isdir(path) if isdir else os.path.isfile(path)
        return ok and not os.path.islink(path)

    return (
        bool(root)
        and plain(root, isdir=True)
        and plain(os.path.join(root, "AGENTS.md"))
        and plain(os.path.join(root, "bin", "fm-remote-job-worker.sh"))
    )


def _may_be_worker(proc: Proc) -> bool:
    """Cheap first look (no /proc read): a worker runs as its interpreter (a shell) or under
    its script's own name."""
    name = proc.name
    return name.startswith("fm-remote-job") or classify(name, "") == ProcessClass.SHELL


def sweep_remote_jobs(kill_wait: float) -> RemoteJobsResult | None:
    """End the remote-job workers whose code root is gone; None when there were none."""
    table = processes.scan()
    if table.error:
        return RemoteJobsResult(error=table.error)
    me = os.getuid()
    mine = _ancestry(table)
    own_group = reads.process_group(0)
    reaped: list[Worker] = []
    survived: list[Worker] = []
    done_groups: set[int] = set()
    for proc in sorted(table.procs.values(), key=lambda p: p.pid):
        if proc.zombie or proc.pid in mine or not _may_be_worker(proc):
            continue
        if reads.uid_of(proc.pid) != me:
            continue
        command = reads.argv_of(proc.pid)
        if not command:
            continue
        leading = command.split(" ", 1)[0]
        executable = frozenset({leading}) if reads.executable_file(leading) else frozenset()
        root = worker_root(command, executable)
        if root is None or _root_live(root):
            continue
        group = reads.process_group(proc.pid)
        if group is None or group == own_group or group in done_groups:
            continue
        # Read again right before: a recycled pid is never ended on a stale scan line.
        if reads.argv_of(proc.pid) != command or not _alive(proc):
            continue
        members, whole = _worker_tree(proc, group, own_group, mine)
        if whole:
            done_groups.add(group)
        worker = Worker(proc.pid, root, group if whole else 0)
        processes.terminate(members, WORKER_WAIT, max(kill_wait, WORKER_WAIT), {})
        (survived if any(_alive(m) for m in members) else reaped).append(worker)
    if not reaped and not survived:
        return None
    return RemoteJobsResult(tuple(reaped), tuple(survived))


def _worker_tree(
    worker: Proc, group: int, own_group: int | None, mine: set[int]
) -> tuple[list[Proc], bool]:
    """What ending `worker` ends: its whole process group when the group's leader is itself a
    worker (firstmate starts a worker tree in its own group), else the worker alone; never a
    tmux process, an agent or fm's ancestry. Whether the group is ended whole."""
    if group in (0, 1) or group == own_group:
        return [worker], False
    leader = reads.argv_of(group) or ""
    if "fm-remote-job-worker.sh" not in leader:
        return [worker], False
    members = []
    for proc in processes.scan().procs.values():
        if proc.zombie or proc.pid in mine or reads.process_group(proc.pid) != group:
            continue
        if is_tmux(proc.name, proc.argv0) or classify(proc.name, proc.argv0) == ProcessClass.AGENT:
            continue
        members.append(proc)
    return members or [worker], True
