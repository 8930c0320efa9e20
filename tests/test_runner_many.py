"""`runner.run_many`: several commands from one thread, a few at a time, each with `run`'s
policy (its own session, the timeout that kills its group), results in the order given."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fm_teardown.adapters import runner


def test_results_come_in_the_order_given() -> None:
    argvs = [["sh", "-c", f"sleep 0.{9 - i}; echo {i}; echo e{i} >&2; exit {i}"] for i in range(5)]
    results = runner.run_many(argvs, timeout=30, width=3)
    assert [(r.rc, r.out, r.err) for r in results] == [
        (i, f"{i}\n".encode(), f"e{i}\n") for i in range(5)
    ]


def test_at_most_width_run_at_once(tmp_path: Path) -> None:
    # Each command marks itself running in a file, then reads how many are: never above 2.
    d = str(tmp_path)
    script = f'touch {d}/$$; n=$(ls {d} | wc -l); sleep 0.2; rm {d}/$$; echo "$n"'
    results = runner.run_many([["sh", "-c", script]] * 6, timeout=30, width=2)
    assert all(r.ok for r in results)
    assert max(int(r.out) for r in results) <= 2


def test_a_command_that_cannot_start_or_times_out_says_so_alone() -> None:
    missing = "/nonexistent/fm-no-such-binary"
    start = time.monotonic()
    results = runner.run_many(
        [[missing], ["sh", "-c", "sleep 30"], ["sh", "-c", "echo ok"]], timeout=0.5, width=4
    )
    assert time.monotonic() - start < 10
    assert results[0].rc is None and missing in results[0].err
    assert results[1].rc is None and results[1].timed_out
    assert results[2].ok and results[2].out == b"ok\n"


def test_each_command_runs_in_a_session_of_its_own() -> None:
    (r,) = runner.run_many([["sh", "-c", "ps -o sid= -p $$"]], timeout=30, width=1)
    assert r.ok
    assert int(r.out) != os.getsid(0)


def test_a_command_keeps_the_name_it_was_given() -> None:
    # Looked up on PATH once for all the runs, it still sees argv[0] as given.
    results = runner.run_many([["sh", "-c", 'echo "$0"']] * 2, timeout=30, width=2)
    assert [r.out for r in results] == [b"sh\n", b"sh\n"]


def test_large_output_on_both_pipes_comes_whole() -> None:
    # More than a pipe holds, on stdout and stderr at once, from several commands together.
    script = "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2"
    results = runner.run_many([["sh", "-c", script]] * 3, timeout=30, width=3)
    assert [(r.rc, len(r.out), len(r.err)) for r in results] == [(0, 300000, 200000)] * 3


def test_a_command_that_closes_its_pipes_and_stays_is_killed_at_its_deadline() -> None:
    start = time.monotonic()
    (r,) = runner.run_many([["sh", "-c", "exec >/dev/null 2>&1; sleep 30"]], timeout=0.5, width=1)
    assert time.monotonic() - start < 10
    assert r.rc is None and r.timed_out


# The commands below see what a command started by Popen sees: stdin at end of file, SIGPIPE
# at its default (Python ignores it), no descriptor of ours but the three, its exit by signal
# as a negative code. They are run started through posix_spawn (the usual way) and, with
# `_inherited_fds` made to fail, through Popen, and must answer alike.
_LIKE_POPEN = [
    ["sh", "-c", "cat; echo eof"],
    ["sh", "-c", "yes | head -n 1"],
    ["sh", "-c", 'kill -TERM "$$"'],
    ["sh", "-c", "ps -o sid= -p $$ | tr -d ' '; echo $$"],
]


def _fd_check(fd: int) -> list[str]:
    return ["sh", "-c", f"if [ -e /proc/self/fd/{fd} ]; then echo open; else echo closed; fi"]


def test_spawned_commands_see_what_popen_would_give_them(monkeypatch: pytest.MonkeyPatch) -> None:
    r, w = os.pipe()
    os.set_inheritable(w, True)  # a descriptor Popen's close_fds would not pass on
    try:
        spawned = runner.run_many([*_LIKE_POPEN, _fd_check(w)], timeout=30, width=3)
        monkeypatch.setattr(runner, "_inherited_fds", lambda: None)
        popened = runner.run_many([*_LIKE_POPEN, _fd_check(w)], timeout=30, width=3)
    finally:
        os.close(r)
        os.close(w)
    for results in (spawned, popened):
        assert (results[0].rc, results[0].out) == (0, b"eof\n")
        assert (results[1].rc, results[1].out, results[1].err) == (0, b"y\n", "")
        assert results[2].rc == -15
        sid, pid = results[3].out.split()
        assert sid == pid  # a session of its own, led by the command
        assert results[4].out == b"closed\n"


# -- a batch's git door -----------------------------------------------------------------------


def _repos(tmp_path: Path, n: int) -> list[str]:
    repos = []
    for i in range(n):
        repo = tmp_path / f"repo{i}"
        repo.mkdir()
        (repo / f"file{i}").write_text("work\n")
        assert runner.git(str(repo), "init", "-q").ok
        repos.append(str(repo))
    return repos


def test_a_batch_empties_the_drivers_the_users_config_names_as_each_command_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's config (read once for the batch) and each repository's own (read for its
    # command) both name a filter: git, asked, sees each program emptied, in every repository.
    user = tmp_path / "user.gitconfig"
    user.write_text('[filter "users"]\n\tclean = touch /tmp/fm-never-run-users\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user))
    repos = _repos(tmp_path, 3)
    with open(os.path.join(repos[1], ".git", "config"), "a") as fh:
        fh.write('[filter "repos"]\n\tclean = touch /tmp/fm-never-run-repos\n')
    calls = [
        (r, ["config", "--get", f"filter.{name}.clean"])
        for r in repos
        for name in ("users", "repos")
    ]
    results = runner.git_many(calls, width=2)
    said = [(r.rc, r.out) for r in results]
    assert said == [
        (0, b"\n"),  # the user's filter, emptied
        (1, b""),  # no such key in this repository
        (0, b"\n"),
        (0, b"\n"),  # the repository's own, emptied
        (0, b"\n"),
        (1, b""),
    ]


def test_a_batch_gives_each_command_its_own_input_small_or_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a pipe holds whole is written as the command starts, beside the others; a larger
    # input is given as `run` gives it, that command alone: each comes out whole, in order.
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    repo = _repos(tmp_path, 1)[0]
    large = "x" * (1 << 20)
    inputs = ["one\n", None, large, "three\n"]
    calls = [(repo, ["hash-object", "--stdin"]) for _ in inputs]
    results = runner.git_many(calls, width=4, stdins=inputs)
    want = [
        subprocess.run(
            ["git", "hash-object", "--stdin"],
            input=(text or "").encode(),
            capture_output=True,
            check=True,
            cwd=repo,
        ).stdout
        for text in inputs
    ]
    assert [(r.rc, r.out) for r in results] == [(0, w) for w in want]
