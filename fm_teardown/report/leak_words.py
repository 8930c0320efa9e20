"""The words of the leaks a teardown ends beyond the slot (`model/leaks.py`): TASK's browser
stack and the remote-job sweep, as a step's result, a warning and firstmate's drop-in's
progress lines. Written once, here; `step_words.py` and `firstmate_view.py` call them."""

from __future__ import annotations

from fm_teardown.model.leaks import BrowserResult, BrowserWhat, Ended, RemoteJobsResult, Worker

__all__ = [
    "browser_left_text",
    "browser_lines",
    "browser_text",
    "remote_jobs_lines",
    "remote_jobs_text",
    "workers_left_text",
]


def _ended(procs: tuple[Ended, ...]) -> str:
    return ", ".join(f"{p.name or '?'} ({p.pid})" for p in procs)


def _up(seconds: float) -> str:
    s = int(seconds)
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60}m"
    return f"{s}s"


def browser_text(r: BrowserResult) -> str:
    """The browser step's detail."""
    pid = f"bridge pid {r.pid}"
    match r.what:
        case BrowserWhat.CLOSED if r.by_tool:
            return f"closed the browser stack ({pid}, up {_up(r.age)}): chrome-devtools-axi stop"
        case BrowserWhat.CLOSED:
            kept = f"; left {_ended(r.skipped)}: no browser-stack marker" if r.skipped else ""
            return f"ended the browser stack ({pid}, up {_up(r.age)}): {_ended(r.ended)}{kept}"
        case BrowserWhat.NOT_RUNNING:
            return f"the registry's {pid} no longer runs: no browser stack to end"
        case BrowserWhat.SURVIVED:
            return f"the bridge (pid {r.pid}) still runs after SIGTERM and SIGKILL; left"
    return f"left as it is: {_refusal(r)}"


def _refusal(r: BrowserResult) -> str:
    match r.what:
        case BrowserWhat.UNREADABLE:
            return f"its registry record {r.other}"
        case BrowserWhat.NOT_BRIDGE:
            return f"pid {r.pid} runs, but its argv names no chrome-devtools-axi bridge"
        case BrowserWhat.RECYCLED:
            return f"pid {r.pid} started after the registry record was written (a reused pid)"
        case BrowserWhat.SHARED:
            return f"another session's registry record names pid {r.pid} too"
        case BrowserWhat.OTHER_SESSION:
            return f"pid {r.pid}'s environment names another session ({r.other})"
    return f"pid {r.pid}"


def browser_left_text(r: BrowserResult) -> str:
    """The warning when TASK's browser session was left."""
    if r.what == BrowserWhat.SURVIVED:
        return (
            f"browser session {r.session}: its bridge (pid {r.pid}) survived; left for manual "
            "inspection"
        )
    return f"browser session {r.session} left as it is: {_refusal(r)}"


def _worker(w: Worker) -> str:
    group = f", process group {w.group}" if w.group else ""
    return f"{w.pid} (pruned code root {w.root}{group})"


def remote_jobs_text(r: RemoteJobsResult) -> str:
    """The remote-jobs step's detail."""
    if r.error:
        return f"could not look for abandoned remote-job workers: {r.error}"
    parts = []
    if r.reaped:
        parts.append("ended abandoned remote-job workers " + ", ".join(map(_worker, r.reaped)))
    if r.survived:
        parts.append("still running: " + ", ".join(map(_worker, r.survived)))
    return "; ".join(parts)


def workers_left_text(r: RemoteJobsResult) -> str:
    if r.error:
        return f"abandoned remote-job workers were not looked for: {r.error}"
    return "abandoned remote-job workers survived ending: " + ", ".join(map(_worker, r.survived))


def browser_lines(r: BrowserResult) -> list[str]:
    """firstmate's reaper's own progress lines (`browser reap: …`), for the drop-in; a stack
    left alone is said by the run's warning."""
    if r.what not in (BrowserWhat.CLOSED, BrowserWhat.SURVIVED):
        return []
    lines = [f"browser reap: closing browser stack {r.session} (pid {r.pid}, up {int(r.age)}s)"]
    if not r.by_tool:
        lines.append(f"browser reap: {r.session} did not stop cleanly; signalling its process tree")
    if r.what == BrowserWhat.CLOSED:
        lines.append(f"browser reap: {r.session} closed")
    return lines


def remote_jobs_lines(r: RemoteJobsResult) -> list[str]:
    """firstmate's sweep's own lines for the workers it ended, for the drop-in; survivors are
    said by the run's warning."""
    return [
        f"reaped abandoned remote job worker {w.pid} (pruned code root {w.root})" for w in r.reaped
    ]
