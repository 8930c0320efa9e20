"""A record's kind, mode and backend, a verdict, an endpoint's state and a step's outcome are
enums, parsed once (`model/records.py` for a record's): no module compares one with a string
literal, where a typo or a renamed value would silently never match."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fm_teardown"
# The attributes that hold those enums, wherever they are read.
KINDS = {"kind", "mode", "backend", "verdict", "state", "endpoint", "outcome"}


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    return isinstance(node, ast.Tuple | ast.List | ast.Set) and any(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    )


def comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing `<x>.kind` (or another of `KINDS`) with a string or strings."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        kinds = any(isinstance(s, ast.Attribute) and s.attr in KINDS for s in sides)
        if kinds and any(_literal(s) for s in sides):
            found.append(node.lineno)
    return found


def test_no_kind_is_compared_with_a_string_literal() -> None:
    bad = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := comparisons(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert not bad


def test_the_check_sees_one() -> None:
    tree = ast.parse('a = record.kind == "secondmate"\nb = r.verdict not in ("proceed", "x")\n')
    assert comparisons(tree) == [1, 2]
