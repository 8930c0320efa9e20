"""Shell completion (spec §11): the static scripts in completions/ driven in real bash, zsh
and fish (each in a tmux pane on a private socket), the answers they compute without Python,
`fm __complete owners`, and `fm --install-completion` / `--show-completion`.

The panes get a HOME, SHELL and XDG dirs of their own under tmp_path, and a bin dir first on
PATH whose `fm`, `python3` and `python` only log their argv: task-id completion must log
nothing, `--discard-live-owner` exactly one `fm __complete owners ...` per Tab.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fm_teardown.commands import completion
from tests.fleet import Tmux, wait_for

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "completions"
SHELLS = ("bash", "zsh", "fish")
PROMPT = "PROMPT>"
COMMANDS = {"bash": "bash --norc --noprofile", "zsh": "zsh -f", "fish": "fish --no-config"}
OWNERS = ("bravo", "lease:ci-bot", "pid:1234")
SAVES = ("saved-one", "saved-two")

# A stand-in for `fm` (and for python): logs its argv, one call per line, fields ended by `|`;
# answers `fm __complete owners ...` with fixed owners and `fm __complete saves` with tasks.
STUB = """#!/bin/sh
{{ printf '%s|' "$(basename "$0")" "$@"; echo; }} >> {log}
if [ "$1" = __complete ] && [ "$2" = owners ]; then
  printf '%s\\n' {owners}
  exit 0
fi
if [ "$1" = __complete ] && [ "$2" = saves ]; then
  printf '%s\\n' {saves}
  exit 0
fi
exit 1
"""


def need(program: str) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")


# --------------------------------------------------------------------------- fixtures


def records(state: Path, *ids: str) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    for task in ids:
        (state / task).write_text("")
    return state


class World:
    """tmp_path laid out for a shell: a HOME, XDG dirs, a fleet home, the logging stubs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.fm_home = root / "fleet"
        self.bin = root / "bin"
        self.log = root / "calls.log"
        for d in (self.home, self.fm_home, self.bin):
            d.mkdir()
        stub = STUB.format(
            log=shlex.quote(str(self.log)), owners=" ".join(OWNERS), saves=" ".join(SAVES)
        )
        for name in ("fm", "python3", "python"):
            (self.bin / name).write_text(stub)
            (self.bin / name).chmod(0o755)
        self.env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "TERM": "xterm",
            "LANG": "C.UTF-8",
        }

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [line.split("|")[:-1] for line in self.log.read_text().splitlines()]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


