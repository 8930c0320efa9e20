"""The processes step's later pass (spec §14.8): what TASK's processes leave behind as they are
ended (a child forked by a SIGTERM handler, re-parented when its parent exits) is ended on a
later pass when it is no agent, has no terminal and TASK is the slot's only claimant; an
agent that starts there the same way fails the step and keeps running."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.fleet import Fleet, gone, tid, wait_for

# On SIGTERM: fork a child that execs argv[2..] (so it keeps running), write its pid to
# argv[1], exit. The firstmate suite's own process does the same. Makes `<argv[1]>.ready`
# once its handler is set.
FORKER = """
use POSIX ();
my $file = shift;
my @child = @ARGV;
$SIG{TERM} = sub {
    my $child = fork();
    die "fork" unless defined $child;
    if (!$child) {
        # perl blocks SIGTERM while its handler runs, and exec keeps the mask.
        POSIX::sigprocmask(POSIX::SIG_UNBLOCK(), POSIX::SigSet->new(POSIX::SIGTERM()));
        exec @child;
        die "exec";
    }
    # Until the child is ready to be signalled (FORKER_WAIT: a file it makes then).
    if ($ENV{FORKER_WAIT}) { select(undef, undef, undef, 0.02) until -e $ENV{FORKER_WAIT}; }
    open my $fh, ">", "$file.tmp" or die "open";
    print {$fh} "$child\\n";
    close $fh;
    rename "$file.tmp", $file;
    exit 0;
};
open my $ready, ">", "$file.ready" or die "ready";
close $ready;
sleep 300 while 1;
"""

LEFT_BEHIND = "left behind by those ended (started there as they ended, no agent, no terminal)"
FAST = {"FM_TERM_GRACE_SECS": "1", "FM_KILL_WAIT_SECS": "1"}


def forker(
    fleet: Fleet, slot: Path, childfile: Path, child: list[str], wait: Path | None = None
) -> subprocess.Popen[bytes]:
    """The forker, cd'd into `slot`, in a session of its own: no controlling terminal, whatever
    terminal the suite runs in (its child inherits that). With `wait`, its handler exits only
    once that file exists."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if wait is not None:
        env["FORKER_WAIT"] = str(wait)
    p = subprocess.Popen(
        ["perl", "-e", FORKER, str(childfile), *child],
        cwd=slot,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    fleet.procs.append(p)
    fleet.tracked.add(p.pid)
    ready = Path(f"{childfile}.ready")
    wait_for(ready.exists, what="the forker")
    return p


def test_a_child_forked_by_a_term_handler_is_ended_on_a_later_pass(fleet: Fleet) -> None:
    """The forker's child started in the slot during the step: no agent, no terminal, TASK
    the only claimant. The teardown converges: exit 0, both gone, the journal's `signalled`
    names both, and the step's detail names the child as ended on a later pass."""
    task = tid("lp")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    childfile = fleet.root / "child"
    parent = forker(fleet, slot, childfile, ["sleep", "300"])
    code, doc = fleet.fm_json("teardown", task, env=fleet.env(**FAST))
    child = int(childfile.read_text())
    fleet.tracked.add(child)
    assert parent.wait(timeout=10) == 0
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    # Gone when the teardown returns, not a zombie init has yet to reap (`kill -0` fails):
    # the child was re-parented to init when the forker exited.
    assert not Path(f"/proc/{child}").exists(), "the forked child is still there"
    [step] = [s for s in doc["steps"] if s["step"] == "processes"]
    assert step["outcome"] == "done", step
    assert step["detail"].endswith(f"ended on a later pass, {LEFT_BEHIND}: sleep ({child})")
    assert f"perl ({parent.pid})" in step["detail"], step
    assert not (fleet.state / f"{task}.meta").exists()
    [line] = fleet.journal()
    signalled = {s["pid"]: s for s in line["signalled"]}
    assert parent.pid in signalled and child in signalled, line["signalled"]
    assert signalled[child]["signals"][0] == "SIGTERM", signalled[child]


def test_an_agent_forked_by_a_term_handler_fails_the_step(fleet: Fleet) -> None:
    """The same forker, but its child is an agent (`claude`): never ended as a leftover. The
    step fails (exit 1), the agent runs on, named as started there, and the record is kept."""
    task = tid("la")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    childfile = fleet.root / "child"
    parent = forker(fleet, slot, childfile, [str(fleet.bin / "claude"), "100000"])
    code, doc = fleet.fm_json("teardown", task, env=fleet.env(**FAST))
    child = int(childfile.read_text())
    fleet.tracked.add(child)
    assert parent.wait(timeout=10) == 0
    assert (code, doc["verdict"]) == (1, "failed"), doc
    [step] = [s for s in doc["steps"] if s["step"] == "processes"]
    assert step["outcome"] == "failed", step
    # Named as the scan saw it: `claude`, or still `perl` when seen between fork and exec.
    said = rf"started there during the teardown: (claude|perl) \({child}\)"
    assert re.search(said, step["detail"]), step
    assert "later pass" not in step["detail"], step
    assert not gone(child)
    assert (fleet.state / f"{task}.meta").exists()
    [line] = fleet.journal()
    assert child not in {s["pid"] for s in line["signalled"]}, line["signalled"]


def test_an_agent_left_behind_on_the_later_pass_fails_the_step(fleet: Fleet) -> None:
    """Two generations: the forker's child is a forker too, whose own child is an agent. The
    later pass ends the first child (a leftover) and then meets the agent it left: the step
    fails, the agent runs on, the record is kept, and the detail names both."""
    task = tid("lg")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    first, second = fleet.root / "first", fleet.root / "second"
    inner = ["perl", "-e", FORKER, str(second), str(fleet.bin / "claude"), "100000"]
    # The outer handler exits once the middle forker's handler is set: the later pass's
    # SIGTERM then makes the middle one fork the agent.
    parent = forker(fleet, slot, first, inner, wait=Path(f"{second}.ready"))
    code, doc = fleet.fm_json("teardown", task, env=fleet.env(**FAST))
    assert parent.wait(timeout=10) == 0
    middle = int(first.read_text())
    fleet.tracked.add(middle)
    assert second.exists(), doc  # the middle one was signalled, on the later pass
    agent = int(second.read_text())
    fleet.tracked.add(agent)
    assert (code, doc["verdict"]) == (1, "failed"), doc
    [step] = [s for s in doc["steps"] if s["step"] == "processes"]
    assert step["outcome"] == "failed", step
    # Named as the scan saw it: `claude`, or still `perl` when seen between fork and exec.
    assert re.search(
        rf"started there during the teardown: (claude|perl) \({agent}\)", step["detail"]
    ), step
    assert "ended on a later pass" in step["detail"], step
    assert f"perl ({middle})" in step["detail"], step
    wait_for(lambda: gone(middle), what="the middle forker gone")
    assert not gone(agent)
    assert (fleet.state / f"{task}.meta").exists()
    [line] = fleet.journal()
    signalled = {s["pid"] for s in line["signalled"]}
    assert middle in signalled and agent not in signalled, line["signalled"]


def test_a_leftover_in_a_slot_another_record_claims_fails_the_step(fleet: Fleet) -> None:
    """The same plain child, but another record (its endpoint dead) also claims the slot: the
    child might be that task's, so it is no leftover of TASK's. The step fails (exit 1), the
    child runs on, the record is kept."""
    task, other = tid("lc"), tid("lo")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    fleet.task(other, slot, "dead")
    childfile = fleet.root / "child"
    parent = forker(fleet, slot, childfile, ["sleep", "300"])
    code, doc = fleet.fm_json("teardown", task, env=fleet.env(**FAST))
    child = int(childfile.read_text())
    fleet.tracked.add(child)
    assert parent.wait(timeout=10) == 0
    assert (code, doc["verdict"]) == (1, "failed"), doc
    [step] = [s for s in doc["steps"] if s["step"] == "processes"]
    assert f"started there during the teardown: sleep ({child})" in step["detail"], step
    assert not gone(child)
    assert (fleet.state / f"{task}.meta").exists()
