"""The git door key by key (spec §15.1), on real repositories: what only the network, a
submodule or an odd config reaches. `tests/test_git_door.py` plants everything in a fleet;
this one runs fm's git door (`runner.git`) directly where a fleet cannot go: ssh and http
remotes, credential helpers, remote helpers and the `ext::` transport, `upload-pack`,
submodules with drivers of their own, config files fm cannot read, and the config parser
against git's own."""

from __future__ import annotations

import ast
import http.server
import itertools
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fm_teardown.adapters import git_config, runner
from tests.fleet import git

MARK = """#!/bin/sh
echo "{name} $*" >> {log}
{then}
"""


class Marks:
    """Programs that each write their name to one log when run."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "programs"
        self.dir.mkdir()
        self.log = root / "ran.log"

    def program(self, name: str, then: str = "exit 1") -> str:
        path = self.dir / name
        path.write_text(MARK.format(name=name, log=self.log, then=then))
        path.chmod(0o755)
        return str(path)

    def ran(self) -> list[str]:
        if not self.log.exists():
            return []
        return [line.split(" ", 1)[0] for line in self.log.read_text().splitlines()]


@pytest.fixture
def marks(tmp_path: Path) -> Marks:
    return Marks(tmp_path)


def repo(tmp_path: Path, name: str = "repo") -> Path:
    path = tmp_path / name
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "init")
    return path


def plant(path: Path, *pairs: tuple[str, str], where: str = "config") -> None:
    """Config of the repository (`config`) or of its worktree (`config.worktree`)."""
    gitdir = Path(git(path, "rev-parse", "--path-format=absolute", "--git-dir"))
    if where == "config.worktree":
        git(path, "config", "extensions.worktreeConfig", "true")
    for key, val in pairs:
        git(path, "config", "--file", str(gitdir / where), "--add", key, val)


def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """The user's own global config, as fm's process sees it."""
    cfg = tmp_path / "user.gitconfig"
    cfg.write_text(text)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))


# -- ssh and credentials: the user's own, never the repository's --------------------------


def test_a_fetch_uses_the_users_own_ssh_never_the_repositorys(
    tmp_path: Path, marks: Marks, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = repo(tmp_path)
    git(r, "remote", "add", "origin", "ssh://127.0.0.1:1/nowhere.git")
    plant(r, ("core.sshCommand", marks.program("repo-ssh")))
    plant(r, ("core.sshCommand", marks.program("worktree-ssh")), where="config.worktree")
    user_config(tmp_path, monkeypatch, f"[core]\n\tsshCommand = {marks.program('user-ssh')}\n")
    got = runner.git(str(r), "fetch", "origin")
    assert not got.ok
    assert marks.ran() == ["user-ssh"]
    # No global setting: the user's GIT_SSH, else plain ssh; still never the repository's.
    user_config(tmp_path, monkeypatch, "")
    monkeypatch.setenv("GIT_SSH", marks.program("user-env-ssh"))
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    runner._user_net.clear()
    assert not runner.git(str(r), "ls-remote", "origin").ok
    assert marks.ran() == ["user-ssh", "user-env-ssh"]
    # A command that needs no network runs no ssh at all.
    assert runner.git(str(r), "status", "--porcelain").ok
    assert marks.ran() == ["user-ssh", "user-env-ssh"]


class _Unauthorized(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="fm"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_401() -> Iterator[str]:
    """An http server on this machine that asks every request for credentials."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_credentials_come_from_the_users_helpers_never_the_repositorys(
    tmp_path: Path, marks: Marks, monkeypatch: pytest.MonkeyPatch, http_401: str
) -> None:
    r = repo(tmp_path)
    git(r, "remote", "add", "origin", http_401)
    url = http_401.rsplit("/", 1)[0]
    plant(
        r,
        ("credential.helper", f"!{marks.program('repo-helper', 'exit 0')}"),
        (f"credential.{url}.helper", f"!{marks.program('repo-url-helper', 'exit 0')}"),
        ("core.askPass", marks.program("repo-askpass")),
    )
    plant(
        r,
        ("credential.helper", f"!{marks.program('worktree-helper', 'exit 0')}"),
        where="config.worktree",
    )
    user_config(
        tmp_path,
        monkeypatch,
        f"[credential]\n\thelper = !{marks.program('user-helper', 'exit 0')}\n"
        f'[credential "{url}"]\n\thelper = !{marks.program("user-url-helper", "exit 0")}\n',
    )
    monkeypatch.setenv("GIT_ASKPASS", marks.program("env-askpass"))
    monkeypatch.setenv("SSH_ASKPASS", marks.program("env-ssh-askpass"))
    got = runner.git(str(r), "ls-remote", "origin")
    assert not got.ok
    # git asks each helper in turn (and again to reject what failed): the user's only.
    assert set(marks.ran()) == {"user-helper", "user-url-helper"}, marks.ran()