class Pane:
    """One interactive shell with fm's completion loaded, in a pane of a private tmux server."""

    def __init__(
        self,
        shell: str,
        world: World,
        env: dict[str, str],
        cwd: Path,
        command: str | None = None,
        setup: str | None = None,
    ) -> None:
        need("tmux")
        need(shell)
        self.shell = shell
        self.tmux = Tmux(world.home)
        self.tmux.env = {**world.env, "SHELL": shutil.which(shell) or shell, **env}
        rc = world.root / f"setup.{shell}"
        rc.write_text(self._setup(shell, world) if setup is None else setup)
        try:
            self.tmux.run(
                "new-session", "-d", "-s", "t", "-x", "250", "-y", "50", "-c", str(cwd),
                command or COMMANDS[shell],
            )  # fmt: skip
            self.keys("source " + shlex.quote(str(rc)), "Enter")
            self.wait(lambda s: s.strip().splitlines()[-1:] == [PROMPT], "the prompt")
            self.reset()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _setup(shell: str, world: World) -> str:
        if shell == "bash":
            return (
                f"PS1='{PROMPT} '\n"
                "bind 'set show-all-if-ambiguous on'\n"
                "bind 'set bell-style none'\n"
                f"source {shlex.quote(str(SCRIPTS / 'fm.bash'))}\n"
            )
        if shell == "zsh":
            fdir = world.root / "zfunc"
            fdir.mkdir()
            shutil.copy(SCRIPTS / "_fm", fdir / "_fm")
            return (
                f"PROMPT='{PROMPT} '\nRPROMPT=''\n"
                "unsetopt list_ambiguous  # list the candidates on the first Tab\n"
                f"fpath=({shlex.quote(str(fdir))} $fpath)\n"
                f"autoload -Uz compinit && compinit -u -d {shlex.quote(str(world.root / 'zcd'))}\n"
            )
        return (
            f"function fish_prompt; printf '{PROMPT} '; end\n"
            "function fish_right_prompt; end\n"
            "set -g fish_greeting ''\n"
            "set -g fish_autosuggestion_enabled 0\n"
            f"source {shlex.quote(str(SCRIPTS / 'fm.fish'))}\n"
        )

    def keys(self, text: str, *special: str) -> None:
        if text:
            self.tmux.run("send-keys", "-t", "t", "-l", text)
        if special:
            self.tmux.run("send-keys", "-t", "t", *special)

    def screen(self) -> str:
        return self.tmux.run("capture-pane", "-p", "-t", "t").stdout

    def wait(self, cond: Callable[[str], bool], what: str, timeout: float = 10.0) -> str:
        seen = [""]

        def check() -> bool:
            seen[0] = self.screen()
            return cond(seen[0])

        try:
            wait_for(check, timeout=timeout, what=what)
        except AssertionError:
            raise AssertionError(
                f"{self.shell}: timed out waiting for {what}:\n{seen[0]}"
            ) from None
        return seen[0]

    def reset(self) -> None:
        """An empty line on a cleared screen, before the next thing is typed."""
        self.keys("", "C-u", "C-l")
        self.wait(lambda s: s.strip() == PROMPT, "a cleared screen")

    def line(self, screen: str) -> str:
        """The command line being edited: the last line that starts with the prompt."""
        lines = [ln for ln in screen.splitlines() if ln.startswith(PROMPT)]
        return " ".join(lines[-1][len(PROMPT) :].split()) if lines else ""

    def complete(
        self,
        typed: str,
        want_line: str | None = None,
        shown: tuple[str, ...] = (),
        after: str = "",
    ) -> str:
        """Type `typed`, press Tab once, wait until the line reads `want_line` (blanks
        squeezed) and every word of `shown` is on the screen (in the list of candidates).
        `after`: more text on the line, after the cursor."""
        self.reset()
        self.keys(typed + after)
        self.keys("", *(["Left"] * len(after)), "Tab")

        def done(screen: str) -> bool:
            words = set(screen.split())
            if want_line is not None and self.line(screen) != want_line:
                return False
            return all(w in words for w in shown)

        return self.wait(done, f"{typed!r}<TAB> → {want_line!r} {shown}")

    def complete_nothing(self, typed: str) -> None:
        """Type `typed` and Tab, then a marker: once the marker is on the line the Tab has been
        handled, and it must have added nothing."""
        self.reset()
        self.keys(typed, "Tab")
        self.keys("Z")
        self.wait(lambda s: self.line(s).endswith("Z"), f"{typed!r}<TAB> handled")
        assert self.line(self.screen()) == f"{typed}Z".strip()

    def close(self) -> None:
        self.tmux.kill()


@pytest.fixture
def pane(world: World) -> Iterator[Callable[..., Pane]]:
    panes: list[Pane] = []

    def start(
        shell: str, env: dict[str, str] | None = None, cwd: Path | None = None, **kw: str
    ) -> Pane:
        p = Pane(shell, world, env or {}, cwd or world.root, **kw)
        panes.append(p)
        return p

    yield start
    for p in panes:
        p.close()


# --------------------------------------------------------------------------- the runbook list


RUNBOOK_LISTS = {
    "bash": r"^_fm_runbooks=\(([^)]*)\)$",
    "zsh": r"^\s*local -a runbooks=\(([^)]*)\)$",
    "fish": r"^set -g __fm_runbooks (.*)$",
}


@pytest.mark.parametrize("shell", SHELLS)
def test_each_script_lists_the_runbooks_once_and_as_python_does(shell: str) -> None:
    text = (SCRIPTS / completion.SCRIPT_FILES[shell]).read_text()
    found = re.findall(RUNBOOK_LISTS[shell], text, re.MULTILINE)
    assert len(found) == 1, f"{shell}: the runbook list must be in one place"
    assert tuple(found[0].split()) == completion.RUNBOOKS
    # ... and nowhere else: no other line of the script carries the list.
    others = [ln for ln in text.splitlines() if "mass-cleanup" in ln]
    assert len(others) == 1


def test_the_scripts_are_the_three_files_and_no_other() -> None:
    assert sorted(p.name for p in SCRIPTS.iterdir() if p.name != "README.md") == sorted(
        completion.SCRIPT_FILES.values()
    )


# --------------------------------------------------------------------------- real shells


