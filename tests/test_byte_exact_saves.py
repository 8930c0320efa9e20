"""Saves and restores move bytes as they are (spec §15.1): `fm teardown --force` saves, and
`fm restore` gives back, exactly the bytes the slot held, whatever the attributes and config
say about line endings, `ident`, `working-tree-encoding` or filters, and no filter runs.

git's own `add` and checkout would convert: `text eol=crlf` turns a file with LF endings into
CRLF on the way back, `text=auto` normalises mixed endings, `ident` rewrites `$Id$`,
`working-tree-encoding` re-encodes, a clean filter rewrites the content (and runs a program the
repository names), `core.autocrlf` adds carriage returns."""

from __future__ import annotations

import os

from tests.fleet import Fleet, files_of, git, tid
from tests.test_git_door import Plants

ATTRIBUTES = """\
*.crlf text=auto eol=crlf
*.lf text eol=crlf
*.id ident
*.u16 working-tree-encoding=UTF-16
*.flt filter=upper
"""

# What the slot holds when it is discarded: every file a conversion would change.
WORK = {
    "tracked.lf": b"one\ntwo\n",  # LF endings where checkout writes CRLF
    "mixed.crlf": b"x\r\ny\nz\r\n",  # mixed endings, which `add` would normalise
    "new.lf": b"lf only\n",
    "version.id": b"$Id: 0000000000000000000000000000000000000000 $\nbody\n",
    "text.u16": b"\xff\xfe" + "h\u00e9llo\n".encode("utf-16-le"),
    "odd.u16": b"\xff\xfe\x41",  # not UTF-16 at all: git would refuse to add it
    "shout.flt": b"lower case, as written\n",
    "plain.txt": b"no attributes, LF only\n",  # core.autocrlf would add CRs on checkout
    "bytes.bin": b"\x00\r\n\xff binary\r\n",
    "tool.sh": b"#!/bin/sh\r\necho hi\r\n",
}


def test_a_forced_save_and_its_restore_are_byte_for_byte(fleet: Fleet) -> None:
    task = tid("bytes")
    (fleet.project / ".gitattributes").write_text(ATTRIBUTES)
    (fleet.project / "tracked.lf").write_bytes(b"one\n")
    (fleet.project / "shout.flt").write_bytes(b"tracked\n")
    git(fleet.project, "add", "-A")
    git(fleet.project, "commit", "-q", "-m", "attributes")
    git(fleet.project, "push", "-q", "origin", "main")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    for name, data in WORK.items():
        (slot / name).write_bytes(data)
    os.chmod(slot / "tool.sh", 0o755)
    os.symlink("tracked.lf", slot / "link")
    plants = Plants(fleet.root, "bytes")
    common = fleet.project / ".git"
    for key, val in (
        ("filter.upper.clean", f"{plants.program('clean', 'exec tr a-z A-Z')}"),
        ("filter.upper.smudge", f"{plants.program('smudge', 'exec cat')}"),
        ("filter.upper.required", "true"),
        ("core.autocrlf", "true"),
        ("core.eol", "crlf"),
    ):
        git(fleet.root, "config", "--file", str(common / "config"), key, val)
    work = files_of(slot)
    assert {k: v[0] for k, v in work.items() if k in WORK} == WORK

    r = fleet.fm("teardown", task, "--force")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert plants.fired() == [], plants.fired()
    dest = fleet.root / "restored"
    r = fleet.fm("restore", task, "--to", str(dest))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert plants.fired() == [], plants.fired()
    assert files_of(dest) == work  # every byte and exec bit as the slot held them
    assert os.access(dest / "tool.sh", os.X_OK)
    assert os.readlink(dest / "link") == "tracked.lf"  # a link, as it was
