"""People and agents, whatever their name (spec §15.4), on real tmux servers, real processes
and real git.

A person's terminal no task holds (a shell, an editor with an unsaved edit, in someone's
pane) stops a single teardown as an agent in someone's pane does: exit 4, owner `pid:<PID>`
named with its pane, server and terminal, lifted only by `--force --discard-live-owner`. An
interpreter running an agent's script or package (`node …/@google/gemini-cli/dist/index.js`)
is that agent. Mass cleanup ends neither, `--include-live` included, and offers an opt-in only
when it would include the task.

The node-run agent here is a real interpreter whose command line is the real one's: Python,
started through a link named `node`, running a file at `…/node_modules/@google/gemini-cli/
dist/index.js` that sleeps (fm reads the name and the command line, as it would of node).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.fleet import (
    Fleet,
    agent_alone,
    gone,
    pane_shell,
    tid,
    wait_for,
)

OLD = {"spawn_gen": "s1000.1.a"}  # launched long ago
GEMINI = "node_modules/@google/gemini-cli/dist/index.js"


def done_task(fleet: Fleet, name: str, n: int, state: str = "dead") -> tuple[str, Path]:
    """A task finished by every other measure: its slot clean at main, launched long ago."""
    task = tid(name)
    slot = fleet.slot(n, holder=task)
    fleet.task(task, slot, state, extra=OLD)
    return task, slot


def not_selected(doc: dict[str, Any]) -> dict[str, tuple[str, str, str | None]]:
    return {n["task"]: (n["verdict"], n["reason"], n["opt_in"]) for n in doc["not_selected"]}


def interpreter(fleet: Fleet, name: str) -> Path:
    """A real interpreter reached through a link called `name` (its process is named so)."""
    link = fleet.bin / name
    if not link.exists():
        link.symlink_to(os.path.realpath(sys.executable))
    return link


def gemini_script(fleet: Fleet) -> Path:
    """Where npm installs Gemini CLI's entry point; what it runs here: a sleep."""
    script = fleet.root / "lib" / GEMINI
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("import time\ntime.sleep(100000)\n")
    return script


def node_gemini_alone(fleet: Fleet, cwd: Path) -> subprocess.Popen[bytes]:
    """`node …/@google/gemini-cli/dist/index.js` in no pane and on no terminal (orphaned)."""
    node = interpreter(fleet, "node")
    return fleet.spawn([str(node), str(gemini_script(fleet)), "1000"], cwd, new_session=True)


def child_named(root: int, name: str) -> int | None:
    kids = [c for c in psutil.Process(root).children(recursive=True) if c.name() == name]
    return kids[0].pid if kids else None


def screen(fleet: Fleet, window: str) -> str:
    return fleet.tmux.run("capture-pane", "-p", "-t", window).stdout