@pytest.mark.parametrize("shell", SHELLS)
def test_task_ids_from_fm_home_state(shell: str, world: World, pane: Callable[..., Pane]) -> None:
    records(
        world.fm_home / "state",
        *("alpha.meta", "alps.meta", "beta.meta", "alpha.status", ".hidden.meta", "bad id.meta"),
    )
    p = pane(shell, {"FM_HOME": str(world.fm_home)})
    p.complete("fm teardown be", "fm teardown beta")
    screen = p.complete("fm teardown al", shown=("alpha", "alps"))
    assert "hidden" not in screen and "alpha.status" not in screen and "bad" not in screen
    # Several ids may be given: every positional word completes, without the ids already there.
    p.complete("fm teardown alpha al", "fm teardown alpha alps")
    assert world.calls() == [], "task-id completion started a process"


@pytest.mark.parametrize("shell", SHELLS)
def test_restore_offers_the_tasks_that_have_saves(
    shell: str, world: World, pane: Callable[..., Pane]
) -> None:
    """Not the current records: a task torn down with --force has no record any more, and
    its saves are what `fm restore` brings back (`fm __complete saves`, one call per Tab)."""
    records(world.fm_home / "state", "beta.meta")
    p = pane(shell, {"FM_HOME": str(world.fm_home)})
    p.complete("fm restore saved-t", "fm restore saved-two")
    assert world.calls() == [["fm", "__complete", "saves"]]
    state = records(world.root / "sd", "x.meta")
    p.complete(
        f"fm restore --state-dir {state} saved-o", f"fm restore --state-dir {state} saved-one"
    )
    assert world.calls()[-1] == ["fm", "__complete", "saves", "--state-dir", str(state)]
    p.complete_nothing("fm restore be")


@pytest.mark.parametrize("shell", SHELLS)
def test_task_ids_from_fm_state_override(
    shell: str, world: World, pane: Callable[..., Pane]
) -> None:
    records(world.fm_home / "state", "oscar.meta")
    override = records(world.root / "override", "omega.meta")
    p = pane(shell, {"FM_HOME": str(world.fm_home), "FM_STATE_OVERRIDE": str(override)})
    p.complete("fm teardown o", "fm teardown omega")
    assert world.calls() == []


@pytest.mark.parametrize("shell", SHELLS)
def test_the_state_dir_on_the_line_wins(
    shell: str, world: World, pane: Callable[..., Pane]
) -> None:
    override = records(world.root / "override", "omega.meta")
    records(world.root / "line" / "state", "orca.meta")
    p = pane(shell, {"FM_STATE_OVERRIDE": str(override)})
    line = world.root / "line" / "state"
    p.complete(f"fm teardown --state-dir {line} o", f"fm teardown --state-dir {line} orca")
    p.complete(f"fm teardown --state-dir={line} o", f"fm teardown --state-dir={line} orca")
    # Relative to the shell's cwd; and after the cursor too (fish hands a completion only the
    # line up to the cursor).
    p.complete("fm teardown --state-dir line/state o", "fm teardown --state-dir line/state orca")
    if shell != "fish":
        after = " --state-dir line/state"
        p.complete("fm teardown o", f"fm teardown orca{after}", after=after)
    assert world.calls() == []


@pytest.mark.parametrize("shell", SHELLS)
def test_subcommands_options_and_runbooks(
    shell: str, world: World, pane: Callable[..., Pane]
) -> None:
    p = pane(shell)
    p.complete("fm tear", "fm teardown")
    p.complete("fm rest", "fm restore")
    p.complete("fm --show-c", "fm --show-completion")
    p.complete("fm runbook git", "fm runbook git-lock")
    p.complete("fm runbook mass", "fm runbook mass-cleanup")
    p.complete("fm teardown --dry", "fm teardown --dry-run")
    p.complete("fm teardown --lan", "fm teardown --landed")
    p.complete("fm teardown --no-j", "fm teardown --no-journal")
    p.complete(
        "fm teardown --expect-p", "fm teardown --expect-plan" + ("=" if shell == "zsh" else "")
    )
    # zsh offers an option that takes a value as `--opt=`.
    p.complete("fm restore --pro", "fm restore --project" + ("=" if shell == "zsh" else ""))
    p.complete("fm demo --k", "fm demo --keep")
    assert world.calls() == []


