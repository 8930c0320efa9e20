"""What git config could make git run, read without running git: the names the door needs.

The git door (`runner.git`) overrides every config key that names a program. Most have fixed
names (`core.hooksPath`, `core.fsmonitor`, ...); the drivers do not: `filter.<f>.clean`,
`diff.<d>.textconv`, `merge.<m>.driver`, `remote.<r>.uploadpack`, where `.gitattributes` (or
a fetch's arguments) pick `<f>`, `<d>`, `<m>`, `<r>` by name. So the door must know which
names exist: this module reads them from every config file git could read for a command run
in a directory, without a subprocess (a one-task dry run stays cheap):

- the repository's `config`, every worktree config (`config.worktree`, read whether or not
  `extensions.worktreeConfig` is set), the user's (`GIT_CONFIG_GLOBAL`, or `~/.gitconfig` and
  `$XDG_CONFIG_HOME/git/config`) and the system's (`GIT_CONFIG_SYSTEM`, `/etc/gitconfig`,
  `<prefix>/etc/gitconfig`, unless `GIT_CONFIG_NOSYSTEM`);
- every `include.path` and `includeIf.<condition>.path`, whatever the condition (a superset
  of what git reads: naming a driver that git would not see only overrides it for nothing);
- for the commands that recurse into submodules (`status`), each populated submodule the
  index records (a gitlink), read the same way, its own submodules too: git runs a `git
  status` in each, which reads that submodule's config and attributes.

The files are parsed as git parses them (`config.c`: sections, quoted subsections, escapes,
continuation lines, comments) and each is parsed once per content (cached by its stat).
Failing closed: a repository's config file (or include, or index) that exists but cannot be
read or parsed, includes nested deeper than git allows, too many submodules: the scan says
why (`Scan.problem`), and the door runs no git there.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import stat
from collections.abc import Callable, Iterator, Mapping

from fm_teardown.adapters.git_files import Unreadable as _Unreadable
from fm_teardown.adapters.git_files import kept as _kept
from fm_teardown.adapters.git_files import read as _read
from fm_teardown.adapters.git_files import signature as _signature
from fm_teardown.adapters.git_repo_rules import WORKTREE, configured_hook, other_tree
from fm_teardown.model.values import value

__all__ = ["Scan", "common_of", "file_bytes", "find_repo", "outside_keys", "parse", "scan"]

# The sections whose subsections name drivers or remotes, and the keys of each that name a
# program (or, for a remote, a program's name or a remote helper).
_DRIVER_KEYS = {
    "filter": frozenset({"clean", "smudge", "process"}),
    "diff": frozenset({"command", "textconv"}),
    "merge": frozenset({"driver"}),
    "remote": frozenset({"uploadpack", "receivepack", "vcs", "promisor"}),
    # A configured hook (git 2.54 and later): `[hook "<name>"] command = ...`.
    "hook": frozenset({"command"}),
}

# git's own limit (config.c, MAX_INCLUDE_DEPTH): deeper includes make git die.
_MAX_INCLUDE_DEPTH = 10
# A config file larger than this is not read (a real one is a few KiB).
_MAX_CONFIG = 8 << 20
# An index larger than this is not read for its submodules (git's own status of such a tree
# costs far more than reading it).
_MAX_INDEX = 1 << 30
# Submodules within submodules, and submodules in all, beyond which the scan fails closed.
_MAX_DEPTH = 8
_MAX_REPOS = 256

_GITLINK_MODE = b"\x00\x00\xe0\x00"  # 0o160000, as the index stores an entry's mode


@value
class Scan:
    """What the config git could read names: `keys`, each (section, subsection, key) of a
    program-naming driver key seen (`filter.x.clean` -> ("filter", "x", "clean")); `problem`:
    why git must not run there (None: it may, with these overridden)."""

    keys: frozenset[tuple[str, str, str]]
    problem: str | None = None

    def subsections(self, section: str) -> list[str]:
        return sorted({sub for sec, sub, _ in self.keys if sec == section})

    def subsections_with(self, key: str) -> list[str]:
        return sorted({sub for _, sub, k in self.keys if k == key})

    @property
    def lazy(self) -> bool:
        """A partial clone (a promisor remote): git may fetch missing objects on its own."""
        return any(k in ("promisor", "partialclone") for _, _, k in self.keys)

    def vcs_remotes(self) -> list[str]:
        """The remotes the config gives a remote helper (`remote.<r>.vcs`)."""
        return sorted({sub for sec, sub, key in self.keys if (sec, key) == ("remote", "vcs")})


# -- parsing, as git's config.c does -----------------------------------------------------

_SPACE = frozenset(b" \t\n\r")


class _Source:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.eof = data, 0, False

    def next(self) -> int:
        """The next byte; "\\r\\n" reads as "\\n", and the end of the data as "\\n" (eof)."""
        data, pos = self.data, self.pos
        if pos >= len(data):
            self.eof = True
            return 10
        c = data[pos]
        self.pos = pos + 1
        if c == 13 and self.pos < len(data) and data[self.pos] == 10:
            self.pos += 1
            return 10
        return c


def _keychar(c: int) -> bool:
    return 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 45


def _lower(c: int) -> int:
    return c + 32 if 65 <= c <= 90 else c


def _base_var(src: _Source) -> bytes | None:
    """After `[`: the header's name as git keeps it (`section` lowercased, then `.` and the
    subsection as written), None if malformed."""
    name = bytearray()
    while True:
        c = src.next()
        if src.eof:
            return None
        if c == 93:  # ]
            return bytes(name)
        if c in _SPACE:
            return _extended_base_var(src, c, name)
        if not _keychar(c) and c != 46:
            return None
        name.append(_lower(c))


def _extended_base_var(src: _Source, c: int, name: bytearray) -> bytes | None:
    """`[section "subsection"]`: the subsection as written (`\\x` reads as `x`)."""
    while c in _SPACE:
        if c == 10:
            return None
        c = src.next()
    if c != 34:  # "
        return None
    name.append(46)
    while True:
        c = src.next()
        if c == 10:
            return None
        if c == 34:
            break
        if c == 92:  # backslash
            c = src.next()
            if c == 10:
                return None
        name.append(c)
    if src.next() != 93:
        return None
    return bytes(name)


def _value(src: _Source) -> bytes | None:
    """After `=`: the value, unquoted and unescaped; None if malformed."""
    out = bytearray()
    quote = comment = False
    space = 0
    while True:
        c = src.next()
        if c == 10:
            return None if quote else bytes(out)
        if comment:
            continue
        if c in _SPACE and not quote:
            if out:
                space += 1
            continue
        if not quote and c in (59, 35):  # ; #
            comment = True
            continue
        out += b" " * space
        space = 0
        if c == 92:
            c = src.next()
            if c == 10:
                continue
            escaped = {116: 9, 98: 8, 110: 10, 92: 92, 34: 34}.get(c)
            if escaped is None:
                return None
            out.append(escaped)
            continue
        if c == 34:
            quote = not quote
            continue
        out.append(c)


Entry = tuple[str, str | None, str, bytes | None]


def parse(data: bytes) -> list[Entry] | None:
    """Every (section, subsection, key, value) of a config file, in order: section and key
    lowercased, a key without `=` has the value None; None when git would reject the file."""
    src = _Source(data)
    out: list[Entry] = []
    header: tuple[str, str | None] | None = None  # section, subsection
    comment = False
    bom = b"\xef\xbb\xbf"
    if data.startswith(bom):
        src.pos = len(bom)
    while True:
        c = src.next()
        if c == 10:
            if src.eof:
                return out
            comment = False
            continue
        if comment or c in _SPACE:
            continue
        if c in (35, 59):
            comment = True
            continue
        if c == 91:  # [
            name = _base_var(src)
            if not name:
                return None
            # As git reads `section.sub.key`: the section up to the first dot, the key after
            # the last, the subsection between (`[a.b "c"]` is section a, subsection b.c).
            section, dot, sub = name.partition(b".")
            header = (
                section.decode("latin-1"),
                sub.decode("utf-8", "surrogateescape") if dot else None,
            )
            continue
        if not (65 <= c <= 90 or 97 <= c <= 122):
            return None
        key = bytearray([_lower(c)])
        while True:
            c = src.next()
            if src.eof or not _keychar(c):
                break
            key.append(_lower(c))
        while c in (32, 9):
            c = src.next()
        val: bytes | None = None
        if c != 10:
            if c != 61:  # =
                return None
            val = _value(src)
            if val is None:
                return None
        where = header if header is not None else ("", None)  # a key before any header
        out.append((where[0], where[1], key.decode("latin-1"), val))


# -- reading files -----------------------------------------------------------------------


# One parsed config file: its driver keys, its includes (value as written), its object format.
_Parsed = tuple[frozenset[tuple[str, str, str]], tuple[bytes | None, ...], str | None]
_configs: dict[str, tuple[tuple[int, ...], _Parsed]] = {}
_indexes: dict[str, tuple[tuple[int, ...], tuple[tuple[bytes, ...], bool]]] = {}
_gitfiles: dict[str, tuple[tuple[int, ...], str | None]] = {}
_commons: dict[str, tuple[tuple[int, ...] | None, str]] = {}


def _config(path: str) -> _Parsed | None:
    """The parsed file at `path` (None: there is none), from the cache while its stat says
    it is unchanged."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _Unreadable(f"cannot read the git config file ({exc.strerror}): {path}") from None
    cached = _configs.get(path)
    if cached is not None and cached[0] == _signature(st):
        return cached[1]
    got = _read(path, _MAX_CONFIG, "git config file")
    if got is None:
        return None
    data, sig = got
    entries = parse(data)
    if entries is None:
        raise _Unreadable(f"the git config file has a line git rejects: {path}")
    keys, includes, fmt = set(), [], None
    for section, sub, key, val in entries:
        if sub is not None and key in _DRIVER_KEYS.get(section, ()):
            keys.add((section, sub, key))
        elif key == "path" and (
            (section == "include" and sub is None) or (section == "includeif" and sub is not None)
        ):
            includes.append(val)
        elif section == "extensions" and sub is None and key == "objectformat" and val:
            fmt = val.decode("latin-1").lower()
        elif section == "extensions" and sub is None and key == "partialclone":
            keys.add(("extensions", "", "partialclone"))
        elif section == "core" and sub is None and key == "worktree":
            # Kept with its value (as the subsection's place): checked by `_RepoScan.repo`.
            keys.add((WORKTREE, os.fsdecode(val or b""), "worktree"))
    parsed: _Parsed = (frozenset(keys), tuple(includes), fmt)
    _kept(_configs, path, (sig, parsed))
    return parsed