# -- remote helpers, transports, upload-pack ----------------------------------------------


def test_a_remote_helper_the_repository_names_is_not_run_and_that_is_said(
    tmp_path: Path, marks: Marks, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = repo(tmp_path)
    helper = Path(marks.program("git-remote-evil"))
    monkeypatch.setenv("PATH", f"{helper.parent}:{os.environ['PATH']}")
    git(r, "remote", "add", "origin", str(tmp_path / "nowhere.git"))
    plant(r, ("remote.origin.vcs", "evil"))
    got = runner.git(str(r), "fetch", "origin")
    assert got.rc is None and "remote.origin.vcs" in got.err and "fm did not run" in got.err
    # A URL naming the helper, or rewritten to `ext::` by the repository: git refuses them.
    git(r, "config", "--unset", "remote.origin.vcs")
    git(r, "remote", "set-url", "origin", "evil::somewhere")
    assert "not allowed" in runner.git(str(r), "fetch", "origin").err
    ext = marks.program("ext-command")
    git(r, "remote", "set-url", "origin", "https://example.invalid/repo.git")
    plant(r, ("protocol.ext.allow", "always"), (f"url.ext::{ext} %S.insteadOf", "https://"))
    assert "not allowed" in runner.git(str(r), "fetch", "origin").err
    assert marks.ran() == []
    # The plants are live: plain git runs them.
    subprocess.run(["git", "-C", str(r), "fetch", "origin"], capture_output=True, check=False)
    git(r, "remote", "set-url", "origin", "evil::somewhere")
    subprocess.run(["git", "-C", str(r), "fetch", "origin"], capture_output=True, check=False)
    assert marks.ran() == ["ext-command", "git-remote-evil"]


def test_a_local_fetch_runs_gits_own_upload_pack(tmp_path: Path, marks: Marks) -> None:
    origin = repo(tmp_path, "origin")
    r = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(r))
    (origin / "later").write_text("later\n")
    git(origin, "add", "later")
    git(origin, "commit", "-q", "-m", "later")
    plant(
        r,
        ("remote.origin.uploadpack", marks.program("upload-pack")),
        ("core.gitProxy", marks.program("git-proxy")),
        ("core.alternateRefsCommand", marks.program("alternate-refs")),
        ("fetch.recurseSubmodules", "true"),
        ("gc.auto", "1"),
    )
    got = runner.git(str(r), "fetch", "-q", "origin")
    assert got.ok, got.err
    assert runner.rev(str(r), "origin/main") == runner.rev(str(origin), "HEAD")
    assert marks.ran() == []


# -- submodules: git runs a `git status` in each ------------------------------------------


def test_a_submodules_own_drivers_are_emptied_too(tmp_path: Path, marks: Marks) -> None:
    top = repo(tmp_path, "top")
    inner = top / "inner"  # an embedded repository added as a gitlink: its .git is its own
    git(tmp_path, "init", "-q", "-b", "main", str(inner))
    (inner / "f").write_text("x\n")
    (inner / ".gitattributes").write_text("* filter=subevil\n")
    git(inner, "add", "-A")
    git(inner, "commit", "-q", "-m", "inner")
    nested = inner / "deeper"  # and one inside it, two levels down
    git(tmp_path, "init", "-q", "-b", "main", str(nested))
    (nested / "g").write_text("y\n")
    (nested / ".gitattributes").write_text("* filter=deepevil\n")
    git(nested, "add", "-A")
    git(nested, "commit", "-q", "-m", "deeper")
    git(inner, "add", "deeper")
    git(inner, "commit", "-q", "-m", "gitlink")
    git(top, "add", "inner")
    git(top, "commit", "-q", "-m", "gitlink")
    # Each names its own filter, in its own config only.
    plant(inner, ("filter.subevil.clean", marks.program("inner-clean", "exec cat")))
    plant(nested, ("filter.deepevil.clean", marks.program("deeper-clean", "exec cat")))
    for f in (inner / "f", nested / "g"):
        os.utime(f, (1, 1))  # stat differs from the index: git compares the content
    args = ("status", "--porcelain=v2", "--ignore-submodules=none")
    got = runner.git(str(top), *args)
    assert got.ok, got.err
    assert marks.ran() == []
    subprocess.run(["git", "-C", str(top), *args], capture_output=True, check=False)
    assert {"inner-clean", "deeper-clean"} <= set(marks.ran()), marks.ran()


# -- config fm cannot read: no git runs there ---------------------------------------------