@pytest.mark.parametrize("shell", SHELLS)
def test_live_owners_come_from_fm_complete_owners(
    shell: str, world: World, pane: Callable[..., Pane]
) -> None:
    state = records(world.root / "sd", "alpha.meta", "zulu.meta")
    p = pane(shell, {"FM_HOME": str(world.fm_home)})
    want = ["fm", "__complete", "owners", "--state-dir", str(state), "alpha"]

    # `=` and `:` are in bash's COMP_WORDBREAKS: the owner must still complete whole.
    typed = f"fm teardown --state-dir {state} alpha zulu --force --discard-live-owner=lease:c"
    p.complete(typed, typed.replace("lease:c", "lease:ci-bot"))
    assert world.calls() == [want], "one call per Tab, with the line's first TASK and state dir"

    p.complete(
        f"fm teardown alpha --force --state-dir={state} --discard-live-owner p",
        f"fm teardown alpha --force --state-dir={state} --discard-live-owner pid:1234",
    )
    assert world.calls() == [want, want]

    p.complete("fm teardown alpha --discard-live-owner ", shown=OWNERS)
    assert world.calls()[-1] == ["fm", "__complete", "owners", "alpha"]
    assert len(world.calls()) == 3, "fish (and every shell) runs fm once per Tab"

    # No TASK on the line: nothing to ask.
    p.complete_nothing("fm teardown --discard-live-owner=")
    assert len(world.calls()) == 3


@pytest.mark.parametrize("shell", SHELLS)
def test_a_missing_state_dir_offers_nothing_and_prints_nothing(
    shell: str, world: World, pane: Callable[..., Pane]
) -> None:
    p = pane(shell, {"FM_HOME": str(world.root / "nowhere")})
    p.complete_nothing("fm teardown ")
    p.complete_nothing(f"fm teardown --state-dir {world.root / 'none'} a")
    assert p.screen().strip().splitlines() == [
        f"{PROMPT} fm teardown --state-dir {world.root / 'none'} aZ"
    ]
    assert world.calls() == []


# --------------------------------------------------------------------------- bash, driven directly


def bash_words(line: str) -> list[str]:
    """COMP_WORDS as bash builds them: split at blanks, then at `=`, `:` and `@`."""
    words = [piece for w in line.split() for piece in re.findall(r"[^=:@]+|[=:@]+", w)]
    return [*words, ""] if line.endswith(" ") or not line else words


def bash_complete(
    world: World, line: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    words = bash_words(line)
    script = (
        f"source {shlex.quote(str(SCRIPTS / 'fm.bash'))}; "
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
        f"COMP_CWORD={len(words) - 1}; COMP_LINE={shlex.quote(line)}; "
        "COMP_POINT=${#COMP_LINE}; _fm fm; "
        '((${#COMPREPLY[@]} == 0)) || printf "%s\\n" "${COMPREPLY[@]}"'
    )
    need("bash")
    return subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env={**world.env, **(env or {})},
        cwd=cwd or world.root,
        timeout=30,
        check=False,
    )


def replies(r: subprocess.CompletedProcess[str]) -> list[str]:
    return [w for w in r.stdout.split("\n") if w]


def test_bash_task_ids_start_no_python_and_no_fm(world: World) -> None:
    records(world.fm_home / "state", *(f"t{i:03}.meta" for i in range(50)))
    r = bash_complete(world, "fm teardown ", {"FM_HOME": str(world.fm_home)})
    assert replies(r) == [f"t{i:03}" for i in range(50)] and r.stderr == ""
    assert world.calls() == [], "the task-id path ran fm or python"


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({"FM_HOME": "fleet", "FM_ROOT_OVERRIDE": "root"}, ["home"]),
        ({"FM_ROOT_OVERRIDE": "root"}, ["root"]),
        ({}, ["cwd"]),
        ({"FM_HOME": "", "FM_STATE_OVERRIDE": ""}, ["cwd"]),
        ({"FM_STATE_OVERRIDE": "over", "FM_HOME": "fleet"}, ["over"]),
        ({"FM_HOME": "fleet", "_line": "--state-dir over"}, ["over"]),
    ],
)
def test_bash_state_dir_precedence(world: World, env: dict[str, str], want: list[str]) -> None:
    """The line's --state-dir, FM_STATE_OVERRIDE, FM_HOME, FM_ROOT_OVERRIDE, the cwd."""
    records(world.root / "fleet" / "state", "home.meta")
    records(world.root / "root" / "state", "root.meta")
    records(world.root / "over", "over.meta")
    records(world.root / "cwd" / "state", "cwd.meta")
    line = f"fm teardown {env.pop('_line', '')} ".replace("  ", " ")
    full = {k: str(world.root / v) if v else "" for k, v in env.items()}
    r = bash_complete(
        world, line.replace("over", str(world.root / "over")), full, world.root / "cwd"
    )
    assert replies(r) == want