def test_vim_with_an_unsaved_edit_in_an_operators_pane_stops_a_single_teardown(
    fleet: Fleet,
) -> None:
    """The issue's case: an operator's session `editor` has a pane in the merged task's slot
    running `vim -n` with an unsaved line. The dry run, the real run and `--force` refuse
    (4), naming `pid:<the pane's shell>` with its pane, server and terminal and vim in it;
    vim, its edit, the pane, the record, the slot and the task's window are untouched. The
    last-resort hint says what a discard would lose; only it ends the terminal."""
    vim = shutil.which("vim")
    if vim is None:
        pytest.skip("vim is not installed")
    task, slot = done_task(fleet, "edited", 1)
    window, shell = pane_shell(fleet, fleet.tmux, "editor", "vim", slot)
    fleet.tmux.run("send-keys", "-t", window, f"{vim} -n -u NONE notes.txt", "Enter")
    wait_for(lambda: child_named(shell, "vim") is not None, what="vim in editor:vim")
    editor = child_named(shell, "vim")
    assert editor is not None
    fleet.tmux.run("send-keys", "-t", window, "i", "an unsaved line")
    wait_for(lambda: "an unsaved line" in screen(fleet, window), what="the edit on screen")
    tty = os.readlink(f"/proc/{shell}/fd/0")
    before = fleet.snapshot(slot)
    for args in (("--dry-run",), (), ("--force",)):
        code, doc = fleet.fm_json("teardown", task, *args)
        assert (code, doc["verdict"]) == (4, "live-owner"), doc
        [owner] = [o for o in doc["owners"] if o["live"]]
        assert (owner["id"], owner["kind"]) == (f"pid:{shell}", "terminal"), owner
        for said in ("editor:vim", fleet.tmux.socket, tty, f"vim ({editor})", f"bash ({shell})"):
            assert said in owner["why"], (said, owner["why"])
        assert f"pid:{shell}" in doc["reasons"][0]
    r = fleet.fm("teardown", task)
    assert r.returncode == 4
    assert f"live-owner: pid:{shell} is working in this slot" in r.stderr
    assert f"--discard-live-owner=pid:{shell}" in r.stderr
    assert "an editor's unsaved buffers" in r.stderr
    assert fleet.snapshot(slot) == before
    assert not gone(editor) and not gone(shell)
    assert "an unsaved line" in screen(fleet, window)
    assert (fleet.state / f"{task}.meta").exists()
    assert not [e for e in fleet.journal() if e.get("exit_code") == 0]

    # The last resort, named exactly: the terminal (the shell and vim) is ended.
    code, doc = fleet.fm_json("teardown", task, "--force", f"--discard-live-owner=pid:{shell}")
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    wait_for(lambda: gone(editor), what="vim ended by the discard")
    assert not (fleet.state / f"{task}.meta").exists()


def test_a_shell_on_a_terminal_in_no_pane_is_a_person(fleet: Fleet) -> None:
    """An ssh login's shell (a controlling terminal, in no tmux pane) is class 5 too: a single
    teardown refuses (4) naming its terminal; `--landed` leaves it."""
    task, slot = done_task(fleet, "login", 1)
    # A terminal of its own, as an ssh login has: `script` gives the shell a pty of its own.
    script = shutil.which("script")
    if script is None:
        pytest.skip("script(1) is not installed")
    login = fleet.spawn(
        [script, "-q", "-c", "exec bash --norc --noprofile -c 'sleep 100000'", "/dev/null"],
        slot,
        new_session=True,
    )
    wait_for(lambda: child_named(login.pid, "sleep") is not None, what="the login's shell")
    on_tty = [
        p for p in psutil.Process(login.pid).children(recursive=True) if p.terminal() is not None
    ]
    assert on_tty
    first = min(on_tty, key=lambda p: (p.create_time(), p.pid))
    before = fleet.snapshot(slot)
    code, doc = fleet.fm_json("teardown", task)
    assert (code, doc["verdict"]) == (4, "live-owner"), doc
    [owner] = [o for o in doc["owners"] if o["live"]]
    assert (owner["id"], owner["kind"]) == (f"pid:{first.pid}", "terminal"), owner
    assert "in no tmux pane" in owner["why"] and str(first.terminal()) in owner["why"]
    code, doc = fleet.fm_json("teardown", "--landed")
    assert (code, doc["results"]) == (0, []), doc
    assert not_selected(doc)[task][0] == "live-owner"
    assert fleet.snapshot(slot) == before and all(not gone(p.pid) for p in on_tty)


