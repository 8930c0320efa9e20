"""decide/ decides from values: it reads no clock, no file, no process state, and imports
nothing of observe/ but the endpoint classifiers (pure; on their way to the model). What it
needs of the world (the time, a meta's inode, fm's own pid) the pipeline reads and passes in.
Read with `ast`, never by importing."""

from __future__ import annotations

import ast

from tests.test_layers import PACKAGE, imports_of

# Calls that read the world: the clock, the file system, the process.
_IO_CALLS = {
    ("time", "time"),
    ("time", "monotonic"),
    ("os", "lstat"),
    ("os", "stat"),
    ("os", "getpid"),
    ("os", "getcwd"),
    ("os", "listdir"),
    ("os", "scandir"),
    ("os", "readlink"),
    ("datetime", "now"),
}
_IO_NAMES = {"open"}
# Pure classifiers another change moves into the model; until then decide may read them here.
_ALLOWED_OBSERVE = {"fm_teardown.observe.endpoint"}


def _io_calls(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in _IO_NAMES:
            found.append(f"{f.id}() at line {node.lineno}")
        elif (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and (f.value.id, f.attr) in _IO_CALLS
        ):
            found.append(f"{f.value.id}.{f.attr}() at line {node.lineno}")
    return found


def test_decide_reads_nothing_of_the_world() -> None:
    found = []
    for path in sorted((PACKAGE / "decide").glob("*.py")):
        name = path.name
        found += [f"{name}: {c}" for c in _io_calls(ast.parse(path.read_text(), name))]
        found += [
            f"{name} imports {m}"
            for m in sorted(imports_of(path))
            if m.startswith("fm_teardown.observe") and m not in _ALLOWED_OBSERVE
        ]
    assert found == []


def test_the_check_sees_a_clock_read_and_a_stat() -> None:
    tree = ast.parse("import os, time\nx = time.time() - os.lstat('m').st_ino\nopen('f')\n")
    assert len(_io_calls(tree)) == 3