def test_bash_a_missing_state_dir_offers_nothing_and_prints_nothing(world: World) -> None:
    for line in ("fm teardown ", "fm teardown --state-dir /nonexistent/x ", "fm restore a"):
        r = bash_complete(world, line, {"FM_HOME": str(world.root / "nowhere")})
        assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), line


def test_bash_option_values_that_are_directories(world: World) -> None:
    (world.root / "records").mkdir()
    (world.root / "recipe").write_text("")
    for line in (
        "fm teardown --state-dir rec",
        "fm teardown --state-dir=rec",
        "fm restore --to rec",
    ):
        assert replies(bash_complete(world, line)) == ["records"], line
    assert replies(bash_complete(world, "fm restore --ref rec")) == []


def test_bash_the_users_glob_options_do_not_leak(world: World) -> None:
    records(world.fm_home / "state", "alpha.meta", ".dot.meta", "ALPHA.META")
    script = SCRIPTS / "fm.bash"
    body = (
        f"shopt -s failglob dotglob nocaseglob; source {shlex.quote(str(script))}; "
        'COMP_WORDS=(fm teardown ""); COMP_CWORD=2; COMP_LINE="fm teardown "; '
        "COMP_POINT=${#COMP_LINE}; _fm; printf '%s\\n' \"${COMPREPLY[@]}\"; shopt -p failglob "
        "dotglob nocaseglob nullglob"
    )
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", body],
        capture_output=True,
        text=True,
        env={**world.env, "FM_HOME": str(world.fm_home)},
        check=False,
    )
    assert r.stdout.splitlines() == [
        "alpha",
        "shopt -s failglob",
        "shopt -s dotglob",
        "shopt -s nocaseglob",
        "shopt -u nullglob",
    ], r.stderr


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("fm teardown alpha --discard-live-owner=lease:", ["ci-bot"]),
        ("fm teardown alpha --discard-live-owner=", list(OWNERS)),
        ("fm teardown alpha --discard-live-owner=b", ["bravo"]),
        ("fm teardown alpha --discard-live-owner ", list(OWNERS)),
        ("fm teardown alpha --discard-live-owner lease:c", ["ci-bot"]),
        ("fm teardown --discard-live-owner ", []),
        ("fm teardown -- --discard-live-owner ", []),
    ],
)
def test_bash_owner_replies_fit_readline_words(world: World, line: str, want: list[str]) -> None:
    """readline replaces only the text after the last `=`/`:`, so the replies are cut there."""
    r = bash_complete(world, line)
    assert replies(r) == want and r.stderr == ""


# --------------------------------------------------------------------------- fish, non-interactive


def fish_complete(world: World, line: str, env: dict[str, str] | None = None) -> list[str]:
    need("fish")
    r = subprocess.run(
        [
            "fish",
            "--no-config",
            "-c",
            f"source {shlex.quote(str(SCRIPTS / 'fm.fish'))}; complete -C {shlex.quote(line)}",
        ],
        capture_output=True,
        text=True,
        env={**world.env, **(env or {})},
        cwd=world.root,
        timeout=30,
        check=False,
    )
    assert r.stderr == "", r.stderr
    return [ln.split("\t")[0] for ln in r.stdout.splitlines()]


def test_fish_rules_without_a_terminal(world: World) -> None:
    records(world.fm_home / "state", "alpha.meta", "alps.meta", "beta.meta", ".x.meta")
    records(world.root / "state", "cwd.meta")
    env = {"FM_HOME": str(world.fm_home)}
    assert fish_complete(world, "fm teardown ", env) == ["alpha", "alps", "beta"]
    assert fish_complete(world, "fm teardown alpha beta ", env) == ["alps"]
    assert fish_complete(world, "fm teardown ", {"FM_ROOT_OVERRIDE": str(world.fm_home)}) == [
        "alpha",
        "alps",
        "beta",
    ]
    assert fish_complete(world, "fm teardown ") == ["cwd"]
    assert fish_complete(world, "fm teardown ", {"FM_HOME": str(world.root / "none")}) == []
    assert fish_complete(world, "fm restore alpha ", env) == []
    assert fish_complete(world, "fm runbook ", env) == sorted(completion.RUNBOOKS)
    assert world.calls() == []


# --------------------------------------------------------------------------- fm __complete