def test_a_node_run_gemini_orphaned_in_a_merged_slot_is_an_agent(fleet: Fleet) -> None:
    """`node …/@google/gemini-cli/dist/index.js` (comm `node`) in no pane: `--landed` does not
    select the task (and offers no opt-in), the single teardown names it an agent in no pane,
    left in the slot of its only claimant, as it does `claude`; with another record on the
    slot it is a live owner (4), as `claude` is."""
    task, slot = done_task(fleet, "gemini", 1)
    gemini = node_gemini_alone(fleet, slot)
    wait_for(lambda: psutil.Process(gemini.pid).name() == "node", what="node running")
    named = f"node ({gemini.pid}, running @google/gemini-cli/dist/index.js)"
    before = fleet.snapshot(slot)
    for dry in (("--dry-run",), ()):
        code, doc = fleet.fm_json("teardown", "--landed", *dry)
        assert (code, doc["results"]) == (0, []), doc
        _, reason, opt_in = not_selected(doc)[task]
        assert reason == f"still working in its slot: {named}, an agent in no pane", reason
        assert opt_in is None
    assert fleet.snapshot(slot) == before and not gone(gemini.pid)
    code, doc = fleet.fm_json("teardown", task, "--dry-run")
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    processes = next(s for s in doc["steps"] if s["step"] == "processes")
    assert (
        f"node ({gemini.pid}) [an agent in no pane, left in {task}'s slot]" in (processes["detail"])
    )
    # Another record on the slot: the agent may be its work, so it owns the slot.
    fleet.record(tid("other"), slot, extra=OLD)
    code, doc = fleet.fm_json("teardown", task)
    assert (code, doc["verdict"]) == (4, "live-owner"), doc
    [owner] = [o for o in doc["owners"] if o["id"].startswith("pid:")]
    assert owner["id"] == f"pid:{gemini.pid}" and "@google/gemini-cli" in owner["why"]
    assert not gone(gemini.pid) and (fleet.state / f"{task}.meta").exists()


def test_a_node_run_gemini_in_someones_pane_is_a_live_owner(fleet: Fleet) -> None:
    """The same agent in an operator's pane: a single teardown refuses (4), the owner its
    `pid:` with the pane and what it runs; the pane's shell is named with it, not apart."""
    task, slot = done_task(fleet, "gemini-pane", 1)
    node = interpreter(fleet, "node")
    command = f"bash --norc --noprofile -c '{node} {gemini_script(fleet)} 1000; exec bash'"
    window = fleet.tmux.new_window("ops", "gemini", slot, command)
    [root] = fleet.tmux.pane_pids(window)
    wait_for(lambda: child_named(root, "node") is not None, what="node in ops:gemini")
    agent = child_named(root, "node")
    before = fleet.snapshot(slot)
    for args in (("--dry-run",), ()):
        code, doc = fleet.fm_json("teardown", task, *args)
        assert (code, doc["verdict"]) == (4, "live-owner"), doc
        [owner] = [o for o in doc["owners"] if o["live"]]
        assert (owner["id"], owner["kind"]) == (f"pid:{agent}", "process"), owner
        assert "@google/gemini-cli" in owner["why"] and "ops:gemini" in owner["why"]
        assert f"bash ({root})" in owner["why"]
    assert fleet.snapshot(slot) == before and agent is not None and not gone(agent)


@pytest.mark.parametrize("operator", [True, False], ids=["shell-and-agent", "agent-only"])
def test_include_live_never_ends_an_operators_shell_or_a_nohup_agent(
    fleet: Fleet, operator: bool
) -> None:
    """`--landed --include-live` takes a task for its own live endpoint, never for someone
    else's work beside it: with an operator's shell and a nohup'd agent in the slot (or the
    agent alone) the task refuses (live-owner), listed with who works there; nothing ends."""
    task, slot = done_task(fleet, "busy", 1, "alive")
    control, control_slot = done_task(fleet, "control", 2)
    shell = pane_shell(fleet, fleet.tmux, "ops", "sh", slot)[1] if operator else None
    nohup = agent_alone(fleet, slot)
    before = fleet.snapshot(slot)["slots"]
    windows = fleet.tmux.windows()
    _, doc = fleet.fm_json("teardown", "--landed", "--include-live", "--dry-run")
    assert [r["task"] for r in doc["results"]] == [control], doc
    for args in ((), ("--dry-run",)):
        code, doc = fleet.fm_json("teardown", "--landed", "--include-live", *args)
        # The control is torn down; the refusal counts in the batch's exit code.
        assert code == 4, doc
        assert task not in [r["task"] for r in doc["results"]], doc
        verdict, reason, opt_in = not_selected(doc)[task]
        assert (verdict, opt_in) == ("live-owner", None), reason
        assert reason.startswith("refused (live-owner): ") and "still working in its slot" in reason
        assert f"claude ({nohup.pid}), an agent in no pane" in reason
        if shell is not None:
            assert f"bash ({shell}), a terminal no task holds" in reason
    assert fleet.snapshot(slot)["slots"] == before
    assert not gone(nohup.pid) and (shell is None or not gone(shell))
    assert f"firstmate:fm-{task}" in fleet.tmux.windows()
    assert fleet.tmux.windows() == sorted(w for w in windows if w != f"firstmate:fm-{control}")
    assert (fleet.state / f"{task}.meta").exists() and control_slot.exists()


