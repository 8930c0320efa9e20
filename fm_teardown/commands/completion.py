"""Shell completion (spec §11): the static scripts, installing and showing them, and the
one answer those scripts ask `fm` for.

The scripts live in `completions/` (`fm.bash`, `_fm` for zsh, `fm.fish`). They answer
subcommands, options, runbook names and task ids in the shell itself — task ids by listing
`<state dir>/*.meta`, so `fm teardown <TAB>` starts no Python. Two answers ask `fm`:
`--discard-live-owner`'s value asks `fm __complete owners [--state-dir DIR] TASK`
(`live_owners` below), since telling which owners of a slot are live needs the whole
observation; `fm restore <TAB>` asks `fm __complete saves [--state-dir DIR]` (`saved_tasks`),
since the saves are refs in the projects' repositories, not records.

Only the standard library is imported here; the pipeline is imported inside `live_owners`,
the restore command inside `saved_tasks`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = [
    "RUNBOOKS",
    "SCRIPT_FILES",
    "SHELLS",
    "CompletionError",
    "answers",
    "install",
    "live_owners",
    "owner_request",
    "print_answers",
    "saved_tasks",
    "script",
    "script_path",
    "shell_of",
    "task_ids",
]

# The runbooks `fm runbook NAME` prints (spec §11). The completion scripts carry the same
# list (one place in each; a test compares them), since they must not start Python for it.
RUNBOOKS: tuple[str, ...] = (
    "live-owner",
    "stale-slot",
    "unlanded",
    "unsafe",
    "failed",
    "invalid",
    "git-lock",
    "mass-cleanup",
    "plan-changed",
    "agents",
)

SHELLS: tuple[str, ...] = ("bash", "zsh", "fish")

# The script of each shell, by its file name in `completions/`.
SCRIPT_FILES: dict[str, str] = {"bash": "fm.bash", "zsh": "_fm", "fish": "fm.fish"}

# The same rule as records.task_id_problem, without importing the records module.
_TASK_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")

_ZSHRC_LINES = ("fpath=(~/.zfunc $fpath)", "autoload -Uz compinit && compinit")


class CompletionError(Exception):
    """A request `--install-completion`/`--show-completion` cannot satisfy; `code` is the exit
    code (2: the shell was not named or is not supported; 1: the script could not be written)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- the answers


def live_owners(state_dir: str | None, task: str) -> list[str]:
    """The ids of the live owners of TASK's slot, as `--discard-live-owner` takes them; [] on
    any error (completion never fails loudly)."""
    try:
        from fm_teardown.decide.ownership import owners_of
        from fm_teardown.model import settings
        from fm_teardown.observe.observation import observe
        from fm_teardown.pipeline.stages import load

        s = settings.load(state_dir or None)
        fleet = load(s, task)
        return [o.id for o in owners_of(task, fleet, observe(s, fleet)) if o.live]
    except Exception:
        return []


def task_ids(state_dir: str | None) -> list[str]:
    """The task ids of the state dir (the `.meta` names that are valid ids), sorted; what the
    shell scripts list themselves. Used by typer's own completion path (`_FM_COMPLETE`)."""
    try:
        from fm_teardown.model import settings

        names = os.listdir(settings.load(state_dir or None).state_dir)
    except Exception:
        return []
    ids = (n[: -len(".meta")] for n in names if n.endswith(".meta"))
    return sorted(i for i in ids if _TASK_ID.fullmatch(i))


def owner_request(args: Sequence[str]) -> tuple[str | None, str | None]:
    """`[--state-dir DIR | --state-dir=DIR] TASK ...` → (DIR or None, the first TASK or None).

    The arguments of `fm __complete owners`; the last --state-dir wins, as on the real line.
    """
    state_dir: str | None = None
    task: str | None = None
    it = iter(args)
    for arg in it:
        if arg == "--state-dir":
            state_dir = next(it, None) or None
        elif arg.startswith("--state-dir="):
            state_dir = arg.partition("=")[2] or None
        elif arg == "--":
            task = task or next(it, None)
        elif not arg.startswith("-") and task is None:
            task = arg
    return state_dir, task


def answers(what: str, args: Sequence[str]) -> list[str]:
    """What `fm __complete WHAT ARGS...` prints, one per line. Unknown WHAT: nothing."""
    if what == "owners":
        state_dir, task = owner_request(args)
        return live_owners(state_dir, task) if task else []
    if what == "saves":
        state_dir, _ = owner_request(args)
        return saved_tasks(state_dir)
    return []


def saved_tasks(state_dir: str | None) -> list[str]:
    """The task ids `fm restore` has saves of (`commands/restore.py` lists them: the refs
    under refs/fm/discarded/ in the projects the journal and the records name); [] on any
    error."""
    try:
        from fm_teardown.commands.restore import saved_tasks as listed
        from fm_teardown.model import settings

        return listed(settings.load(state_dir or None))
    except Exception:
        return []