def fm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fm_teardown", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=REPO,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("__complete",),
        ("__complete", "owners"),
        ("__complete", "owners", "no-such-task", "--state-dir", "/nonexistent"),
        ("__complete", "owners", "--help"),
        ("__complete", "owners", "../bad id"),
        ("__complete", "what-else", "x"),
    ],
)
def test_fm_complete_prints_nothing_and_exits_0_when_it_has_no_answer(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    r = fm(*args, env={"FM_HOME": str(tmp_path)})
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_fm_complete_is_hidden_from_help() -> None:
    assert "__complete" not in fm("--help").stdout


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["alpha"], (None, "alpha")),
        (["--state-dir", "/s", "alpha", "beta"], ("/s", "alpha")),
        (["--state-dir=/s", "alpha"], ("/s", "alpha")),
        (["alpha", "--state-dir", "/a", "--state-dir=/b"], ("/b", "alpha")),
        (["--state-dir"], (None, None)),
        (["--", "-x"], (None, "-x")),
    ],
)
def test_owner_request(args: list[str], want: tuple[str | None, str | None]) -> None:
    assert completion.owner_request(args) == want


def test_live_owners_answers_through_the_pipeline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str | None, str]] = []

    def fake(state_dir: str | None, task: str) -> list[str]:
        seen.append((state_dir, task))
        return ["bravo", "lease:ci-bot"]

    monkeypatch.setattr(completion, "live_owners", fake)
    completion.print_answers("owners", ["--state-dir", "/s", "alpha", "beta"])
    assert seen == [("/s", "alpha")]
    assert capsys.readouterr().out == "bravo\nlease:ci-bot\n"


def test_live_owners_is_empty_on_any_error(tmp_path: Path) -> None:
    assert completion.live_owners(str(tmp_path / "missing"), "alpha") == []
    assert completion.live_owners(str(tmp_path), "../x") == []


def test_task_ids_in_python_follow_the_shell_rule(tmp_path: Path) -> None:
    records(tmp_path, "alpha.meta", ".x.meta", "bad id.meta", "a.b.meta", "beta.status")
    assert completion.task_ids(str(tmp_path)) == ["a.b", "alpha"]
    assert completion.task_ids(str(tmp_path / "missing")) == []


# --------------------------------------------------------------------------- install / show


@pytest.mark.parametrize("shell", SHELLS)
def test_show_completion_prints_the_script(shell: str) -> None:
    want = (SCRIPTS / completion.SCRIPT_FILES[shell]).read_text()
    assert fm("--show-completion", shell).stdout == want
    assert fm("--show-completion", env={"SHELL": f"/usr/bin/{shell}"}).stdout == want


def test_show_completion_refuses_an_unknown_shell() -> None:
    r = fm("--show-completion", env={"SHELL": "/bin/tcsh"})
    assert r.returncode == 2 and "fm --show-completion bash|zsh|fish" in r.stderr
    r = fm("--show-completion", "tcsh")
    assert r.returncode == 2 and "unsupported shell 'tcsh'" in r.stderr


def _install_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "ZDOTDIR", "BASH_C"))}
    return {**env, "HOME": str(tmp_path), **extra}


@pytest.mark.parametrize(
    ("shell", "where", "extra"),
    [
        ("bash", ".local/share/bash-completion/completions/fm", {}),
        ("bash", "data/bash-completion/completions/fm", {"XDG_DATA_HOME": "{tmp}/data"}),
        ("fish", ".config/fish/completions/fm.fish", {}),
        ("fish", "conf/fish/completions/fm.fish", {"XDG_CONFIG_HOME": "{tmp}/conf"}),
        ("zsh", ".zfunc/_fm", {}),
    ],
)
def test_install_completion_puts_our_script_in_the_standard_place(
    tmp_path: Path, shell: str, where: str, extra: dict[str, str]
) -> None:
    env = _install_env(tmp_path, SHELL=f"/bin/{shell}")
    env.update({k: v.format(tmp=tmp_path) for k, v in extra.items()})
    r = fm("--install-completion", env=env)
    assert r.returncode == 0, r.stderr
    target = tmp_path / where
    assert target.read_text() == (SCRIPTS / completion.SCRIPT_FILES[shell]).read_text()
    assert f"{shell} completion installed in {target}" in r.stdout


