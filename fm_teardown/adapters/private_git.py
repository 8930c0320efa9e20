"""A git dir of fm's own (spec §15.1): how `--force` saves a tree's bytes and a restore puts
them back, through a private index over a repository's objects, with none of the
repository's config, attributes or hooks (`act/discard.py`, `act/restore.py`). Its git runs
through the git door like any other (`runner.git`), the door reading this git dir's config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from fm_teardown.adapters.runner import LOCAL_GIT_TIMEOUT, Result, git
from fm_teardown.model.values import value

__all__ = ["PrivateRepo", "git_private", "private_repo"]


@value
class PrivateRepo:
    """A git dir of fm's own, for moving a tree's bytes as they are (spec §15.1): it shares a
    repository's objects, but none of its config, attributes or hooks. Its `info/attributes`
    turns every conversion off for every path (no filter, no end-of-line conversion, no
    `ident`, no `working-tree-encoding`: they outrank every `.gitattributes`), and it keeps
    only the repository's settings that say what a path is (file modes, links, case, ignore
    files, shared permissions) and its ignore rules (`info/exclude`). `index`: the index it
    uses (the repository's own is never touched)."""

    gitdir: str
    worktree: str
    index: str
    objects: str
    settings: tuple[tuple[str, str], ...]


_SETTINGS = (
    r"^(core\.(filemode|symlinks|ignorecase|precomposeunicode|protectntfs|protecthfs"
    r"|excludesfile|sharedrepository)|extensions\.objectformat)$"
)
_NO_CONVERSION = b"* -text -eol -crlf -ident -filter -working-tree-encoding -diff -merge\n"


def private_repo(repo: str, worktree: str, tmp: str) -> PrivateRepo | Result:
    """A private git dir in the directory `tmp` (fm's own, empty) for the worktree
    `worktree` over the objects of the repository at `repo`; the Result of what failed."""
    from fm_teardown.adapters import git_config, git_door

    common = git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if not common.ok or not os.path.isabs(common.text):
        return common if not common.ok else Result(None, b"", "git names no common dir")
    got = git(repo, "config", "-z", "--get-regexp", _SETTINGS)
    if got.rc not in (0, 1):
        return got
    pairs = git_door.config_pairs(got.out)
    fmt = next((v.lower() for k, v in reversed(pairs) if k == "extensions.objectformat"), "sha1")
    exclude, why = git_config.file_bytes(os.path.join(common.text, "info", "exclude"))
    if why is not None:
        return Result(None, b"", why)
    gitdir = os.path.join(tmp, "git")
    for sub in ("refs/heads", "objects", "info"):
        os.makedirs(os.path.join(gitdir, sub))
    config = b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
    if fmt != "sha1":
        config = b"[core]\n\trepositoryformatversion = 1\n\tbare = false\n"
        config += b"[extensions]\n\tobjectformat = " + fmt.encode() + b"\n"
    for name, data in (
        ("HEAD", b"ref: refs/heads/fm-private\n"),
        ("config", config),
        ("info/attributes", _NO_CONVERSION),
        ("info/exclude", exclude or b""),
    ):
        with open(os.path.join(gitdir, name), "xb") as fh:
            fh.write(data)
    return PrivateRepo(
        gitdir,
        worktree,
        os.path.join(tmp, "index"),
        os.path.join(common.text, "objects"),
        tuple((k, v) for k, v in pairs if k != "extensions.objectformat"),
    )


def git_private(
    p: PrivateRepo,
    *args: str,
    timeout: float = LOCAL_GIT_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> Result:
    """`git args...` in the private git dir `p` on its worktree, through the git door."""
    from fm_teardown.adapters import git_door

    extra = {**git_door.gitdir_env(p.gitdir, p.worktree, p.index, p.objects), **(env or {})}
    settings = [a for k, v in p.settings for a in ("-c", f"{k}={v}")]
    return git(p.worktree, *settings, *args, timeout=timeout, env=extra, scan_from=p.gitdir)