def print_answers(what: str, args: Sequence[str]) -> None:
    """Print the answers; never raises (a completion must not print a traceback)."""
    try:
        lines = answers(what, args)
        if lines:
            sys.stdout.write("".join(f"{line}\n" for line in lines))
            sys.stdout.flush()
    except Exception:
        pass


# --------------------------------------------------------------------------- the scripts


def script_path(shell: str) -> Path:
    """The static script of `shell`: in the package (a wheel install carries them in
    `fm_teardown/completions/`), else in the source checkout's `completions/`."""
    name = SCRIPT_FILES[shell]
    here = Path(__file__).resolve().parent.parent
    for directory in (here / "completions", here.parent / "completions"):
        candidate = directory / name
        if candidate.is_file():
            return candidate
    raise CompletionError(f"the {shell} completion script {name} is missing from this install", 1)


def script(shell: str) -> str:
    try:
        return script_path(shell).read_text(encoding="utf-8")
    except OSError as exc:
        raise CompletionError(f"cannot read the {shell} completion script: {exc}", 1) from None


def shell_of(
    name: str | None, env: Mapping[str, str] | None = None, option: str = "--install-completion"
) -> str:
    """The shell named on the command line (`--install-completion zsh`), else `$SHELL`'s."""
    env = os.environ if env is None else env
    if name:
        if name not in SHELLS:
            raise CompletionError(
                f"unsupported shell {name!r}: completion is for {', '.join(SHELLS)}", 2
            )
        return name
    login = os.path.basename(env.get("SHELL", "").rstrip("/"))
    if login in SHELLS:
        return login
    shown = env.get("SHELL") or "unset"
    raise CompletionError(
        f"cannot tell the shell from $SHELL ({shown}); name it: fm {option} {'|'.join(SHELLS)}",
        2,
    )


def _base(env: Mapping[str, str], var: str, default: Path) -> Path:
    """An XDG base directory: the variable when it holds an absolute path, else the default."""
    value = env.get(var, "")
    return Path(value) if os.path.isabs(value) else default


def _target_of(shell: str, env: Mapping[str, str]) -> Path:
    """Where `--install-completion` puts the script of `shell` for this user."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    if shell == "bash":
        # bash-completion's lazy loader looks here for a command's completion, by its name.
        user_dir = env.get("BASH_COMPLETION_USER_DIR", "")
        if os.path.isabs(user_dir):
            return Path(user_dir) / "completions" / "fm"
        data = _base(env, "XDG_DATA_HOME", home / ".local" / "share")
        return data / "bash-completion" / "completions" / "fm"
    if shell == "zsh":
        return home / ".zfunc" / "_fm"
    return _base(env, "XDG_CONFIG_HOME", home / ".config") / "fish" / "completions" / "fm.fish"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.fm-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _zshrc_note(env: Mapping[str, str]) -> list[str]:
    """Put ~/.zfunc on zsh's fpath in ~/.zshrc unless it already is there; say what was done."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    zdotdir = env.get("ZDOTDIR", "")
    zshrc = (Path(zdotdir) if os.path.isabs(zdotdir) else home) / ".zshrc"
    try:
        current = zshrc.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        current = ""
    if re.search(r"^[^#\n]*fpath.*\.zfunc", current, re.MULTILINE):
        return [f"{zshrc} already puts ~/.zfunc on fpath"]
    block = "".join(f"{line}\n" for line in _ZSHRC_LINES)
    lead = "" if current == "" or current.endswith("\n") else "\n"
    with zshrc.open("a", encoding="utf-8") as f:
        f.write(f"{lead}# added by `fm --install-completion`: fm's completion is in ~/.zfunc\n")
        f.write(block)
    return [f"added to {zshrc}:", *(f"  {line}" for line in _ZSHRC_LINES)]


def install(name: str | None, env: Mapping[str, str] | None = None) -> list[str]:
    """Install the static script of the shell for this user; the lines saying what was done."""
    env = os.environ if env is None else env
    shell = shell_of(name, env)
    text = script(shell)
    target = _target_of(shell, env)
    try:
        _write(target, text)
        lines = [f"{shell} completion installed in {target}"]
        if shell == "zsh":
            lines += _zshrc_note(env)
    except OSError as exc:
        raise CompletionError(f"cannot install the {shell} completion: {exc}", 1) from None
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    legacy = home / ".bash_completions" / "fm.sh"
    if shell == "bash" and legacy.exists():
        lines.append(
            f"note: {legacy} (an older fm's completion) is still sourced by ~/.bashrc; "
            "remove it and that line to use this one"
        )
    if shell == "bash":
        lines.append(
            "bash loads it in new shells through the bash-completion package; "
            f"without that package, add `source {target}` to ~/.bashrc"
        )
    else:
        lines.append("it takes effect in new shells")
    return lines
