"""Tests of the treehouse stand-in itself (fm_teardown/standin/treehouse), against real git.

They pin the parts of the real contract (docs/pool.md) that the
project's own tests rely on, so a drift in the stand-in shows up here first.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.standin.pool_fixtures import (
    LOCK_FILE,
    SIGTERM_IGNORER,
    STANDIN_BIN,
    git,
    head_is_detached,
    hold_state_lock,
    lease_slot,
    make_project,
    pool_dir_for,
    pool_status,
    read_state,
    run_standin,
    slot_gitdir,
    spawn_in,
    standin_env,
    state_entry,
    state_file_of,
    state_lock_held,
    status_of,
    stop,
    wait_until,
)

RETURNED = "🌳 Worktree returned to pool."
ABORTED = "🌳 Aborted."
PROMPT = "Worktree has uncommitted changes. Clean and return? [Y/n] "
HEX32 = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class Pool:
    tmp: Path
    origin: Path
    project: Path
    env: dict[str, str]

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        input: str | None = None,
        timeout: float = 30.0,
        **extra_env: str | None,
    ) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        for key, value in extra_env.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return run_standin(args, env, cwd or self.project, input=input, timeout=timeout)

    def lease(self, holder: str = "holder-A") -> dict[str, str]:
        return lease_slot(self.project, self.env, holder)

    def status(self, slot: str) -> dict[str, Any]:
        return status_of(self.project, self.env, slot)


@pytest.fixture
def pool(tmp_path: Path) -> Pool:
    origin, project = make_project(tmp_path)
    return Pool(tmp_path, origin, project, standin_env(tmp_path))


def origin_main(pool: Pool) -> str:
    return git(["rev-parse", "refs/remotes/origin/main"], pool.project)


def assert_still_leased(pool: Pool, lease: dict[str, str], state_before: bytes) -> None:
    slot = lease["path"]
    assert state_file_of(slot).read_bytes() == state_before
    row = pool.status(slot)
    assert row["status"] == "leased"
    assert row["lease_id"] == lease["lease_id"]


# ----------------------------------------------------------------------------- CLI surface


def test_version_and_usage_errors(pool: Pool) -> None:
    proc = pool.run("--version")
    assert (proc.returncode, proc.stdout) == (0, "2.3.0\n")
    for args, message in [
        (("bogus",), 'unknown command "bogus" for "treehouse"'),
        (("status", "--nope"), "unknown flag: --nope"),
        (("get", "--json"), "--json requires --lease"),
        (("get",), "interactive get is not supported"),
        (("return", "--if-lease-id"), "flag needs an argument: --if-lease-id"),
        (("return", "--if-lease-id", ""), "--if-lease-id cannot be empty"),
        (("return", "--if-lease-id="), "--if-lease-id cannot be empty"),
    ]:
        proc = pool.run(*args)
        assert proc.returncode == 1, args
        assert proc.stdout == "", args
        assert message in proc.stderr, (args, proc.stderr)


def test_empty_pool_status_creates_state(pool: Pool) -> None:
    proc = pool.run("status", "--json")
    assert (proc.returncode, proc.stdout) == (0, "[]\n")
    pool_dir = pool_dir_for(pool.project, pool.env)
    assert (pool_dir / "treehouse-state.json").read_text() == '{\n  "worktrees": null\n}'
    assert (pool_dir / LOCK_FILE).exists()


def test_status_needs_cwd_in_repo(pool: Pool) -> None:
    proc = pool.run("status", "--json", cwd=pool.tmp)
    assert proc.returncode == 1
    assert proc.stderr.startswith("not in a git or jj repository: git rev-parse --show-toplevel")


# ----------------------------------------------------------------------------- get --lease


def test_get_lease_creates_numbered_slots_and_state(pool: Pool) -> None:
    first = pool.lease("holder-A")
    second = pool.lease("holder-B")
    pool_dir = pool_dir_for(pool.project, pool.env)
    assert pool_dir.parent == pool.tmp / "pool-root" / ".treehouse"
    assert first["path"] == str(pool_dir / "1" / "project")
    assert second["path"] == str(pool_dir / "2" / "project")
    assert list(first) == ["path", "lease_id", "lease_holder", "leased_at"]
    for lease, holder in ((first, "holder-A"), (second, "holder-B")):
        assert HEX32.match(lease["lease_id"])
        assert lease["lease_holder"] == holder
        assert datetime.fromisoformat(lease["leased_at"]).tzinfo is not None
        slot = Path(lease["path"])
        assert (slot / ".git").is_file()
        assert head_is_detached(slot)
        assert git(["rev-parse", "HEAD"], slot) == origin_main(pool)
    assert first["lease_id"] != second["lease_id"]

    raw = (pool_dir / "treehouse-state.json").read_text()
    assert not raw.endswith("\n")
    assert raw.startswith('{\n  "worktrees": [\n    {\n      "name": "1",\n')
    entries = json.loads(raw)["worktrees"]
    assert [list(e) for e in entries] == [
        ["name", "path", "created_at", "leased", "lease_id", "lease_holder", "leased_at"]
    ] * 2
    assert entries[0]["lease_id"] == first["lease_id"]
    assert entries[0]["leased_at"] == first["leased_at"]
    assert (pool_dir.parent / ".gitignore").read_text() == "*\n"

    # Without --json: the bare path; the holder defaults to $TREEHOUSE_LEASE_HOLDER.
    proc = pool.run("get", "--lease", "--no-fetch", TREEHOUSE_LEASE_HOLDER="from-env")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == str(pool_dir / "3" / "project") + "\n"
    assert "🌳 Leased worktree at" in proc.stderr
    assert state_entry(pool_dir / "3" / "project")["lease_holder"] == "from-env"


def test_get_fetches_and_root_flag_overrides_env(pool: Pool) -> None:
    elsewhere = pool.tmp / "other-root"
    proc = pool.run("get", "--lease", "--json", "--root", str(elsewhere))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["path"].startswith(str(elsewhere / ".treehouse") + "/")
    # --root . puts the pool inside the repo and keeps it out of git status.
    proc = pool.run("get", "--lease", "--root", ".")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(str(pool.project / ".treehouse") + "/")
    exclude = (pool.project / ".git" / "info" / "exclude").read_text()
    assert "/.treehouse" in exclude.splitlines()
    assert git(["status", "--porcelain"], pool.project) == ""


def test_pool_full_fails(pool: Pool) -> None:
    (pool.project / "treehouse.toml").write_text("max_trees = 1\n")
    pool.lease()
    proc = pool.run("get", "--lease", "--json", "--no-fetch")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "all 1 worktrees are in use or dirty (max_trees = 1)" in proc.stderr


def test_status_json_echoes_lease(pool: Pool) -> None:
    lease = pool.lease()
    proc = pool.run("status", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert proc.stdout == json.dumps(rows, separators=(",", ":")) + "\n"
    assert rows == [
        {
            "name": "1",
            "path": lease["path"],
            "status": "leased",
            "flavor": "git",
            "lease_id": lease["lease_id"],
            "lease_holder": lease["lease_holder"],
            "leased_at": lease["leased_at"],
            "processes": [],
        }
    ]
    assert list(rows[0]) == [
        "name",
        "path",
        "status",
        "flavor",
        "lease_id",
        "lease_holder",
        "leased_at",
        "processes",
    ]


# ----------------------------------------------------------------------------- return


def test_return_happy_path(pool: Pool) -> None:
    lease = pool.lease()
    slot = Path(lease["path"])
    (slot / "untracked.txt").write_text("scratch")
    (slot / "newdir").mkdir()
    (slot / "newdir" / "file.txt").write_text("scratch")
    (slot / "keep.log").write_text("ignored file")
    (slot / "ignored").mkdir()
    (slot / "ignored" / "cache.bin").write_text("ignored dir")
    (slot / "README.md").write_text("edited\n")
    git(["checkout", "--quiet", "-b", "feature"], slot)  # a branch checked out in the slot

    proc = pool.run(
        "return",
        str(slot),
        "--force",
        "--if-lease-id",
        lease["lease_id"],
        "--if-lease-holder",
        lease["lease_holder"],
        cwd=pool.tmp,  # outside the repo, with an explicit path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == RETURNED

    assert not (slot / "untracked.txt").exists()
    assert not (slot / "newdir").exists()
    assert (slot / "keep.log").read_text() == "ignored file"
    assert (slot / "ignored" / "cache.bin").exists()
    assert (slot / "README.md").read_text() == "hello from the project\n"
    assert head_is_detached(slot)
    assert git(["rev-parse", "HEAD"], slot) == origin_main(pool)
    assert git(["status", "--porcelain"], slot) == ""

    assert list(state_entry(slot)) == ["name", "path", "created_at"]
    row = pool.status(str(slot))
    assert row["status"] == "available"
    assert (row["lease_id"], row["lease_holder"], row["leased_at"]) == ("", "", None)


def test_return_targets_further_ahead_branch(pool: Pool) -> None:
    lease = pool.lease()
    (pool.project / "local.txt").write_text("unpushed\n")
    git(["add", "local.txt"], pool.project)
    git(["commit", "--quiet", "-m", "local only"], pool.project)
    proc = pool.run("return", lease["path"], "--if-lease-id", lease["lease_id"])
    assert proc.returncode == 0, proc.stderr
    # refs/heads/main is ahead of origin/main, so it is the reset target.
    assert git(["rev-parse", "HEAD"], lease["path"]) == git(["rev-parse", "main"], pool.project)


def test_returned_slot_is_reused_and_stale_lease_id_rejected(pool: Pool) -> None:
    old = pool.lease("agent")
    assert pool.run("return", old["path"], "--if-lease-id", old["lease_id"]).returncode == 0
    new = pool.lease("agent")
    assert new["path"] == old["path"]
    assert new["lease_id"] != old["lease_id"]
    before = state_file_of(new["path"]).read_bytes()
    proc = pool.run("return", old["path"], "--if-lease-id", old["lease_id"])
    assert proc.returncode == 1
    assert (
        f"failed to return worktree: lease precondition failed: "
        f"lease identity does not match worktree {old['path']}"
    ) in proc.stderr
    assert_still_leased(pool, new, before)


def test_lease_precondition_failures_change_nothing(pool: Pool) -> None:
    lease = pool.lease("holder-A")
    slot = lease["path"]
    sentinel = Path(slot) / "sentinel.txt"
    sentinel.write_text("keep me")
    before = state_file_of(slot).read_bytes()
    cases = [
        (("--if-lease-id", "0" * 32), "lease identity does not match worktree"),
        (
            ("--if-lease-id", lease["lease_id"], "--if-lease-holder", "holder-B"),
            "lease holder does not match worktree",
        ),
        (("--if-lease-holder", ""), "lease holder does not match worktree"),
    ]
    for flags, message in cases:
        proc = pool.run("return", slot, "--force", *flags)
        assert proc.returncode == 1, flags
        assert proc.stdout == ""
        assert (
            proc.stderr
            == f"failed to return worktree: lease precondition failed: {message} {slot}\n"
        )
        assert sentinel.exists()
    assert_still_leased(pool, lease, before)

    # After a successful return, a retry is told the slot is not leased.
    ok = pool.run("return", slot, "--force", "--if-lease-id", lease["lease_id"])
    assert ok.returncode == 0, ok.stderr
    again = pool.run("return", slot, "--force", "--if-lease-id", lease["lease_id"])
    assert again.returncode == 1
    assert f"lease precondition failed: worktree {slot} is not leased" in again.stderr


def test_dirty_without_force_and_devnull_stdin_aborts(pool: Pool) -> None:
    lease = pool.lease()
    slot = Path(lease["path"])
    (slot / "work.txt").write_text("unsaved")
    before = state_file_of(slot).read_bytes()
    proc = pool.run("return", str(slot), "--if-lease-id", lease["lease_id"])  # stdin=DEVNULL
    assert proc.returncode == 0
    assert proc.stdout == ""
    assert proc.stderr == PROMPT + ABORTED + "\n"
    assert (slot / "work.txt").exists()
    assert_still_leased(pool, lease, before)


def test_dirty_without_force_and_a_closed_stdin_aborts(pool: Pool) -> None:
    """The real pool's contract for an unforced return from a caller whose stdin is closed
    (not /dev/null: no fd 0 at all): the dirty prompt reads EOF, `Aborted.`, exit 0, the tree
    and the lease untouched. fm's proof of an unforced return relies on it."""
    lease = pool.lease()
    slot = Path(lease["path"])
    (slot / "work.txt").write_text("unsaved")
    before = state_file_of(slot).read_bytes()
    proc = subprocess.run(
        ["bash", "-c", 'exec "$@" <&-', "-", str(STANDIN_BIN), "return", str(slot)],
        cwd=pool.project,
        env=pool.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr == PROMPT + ABORTED + "\n"
    assert (slot / "work.txt").read_text() == "unsaved"
    assert_still_leased(pool, lease, before)


def test_dirty_prompt_answers(pool: Pool) -> None:
    lease = pool.lease()
    slot = Path(lease["path"])
    (slot / "work.txt").write_text("unsaved")
    before = state_file_of(slot).read_bytes()
    no = pool.run("return", str(slot), "--if-lease-id", lease["lease_id"], input="n\n")
    assert (no.returncode, no.stderr) == (0, PROMPT + ABORTED + "\n")
    eof = pool.run("return", str(slot), input="y")  # no newline before EOF
    assert (eof.returncode, eof.stderr) == (0, PROMPT + ABORTED + "\n")
    assert_still_leased(pool, lease, before)
    yes = pool.run("return", str(slot), "--if-lease-id", lease["lease_id"], input="y\n")
    assert yes.returncode == 0, yes.stderr
    assert yes.stderr == PROMPT + RETURNED + "\n"  # a piped answer is not echoed
    assert not (slot / "work.txt").exists()


def test_paths_not_managed(pool: Pool) -> None:
    lease = pool.lease()
    slot = Path(lease["path"])
    (slot / "sub").mkdir()
    alias = pool.tmp / "alias"
    alias.symlink_to(slot)
    before = state_file_of(slot).read_bytes()
    for path in (pool.tmp / "nowhere", slot / "sub", alias, pool.project):
        proc = pool.run("return", str(path), "--force", cwd=pool.tmp)
        assert proc.returncode == 1, path
        assert proc.stderr == f"worktree {path} is not managed by treehouse\n"
    assert_still_leased(pool, lease, before)


def test_treehouse_dir_is_used_without_a_path(pool: Pool) -> None:
    lease = pool.lease()
    proc = pool.run(
        "return", "--if-lease-id", lease["lease_id"], cwd=pool.tmp, TREEHOUSE_DIR=lease["path"]
    )
    assert proc.returncode == 0, proc.stderr
    assert state_entry(lease["path"]).get("leased") is None


# ----------------------------------------------------------------------------- processes


def test_return_terminates_sleep_in_slot(pool: Pool) -> None:
    lease = pool.lease()
    slot = Path(lease["path"])
    (slot / "deep").mkdir()
    sleeper = spawn_in(slot / "deep", ["sleep", "1000"])
    try:
        row = pool.status(str(slot))
        assert row["status"] == "leased"
        assert {"pid": sleeper.pid, "name": "sleep"} in row["processes"]
        started = time.monotonic()
        proc = pool.run("return", str(slot), "--force", "--if-lease-id", lease["lease_id"])
        elapsed = time.monotonic() - started
        assert proc.returncode == 0, proc.stderr
        assert f"🌳 Terminated lingering processes: sleep ({sleeper.pid})" in proc.stderr
        assert sleeper.wait(timeout=5) == -signal.SIGTERM
        assert elapsed < 1.9  # SIGTERM was enough: no SIGKILL round
    finally:
        stop(sleeper)
    assert pool.status(str(slot))["status"] == "available"


def test_unleased_slot_with_a_process_is_in_use(pool: Pool) -> None:
    lease = pool.lease()
    assert pool.run("return", lease["path"], "--force").returncode == 0
    sleeper = spawn_in(lease["path"], ["sleep", "1000"])
    try:
        assert pool.status(lease["path"])["status"] == "in-use"
    finally:
        stop(sleeper)


def test_sigterm_ignoring_process_is_sigkilled(pool: Pool) -> None:
    lease = pool.lease()
    slot = lease["path"]
    stubborn = spawn_in(slot, SIGTERM_IGNORER, ready_line="ready")
    try:
        started = time.monotonic()
        proc = pool.run("return", slot, "--force", "--if-lease-id", lease["lease_id"])
        elapsed = time.monotonic() - started
        assert proc.returncode == 0, proc.stderr
        assert stubborn.wait(timeout=5) == -signal.SIGKILL
        assert elapsed >= 1.9  # the full SIGTERM grace period passed first
    finally:
        stop(stubborn)


def test_survivor_fault_keeps_lease(pool: Pool) -> None:
    lease = pool.lease()
    slot = Path(lease["path"])
    (slot / "sentinel.txt").write_text("x")
    before = state_file_of(slot).read_bytes()
    proc = pool.run(
        "return",
        str(slot),
        "--force",
        "--if-lease-id",
        lease["lease_id"],
        TREEHOUSE_STANDIN_FAULT="survivor",
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        "failed to return worktree: worktree still has live processes after termination: "
        "agent (4321)\n"
    )
    assert (slot / "sentinel.txt").exists()
    assert_still_leased(pool, lease, before)


# ----------------------------------------------------------------------------- git failures


def test_real_index_lock_keeps_lease(pool: Pool) -> None:
    lease = pool.lease()
    slot = Path(lease["path"])
    gitdir = slot_gitdir(slot)
    (gitdir / "index.lock").write_text("")
    before = state_file_of(slot).read_bytes()
    sleeper = spawn_in(slot, ["sleep", "1000"])
    try:
        # Without --force the detach fails first: nothing is killed or reset.
        proc = pool.run("return", str(slot), "--if-lease-id", lease["lease_id"])
        assert proc.returncode == 1
        assert proc.stderr.startswith(
            "failed to return worktree: failed to detach worktree HEAD: git checkout --detach: "
            f"fatal: Unable to create '{gitdir}/index.lock': File exists."
        )
        assert sleeper.poll() is None
        assert_still_leased(pool, lease, before)

        # With --force the processes die, then read-tree fails; files stay, lease stays.
        (slot / "sentinel.txt").write_text("x")
        proc = pool.run("return", str(slot), "--force", "--if-lease-id", lease["lease_id"])
        assert proc.returncode == 1
        sha = origin_main(pool)
        assert (
            f"failed to return worktree: git read-tree --reset -u {sha}: fatal: Unable to "
            f"create '{gitdir}/index.lock': File exists."
        ) in proc.stderr
        assert sleeper.wait(timeout=5) == -signal.SIGTERM
        assert (slot / "sentinel.txt").exists()
        assert not (gitdir / "HEAD.lock").exists()
        assert_still_leased(pool, lease, before)
    finally:
        stop(sleeper)

    (gitdir / "index.lock").unlink()
    proc = pool.run("return", str(slot), "--force", "--if-lease-id", lease["lease_id"])
    assert proc.returncode == 0, proc.stderr


def test_index_lock_fault(pool: Pool) -> None:
    lease = pool.lease()
    slot = Path(lease["path"])
    (slot / "sentinel.txt").write_text("x")
    before = state_file_of(slot).read_bytes()
    proc = pool.run(
        "return",
        str(slot),
        "--force",
        "--if-lease-id",
        lease["lease_id"],
        TREEHOUSE_STANDIN_FAULT="index-lock",
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        f"failed to return worktree: git read-tree --reset -u {origin_main(pool)}: fatal: "
        f"Unable to create '{slot_gitdir(slot)}/index.lock': File exists.\n"
    )
    assert (slot / "sentinel.txt").exists()
    assert not (slot_gitdir(slot) / "index.lock").exists()
    assert_still_leased(pool, lease, before)


# ----------------------------------------------------------------------------- locking


def test_held_flock_blocks_the_standin(pool: Pool) -> None:
    lease = pool.lease()
    before = state_file_of(lease["path"]).read_bytes()
    with (
        hold_state_lock(state_file_of(lease["path"]).parent),
        pytest.raises(subprocess.TimeoutExpired),
    ):
        pool.run("return", lease["path"], "--force", timeout=0.7)
    assert_still_leased(pool, lease, before)


def test_sleep_fault_holds_the_lock_during_return(pool: Pool) -> None:
    lease = pool.lease()
    pool_dir = state_file_of(lease["path"]).parent
    env = dict(pool.env, TREEHOUSE_STANDIN_FAULT="sleep:1")
    returner = subprocess.Popen(
        [str(STANDIN_BIN), "return", lease["path"], "--force", "--if-lease-id", lease["lease_id"]],
        cwd=pool.tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: state_lock_held(pool_dir), timeout=10)
        status = pool.run("status", "--json")  # blocks until the return is done
        assert returner.poll() == 0
        assert json.loads(status.stdout)[0]["status"] == "available"
    finally:
        if returner.poll() is None:
            returner.kill()
        returner.wait(timeout=10)


# ----------------------------------------------------------------------------- state handling


def test_corrupt_state_is_recovered_as_leased(pool: Pool) -> None:
    lease = pool.lease()
    assert pool.run("return", lease["path"], "--force").returncode == 0
    state_file_of(lease["path"]).write_text('{"worktrees": [')
    proc = pool.run("status", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "treehouse: WARNING: state file" in proc.stderr
    assert "is corrupt or truncated" in proc.stderr
    row = json.loads(proc.stdout)[0]
    assert row["status"] == "leased"
    assert row["lease_id"] == ""
    assert row["lease_holder"].startswith("recovered: ")
    # An unconditional return releases a recovered lease.
    assert pool.run("return", lease["path"], "--force").returncode == 0
    assert pool.status(lease["path"])["status"] == "available"


def test_status_heals_vanished_slot_and_get_recreates_it(pool: Pool) -> None:
    pool.lease()
    second = pool.lease()
    shutil.rmtree(Path(second["path"]).parent)
    rows = pool_status(pool.project, pool.env)
    assert [r["name"] for r in rows] == ["1"]
    assert [e["name"] for e in read_state(rows[0]["path"])["worktrees"]] == ["1"]
    again = pool.lease()  # the stale git worktree registration is pruned first
    assert again["path"] == second["path"]


def test_noise_fault_only_touches_stderr(pool: Pool) -> None:
    proc = pool.run("status", "--json", TREEHOUSE_STANDIN_FAULT="noise")
    assert (proc.returncode, proc.stdout) == (0, "[]\n")
    assert "A new version of treehouse is available" in proc.stderr
    assert "treehouse: WARNING: state file" in proc.stderr
    state = pool_dir_for(pool.project, pool.env) / "treehouse-state.json"
    assert state.read_text() == '{\n  "worktrees": null\n}'
    assert pool.run("status", TREEHOUSE_STANDIN_FAULT="bogus").returncode == 1


# ----------------------------------------------------------------------------- call log


def test_call_log_records_each_invocation(pool: Pool) -> None:
    log = pool.tmp / "calls.jsonl"
    lease = pool.lease()
    args = ("return", lease["path"], "--force", "--if-lease-id", lease["lease_id"])
    assert pool.run(*args, cwd=pool.tmp, TREEHOUSE_STANDIN_LOG=str(log)).returncode == 0
    assert pool.run("status", input="", TREEHOUSE_STANDIN_LOG=str(log)).returncode == 0
    first, second = (json.loads(line) for line in log.read_text().splitlines())
    assert first["argv"] == list(args)
    assert first["cwd"] == str(pool.tmp)
    assert first["stdin_tty"] is False
    assert first["stdin_closed_or_devnull"] is True
    assert first["stdin_kind"] == "devnull"
    assert first["env"]["TREEHOUSE_NO_UPDATE_CHECK"] == "1"
    assert first["env"]["TREEHOUSE_ROOT"] == pool.env["TREEHOUSE_ROOT"]
    assert first["env"]["TREEHOUSE_STANDIN_LOG"] == str(log)
    assert not any(not k.startswith("TREEHOUSE_") for k in first["env"])
    assert second["argv"] == ["status"]
    assert second["cwd"] == str(pool.project)
    assert second["stdin_kind"] == "pipe"


def test_the_standin_is_checked_as_python_by_ruff_and_mypy() -> None:
    """The stand-in is named as the pool's command (no `.py`), so neither tool would find it
    by itself: the project's configuration names it, and it is Python they can check."""
    import ast
    import tomllib

    root = Path(__file__).resolve().parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    path = "fm_teardown/standin/treehouse"
    assert path in config["tool"]["mypy"]["files"]
    assert path in config["tool"]["ruff"]["extend-include"]
    assert config["tool"]["mypy"]["strict"] is True
    ast.parse((root / path).read_text(encoding="utf-8"))