def test_install_completion_for_zsh_puts_zfunc_on_fpath_once(tmp_path: Path) -> None:
    (tmp_path / ".zshrc").write_text("export EDITOR=vi")  # no final newline
    env = _install_env(tmp_path, SHELL="/bin/bash")
    r = fm("--install-completion", "zsh", env=env)
    assert r.returncode == 0, r.stderr
    assert "added to" in r.stdout and "fpath=(~/.zfunc $fpath)" in r.stdout
    zshrc = (tmp_path / ".zshrc").read_text()
    assert zshrc.startswith("export EDITOR=vi\n")
    assert "fpath=(~/.zfunc $fpath)\nautoload -Uz compinit && compinit\n" in zshrc
    r = fm("--install-completion=zsh", env=env)
    assert r.returncode == 0 and "already puts ~/.zfunc on fpath" in r.stdout
    assert (tmp_path / ".zshrc").read_text() == zshrc


def test_the_installed_zsh_function_works_from_the_zshrc_it_wrote(
    world: World, pane: Callable[..., Pane]
) -> None:
    """`fm --install-completion zsh`, then a new zsh that reads that ~/.zshrc completes."""
    need("zsh")
    r = fm("--install-completion", "zsh", env=_install_env(world.home))
    assert r.returncode == 0, r.stderr
    records(world.fm_home / "state", "kilo.meta")
    p = pane("zsh", {"FM_HOME": str(world.fm_home)}, command="zsh", setup=f"PROMPT='{PROMPT} '\n")
    p.complete("fm teardown k", "fm teardown kilo")


def test_install_completion_without_a_known_shell_says_how(tmp_path: Path) -> None:
    r = fm("--install-completion", env=_install_env(tmp_path, SHELL="/bin/sh"))
    assert r.returncode == 2 and "fm --install-completion bash|zsh|fish" in r.stderr
    assert not (tmp_path / ".local").exists()


