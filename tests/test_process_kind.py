"""What kind of process a process is, by its name, argv[0] and, for an interpreter, what it
runs (spec §15.4): the one list of agents in `model/process_kind.py`, `FM_AGENT_NAMES`, and
the command line read with argv[0], bounded and failing closed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from fm_teardown.adapters import processes
from fm_teardown.model import process_kind
from fm_teardown.model.process_kind import ProcessClass, classify_proc, configure, named
from fm_teardown.model.settings import load
from fm_teardown.model.world import Proc, ProcStat, parse_cmdline
from tests.fleet import wait_for

AGENT, OTHER, SHELL, UNSURE = (
    ProcessClass.AGENT,
    ProcessClass.OTHER,
    ProcessClass.SHELL,
    ProcessClass.UNSURE,
)


def proc(name: str, *argv: str, cut: bool = False) -> Proc:
    return Proc(7, 1, name, (argv[0], tuple(argv[1:]), cut), None, ProcStat(1.0))


@pytest.fixture(autouse=True)
def builtin_list() -> Iterator[None]:
    configure(())
    yield
    configure(())


@pytest.mark.parametrize(
    ("p", "kind"),
    [
        # Interpreters running an agent's script, module or package.
        (proc("node", "node", "/u/lib/node_modules/@google/gemini-cli/dist/index.js"), AGENT),
        (
            proc(
                "node",
                "/usr/bin/node",
                "--no-warnings",
                "/n/node_modules/@anthropic-ai/claude-code/cli.js",
            ),
            AGENT,
        ),
        (proc("node", "node", "/g/node_modules/@openai/codex/bin/codex.js", "exec"), AGENT),
        (proc("node", "node", "/g/node_modules/@sourcegraph/amp/dist/main.js"), AGENT),
        (proc("node", "node", "/h/.local/share/cursor-agent/versions/1/index.js"), AGENT),
        (proc("bun", "bun", "run", "/h/.bun/bin/omp"), AGENT),
        (proc("deno", "deno", "run", "-A", "npm:@google/gemini-cli"), AGENT),
        (proc("npx", "npx", "-y", "@openai/codex@latest"), AGENT),
        (proc("npx", "npx", "-p", "@google/gemini-cli", "gemini"), AGENT),
        (proc("npx", "npx", "opencode-ai"), AGENT),
        (proc("uvx", "uvx", "--from", "aider-chat", "aider"), AGENT),
        (proc("python3", "python3", "-m", "aider", "--yes"), AGENT),
        (proc("python3.12", "python3.12", "/usr/local/bin/aider"), AGENT),
        (proc("python3", "python3", "/v/lib/python3.12/site-packages/aider/main.py"), AGENT),
        (proc("node", "node", "/h/bin/agy"), AGENT),
        # Interpreters running something else: other.
        (proc("node", "node", "server.js", "--name", "claude"), OTHER),
        (proc("node", "node"), OTHER),  # a REPL (in a pane, a person's terminal anyway)
        (proc("node", "node", "-e", "setInterval(() => {}, 1000)"), OTHER),
        (proc("python3", "python3", "manage.py", "runserver"), OTHER),
        (proc("python3", "python3", "-c", "import time"), OTHER),
        (proc("uv", "uv", "run", "pytest"), OTHER),
        # What it runs lies past what was read, or nothing could be read: cannot be told.
        (proc("node", "node", "--max-old-space-size=4096", cut=True), UNSURE),
        (proc("python3", "python3", *(["-W", "ignore"] * 40), "x.py"), UNSURE),
        (Proc(7, 1, "node", lambda pid: "", None, ProcStat(1.0)), UNSURE),
        # Names, as before.
        (proc("claude", "claude"), AGENT),
        (proc("agy", "agy"), AGENT),
        (proc("bash", "bash"), SHELL),
        (proc("sleep", "sleep", "1000"), OTHER),
        (proc("vim", "vim", "-n", "README.md"), OTHER),
    ],
)
def test_classify_proc(p: Proc, kind: ProcessClass) -> None:
    assert classify_proc(p) == kind


def test_a_node_run_agent_is_named_with_what_it_runs() -> None:
    p = proc("node", "node", "/u/lib/node_modules/@google/gemini-cli/dist/index.js", "1000")
    assert named(p) == "node (7, running @google/gemini-cli/dist/index.js)"
    assert named(proc("sleep", "sleep", "1")) == "sleep (7)"


def test_fm_agent_names_adds_names_and_packages() -> None:
    mine = proc("my-agent", "/opt/my-agent")
    script = proc("node", "node", "/x/node_modules/@acme/agent-cli/index.js")
    runner = proc("npx", "npx", "@acme/agent-cli@2")
    assert [classify_proc(p) for p in (mine, script, runner)] == [OTHER] * 3
    settings = load(None, {"FM_AGENT_NAMES": " my-agent , @acme/agent-cli,, "})
    assert settings.agent_names == ("my-agent", "@acme/agent-cli")
    assert [classify_proc(p) for p in (mine, script, runner)] == [AGENT] * 3
    assert process_kind.agent_list().extra == ("@acme/agent-cli", "my-agent")
    load(None, {})
    assert classify_proc(mine) == OTHER and process_kind.agent_list().extra == ()


@pytest.mark.parametrize("bad", ["my agent", "/usr/bin/x", "a\tb", "@scope", "..", "x/y"])
def test_a_bad_agent_name_is_a_usage_error(bad: str) -> None:
    from fm_teardown.model.errors import ExitCode, FmError

    with pytest.raises(FmError) as err:
        load(None, {"FM_AGENT_NAMES": f"ok,{bad}"})
    assert err.value.exit_code == ExitCode.INVALID
    assert "FM_AGENT_NAMES" in err.value.message and repr(bad) in err.value.message


def test_parse_cmdline() -> None:
    assert parse_cmdline("") == ("", None, False)
    assert parse_cmdline("node\0a.js\0\0") == ("node", ("a.js", ""), False)
    assert parse_cmdline("node\0a.js") == ("node", ("a.js",), True)  # no last NUL: cut
    assert parse_cmdline("sshd: user@pts/0") == ("sshd: user@pts/0", (), True)


def test_each_way_a_command_line_is_given_reads_as_it_did() -> None:
    """`Proc` is given a command line one of four ways: argv[0] alone, as read, the reader
    that reads it on first use (once), or nothing to read."""
    alone = Proc(7, 1, "bash", "bash", None, ProcStat(1.0))
    assert (alone.argv0, alone.args, alone.cut) == ("bash", (), False)
    read = Proc(7, 1, "node", ("node", ("a.js",), True), None, ProcStat(1.0))
    assert (read.argv0, read.args, read.cut) == ("node", ("a.js",), True)
    calls: list[int] = []

    def reader(pid: int) -> str:
        calls.append(pid)
        return "node\0b.js\0"

    later = Proc(8, 1, "node", reader, None, ProcStat(1.0))
    assert calls == []  # not read until asked
    assert (later.args, later.argv0, later.cut, calls) == (("b.js",), "node", False, [8])
    gone = Proc(9, 1, "x", None, None, ProcStat(1.0, zombie=True, tty="/dev/pts/1", tpgid=9))
    assert (gone.argv0, gone.args, gone.cut) == ("", None, False)
    assert (gone.start_time, gone.zombie, gone.tty, gone.tpgid) == (1.0, True, "/dev/pts/1", 9)


def test_a_command_line_past_the_bound_reads_as_cut() -> None:
    """A real process whose command line is longer than fm reads: argv[0] and the first
    arguments are there, and it reads as cut (an interpreter's script past it is doubt)."""
    long = ["x" * 100] * 60  # 6 KiB of arguments
    code = "import time; time.sleep(1000)"
    p = subprocess.Popen([sys.executable, "-c", code, *long])
    try:
        wait_for(lambda: processes.read_argv0(p.pid) == sys.executable, what="python started")
        table = processes.scan()
        found = table.procs[p.pid]
        assert (found.argv0, found.cut) == (sys.executable, True)
        assert found.args is not None and found.args[:3] == ("-c", code, "x" * 100)
        assert len("\0".join((found.argv0, *found.args))) <= processes.CMDLINE_BOUND
    finally:
        p.kill()
        p.wait()