def test_include_live_is_offered_only_when_it_would_include_the_task(fleet: Fleet) -> None:
    """A live task whose branch was merged with a merge commit has nothing of its own beyond
    the default branch: `--include-live` would not take it, so it is not offered."""
    task = tid("merge-commit")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "alive", extra=OLD)
    (slot / "feature.txt").write_text("feature\n")
    git_id = ("-c", "user.name=T", "-c", "user.email=t@x.invalid")
    subprocess.run(["git", "-C", str(slot), "add", "feature.txt"], check=True)
    subprocess.run(["git", "-C", str(slot), *git_id, "commit", "-qm", "feature"], check=True)
    subprocess.run(
        ["git", "-C", str(slot), "push", "-q", "origin", "HEAD:refs/heads/f"], check=True
    )
    main = fleet.root / "merger"
    subprocess.run(["git", "clone", "-q", str(fleet.origin), str(main)], check=True)
    merge = ["merge", "--no-ff", "-qm", "Merge f", "origin/f"]
    subprocess.run(["git", "-C", str(main), *git_id, *merge], check=True)
    subprocess.run(["git", "-C", str(main), "push", "-q", "origin", "main"], check=True)
    subprocess.run(["git", "-C", str(slot), "fetch", "-q", "origin"], check=True)
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run")
    assert (code, doc["results"]) == (0, []), doc
    _, reason, opt_in = not_selected(doc)[task]
    assert "own endpoint is alive" in reason and opt_in is None, (reason, opt_in)
    human = fleet.fm("teardown", "--landed", "--dry-run").stdout
    assert task in human and "[include with --include-live]" not in human
    # And indeed the flag does not take it.
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--include-live")
    assert doc["results"] == [] and "nothing of its own" in not_selected(doc)[task][1]
    # A live task with work of its own, squash-merged, is offered the flag, which takes it.
    other = tid("live-own")
    s2 = fleet.slot(2, holder=other)
    fleet.task(other, s2, "alive", extra=OLD)
    for tree, message in ((s2, "own"), (main, "own (squashed)")):
        subprocess.run(["git", "-C", str(tree), "pull", "-q", "--ff-only", "origin", "main"])
        (tree / "own.txt").write_text("own\n")
        subprocess.run(["git", "-C", str(tree), "add", "own.txt"], check=True)
        subprocess.run(["git", "-C", str(tree), *git_id, "commit", "-qm", message], check=True)
    subprocess.run(["git", "-C", str(s2), "push", "-q", "origin", "HEAD:refs/heads/g"], check=True)
    subprocess.run(["git", "-C", str(main), "push", "-q", "origin", "main"], check=True)
    subprocess.run(["git", "-C", str(s2), "fetch", "-q", "origin"], check=True)
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run")
    assert not_selected(doc)[other][2] == "--include-live", not_selected(doc)[other]
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run", "--include-live")
    assert [r["task"] for r in doc["results"]] == [other], doc


