"""The git door's policy: the command line and environment of every git command fm runs, so
that git runs no program a repository names (spec §15.1).

Agents write to their slots and may write to the project's git config. Whatever they write,
no git command fm runs (in a slot, a secondmate's home, the project checkout; dry run or real
run, save or restore) runs a program that repository-level or worktree-level config, an
included file, `.gitattributes` or `info/attributes` names. Every git call of the package goes
through `runner.git` (and `git_many`, `rev`, `private_git.git_private`), which asks this module for:

- config overrides, given to git in the environment (`GIT_CONFIG_COUNT`, the command line's
  own scope, which beats every file): hooks go nowhere (`core.hooksPath=/dev/null`: no hook
  of any name runs, `reference-transaction` and `post-index-change` included), no fsmonitor,
  no pager, no editor, no askpass, no credential helper, no signing or signature checks (and
  `gpg.*program` name nothing runnable), no submodule recursion, no automatic gc or
  maintenance, no `ext::` transport, no alternate-refs command, no external diff; and for
  every driver the config files name (`adapters/git_config.py` reads them without running
  git), its program emptied: `filter.<f>.clean/smudge/process` (and `required=false`),
  `diff.<d>.command/textconv`, `merge.<m>.driver` (git then fails that merge rather than run
  it), `remote.<r>.vcs` to none;
- `--no-ext-diff --no-textconv` for every command that makes a diff (no pager runs: git's
  output is never a terminal, and the pager is `cat` all the same);
- an environment without the variables that would name a program ahead of the overrides
  (`GIT_EXTERNAL_DIFF`, `GIT_SSH`, `GIT_SSH_COMMAND`, `GIT_ASKPASS`, `SSH_ASKPASS`,
  `GIT_EDITOR`, `GIT_PAGER`, `GIT_PROXY_COMMAND`, `GIT_CONFIG_PARAMETERS`, ...), with
  `GIT_ASKPASS` and `GIT_PROXY_COMMAND` empty (git then asks no program), and no transport
  at all for a command that needs no network (`GIT_ALLOW_PROTOCOL` empty: a partial clone's
  lazy fetch would run the remote's `uploadpack`, where the first value in the files wins
  over any override).

Where fm needs the network (a fetch), the user's own global config still applies: their
`core.sshCommand` and credential helpers (`~/.gitconfig`, read with `git config --global`),
and their own `GIT_SSH_COMMAND`, `GIT_SSH` and `GIT_PROXY_COMMAND`, never the repository's;
git's own `git-upload-pack` (or `git-receive-pack`), given on the command line; only the
transports git itself speaks (`GIT_ALLOW_PROTOCOL`: no remote helper that a URL or
`insteadOf` names, no `ext::`). A fetch that cannot run without a program the config names
(`remote.<r>.vcs`; an `uploadpack` of its own in a partial clone, or in a command that takes
no `--upload-pack`) is not run, and the refusal says why.

What git runs of its own (a `git status` inside each submodule, a fetch's `rev-list`)
inherits the overrides, and the submodules' own drivers are read too. The user's and the
system's config apply, but for these programs: a driver they define (git-lfs's filter, say)
is emptied as well, since the tree's attributes choose which one runs. The pool's `treehouse`
runs git itself: that is the pool's program, not fm's, and outside this door.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence

from fm_teardown.adapters import git_config

__all__ = [
    "FIXED",
    "NETWORK",
    "SAFE_PROTOCOLS",
    "Call",
    "call",
    "config_pairs",
    "gitdir_env",
    "needs_network",
    "outside_keys",
    "overrides_env",
    "owned",
    "subcommand",
]

# Overrides every git command gets, whatever the repository says.
FIXED: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),  # not a directory: no hook of any name is found
    ("core.fsmonitor", "false"),
    ("core.askPass", ""),
    ("core.editor", ":"),  # git's own "no editor"
    ("sequence.editor", ":"),
    ("core.pager", "cat"),
    ("core.alternateRefsCommand", ""),  # names nothing: git lists no alternate's refs
    ("diff.external", ""),
    ("credential.helper", ""),  # empties the list of helpers every file added to
    ("gpg.program", "/dev/null"),
    ("gpg.openpgp.program", "/dev/null"),
    ("gpg.x509.program", "/dev/null"),
    ("gpg.ssh.program", "/dev/null"),
    ("gpg.ssh.defaultKeyCommand", "/dev/null"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("status.submoduleSummary", "false"),
    ("diff.submodule", "short"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.ext.allow", "never"),
)

# What each driver key becomes: empty (git runs nothing), or git's own program.
_DRIVER_VALUE = {
    ("filter", "clean"): "",
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("diff", "command"): "",
    ("diff", "textconv"): "",
    ("merge", "driver"): "",
    ("remote", "vcs"): "",
}
# What a remote's program keys become, on the command line (the first value in the config
# files wins over any override for these two: git takes the command line's option instead).
_PACK_OPTION = {
    "fetch": "--upload-pack=git-upload-pack",
    "pull": "--upload-pack=git-upload-pack",
    "ls-remote": "--upload-pack=git-upload-pack",
    "clone": "--upload-pack=git-upload-pack",
    "push": "--receive-pack=git-receive-pack",
}

# Environment variables that name a program (or config) ahead of the overrides: dropped.
_DROPPED = frozenset(
    {
        "GIT_EXTERNAL_DIFF",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "SSH_ASKPASS_REQUIRE",
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "GIT_PAGER",
        "GIT_PROXY_COMMAND",
        "GIT_ALLOW_PROTOCOL",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
    }
)
# The user's own, kept for a command that needs the network.
_NETWORK_KEPT = ("GIT_SSH_COMMAND", "GIT_SSH", "GIT_PROXY_COMMAND", "GIT_ALLOW_PROTOCOL")

# The transports git speaks itself (no remote helper).
SAFE_PROTOCOLS = ("file", "git", "ssh", "http", "https")

# Commands that reach the network (`git remote` only for some of its subcommands), and those
# that make a diff.
NETWORK = frozenset(
    {"fetch", "pull", "push", "ls-remote", "clone", "remote", "fetch-pack", "send-pack"}
)
_REMOTE_NETWORK = frozenset({"update", "prune", "show"})
_DIFFS = frozenset(
    {"diff", "log", "show", "diff-tree", "diff-index", "diff-files", "format-patch", "whatchanged"}
)
# Commands that run git in each populated submodule (and so read its config).
_RECURSING = frozenset({"status", "diff", "diff-files", "diff-index", "commit"})

# Global options of git that take the next argument as their value.
_WITH_VALUE = frozenset({"-c", "-C", "--config-env", "--git-dir", "--work-tree", "--namespace"})


def owned(name: str) -> bool:
    """Whether the door sets (or drops) the environment variable `name`: a caller's own value
    for it is not taken."""
    return (
        name in _DROPPED
        or name in ("GIT_ASKPASS", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER")
        or name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    )


def subcommand(args: Sequence[str]) -> int | None:
    """Where the git subcommand stands in `args` (after git's global options), or None."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in _WITH_VALUE:
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return i
    return None


def needs_network(command: Sequence[str]) -> bool:
    """Whether the git command (its subcommand first) reaches a remote."""
    if not command or command[0] not in NETWORK:
        return False
    if command[0] != "remote":
        return True
    rest = list(command[1:])
    if rest[:1] == ["set-head"]:
        return "-a" in rest or "--auto" in rest
    return bool(rest) and rest[0] in _REMOTE_NETWORK


class Call:
    """One git command as the door lets it run: its argv and environment, or why not."""

    def __init__(self, argv: list[str], env: dict[str, str], refused: str | None = None):
        self.argv, self.env, self.refused = argv, env, refused


def overrides_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The overrides as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n` (exact: no quoting, a name may
    hold any character a config file allows)."""
    key = tuple(pairs)
    env = _overrides_made.get(key)
    if env is None:
        env = {"GIT_CONFIG_COUNT": str(len(pairs))}
        for i, (name, val) in enumerate(pairs):
            env[f"GIT_CONFIG_KEY_{i}"] = name
            env[f"GIT_CONFIG_VALUE_{i}"] = val
        if len(_overrides_made) > 64:
            _overrides_made.clear()
        _overrides_made[key] = env
    return env


# The overrides' environment, made once per set of overrides (a fleet's slots share them).
_overrides_made: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
# The last policy environment made from a runner environment, per network or not: the same
# runner environment (one for all of `git_many`'s commands) gives the same one.
_policy_made: dict[bool, tuple[Mapping[str, str], dict[str, str]]] = {}


def _driver_overrides(scan: git_config.Scan) -> list[tuple[str, str]]:
    """Each driver key the config names, emptied (or git's own program)."""
    out: list[tuple[str, str]] = []
    for section, sub, key in sorted(scan.keys):
        if (section, key) in _DRIVER_VALUE:
            out.append((f"{section}.{sub}.{key}", _DRIVER_VALUE[(section, key)]))
    for sub in scan.subsections("filter"):
        out.append((f"filter.{sub}.required", "false"))
    return out


def _policy_env(env: Mapping[str, str], *, network: bool) -> dict[str, str]:
    """`_make_policy_env`, a copy of the one made last from the same `env` object."""
    made = _policy_made.get(network)
    if made is None or made[0] is not env:
        made = (env, _make_policy_env(env, network=network))
        _policy_made[network] = made
    return dict(made[1])


def _make_policy_env(env: Mapping[str, str], *, network: bool) -> dict[str, str]:
    """`env` (the runner's policy environment) with what names a program ahead of the config
    dropped and set to name nothing; for the network, the user's own ssh and proxy kept and
    the transports git speaks itself allowed, for any other command no transport at all (a
    partial clone's lazy fetch would run the remote's `uploadpack`, which no override
    reaches)."""
    out = {
        k: v
        for k, v in env.items()
        if (k not in _DROPPED or (network and k in _NETWORK_KEPT))
        and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    }
    out.update(GIT_ASKPASS="", GIT_EDITOR=":", GIT_SEQUENCE_EDITOR=":", GIT_PAGER="cat")
    out.setdefault("GIT_PROXY_COMMAND", "")
    allowed = out.get("GIT_ALLOW_PROTOCOL")
    if not network:
        out["GIT_ALLOW_PROTOCOL"] = ""
    elif allowed is None:
        out["GIT_ALLOW_PROTOCOL"] = ":".join(SAFE_PROTOCOLS)
    else:
        out["GIT_ALLOW_PROTOCOL"] = ":".join(p for p in allowed.split(":") if p and p != "ext")
    return out


def _ssh_command(env: Mapping[str, str], user: Sequence[tuple[str, str]]) -> str:
    """The ssh command a fetch uses: the user's global `core.sshCommand`, else their
    `GIT_SSH`, else plain `ssh` (their own `GIT_SSH_COMMAND`, when set, wins over all)."""
    for key, val in reversed(user):
        if key == "core.sshcommand":
            return val
    return shlex.quote(env["GIT_SSH"]) if env.get("GIT_SSH") else "ssh"


def outside_keys(env: Mapping[str, str]) -> frozenset[tuple[str, str, str]]:
    """The driver keys of the user's and the system's config files, as `call` reads them for
    a command run from the runner's policy environment `env` (`git_config.outside_keys`)."""
    return git_config.outside_keys(_policy_env(env, network=False))


def call(
    repo: str,
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    user: Sequence[tuple[str, str]] = (),
    scan_from: str | None = None,
    hooks_run: Callable[[], bool] | None = None,
    outside: frozenset[tuple[str, str, str]] | None = None,
) -> Call:
    """The door's argv and environment for `git -C repo args...`, from the runner's policy
    environment `env`; `user`: the user's global credential helpers and ssh command (for a
    command that needs the network); `scan_from`: where git finds its repository, when not
    `repo` (a private git dir); `hooks_run`: whether the git that runs reads configured
    hooks (unknown: it does); `outside`: the user's and the system's driver keys, read once
    for a batch of commands (`git_config.outside_keys`)."""
    args = list(args)
    at = subcommand(args)
    sub = args[at] if at is not None else None
    network = at is not None and needs_network(args[at:])
    if at is not None and sub in _DIFFS:
        args[at + 1 : at + 1] = ["--no-ext-diff", "--no-textconv"]
    base = _policy_env(env, network=network)
    scan = git_config.scan(
        scan_from or repo,
        base,
        submodules=sub in _RECURSING,
        hooks_run=hooks_run,
        outside=outside,
    )
    argv = ["git", "-C", repo, *args]
    if scan.problem is not None:
        return Call(argv, base, f"fm did not run git: {scan.problem}")
    if network and at is not None:
        why = _network_refusal(scan, sub or "", args[at + 1 :])
        if why is not None:
            return Call(argv, base, f"fm did not run git {sub}: {why}")
        if sub in _PACK_OPTION:
            argv.insert(3 + at + 1, _PACK_OPTION[sub])
    pairs = list(FIXED)
    if network:
        pairs += [(k, v) for k, v in user if k != "core.sshcommand"]
    pairs.append(("core.sshCommand", _ssh_command(base, user) if network else "ssh"))
    pairs += _driver_overrides(scan)
    base.update(overrides_env(pairs))
    return Call(argv, base)


def _network_refusal(scan: git_config.Scan, sub: str, rest: Sequence[str]) -> str | None:
    """Why a command that needs the network cannot run without a program the config names."""
    named = set(scan.vcs_remotes()).intersection(rest)
    if named:
        r = sorted(named)[0]
        return (
            f"the repository's config gives the remote {r} a remote helper (remote.{r}.vcs), "
            "a program fm does not run"
        )
    packs = scan.subsections_with("uploadpack") + scan.subsections_with("receivepack")
    if packs and (sub not in _PACK_OPTION or scan.lazy):
        why = "its remotes fetch lazily" if scan.lazy else f"git {sub} would run it"
        return (
            f"the repository's config names the program run for the remote {packs[0]} "
            f"(remote.{packs[0]}.uploadpack or receivepack), and {why}"
        )
    return None


def gitdir_env(gitdir: str, worktree: str, index: str, objects: str) -> dict[str, str]:
    """The variables that make git use a private git dir on a worktree and index of its own,
    over a repository's objects."""
    return {
        "GIT_DIR": gitdir,
        "GIT_WORK_TREE": worktree,
        "GIT_INDEX_FILE": index,
        "GIT_OBJECT_DIRECTORY": objects,
    }


def config_pairs(out: bytes) -> list[tuple[str, str]]:
    """`git config -z --get-regexp` output as (key, value) pairs, in order."""
    pairs: list[tuple[str, str]] = []
    for item in out.split(b"\0"):
        if not item:
            continue
        key, _, val = item.partition(b"\n")
        pairs.append((os.fsdecode(key), os.fsdecode(val)))
    return pairs
