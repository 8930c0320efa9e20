"""Where state lives and how the tool reaches tmux and the pool (spec §2).

Read once from the environment and the flags; everything downstream takes a Settings value,
so tests never need to patch os.environ behind the code's back.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path

from fm_teardown.model.errors import ErrorCode, invalid
from fm_teardown.model.own_files import NOWHERE, WorkPlaces
from fm_teardown.model.process_kind import bad_agent_name, configure
from fm_teardown.model.values import value

__all__ = ["RunMemory", "Settings", "agent_names", "load"]


class RunMemory:
    """What one run remembers between its looks at the world: a `Settings` is made once per
    command run (`load`), and this with it, so a second run in the same process (a test, a
    library caller) starts afresh instead of inheriting the first one's findings. Compared and
    hashed by identity: two runs are never the same run."""

    __slots__ = ("held_sockets",)

    def __init__(self) -> None:
        # The sockets whose tmux server held some of the records' windows earlier in this
        # run: their going later is the run's own doing (`observe/servers.py`).
        self.held_sockets: set[str] = set()

    def __repr__(self) -> str:
        return f"RunMemory(held_sockets={sorted(self.held_sockets)!r})"


@value
class Settings:
    fm_home: Path
    state_dir: Path
    data_dir: Path
    home: str | None
    tmux_socket_path: str | None
    tmux_socket_name: str | None
    treehouse_bin: str | None
    # `gh` for the merged-PR check (FM_GH_BIN, else `gh` on PATH; absent: the check is skipped).
    gh_bin: str | None = None
    # Seconds a tmux listing may take before the inventory counts as unreadable.
    tmux_timeout: float = 10.0
    # Seconds the pool return may take (it terminates processes and resets the tree).
    treehouse_timeout: float = 120.0
    # Grace between SIGTERM and SIGKILL, and the wait after SIGKILL.
    term_grace: float = 3.0
    quit_grace: float = 5.0  # wait for an agent asked to quit by its keys, before any signal
    # The longest wait, once the agent asked to quit has descendants (its exit hooks: Claude
    # Code's SessionEnd, a notes export), for the agent and all of them to be gone.
    quit_hook_grace: float = 30.0
    kill_wait: float = 3.0
    # Bounded wait for `git fetch` of the default branch (issue 4: a failure is inconclusive).
    fetch_timeout: float = 30.0
    lock_retries: int = 3
    lock_retry_wait: float = 1.0
    stale_lock_age: float = 30.0
    # How long a teardown waits for a lock held by another process: another teardown's slot
    # lock, firstmate's record lock (FM_LOCK_WAIT_SECS).
    lock_timeout: float = 300.0
    # firstmate's duties (spec §10): the config dir (FM_CONFIG_OVERRIDE, else
    # $FM_HOME/config: the backlog backend), grok's home (GROK_HOME, else $HOME/.grok), and
    # the 0.1 s tries for the cost-attribution lock (FM_ATTRIBUTION_LOCK_ATTEMPTS).
    config_dir: Path | None = None
    grok_home: str | None = None
    attribution_lock_attempts: int = 50
    # The agents fm knows beyond its own list (FM_AGENT_NAMES: names, scripts or packages;
    # model/process_kind.py holds the list, `fm runbook agents` prints it).
    agent_names: tuple[str, ...] = ()
    # Where fm's own files never go (`model/own_files.py`), as this run found the fleet: set
    # by the pipeline once it has looked, for the steps that write them; none before that.
    places: WorkPlaces = NOWHERE
    # What this run remembers between its looks at the world (`RunMemory`).
    run: RunMemory = field(default_factory=RunMemory)
    # firstmate's agy harness: its global config root (FM_AGY_CONFIG_HOME, else
    # $HOME/.gemini/config), where its turn-end plugin keeps one auth entry per task.
    agy_config_home: str | None = None
    # firstmate's code root (FM_ROOT_OVERRIDE, else FM_HOME): its path names the home's
    # browser sessions (`fm-<home tag>-<id>`); chrome-devtools-axi's session registry
    # (FM_BROWSER_SESSIONS_ROOT, else $HOME/.chrome-devtools-axi/sessions); the wait between
    # SIGTERM and SIGKILL when a task's browser stack is ended by signal
    # (FM_BROWSER_REAP_GRACE_SECS).
    fm_root: str | None = None
    browser_sessions_root: str | None = None
    browser_reap_grace: float = 2.0
    # The operator's `no-mistakes` on PATH (absolute), None when there is none: a ship task's
    # own run parked at a gate is aborted before its teardown (spec §15.5b), each call bounded
    # by FM_TEARDOWN_NM_TIMEOUT seconds.
    no_mistakes_bin: str | None = None
    nm_timeout: float = 10.0


# The longest wait or timeout a knob may set: a week. Longer ones are no setting but a typo,
# and the clock calls fm's waits end in (a poll in milliseconds, a thread's join) overflow
# past a few weeks: every limit stays one fm can keep.
MAX_SECONDS = 7 * 86400.0


def _shown(raw: str) -> str:
    """A value as an error line quotes it: one short line, whatever was given."""
    text = raw if raw.isprintable() else repr(raw)[1:-1]
    return repr(text if len(text) <= 40 else text[:39] + "…")


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        raise invalid(
            f"{name} must be a number of seconds, got {_shown(raw)}", code=ErrorCode.BAD_SETTING
        ) from None
    if not 0 <= value <= MAX_SECONDS:  # nan and inf fail this too
        raise invalid(
            f"{name} must be a number of seconds from 0 to {MAX_SECONDS:.0f} (a week), "
            f"got {_shown(raw)}",
            code=ErrorCode.BAD_SETTING,
        )
    return value


def _lenient_float(env: Mapping[str, str], names: tuple[str, ...], default: float) -> float:
    """The first non-empty of `names` as seconds; an unusable value falls back to `default`.

    The lock-retry variables are shared with the shell tool, which warns and uses its default
    on a bad value rather than refusing; runbooks set them, so we keep that leniency.
    """
    for name in names:
        raw = env.get(name, "")
        if raw == "":
            continue
        try:
            value = float(raw)
        except ValueError:
            return default
        return value if 0 <= value < 3600 else default
    return default


def _lenient_int(env: Mapping[str, str], name: str, default: int) -> int:
    """A small count (0 to 100) in plain ASCII digits; anything else falls back to `default`
    (never read as a number: `int()` takes other scripts' digits and refuses long strings)."""
    raw = env.get(name, "")
    ok = raw.isascii() and raw.isdigit() and len(raw) <= 3
    return int(raw) if ok and int(raw) <= 100 else default


def _nm_timeout(env: Mapping[str, str]) -> float:
    """FM_TEARDOWN_NM_TIMEOUT: whole seconds in ASCII digits, as firstmate's script reads it
    (anything else is its default, 10). A value fm cannot keep as a limit (0, which would
    mean none, or more than an hour) is the default too: every call stays bounded."""
    raw = env.get("FM_TEARDOWN_NM_TIMEOUT", "")
    ok = raw.isascii() and raw.isdigit() and len(raw) <= 4 and 0 < int(raw) <= 3600
    return float(raw) if ok else Settings.nm_timeout


def _on_path(name: str, env: Mapping[str, str]) -> str | None:
    """`name` as PATH finds it, absolute (a relative PATH entry is read from here, never from
    the directory a command later runs in), or None."""
    found = shutil.which(name, path=env.get("PATH"))
    return os.path.abspath(found) if found else None


def agent_names(env: Mapping[str, str]) -> tuple[str, ...]:
    """FM_AGENT_NAMES: comma-separated names (spaces around each ignored, empty ones
    skipped), each a process or script name or a package (`@scope/name` for npm)."""
    names = tuple(n.strip() for n in env.get("FM_AGENT_NAMES", "").split(",") if n.strip())
    for name in names:
        if bad_agent_name(name):
            raise invalid(
                f"FM_AGENT_NAMES: {name!r} is not a name: give process, script or package "
                "names (letters, digits and ._+-, or @scope/name), separated by commas",
                code=ErrorCode.BAD_AGENT_NAME,
            )
    return names


def load(state_dir_flag: str | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """The settings of this run, from `env` (else the process's environment) and the flags.
    The agents fm knows are set here for the whole run (`process_kind.configure`): the list
    is the built-in one plus FM_AGENT_NAMES."""
    env = os.environ if env is None else env
    names = agent_names(env)
    configure(names)
    # FM_HOME falls back to FM_ROOT_OVERRIDE (firstmate's root) before the current directory.
    fm_home = Path(
        os.path.abspath(env.get("FM_HOME") or env.get("FM_ROOT_OVERRIDE") or os.getcwd())
    )
    if state_dir_flag:
        state_dir = Path(os.path.abspath(state_dir_flag))
    elif env.get("FM_STATE_OVERRIDE"):
        state_dir = Path(os.path.abspath(env["FM_STATE_OVERRIDE"]))
    else:
        state_dir = fm_home / "state"
    data_dir = (
        Path(os.path.abspath(env["FM_DATA_OVERRIDE"]))
        if env.get("FM_DATA_OVERRIDE")
        else fm_home / "data"
    )
    treehouse = env.get("FM_TREEHOUSE_BIN") or shutil.which("treehouse", path=env.get("PATH"))
    return Settings(
        fm_home=fm_home,
        state_dir=state_dir,
        data_dir=data_dir,
        home=env.get("HOME") or None,
        tmux_socket_path=env.get("FM_TMUX_SOCKET") or None,
        tmux_socket_name=env.get("FM_TMUX_SOCKET_NAME") or None,
        treehouse_bin=treehouse or None,
        gh_bin=env.get("FM_GH_BIN") or shutil.which("gh", path=env.get("PATH")) or None,
        # The defaults live once, on the dataclass.
        tmux_timeout=_float(env, "FM_TMUX_TIMEOUT_SECS", Settings.tmux_timeout),
        treehouse_timeout=_float(env, "FM_TREEHOUSE_TIMEOUT_SECS", Settings.treehouse_timeout),
        term_grace=_float(env, "FM_TERM_GRACE_SECS", Settings.term_grace),
        quit_grace=_float(env, "FM_QUIT_GRACE_SECS", Settings.quit_grace),
        quit_hook_grace=_float(env, "FM_QUIT_HOOK_GRACE_SECS", Settings.quit_hook_grace),
        kill_wait=_float(env, "FM_KILL_WAIT_SECS", Settings.kill_wait),
        fetch_timeout=_float(env, "FM_GIT_FETCH_TIMEOUT_SECS", Settings.fetch_timeout),
        lock_timeout=_float(env, "FM_LOCK_WAIT_SECS", Settings.lock_timeout),
        lock_retries=_lenient_int(env, "FM_TREEHOUSE_RETURN_LOCK_RETRIES", Settings.lock_retries),
        lock_retry_wait=_lenient_float(
            env,
            ("FM_TREEHOUSE_RETURN_LOCK_RETRY_WAIT_SECS", "FM_STALE_WORKTREE_LOCK_RETRY_WAIT_SECS"),
            Settings.lock_retry_wait,
        ),
        stale_lock_age=_lenient_float(
            env, ("FM_STALE_WORKTREE_LOCK_AGE_SECS",), Settings.stale_lock_age
        ),
        config_dir=Path(os.path.abspath(env["FM_CONFIG_OVERRIDE"]))
        if env.get("FM_CONFIG_OVERRIDE")
        else fm_home / "config",
        grok_home=env.get("GROK_HOME")
        or (os.path.join(env["HOME"], ".grok") if env.get("HOME") else None),
        attribution_lock_attempts=_lenient_int(
            env, "FM_ATTRIBUTION_LOCK_ATTEMPTS", Settings.attribution_lock_attempts
        ),
        agent_names=names,
        agy_config_home=env.get("FM_AGY_CONFIG_HOME")
        or (os.path.join(env["HOME"], ".gemini", "config") if env.get("HOME") else None),
        fm_root=os.path.abspath(env["FM_ROOT_OVERRIDE"])
        if env.get("FM_ROOT_OVERRIDE")
        else str(fm_home),
        browser_sessions_root=env.get("FM_BROWSER_SESSIONS_ROOT")
        or (
            os.path.join(env["HOME"], ".chrome-devtools-axi", "sessions")
            if env.get("HOME")
            else None
        ),
        browser_reap_grace=_lenient_float(
            env, ("FM_BROWSER_REAP_GRACE_SECS",), Settings.browser_reap_grace
        ),
        no_mistakes_bin=_on_path("no-mistakes", env),
        nm_timeout=_nm_timeout(env),
    )