def _prefix(env: Mapping[str, str]) -> str:
    """Where the git on PATH is installed (`/usr` for `/usr/bin/git`): git's own prefix, for
    its system config and `%(prefix)/` (shutil.which would cost its imports)."""
    for folder in (env.get("PATH") or os.defpath).split(os.pathsep):
        git = os.path.join(folder or ".", "git")
        if os.path.isfile(git) and os.access(git, os.X_OK):
            return os.path.dirname(os.path.dirname(os.path.realpath(git)))
    return "/usr"


def _interpolate(raw: bytes, env: Mapping[str, str]) -> str | None:
    """An include path as git expands it (`~/`, `~user/`, `%(prefix)/`), None if it cannot."""
    path = os.fsdecode(raw)
    if path.startswith("%(prefix)/"):
        return os.path.join(_prefix(env), path[len("%(prefix)/") :])
    if not path.startswith("~"):
        return path
    user, slash, rest = path[1:].partition("/")
    if not user:
        home = env.get("HOME")
        if not home:
            return None
    else:
        try:
            home = pwd.getpwnam(user).pw_dir
        except KeyError:
            return None
    return home + ("/" + rest if slash else "")


def _walk(
    path: str, env: Mapping[str, str], keys: set[tuple[str, str, str]], depth: int = 0
) -> str | None:
    """Add the driver keys of the file at `path` and of everything it includes to `keys`;
    the object format it declares, if any."""
    parsed = _config(path)
    if parsed is None:
        return None
    found, includes, fmt = parsed
    keys |= found
    for raw in includes:
        if raw is None:
            raise _Unreadable(f"a git config include without a path: {path}")
        target = _interpolate(raw, env)
        if target is None:
            raise _Unreadable(
                f"a git config include path fm cannot expand ({os.fsdecode(raw)!r}): {path}"
            )
        if not os.path.isabs(target):
            target = path[: path.rfind("/") + 1] + target
        if depth + 1 > _MAX_INCLUDE_DEPTH:
            raise _Unreadable(
                f"git config includes nested deeper than {_MAX_INCLUDE_DEPTH}: {path}"
            )
        _walk(target, env, keys, depth + 1)
    return fmt


