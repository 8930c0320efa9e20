"""`--force`: save the work that would be lost, before anything discards it (spec §5).

The slot's files are committed on top of its HEAD (uncommitted and untracked changes, ignored
files left out) in a private temporary index, so neither the slot's own index nor its files
are touched, and the commit is kept under `refs/fm/discarded/<id>/<UTC time>` in the project
repository: TASK's own work, or a discarded live owner's under that owner's id (spec §7a).

The files are read as they are (spec §15.1): through a private git dir of fm's own over the
repository's objects (`private_git.private_repo`), in which no filter, end-of-line conversion,
`ident` or `working-tree-encoding` applies, so the save holds the very bytes the slot held and
`fm restore` gives them back; no program the repository names runs.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from datetime import UTC, datetime

from fm_teardown.adapters import private_git, runner
from fm_teardown.model.errors import FmError, Verdict
from fm_teardown.model.paths import canonical
from fm_teardown.model.records import Record, RecordKind
from fm_teardown.model.values import value

__all__ = ["DiscardedRef", "main_checkout", "save_discarded"]

_git = runner.git
_HEX_OID = runner.HEX_OID
_rev = runner.rev


@value
class DiscardedRef:
    ref: str  # refs/fm/discarded/<id>/<UTC timestamp like 20261201T072550Z>
    commit: str  # full sha
    restore: str  # the one shell command that brings the work back
    # A secondmate's home: its task records (`state/<name>.meta`) saved in the commit too.
    records: tuple[str, ...] = ()
    checkout: str = ""  # the checkout `fm restore --project` names (beside which it restores)


def _failed(message: str) -> FmError:
    return FmError(
        Verdict.FAILED,
        f"could not save the work before discarding it: {message}; nothing was discarded",
    )


def _utc(now: datetime) -> datetime:
    # A naive datetime is taken as UTC already (the tool's clock is UTC throughout).
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def _utc_stamp(now: datetime) -> str:
    return _utc(now).strftime("%Y%m%dT%H%M%SZ")


def _restore_dir(checkout: str, task: str, stamp: str) -> str:
    """Where the restore command checks the saved work out: beside the project's checkout,
    never in a slot (which the pool may by then have handed to another task)."""
    return f"{os.path.normpath(checkout)}-fm-restore-{task}-{stamp}"


def main_checkout(path: str) -> str:
    """The repository's main checkout, when `path` is one of its linked worktrees (a
    secondmate's project is its home, a pool slot: a restore beside it would land in the
    pool); `path` itself otherwise, or when git cannot tell."""
    r = _git(path, "worktree", "list", "--porcelain", "-z")
    if not r.ok:
        return path
    first = r.out.split(b"\0\0", 1)[0].split(b"\0")
    if not first or not first[0].startswith(b"worktree ") or b"bare" in first[1:]:
        return path
    return os.fsdecode(first[0][len(b"worktree ") :])


def save_discarded(record: Record, now: datetime, owner: str | None = None) -> DiscardedRef:
    """Save the slot's work under `refs/fm/discarded/<id>/<UTC stamp>` in the project repo.

    The saved commit is parented on the slot's HEAD and its tree is the slot as it is now:
    tracked files with their uncommitted edits, plus untracked files, minus ignored ones
    (`git add -A` semantics; files force-added to the slot's index are kept too). It is built
    in a private temporary index, so the slot's own index and files are not touched.

    The restore command is

        fm restore --project <project> --ref <ref> --to <project>-fm-restore-<id>-<stamp> <id>

    It adds a new worktree beside the project on the save and turns the saved files back into
    uncommitted changes on top of the original HEAD (in plain git, `git worktree add --detach
    DIR <ref>`, then `git -C DIR reset HEAD^`, but with the bytes written as saved: no filter,
    no conversion). It works after the slot was reset and returned, because it reads only the
    ref, never the slot.

    Raises FmError(Verdict.FAILED) on any failure (including an unborn HEAD); the caller
    then discards nothing.
    """
    wt, project = record.worktree, record.project
    if not os.path.isdir(wt):
        raise _failed(f"slot {wt} is not a directory")
    if not os.path.isdir(project):
        raise _failed(f"project {project} is not a directory")
    head = _rev(wt, "HEAD")
    if head is None:
        raise _failed(f"HEAD of {wt} does not name a commit (unborn or unreadable)")

    # The commit is written through the slot but the ref in the project: both must be one
    # object store, or the ref would name an object the project does not have.
    commons = []
    for repo in (wt, project):
        r = _git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
        if not r.ok:
            raise _failed(f"{repo} is not a git repository: {r.why()}")
        commons.append(canonical(r.text))
    if commons[0] != commons[1]:
        raise _failed(f"slot {wt} is not a worktree of the project repository {project}")

    # Whose work it is: TASK's own, or the live owner discarded with --discard-live-owner.
    owner = owner or record.task_id
    stamp = _utc_stamp(now)
    ref = f"refs/fm/discarded/{owner}/{stamp}"
    if not _git(project, "check-ref-format", ref).ok:
        raise _failed(f"{ref} is not a valid ref name")

    records = _home_records(record)
    commit = _snapshot(record, head, now, owner, records)
    reason = f"fm teardown --force: work of task {owner} discarded from {wt}"
    r = _git(project, "update-ref", "--create-reflog", "-m", reason, ref, commit, "")
    # Re-read rather than trust the exit code: the same save made twice is fine, and
    # anything else that leaves the ref not naming our commit is a failure.
    if _rev(project, ref) != commit:
        why = r.why() if not r.ok else "the ref does not name the saved commit after writing it"
        raise _failed(f"git update-ref {ref} failed: {why}")
    # `fm restore` puts the save back as a new worktree with the saved files as uncommitted
    # changes again (the worktree add and the `git reset HEAD^` in one command). The task id
    # comes last, so the directory is the word before it.
    checkout = main_checkout(project) if record.kind == RecordKind.SECONDMATE else project
    restore = shlex.join(
        [
            "fm",
            "restore",
            "--project",
            checkout,
            "--ref",
            ref,
            "--to",
            _restore_dir(checkout, owner, stamp),
            owner,
        ]
    )
    return DiscardedRef(ref, commit, restore, tuple(records), checkout)


def _home_records(record: Record) -> list[str]:
    """A secondmate's task records in its home (`state/*.meta`, regular files only): saved
    byte for byte with the home, whatever the home's ignore rules say, since the pool's
    reset may remove them with it (spec §14.7)."""
    if record.kind != RecordKind.SECONDMATE:
        return []
    state = os.path.join(record.worktree, "state")
    try:
        with os.scandir(state) as it:
            names = sorted(
                e.name for e in it if e.name.endswith(".meta") and e.is_file(follow_symlinks=False)
            )
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise _failed(f"cannot list the task records in {state}: {exc.strerror}") from None
    return [f"state/{name}" for name in names]


def _snapshot(
    record: Record, head: str, now: datetime, owner: str, records: list[str] | None = None
) -> str:
    """A commit of the slot's current files on top of HEAD, built in a temporary index;
    `records` (paths in the slot) are added even when ignored."""
    wt = record.worktree
    tmp = tempfile.mkdtemp(prefix="fm-discard-")
    try:
        private = private_git.private_repo(wt, wt, tmp)
        if isinstance(private, runner.Result):
            raise _failed(f"cannot read the slot's repository: {private.why()}")
        r = private_git.git_private(private, "read-tree", head)
        if not r.ok:
            raise _failed(f"git read-tree HEAD failed: {r.why()}")
        r = private_git.git_private(private, "add", "-A")
        if not r.ok:
            raise _failed(f"git add -A failed: {r.why()}")
        _add_force_added(private, tmp)
        _refuse_nested(private, head)
        if records:
            _add_paths(private, tmp, [os.fsencode(p) for p in records], "task records")
        r = private_git.git_private(private, "write-tree")
        tree = r.text
        if not r.ok or not _HEX_OID.fullmatch(tree):
            raise _failed(f"git write-tree failed: {r.why()}")
        when = f"@{int(_utc(now).timestamp())} +0000"
        # The tool makes this commit, so it signs its own name: that needs no user identity
        # (which a slot may lack) and says plainly where the commit came from.
        ident = {
            "GIT_AUTHOR_NAME": "fm teardown",
            "GIT_AUTHOR_EMAIL": "fm-teardown@localhost",
            "GIT_AUTHOR_DATE": when,
            "GIT_COMMITTER_NAME": "fm teardown",
            "GIT_COMMITTER_EMAIL": "fm-teardown@localhost",
            "GIT_COMMITTER_DATE": when,
        }
        message = (
            f"fm teardown: unlanded work of task {owner}\n\n"
            f"Saved by `fm teardown {record.task_id} --force` before the slot was discarded.\n"
            f"slot: {wt}\nproject: {record.project}\nhead: {head}\n"
        )
        if records:
            message += "task records saved with the home: " + ", ".join(records) + "\n"
        r = private_git.git_private(
            private, "commit-tree", "--no-gpg-sign", tree, "-p", head, "-m", message, env=ident
        )
        commit = r.text
        if not r.ok or not _HEX_OID.fullmatch(commit):
            raise _failed(f"git commit-tree failed: {r.why()}")
        return commit
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _add_force_added(private: private_git.PrivateRepo, tmp: str) -> None:
    """Also keep files the slot's own index tracks although they match an ignore rule.

    `git add -A` on a fresh index skips ignored files, but a file someone `git add -f`-ed is
    the task's work (status shows it as a change), so it must be saved like any other.
    """
    wt = private.worktree
    real = _git(wt, "ls-files", "-z", "--cached")
    ours = private_git.git_private(private, "ls-files", "-z", "--cached")
    if not real.ok or not ours.ok:
        raise _failed(f"git ls-files failed: {(real if not real.ok else ours).why()}")
    have = set(ours.out.split(b"\0"))
    extra = [
        p
        for p in dict.fromkeys(real.out.split(b"\0"))
        if p and p not in have and os.path.lexists(os.path.join(os.fsencode(wt), p))
    ]
    if extra:
        _add_paths(private, tmp, extra, "force-added files")


def _refuse_nested(private: private_git.PrivateRepo, head: str) -> None:
    """A repository nested in the slot would be saved as a bare commit id (a gitlink), and
    nothing restores it from that: the save fails, and nothing is discarded. (The decision
    refuses `--force` while one is there; this catches one made since.)"""
    added = ("diff-index", "--cached", "-z", "--no-renames", "--diff-filter=AT", head)
    r = private_git.git_private(private, *added)
    if not r.ok:
        raise _failed(f"git diff-index failed: {r.why()}")
    fields = r.out.split(b"\0")
    nested = [
        os.fsdecode(path)
        for meta, path in zip(fields[::2], fields[1::2], strict=False)
        if meta.split(b" ")[1:2] == [b"160000"] and not meta.startswith(b":160000")
    ]
    if nested:
        raise _failed(
            f"the slot holds nested repositories ({', '.join(nested[:5])}): a save cannot keep "
            "them with their history"
        )


def _add_paths(private: private_git.PrivateRepo, tmp: str, paths: list[bytes], what: str) -> None:
    """`git add -f` these paths of the slot to the temporary index, ignore rules or not."""
    spec = os.path.join(tmp, "pathspec")
    with open(spec, "wb") as fh:
        fh.write(b"\0".join(paths) + b"\0")
    r = private_git.git_private(
        private,
        "--literal-pathspecs",
        "add",
        "-f",
        f"--pathspec-from-file={spec}",
        "--pathspec-file-nul",
    )
    if not r.ok:
        raise _failed(f"git add -f of {what} failed: {r.why()}")