def test_a_config_fm_cannot_read_means_no_git_runs_there(tmp_path: Path, marks: Marks) -> None:
    r = repo(tmp_path)
    gitdir = r / ".git"
    plant(r, ("core.fsmonitor", marks.program("fsmonitor")))
    os.mkfifo(gitdir / "config.worktree")  # reading it would hang: fm does not try
    got = runner.git(str(r), "status", "--porcelain")
    assert got.rc is None and "fm did not run git" in got.err and "config.worktree" in got.err
    (gitdir / "config.worktree").unlink()
    # An include git would reject; includes nested deeper than git allows.
    config = (gitdir / "config").read_text()
    bad = tmp_path / "bad.gitconfig"
    bad.write_text('[filter "x"\n\tclean = y\n')
    (gitdir / "config").write_text(f"{config}[include]\n\tpath = {bad}\n")
    got = runner.git(str(r), "status", "--porcelain")
    assert got.rc is None and "bad.gitconfig" in got.err
    chain = [tmp_path / f"inc{i}.gitconfig" for i in range(12)]
    for here, there in itertools.pairwise(chain):
        here.write_text(f"[include]\n\tpath = {there}\n")
    chain[-1].write_text("")
    (gitdir / "config").write_text(f"{config}[include]\n\tpath = {chain[0]}\n")
    got = runner.git(str(r), "status", "--porcelain")
    assert got.rc is None and "deeper than 10" in got.err
    assert marks.ran() == []


def test_a_run_of_a_git_argv_goes_through_the_door(tmp_path: Path, marks: Marks) -> None:
    r = repo(tmp_path)
    plant(
        r,
        ("core.fsmonitor", marks.program("fsmonitor")),
        ("diff.external", marks.program("external", "exit 0")),
        ("diff.evil.textconv", marks.program("textconv", 'exec cat "$1"')),
        ("diff.evil.command", marks.program("diff-command", "exit 0")),
    )
    (r / ".gitattributes").write_text("* diff=evil\n")
    (r / "README").write_text("changed\n")
    got = runner.run(["git", "-C", str(r), "diff"], timeout=60)
    assert got.ok and b"+changed" in got.out, got
    (many,) = runner.run_many([["git", "-C", str(r), "log", "-p", "-1"]], timeout=60, width=1)
    assert many.ok and b"+hello" in many.out
    assert marks.ran() == []


# -- the parser reads what git reads --------------------------------------------------------

_NAMES = st.sampled_from(["filter", "Diff", "merge", "remote", "core", "x-y"])
_SUBS = st.sampled_from(["evil", 'E v\\"il', "a.b", "", "ÿ", "a=b", "back\\\\slash"])
_KEYS = st.sampled_from(["clean", "Smudge", "driver", "vcs", "k-2", "textconv"])
_VALUES = st.sampled_from(
    ["prog", '"quoted ; # value"', "a\\\n b", "x # comment", "tab\\there", "", '"unclosed', "\\q"]
)
_SPACE = st.sampled_from(["", " ", "\t", "  "])