def _truthy(text: str | None) -> bool:
    return (text or "").strip().lower() in ("1", "true", "yes", "on")


_ENV_FILES = ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_GLOBAL", "HOME")
_ENV_FILES_MORE = ("XDG_CONFIG_HOME", "PATH")
_user_and_system_made: dict[tuple[str | None, ...], list[str]] = {}


def _user_and_system(env: Mapping[str, str]) -> list[str]:
    """The config files git reads outside any repository (the user's and the system's)."""
    key = tuple(env.get(k) for k in (*_ENV_FILES, *_ENV_FILES_MORE))
    files = _user_and_system_made.get(key)
    if files is None:
        files = _kept(_user_and_system_made, key, _user_and_system_files(env))
    return files


def _user_and_system_files(env: Mapping[str, str]) -> list[str]:
    files: list[str] = []
    if not _truthy(env.get("GIT_CONFIG_NOSYSTEM")):
        if env.get("GIT_CONFIG_SYSTEM") is not None:
            files.append(env["GIT_CONFIG_SYSTEM"])
        else:
            files.append("/etc/gitconfig")
            files.append(os.path.join(_prefix(env), "etc", "gitconfig"))
    if env.get("GIT_CONFIG_GLOBAL") is not None:
        files.append(env["GIT_CONFIG_GLOBAL"])
    else:
        home = env.get("HOME", "")
        xdg = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
        if xdg:
            files.append(os.path.join(xdg, "git", "config"))
        if home:
            files.append(os.path.join(home, ".gitconfig"))
    return [f for f in dict.fromkeys(files) if f]