def test_script_path_prefers_the_package_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel carries the scripts in fm_teardown/completions/; a checkout in completions/."""
    pkg = tmp_path / "fm_teardown"
    (pkg / "completions").mkdir(parents=True)
    (tmp_path / "completions").mkdir()
    for shell, name in completion.SCRIPT_FILES.items():
        (pkg / "completions" / name).write_text(f"package {shell}\n")
        (tmp_path / "completions" / name).write_text(f"checkout {shell}\n")
    monkeypatch.setattr(completion, "__file__", str(pkg / "commands" / "completion.py"))
    assert completion.script("zsh") == "package zsh\n"
    (pkg / "completions" / "_fm").unlink()
    assert completion.script("zsh") == "checkout zsh\n"
    (tmp_path / "completions" / "_fm").unlink()
    with pytest.raises(completion.CompletionError, match="missing"):
        completion.script("zsh")


def test_the_checkout_scripts_are_found() -> None:
    for shell in SHELLS:
        assert completion.script_path(shell) == SCRIPTS / completion.SCRIPT_FILES[shell]


def _save(repo: Path, task: str, stamp: str) -> None:
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(
        ["git", "-C", str(repo), "update-ref", f"refs/fm/discarded/{task}/{stamp}", head],
        check=True,
    )


def _repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "f").write_text("x\n")
    subprocess.run(["git", "-C", str(path), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "one"], check=True)
    return path


def test_fm_complete_saves_lists_the_tasks_with_saves_in_the_named_projects(
    tmp_path: Path,
) -> None:
    """The projects the journal names for a save and those the records name: their
    refs/fm/discarded/<task>/<stamp> refs, whatever records exist now."""
    journalled, recorded, unnamed = (_repo(tmp_path / n) for n in ("p1", "p2", "p3"))
    _save(journalled, "gone-task", "20260101T000000Z")
    _save(journalled, "gone-task", "20260102T000000Z")
    _save(journalled, "not-a-save", "yesterday")  # not a stamp fm writes: not a save
    _save(recorded, "live-task", "20260103T000000Z")
    _save(unnamed, "elsewhere", "20260104T000000Z")  # no record or journal names it
    home = tmp_path / "fleet"
    (home / "state").mkdir(parents=True)
    (home / "data").mkdir()
    (home / "state" / "live-task.meta").write_text(
        f"window=s:fm-live-task\nworktree={recorded}\nproject={recorded}\n"
    )
    line = {
        "task": "gone-task",
        "phase": "result",
        "discarded_ref": "refs/fm/discarded/gone-task/20260102T000000Z",
        "project": str(journalled),
    }
    import json

    (home / "data" / "teardown-log.jsonl").write_text(json.dumps(line) + "\n")
    r = fm("__complete", "saves", env={"FM_HOME": str(home)})
    assert (r.returncode, r.stdout, r.stderr) == (0, "gone-task\nlive-task\n", "")
    r = fm("__complete", "saves", env={"FM_HOME": str(tmp_path / "nowhere")})
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


# --------------------------------------------------------------------------- every option listed

# The commands whose options the scripts list (the hidden `__complete` is the scripts' own).
LISTED = ("teardown", "restore", "runbook", "demo")


def cli_options() -> dict[str, tuple[set[str], set[str]]]:
    """Each command's options as typer parses them, and which of them take a value (every
    command has --help too)."""
    import typer.main

    from fm_teardown import cli

    group: Any = typer.main.get_command(cli.app)
    out: dict[str, tuple[set[str], set[str]]] = {}
    for name in LISTED:
        options = [p for p in group.commands[name].params if p.param_type_name == "option"]
        every = {o for p in options for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        valued = {o for p in options if not p.is_flag for o in p.opts}
        out[name] = every, valued
    return out


def _words(text: str) -> set[str]:
    return set(text.split())


def bash_options(text: str, command: str) -> tuple[set[str], set[str]]:
    m = re.search(rf"^\s*{command}\)\s+opts=\"([^\"]*)\"\s+valued=\"([^\"]*)\"", text, re.M)
    assert m is not None, f"fm.bash lists no options for {command}"
    return _words(m.group(1)), _words(m.group(2))


def zsh_options(text: str, command: str) -> tuple[set[str], set[str]]:
    m = re.search(rf"^\s*\({command}\)\s+_arguments \\\n(.*?)&& ret=0", text, re.M | re.S)
    assert m is not None, f"_fm lists no options for {command}"
    specs = re.findall(r"^\s*['\"]\*?(--[a-z-]+)(=?)\[", m.group(1), re.M)
    return {o for o, _ in specs}, {o for o, eq in specs if eq}


def fish_options(text: str, command: str) -> tuple[set[str], set[str]]:
    lines = re.findall(rf"^complete -c fm -n '__fm_using {command}' -l ([a-z-]+)(.*)$", text, re.M)
    assert lines, f"fm.fish lists no options for {command}"
    return {f"--{o}" for o, _ in lines}, {f"--{o}" for o, rest in lines if " -x" in rest}


# The list of the options whose next word the zsh and fish scripts' scan of the line skips as
# their value, whatever the command (bash keeps one list per command: `valued` above).
SCANNED = {"zsh": r"local i w expect= dd=0 valued='([^']*)'", "fish": r"set -l valued (.*)$"}


def scanned_values(shell: str, text: str) -> set[str]:
    m = re.search(SCANNED[shell], text, re.M)
    assert m is not None, f"{shell}: no list of the options that take a value"
    return _words(m.group(1))


@pytest.mark.parametrize("shell", SHELLS)
def test_every_option_of_every_command_is_in_each_script(shell: str) -> None:
    """A new flag cannot be forgotten in a completion script: each script offers exactly the
    options typer parses for each command, knows which of them take a value (so the word
    after one is never completed as a task id), and its scan of the line skips those values."""
    text = (SCRIPTS / completion.SCRIPT_FILES[shell]).read_text()
    reader = {"bash": bash_options, "zsh": zsh_options, "fish": fish_options}[shell]
    every_valued: set[str] = set()
    for command, (want, valued) in cli_options().items():
        assert reader(text, command) == (want, valued), f"{shell}: fm {command}"
        every_valued |= valued
    if shell in SCANNED:
        assert scanned_values(shell, text) == every_valued, shell


def test_fish_completes_a_task_id_only_where_no_option_wants_a_value() -> None:
    text = (SCRIPTS / "fm.fish").read_text()
    options = cli_options()
    for command in ("teardown", "restore"):
        m = re.search(rf"'__fm_using {command}; and not __fm_after ([^;']*)", text)
        assert m is not None, command
        assert _words(m.group(1)) == options[command][1], command


def test_the_option_readers_see_a_missing_option() -> None:
    """The readers are not blind: a script without one option reads differently."""
    for shell, reader in (("bash", bash_options), ("zsh", zsh_options), ("fish", fish_options)):
        text = (SCRIPTS / completion.SCRIPT_FILES[shell]).read_text()
        full, _ = reader(text, "teardown")
        cut = "\n".join(
            ln for ln in text.splitlines() if "no-journal" not in ln or "opts=" in ln
        ).replace(" --no-journal", "")
        assert reader(cut, "teardown")[0] == full - {"--no-journal"}, shell
