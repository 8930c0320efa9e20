"""fm runs no program a repository names (spec §15.1), end to end on a real fleet.

Every config key of git 2.39 that names a program, and the attributes that pick a driver, are
planted where an agent could write them (the repository's config, the worktree configs, an
included file, `.gitattributes` and `info/attributes`, the hooks directory and
`core.hooksPath`), for the slots and the project checkout alike. Each planted program writes a
marker naming itself and the processes above it. Then the audit, one-task dry runs, a real
teardown, a `--force` teardown that saves, and `fm restore` run, and no marker of a program
fm's own git started may appear. What the pool's `treehouse` runs (its own git, in the slot
it resets) is the pool's program, not fm's: markers with the stand-in among their ancestors
are left out. At the end the test runs plain git itself to show that the plants are live.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fleet import Fleet, files_of, git, tid

# Every hook git 2.39 knows (githooks(5)).
HOOKS = (
    *("applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit"),
    *("prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout"),
    *("post-merge", "pre-push", "pre-receive", "update", "proc-receive", "post-receive"),
    *("post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc"),
    *("post-rewrite", "sendemail-validate", "fsmonitor-watchman", "p4-changelist"),
    *("p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change"),
)

# (config key, program name, what the program does after writing its marker). A hook or
# filter that fails would stop the pool's own git (the stand-in's reset): those pass through.
PROGRAMS = (
    ("core.fsmonitor", "fsmonitor", "exit 1"),
    ("core.sshCommand", "sshCommand", "exit 1"),
    ("core.askPass", "askPass", "exit 1"),
    ("core.gitProxy", "gitProxy", "exit 1"),
    ("core.editor", "editor", "exit 1"),
    ("sequence.editor", "sequenceEditor", "exit 1"),
    ("core.pager", "pager", "exec cat"),
    ("pager.log", "pagerLog", "exec cat"),
    ("pager.status", "pagerStatus", "exec cat"),
    ("core.alternateRefsCommand", "alternateRefs", "exit 1"),
    ("diff.external", "diffExternal", "exit 0"),
    ("diff.evil.command", "diffCommand", "exit 0"),
    ("diff.evil.textconv", "textconv", 'exec cat "$1"'),
    ("diff.evilinfo.textconv", "textconvInfo", 'exec cat "$1"'),
    ("filter.evil.clean", "clean", "exec cat"),
    ("filter.evil.smudge", "smudge", "exec cat"),
    ("filter.evilinfo.clean", "cleanInfo", "exec cat"),
    ("filter.evilinfo.smudge", "smudgeInfo", "exec cat"),
    ("filter.evilproc.process", "process", "exit 1"),
    ("merge.evil.driver", "mergeDriver", "exit 1"),
    ("merge.evilinfo.driver", "mergeDriverInfo", "exit 1"),
    ("merge.evil.recursive", "mergeRecursive", "exit 1"),
    ("gpg.program", "gpg", "exit 1"),
    ("gpg.openpgp.program", "gpgOpenpgp", "exit 1"),
    ("gpg.ssh.program", "gpgSsh", "exit 1"),
    ("gpg.x509.program", "gpgX509", "exit 1"),
    ("gpg.ssh.defaultKeyCommand", "gpgSshKey", "exit 1"),
    ("remote.origin.uploadpack", "uploadpack", "exit 1"),
    ("remote.origin.receivepack", "receivepack", "exit 1"),
    ("uploadpack.packObjectsHook", "packObjectsHook", "exit 1"),
    ("trailer.evil.command", "trailer", "exit 1"),
    ("trailer.evil.cmd", "trailerCmd", "exit 1"),
)
# Settings that make git reach for those programs (or its own, recursively) more often.
SETTINGS = (
    ("merge.default", "evil"),
    ("log.showSignature", "true"),
    ("commit.gpgSign", "true"),
    ("tag.gpgSign", "true"),
    ("submodule.recurse", "true"),
    ("fetch.recurseSubmodules", "true"),
    ("status.submoduleSummary", "true"),
    ("diff.submodule", "diff"),
    ("gc.auto", "1"),
    ("gc.autoDetach", "false"),
    ("maintenance.auto", "true"),
    ("core.fsmonitorHookVersion", "2"),
)
ATTRIBUTES = "* filter=evil diff=evil merge=evil\n*.p filter=evilproc\n"
INFO_ATTRIBUTES = "*.txt filter=evilinfo diff=evilinfo merge=evilinfo\n"

MARKER = """#!/bin/sh
m="{markers}/$(date +%s%N)-$$-{name}"
{{ echo "{name}"; p=$$
while [ -n "$p" ] && [ "$p" -gt 1 ]; do
  tr '\\0' ' ' < /proc/$p/cmdline; echo
  p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status)
done; }} > "$m" 2>/dev/null
{then}
"""

SITES = ("repo", "worktree", "include")


class Plants:
    """The planted programs of one site, and the markers they leave."""

    def __init__(self, root: Path, site: str) -> None:
        self.site = site
        self.bin = root / f"planted-{site}"
        self.markers = root / f"markers-{site}"
        self.hooks = root / f"hooks-{site}"
        for d in (self.bin, self.markers, self.hooks):
            d.mkdir()

    def program(self, name: str, then: str, where: Path | None = None) -> Path:
        path = (where or self.bin) / name
        tag = f"{self.site}:{name}"
        path.write_text(MARKER.format(markers=self.markers, name=tag, then=then))
        path.chmod(0o755)
        return path

    def config(self) -> list[tuple[str, str]]:
        pairs = [(key, str(self.program(name, then))) for key, name, then in PROGRAMS]
        pairs.append(("credential.helper", f"!{self.program('credential', 'exit 0')}"))
        pairs.append(("credential.https://example.invalid.helper", f"!{self.bin / 'credential'}"))
        return pairs + list(SETTINGS)

    def hook_dir(self, where: Path) -> None:
        where.mkdir(exist_ok=True)
        for hook in HOOKS:
            self.program(hook, "exit 0", where)

    def fired(self, *, by_fm: bool = True) -> list[str]:
        """The markers left: by fm's own git (`by_fm`: started by `fm`, not by the pool's
        stand-in), or by anything."""
        out = []
        for marker in sorted(self.markers.iterdir()):
            text = marker.read_text(errors="replace")
            chain = text.split("\n", 1)[1] if "\n" in text else ""
            if by_fm and ("standin/treehouse" in chain or "-m fm_teardown" not in chain):
                continue
            out.append(text.strip())
        return out

    def clear(self) -> None:
        for marker in self.markers.iterdir():
            marker.unlink()


def set_config(file: Path, pairs: list[tuple[str, str]]) -> None:
    for key, val in pairs:
        subprocess.run(
            ["git", "config", "--file", str(file), "--add", key, val],
            check=True,
            capture_output=True,
        )


def common_dir(fleet: Fleet) -> Path:
    return fleet.project / ".git"


def plant(fleet: Fleet, plants: Plants, slots: list[Path]) -> None:
    """Every program-naming key at the site, for the slots and the project checkout."""
    common = common_dir(fleet)
    pairs = plants.config()
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "attributes").write_text(INFO_ATTRIBUTES)
    if plants.site == "repo":
        set_config(common / "config", pairs)
        plants.hook_dir(common / "hooks")
        return
    plants.hook_dir(plants.hooks)
    pairs.append(("core.hooksPath", str(plants.hooks)))
    if plants.site == "worktree":
        set_config(common / "config", [("extensions.worktreeConfig", "true")])
        gitdirs = [common] + [
            Path(git(slot, "rev-parse", "--path-format=absolute", "--git-dir")) for slot in slots
        ]
        for gitdir in gitdirs:
            set_config(gitdir / "config.worktree", pairs)
        return
    # An include (relative to the including file), itself including, on a condition every
    # git dir meets, the file that names the programs.
    inner = plants.bin / "included.gitconfig"
    set_config(inner, pairs)
    (common / "fm-planted.gitconfig").write_text(f'[includeIf "gitdir:/"]\n\tpath = {inner}\n')
    set_config(common / "config", [("include.path", "fm-planted.gitconfig")])


def ok(r: subprocess.CompletedProcess[str], *codes: int) -> None:
    assert r.returncode in codes, (r.returncode, r.stdout, r.stderr)


@pytest.mark.parametrize("site", SITES)
def test_no_git_command_of_fm_runs_a_program_the_repository_names(fleet: Fleet, site: str) -> None:
    landed, dirty, pushed = tid(f"gl{site[0]}"), tid(f"gd{site[0]}"), tid(f"gp{site[0]}")
    # The attributes are the project's own, on main: every slot and the checkout have them.
    (fleet.project / ".gitattributes").write_text(ATTRIBUTES)
    (fleet.project / "notes.txt").write_text("notes\n")
    git(fleet.project, "add", "-A")
    git(fleet.project, "commit", "-q", "-m", "attributes")
    git(fleet.project, "push", "-q", "origin", "main")
    s1, s2, s3 = (fleet.slot(n, holder=t) for n, t in ((1, landed), (2, dirty), (3, pushed)))
    fleet.task(landed, s1, "dead")
    git(s1, "checkout", "-q", "-b", f"fm/{landed}")  # deleted by the real teardown
    fleet.task(dirty, s2, "dead")
    fleet.task(pushed, s3, "dead")
    # pushed: its commit is on origin (a branch), and main edits the same lines since.
    (s3 / "README").write_text("hello from the branch\n")
    git(s3, "commit", "-q", "-am", "branch edit")
    git(s3, "push", "-q", "origin", f"HEAD:refs/heads/feature-{pushed}")
    (fleet.project / "README").write_text("hello from main\n")
    git(fleet.project, "commit", "-q", "-am", "main edit")
    git(fleet.project, "push", "-q", "origin", "main")
    git(fleet.project, "fetch", "-q", "origin")
    # dirty: a tracked file edited, untracked files of each attribute.
    (s2 / "README").write_text("edited in the slot\r\n")
    (s2 / "notes.txt").write_text("more notes\n")
    (s2 / "new.p").write_bytes(b"process me\n")
    (s2 / "new.txt").write_bytes(b"\xff\xfe binary-ish \x00 text\n")
    work = files_of(s2)

    plants = Plants(fleet.root, site)
    plant(fleet, plants, [s1, s2, s3])

    def step(*args: str, codes: tuple[int, ...]) -> None:
        plants.clear()
        ok(fleet.fm(*args), *codes)
        assert plants.fired() == [], f"fm {' '.join(args)} ran: {plants.fired()}"

    step("teardown", "--dry-run", codes=(0,))  # the audit
    step("teardown", dirty, "--dry-run", codes=(3,))
    step("teardown", pushed, "--dry-run", codes=(0, 3, 5))
    step("teardown", landed, codes=(0,))
    step("teardown", dirty, "--force", codes=(0,))
    dest = fleet.root / f"restored-{site}"
    step("restore", dirty, "--to", str(dest), codes=(0,))
    assert files_of(dest) == work  # byte for byte: no filter, no conversion

    # The plants are live: plain git, run by the test, runs them.
    plants.clear()
    subprocess.run(["git", "-C", str(s3), "status"], capture_output=True, check=False)
    subprocess.run(["git", "-C", str(s3), "hash-object", "README"], capture_output=True)
    subprocess.run(
        ["git", "-C", str(fleet.project), "update-ref", "refs/fm-test", "HEAD"],
        capture_output=True,
        check=False,
    )
    subprocess.run(
        ["git", "-C", str(s3), "merge-tree", "--write-tree", "origin/main", "HEAD"],
        capture_output=True,
        check=False,
    )
    names = {m.split("\n", 1)[0].split(":", 1)[1] for m in plants.fired(by_fm=False)}
    assert {"fsmonitor", "clean", "reference-transaction", "mergeDriver"} <= names, names
    assert os.path.isdir(dest)


def test_a_slot_whose_git_config_fm_cannot_read_is_kept_and_says_why(fleet: Fleet) -> None:
    """A config file git would read that fm cannot read (here a FIFO, which would hang a
    reader): fm runs no git there, so whether the work is landed cannot be told."""
    task = tid("unread")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    gitdir = Path(git(slot, "rev-parse", "--path-format=absolute", "--git-dir"))
    os.mkfifo(gitdir / "config.worktree")
    before = fleet.snapshot(slot)
    for args in ((task, "--dry-run"), (task,)):
        code, doc = fleet.fm_json("teardown", *args)
        assert code == 3 and doc["verdict"] == "unlanded", doc
        said = " ".join(doc["reasons"])
        assert "fm did not run git: the git config file is not a regular file" in said, said
    assert fleet.snapshot(slot) == before
