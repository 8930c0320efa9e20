"""One place journals: `report/journal.py` is the only module that writes the journal, and
each of its two lines comes from one call site (a scan of the package's source with `ast`,
as `tests/test_output_in_report.py` scans for output).

- The result line: `journal.write_result`, called only by `pipeline/one_task.py`'s
  `teardown_task`, the run every command makes of a task (`fm teardown`, each task of a
  batch, the `fm-teardown` drop-in).
- The intent line: `journal.write_intent`, called only by the writer `pipeline/one_task.py`
  hands the act stage through its seam (`_intent_writer`), right before the first
  destructive step.
- Nothing else appends to a file of fm's own (`safefile.append_line`), spells the journal's
  file name, or reaches into the journal module's private writers."""

from __future__ import annotations

import ast
from pathlib import Path

import fm_teardown

PACKAGE = Path(fm_teardown.__file__).resolve().parent
JOURNAL_MODULE = "report/journal.py"

# Each writer of the journal's lines, and the one function (module, function) that calls it.
WRITERS = {
    "write_result": ("pipeline/one_task.py", "teardown_task"),
    "write_intent": ("pipeline/one_task.py", "_intent_writer"),
}
# How a module would write the journal without those: the append primitive fm's own files
# go through and the journal module's private writers.
PRIMITIVES = {"append_line", "_append", "_try_append", "try_append", "journal.append"}
# Modules that name the journal's file to read it (the demo narrates what the journal says).
READERS = {"commands/demo.py"}


def _calls(path: Path, name: str) -> list[tuple[str, str, str]]:
    """(callee, calling function, where) of every call in `path` to a function named in
    WRITERS or PRIMITIVES, by attribute (`journal.write_result(...)`) or by name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), name)
    found: list[tuple[str, str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and not function
                else function
            )
            if isinstance(child, ast.Call):
                f = child.func
                callee = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "journal":
                    callee = f"journal.{callee}" if callee == "append" else callee
                if callee in WRITERS or callee in PRIMITIVES:
                    found.append((callee, function or "<module>", f"{name}:{child.lineno}"))
            visit(child, inner)

    visit(tree, "")
    return found


def _spells_the_file(path: Path, name: str) -> list[str]:
    """Where `path` spells the journal's file name (`teardown-log…`) in a string that is no
    docstring or comment-like statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"), name)
    said = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [
        f"{name}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "teardown-log" in node.value
        and id(node) not in said
    ]


def violations(package: Path) -> list[str]:
    out: list[str] = []
    sites: dict[str, list[tuple[str, str]]] = {w: [] for w in WRITERS}
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if name == JOURNAL_MODULE:
            continue
        for callee, function, where in _calls(path, name):
            if callee in PRIMITIVES:
                out.append(f"{where}: {function} writes with {callee}")
            else:
                sites[callee].append((name, function))
        if name not in READERS:
            out += [f"{w}: names the journal's file" for w in _spells_the_file(path, name)]
    for writer, site in WRITERS.items():
        if sites[writer] != [site]:
            out.append(f"{writer} is called from {sites[writer]}, not only from {site}")
    return out


def test_only_the_journal_module_writes_the_journal_and_each_line_has_one_caller() -> None:
    assert violations(PACKAGE) == []


def test_the_scan_sees_another_writer(tmp_path: Path) -> None:
    """The scan is not blind: a second caller of a writer, a direct append and the file's
    name spelled elsewhere are each found."""
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "report").mkdir()
    (tmp_path / "commands").mkdir()
    (tmp_path / "report" / "journal.py").write_text(
        "JOURNAL = 'teardown-log.jsonl'\ndef _append(): append_line()\n"
    )
    (tmp_path / "pipeline" / "one_task.py").write_text(
        "def teardown_task(s, o):\n"
        "    journal.write_result(s, o)\n"
        "def _intent_writer(s):\n"
        "    def write(d):\n"
        "        return journal.write_intent(s, d)\n"
        "    return write\n"
    )
    assert violations(tmp_path) == []
    (tmp_path / "commands" / "x.py").write_text(
        "def f(s, o):\n"
        "    journal.write_result(s, o)\n"
        "    safefile.append_line(s / 'teardown-log.jsonl', b'', None)\n"
    )
    assert violations(tmp_path) == [
        "commands/x.py:3: f writes with append_line",
        "commands/x.py:3: names the journal's file",
        "write_result is called from [('commands/x.py', 'f'), ('pipeline/one_task.py', "
        "'teardown_task')], not only from ('pipeline/one_task.py', 'teardown_task')",
    ]