def test_fm_agent_names_extends_the_list(fleet: Fleet) -> None:
    """An agent fm does not know (`my-agent`, a script of `@acme/agent-cli` run by node),
    orphaned in a merged slot, looks like any program until FM_AGENT_NAMES names it; then
    `--landed` leaves it and says so. A bad entry is a usage error (2), one line."""
    task, slot = done_task(fleet, "mine", 1)
    shutil.copy("/bin/sleep", fleet.bin / "my-agent")
    mine = fleet.spawn([str(fleet.bin / "my-agent"), "100000"], slot, new_session=True)
    acme = fleet.root / "lib" / "node_modules" / "@acme" / "agent-cli" / "index.js"
    acme.parent.mkdir(parents=True)
    acme.write_text("import time\ntime.sleep(100000)\n")
    node = fleet.spawn([str(interpreter(fleet, "node")), str(acme)], slot, new_session=True)
    wait_for(lambda: psutil.Process(node.pid).name() == "node", what="node running")
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run")
    assert [r["task"] for r in doc["results"]] == [task], doc  # nobody else works there
    env = fleet.env(FM_AGENT_NAMES=" my-agent , @acme/agent-cli,")
    for dry in (("--dry-run",), ()):
        code, doc = fleet.fm_json("teardown", "--landed", *dry, env=env)
        assert (code, doc["results"]) == (0, []), doc
        reason = not_selected(doc)[task][1]
        assert f"my-agent ({mine.pid}), an agent in no pane" in reason
        assert f"node ({node.pid}, running @acme/agent-cli/index.js), an agent in no pane" in (
            reason
        )
    assert not gone(mine.pid) and not gone(node.pid)
    r = fleet.fm("teardown", "--landed", env=fleet.env(FM_AGENT_NAMES="my agent"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("fm: FM_AGENT_NAMES: 'my agent' is not a name")


def test_an_interpreter_whose_script_cannot_be_read_is_doubt(fleet: Fleet) -> None:
    """An interpreter in no pane whose command line is longer than fm reads before its script
    may be an agent: the single teardown refuses (5) and `--landed` leaves the task."""
    task, slot = done_task(fleet, "long", 1)
    python = interpreter(fleet, "python3")
    options = ["-W", "ignore::DeprecationWarning"] * 160  # 4 KiB of options before the script
    script = fleet.root / "serve.py"
    script.write_text("import time\ntime.sleep(100000)\n")
    proc = fleet.spawn([str(python), *options, str(script)], slot, new_session=True)
    wait_for(lambda: psutil.Process(proc.pid).name() == "python3", what="python running")
    before = fleet.snapshot(slot)
    code, doc = fleet.fm_json("teardown", task)
    assert (code, doc["verdict"]) == (5, "unsafe"), doc
    assert "whether it runs an agent cannot be told" in doc["reasons"][0]
    code, doc = fleet.fm_json("teardown", "--landed")
    assert (code, doc["results"]) == (0, []), doc
    assert "cannot be told" in not_selected(doc)[task][1]
    assert fleet.snapshot(slot) == before and not gone(proc.pid)


def test_fm_runbook_agents_prints_the_list() -> None:
    """`fm runbook agents`: the list of agents as the code holds it, with FM_AGENT_NAMES's."""
    from fm_teardown.model import process_kind

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fm_teardown", "runbook", "agents"],
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1", **env},
            check=False,
            timeout=60,
        )

    r = run(FM_AGENT_NAMES="")
    assert r.returncode == 0 and r.stdout.startswith("# agents")
    assert "<!--" not in r.stdout
    for name in (*process_kind.AGENT_PACKAGES, *process_kind.AGENT_NAMES, "agy", "node", "uvx"):
        assert name in r.stdout, name
    assert "Added by FM_AGENT_NAMES here: none" in r.stdout
    r = run(FM_AGENT_NAMES="my-agent,@acme/agent-cli")
    assert "Added by FM_AGENT_NAMES here: @acme/agent-cli, my-agent" in r.stdout
    r = run(FM_AGENT_NAMES="/bin/evil")
    assert r.returncode == 2 and "FM_AGENT_NAMES" in r.stderr and not r.stdout