# -- finding the repository --------------------------------------------------------------


def _gitfile(dotgit: str, st: os.stat_result | None = None) -> str | None:
    """The git dir a `.git` file names (relative to the file's directory), None if none;
    `st`: its stat, when taken already (then cached while it is the same)."""
    if st is not None:
        cached = _gitfiles.get(dotgit)
        if cached is not None and cached[0] == _signature(st):
            return cached[1]
        found = _gitfile(dotgit)
        _kept(_gitfiles, dotgit, (_signature(st), found))
        return found
    try:
        got = _read(dotgit, 1 << 16)
    except _Unreadable:
        return None
    if got is None:
        return None
    first = got[0].split(b"\n", 1)[0].strip()
    if not first.startswith(b"gitdir:"):
        return None
    target = os.fsdecode(first[len(b"gitdir:") :].strip())
    return os.path.normpath(os.path.join(os.path.dirname(dotgit), target)) if target else None


def _is_gitdir(path: str) -> bool:
    # `commondir` first: the git dirs looked at most are a pool's worktrees' (no `objects`).
    return os.path.lexists(os.path.join(path, "HEAD")) and (
        os.path.lexists(os.path.join(path, "commondir"))
        or os.path.isdir(os.path.join(path, "objects"))
    )


def find_repo(start: str) -> tuple[str, str] | None:
    """(git dir, worktree root or "") of the repository git finds from `start`, walking up as
    git does: a `.git` file or directory, or a bare repository; None when there is none."""
    path = os.path.abspath(start)
    while True:
        dotgit = os.path.join(path, ".git")
        try:
            st = os.stat(dotgit)
        except OSError:
            st = None
        if st is not None:
            gitdir = dotgit if stat.S_ISDIR(st.st_mode) else _gitfile(dotgit, st)
            if gitdir is not None and _is_gitdir(gitdir):
                return gitdir, path
        if _is_gitdir(path):
            return path, ""
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def common_of(gitdir: str) -> str:
    """The common dir a git dir shares (its `commondir` file), or the git dir itself."""
    path = os.path.join(gitdir, "commondir")
    try:
        sig: tuple[int, ...] | None = _signature(os.stat(path))
    except OSError:
        sig = None
    cached = _commons.get(gitdir)
    if cached is not None and cached[0] == sig:
        return cached[1]
    try:
        got = _read(path, 1 << 16) if sig is not None else None
    except _Unreadable:
        got = None
    common = gitdir
    if got is not None and got[0].strip():
        common = os.path.normpath(os.path.join(gitdir, os.fsdecode(got[0].strip())))
    _kept(_commons, gitdir, (sig, common))
    return common