@st.composite
def _config_text(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            lines.append(f"[{draw(_NAMES)}{draw(_SPACE)}]")
        elif kind == 1:
            lines.append(f'[{draw(_NAMES)} "{draw(_SUBS)}"]')
        elif kind == 2:
            lines.append(f"[{draw(_NAMES)}.{draw(_SUBS).replace(chr(34), '')}]")
        elif kind == 3:
            lines.append(draw(st.sampled_from(["# comment", "; comment", "", "  \t"])))
        elif kind == 4:
            lines.append(f"{draw(_SPACE)}{draw(_KEYS)}")
        else:
            lines.append(f"{draw(_SPACE)}{draw(_KEYS)}{draw(_SPACE)}={draw(_VALUES)}")
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return end.join(lines) + draw(st.sampled_from(["", end]))


def _name(section: str, sub: str | None, key: str) -> str:
    """A config variable's name as `git config --list` prints it."""
    if not section and sub is None:
        return key  # a key before any section header
    return f"{section}.{sub}.{key}" if sub is not None else f"{section}.{key}"


@settings(max_examples=150, deadline=None)
@given(text=_config_text())
def test_the_config_parser_reads_what_git_reads(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    path = tmp_path_factory.mktemp("cfg") / "config"
    path.write_bytes(text.encode())
    r = subprocess.run(
        ["git", "config", "--file", str(path), "--no-includes", "--list", "-z"],
        capture_output=True,
        check=False,
    )
    ours = git_config.parse(text.encode())
    if r.returncode != 0:
        assert ours is None, (text, ours)
        return
    theirs = [
        tuple(item.split(b"\n", 1)) if b"\n" in item else (item,)
        for item in r.stdout.split(b"\0")
        if item
    ]
    assert ours is not None, (text, theirs)
    got = [_name(sec, sub, key).encode("utf-8", "surrogateescape") for sec, sub, key, _ in ours]
    assert got == [t[0] for t in theirs], text
    assert [v for *_, v in ours] == [t[1] if len(t) == 2 else None for t in theirs], text


@pytest.mark.non_root
def test_a_config_file_fm_may_not_read_means_no_git_runs_there(
    tmp_path: Path, marks: Marks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An included file the user may not read: git itself would die on it; fm says why and
    runs nothing. The user's own unreadable global config is theirs, and git's to report."""
    r = repo(tmp_path)
    plant(r, ("core.fsmonitor", marks.program("fsmonitor")))
    secret = tmp_path / "secret.gitconfig"
    secret.write_text('[filter "hidden"]\n\tclean = whatever\n')
    secret.chmod(0)
    gitdir = r / ".git"
    (gitdir / "config").write_text(
        (gitdir / "config").read_text() + f"[include]\n\tpath = {secret}\n"
    )
    got = runner.git(str(r), "status", "--porcelain")
    assert got.rc is None and "cannot read the git config file" in got.err, got
    assert "secret.gitconfig" in got.err
    (gitdir / "config").write_text((gitdir / "config").read_text().replace(str(secret), "x"))
    user_config(tmp_path, monkeypatch, "")
    (tmp_path / "user.gitconfig").chmod(0)
    assert runner.git(str(r), "rev-parse", "HEAD").ok
    assert marks.ran() == []


# -- one door ---------------------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "fm_teardown"
_STARTS = {"subprocess", "os.system", "os.popen", "os.posix_spawn", "os.posix_spawnp"}


def _starts_processes(tree: ast.AST) -> set[str]:
    """What in a module's code can start a process: `subprocess`, `os.system`, `os.exec*`..."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if "subprocess" in names or getattr(node, "module", None) == "subprocess":
                found.add("subprocess")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = f"{node.value.id}.{node.attr}"
            if name in _STARTS or name.startswith(("os.exec", "os.spawn")):
                found.add(name)
    return found


def test_only_the_runner_starts_processes_so_every_git_goes_through_the_door() -> None:
    """git runs only through `runner` (a `runner.run` of a git argv is sent to the door too);
    the one other process start is `fm demo` starting fm itself."""
    starters = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if "standin" not in path.parts
        for found in [_starts_processes(ast.parse(path.read_text(encoding="utf-8")))]
        if found
    }
    assert starters == {
        "adapters/runner.py": {"subprocess", "os.posix_spawn"},
        "commands/demo.py": {"subprocess"},
    }, starters


# -- configured hooks (git 2.54 and later) -------------------------------------------------


def _git_saying(tmp_path: Path, version: str) -> str:
    """A PATH whose `git` says it is `version` and otherwise is the real git."""
    shim = tmp_path / f"git-{version}"
    shim.mkdir()
    (shim / "git").write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "git version ' + version + '"; exit 0; fi\n'
        f'exec {shutil.which("git")} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    return f"{shim}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.parametrize("version", ["2.54.0", "3.1", "unknown"])
def test_a_configured_hook_means_no_git_runs_where_git_would_run_it(
    tmp_path: Path, marks: Marks, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """`[hook "x"] command = ...` in the repository's config (or its worktree's): with a git
    that runs configured hooks (or that does not say its version) fm runs no git there;
    git 2.39 ignores them, and a hook the user configured is the user's."""
    r = repo(tmp_path)
    plant(r, ("hook.evil.command", marks.program("configured")), ("hook.evil.event", "pre-commit"))
    monkeypatch.setenv("PATH", _git_saying(tmp_path, version))
    got = runner.git(str(r), "status", "--porcelain")
    assert got.rc is None and "fm did not run git" in got.err, got
    assert "configures a hook (hook.evil.command)" in got.err, got.err
    assert marks.ran() == []


def test_a_configured_hook_is_no_obstacle_where_git_ignores_it(
    tmp_path: Path, marks: Marks, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = repo(tmp_path)
    plant(
        r,
        ("hook.evil.command", marks.program("configured")),
        ("hook.evil.event", "pre-commit"),
        where="config.worktree",
    )
    monkeypatch.setenv("PATH", _git_saying(tmp_path, "2.39.5"))
    assert runner.git(str(r), "status", "--porcelain").ok
    # The user's own configured hook, with a git that runs them: the user's, git runs.
    user_config(tmp_path, monkeypatch, '[hook "mine"]\n\tcommand = true\n')
    plain = repo(tmp_path, "plain")
    monkeypatch.setenv("PATH", _git_saying(tmp_path, "2.54.0"))
    assert runner.git(str(plain), "status", "--porcelain").ok
    assert not runner.git(str(r), "status", "--porcelain").ok