# -- the index's submodules --------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    c = data[pos]
    pos += 1
    val = c & 127
    while c & 128:
        c = data[pos]
        pos += 1
        val = ((val + 1) << 7) + (c & 127)
    return val, pos


def _gitlinks_in(data: bytes, oid_len: int) -> list[bytes]:
    """The paths of the gitlink (submodule) entries of an index file's bytes; a path of b""
    for a gitlink entry whose name lives in a shared index (a split index)."""
    if len(data) < 12 or data[:4] != b"DIRC":
        raise ValueError("no index signature")
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    flags_at = 40 + oid_len
    out: list[bytes] = []
    if version in (2, 3):
        # Every entry's mode stands 24 bytes into it: a search finds every gitlink entry (and
        # perhaps bytes that only look like one, whose "path" then names no submodule).
        for match in re.finditer(re.escape(_GITLINK_MODE), data):
            start = match.start() - 24
            if start < 12 or start + flags_at + 2 > len(data):
                continue
            flags = int.from_bytes(data[start + flags_at : start + flags_at + 2], "big")
            name = start + flags_at + 2 + (2 if version == 3 and flags & 0x4000 else 0)
            end = data.find(b"\0", name)
            if end >= 0:
                out.append(data[name:end])
        return out
    if version != 4:
        raise ValueError(f"index version {version}")
    pos, prev = 12, b""
    for _ in range(count):
        mode = data[pos + 24 : pos + 28]
        flags = int.from_bytes(data[pos + flags_at : pos + flags_at + 2], "big")
        pos += flags_at + 2 + (2 if flags & 0x4000 else 0)
        strip, pos = _varint(data, pos)
        end = data.index(b"\0", pos)
        if strip > len(prev):
            raise ValueError("bad path compression")
        path = prev[: len(prev) - strip] + data[pos:end]
        pos, prev = end + 1, path
        if mode == _GITLINK_MODE:
            out.append(path)
    return out


def _index_gitlinks(path: str, oid_len: int) -> tuple[tuple[bytes, ...], bool]:
    """The gitlink paths of one index file, and whether it may be split (it has a `link`
    extension: its other entries are in a shared index); cached while its stat is the same."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return (), False
    except OSError as exc:
        raise _Unreadable(f"cannot read the index ({exc.strerror}): {path}") from None
    cached = _indexes.get(path)
    if cached is not None and cached[0] == _signature(st):
        return cached[1]
    got = _read(path, _MAX_INDEX, "index")
    if got is None:
        return (), False
    try:
        found = (tuple(_gitlinks_in(got[0], oid_len)), b"link" in got[0])
    except (ValueError, IndexError):
        raise _Unreadable(f"the index is not one fm can read: {path}") from None
    _kept(_indexes, path, (got[1], found))
    return found


def _gitlinks(gitdir: str, oid_len: int) -> tuple[bytes, ...]:
    """The submodule paths the index of `gitdir` records (its shared indexes' too)."""
    paths, split = _index_gitlinks(os.path.join(gitdir, "index"), oid_len)
    if not split:
        return tuple(p for p in paths if p)
    if b"" in paths:
        raise _Unreadable(f"the split index records a submodule fm cannot place: {gitdir}")
    more: list[bytes] = []
    with contextlib.suppress(OSError):
        for name in os.listdir(gitdir):
            if name.startswith("sharedindex."):
                more += _index_gitlinks(os.path.join(gitdir, name), oid_len)[0]
    return tuple(p for p in (*paths, *more) if p)


# -- the scan ----------------------------------------------------------------------------


def _repo_files(gitdir: str, common: str) -> Iterator[str]:
    """The repository-level config files git may read for a command in this git dir (which
    shares `common`)."""
    yield os.path.join(common, "config")
    yield os.path.join(gitdir, "config.worktree")


def outside_keys(env: Mapping[str, str]) -> frozenset[tuple[str, str, str]]:
    """The driver keys of the config files git reads outside any repository (the user's and
    the system's) for a command run with the environment `env`."""
    keys: set[tuple[str, str, str]] = set()
    for path in _user_and_system(env):
        # The user's or the admin's file, unreadable: git says so itself; nothing of a repo's.
        with contextlib.suppress(_Unreadable):
            _walk(path, env, keys)
    # git takes `core.worktree` from a repository's own config only; a hook the user or the
    # admin configured is theirs, not a repository's.
    return frozenset(k for k in keys if k[0] not in (WORKTREE, "hook"))


def scan(
    start: str,
    env: Mapping[str, str],
    *,
    submodules: bool = False,
    hooks_run: Callable[[], bool] | None = None,
    outside: frozenset[tuple[str, str, str]] | None = None,
) -> Scan:
    """The driver keys of every config git could read for a command run in `start` with the
    environment `env` (see the module doc); with `submodules`, those of the submodules the
    command would recurse into too. `hooks_run`: whether the git that runs reads configured
    hooks (asked only when the repository configures one; not given: it does). `outside`:
    `outside_keys(env)`, when read already for a batch of commands (each repository's own
    files are still read for each command)."""
    keys = set(outside_keys(env) if outside is None else outside)
    found = find_repo(start)
    if found is None:
        return Scan(frozenset(keys))
    try:
        _RepoScan(env, keys, submodules, hooks_run or (lambda: True)).repo(found[0], found[1], 0)
    except _Unreadable as exc:
        return Scan(frozenset(keys), str(exc))
    return Scan(frozenset(keys))


class _RepoScan:
    """One scan's walk of a repository's config files, and with `submodules` of the
    submodules' it would recurse into: the environment git runs with, the driver keys found
    so far (`keys`, added to), and the repositories seen (each once, at most `_MAX_REPOS`)."""

    def __init__(
        self,
        env: Mapping[str, str],
        keys: set[tuple[str, str, str]],
        submodules: bool,
        hooks_run: Callable[[], bool],
    ) -> None:
        self.env, self.keys, self.submodules, self.hooks_run = env, keys, submodules, hooks_run
        self.seen: set[str] = set()

    def repo(self, gitdir: str, worktree: str, depth: int) -> None:
        env, keys, submodules, seen = self.env, self.keys, self.submodules, self.seen
        if submodules:
            seen.add(os.path.normpath(gitdir))
            if len(seen) > _MAX_REPOS:
                raise _Unreadable(f"more than {_MAX_REPOS} submodules")
        fmt = None
        found: set[tuple[str, str, str]] = set()
        common = common_of(gitdir)
        for path in _repo_files(gitdir, common):
            fmt = _walk(path, env, found) or fmt
        trees = sorted(sub for sec, sub, _ in found if sec == WORKTREE)
        hooks = sorted(sub for sec, sub, _ in found if sec == "hook")
        problem = other_tree(trees, gitdir, common, worktree) or configured_hook(
            hooks, self.hooks_run
        )
        if problem is not None:
            raise _Unreadable(problem)
        keys |= {k for k in found if k[0] not in (WORKTREE, "hook")}
        if not submodules or not worktree:
            return
        oid_len = 32 if fmt == "sha256" else 20
        for sub in _gitlinks(gitdir, oid_len):
            subtree = os.path.join(worktree, os.fsdecode(sub))
            dotgit = os.path.join(subtree, ".git")
            try:
                st = os.stat(dotgit)
            except OSError:
                continue  # not checked out: git does not go in
            subdir = dotgit if stat.S_ISDIR(st.st_mode) else _gitfile(dotgit)
            if subdir is None or os.path.normpath(subdir) in seen:
                continue
            if depth + 1 > _MAX_DEPTH:
                raise _Unreadable(f"submodules nested deeper than {_MAX_DEPTH}: {worktree}")
            self.repo(subdir, subtree, depth + 1)


def file_bytes(path: str, limit: int = 1 << 20) -> tuple[bytes | None, str | None]:
    """A small regular file's bytes (None: there is none), or why it cannot be read."""
    try:
        got = _read(path, limit)
    except _Unreadable as exc:
        return None, str(exc)
    return (got[0] if got is not None else None), None
