"""No behaviour of fm depends on the wording of its own messages.

A step's result, a warning, a refusal's tail and a count are typed values
(`fm_teardown/model/results.py`, `step_warnings.py`); their words are written once, in
`fm_teardown/report/messages.py`, which nothing below report/ imports (`tests/test_layers.py`).
This scan of the package's source fails when a module matches on message text again: a
comparison, a membership test or a string method (`startswith`, `split`, ...) applied to a
`.detail`, `.reasons`, `.headline` or `.message`, or the words of a refusal's tail written
outside the renderer.

Other programs' words count too: what git, tmux or treehouse print for people (`.output`,
`.stdout`, `.stderr`, `.err` of a subprocess's result) is read only inside `adapters/`, which
turn it into typed facts (`pool.ReturnResult.not_leased`); elsewhere a subprocess's output is
parsed only as the data a porcelain command prints (split into lines, fields, NUL-separated
names), never searched for words.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fm_teardown

PACKAGE = Path(fm_teardown.__file__).resolve().parent

# Attributes that hold words for people (a step's detail, a decision's reasons and headline,
# an error's message): shown, never read back.
PROSE = {"detail", "reasons", "headline", "message"}
STRING_METHODS = {
    "startswith",
    "endswith",
    "split",
    "rsplit",
    "partition",
    "rpartition",
    "removeprefix",
    "removesuffix",
    "find",
    "rfind",
    "index",
    "count",
    "replace",
}
# The words of a refusal's tail: only the renderer writes them.
TAIL_WORDS = ("nothing was changed", "already done by this run", "nothing else was changed")
# A refusal's lead: kept as a typed fact (`Lead`), its words written by the renderer alone.
LEAD_WORDS = ("REFUSED: ",)
RENDERER = "report/messages.py"
# What a subprocess printed, on the result objects of the one subprocess door and the pool's
# return; only the adapters may search it for words.
SUBPROCESS = {"output", "stdout", "stderr", "err"}
ADAPTERS = "adapters/"
WORD_MATCHERS = {"startswith", "endswith", "find", "rfind", "index", "count"}


def _prose(node: ast.AST) -> bool:
    """`x.detail`, `x.reasons[0]`, `x.message`, a local `detail`: something that holds words."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in PROSE
    return isinstance(node, ast.Attribute) and node.attr in PROSE


def _subprocess_output(node: ast.AST) -> bool:
    """`r.stderr`, `result.output`, `r.err.strip()`: what a subprocess printed."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value  # `.strip()`, `.decode()`, `.lower()` keep it the output
    return isinstance(node, ast.Attribute) and node.attr in SUBPROCESS


def _words(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


class _Scan(ast.NodeVisitor):
    def __init__(self, name: str, tree: ast.Module) -> None:
        self.name = name
        self.found: list[str] = []
        self.function = ""
        self.docstrings = _docstrings(tree)

    def _say(self, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        self.found.append(f"{self.name}:{line} ({self.function or 'module'}): {what}")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    def visit_Compare(self, node: ast.Compare) -> None:
        text_ops = (ast.In, ast.NotIn, ast.Eq, ast.NotEq)
        if any(isinstance(op, text_ops) for op in node.ops) and any(
            _prose(x) for x in (node.left, *node.comparators)
        ):
            self._say(node, f"compares message text: {ast.unparse(node)}")
        elif (
            not self.name.startswith(ADAPTERS)
            and any(isinstance(op, text_ops) for op in node.ops)
            and any(_subprocess_output(x) for x in (node.left, *node.comparators))
            and any(_words(x) for x in (node.left, *node.comparators))
        ):
            self._say(node, f"matches a program's words: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        # `text.split()` with no separator only re-flows whitespace (click's usage message).
        reflow = f.attr in ("split", "rsplit") if isinstance(f, ast.Attribute) else False
        reflow = reflow and not node.args and not node.keywords
        if (
            isinstance(f, ast.Attribute)
            and f.attr in STRING_METHODS
            and _prose(f.value)
            and not reflow
        ):
            self._say(node, f"parses message text: {ast.unparse(node)}")
        elif not self.name.startswith(ADAPTERS) and isinstance(f, ast.Attribute):
            searched = (f.attr in WORD_MATCHERS and _subprocess_output(f.value) and node.args) or (
                f.attr in ("search", "match", "fullmatch", "findall")
                and any(_subprocess_output(a) for a in node.args)
            )
            if searched:
                self._say(node, f"searches a program's words: {ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if (
            self.name != RENDERER
            and isinstance(node.value, str)
            and id(node) not in self.docstrings
            and any(w in node.value for w in TAIL_WORDS)
        ):
            self._say(node, f"writes a refusal's tail: {node.value!r}")
        if (
            self.name != RENDERER
            and isinstance(node.value, str)
            and id(node) not in self.docstrings
            and node.value.startswith(LEAD_WORDS)
        ):
            self._say(node, f"writes a refusal's lead: {node.value!r}")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        for part in node.values:
            if isinstance(part, ast.Constant):
                self.visit_Constant(part)
            else:
                self.visit(part)


def violations(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        scan = _Scan(str(path.relative_to(package)), tree)
        scan.visit(tree)
        found += scan.found
    return found


def test_no_module_matches_on_message_text() -> None:
    assert violations(PACKAGE) == []


def test_the_scan_sees_each_kind_of_match(tmp_path: Path) -> None:
    """Each pattern that made behaviour depend on words is caught, wherever it hides."""
    (tmp_path / "bad.py").write_text(
        "def f(s, o, err):\n"
        "    a = s.detail.startswith('deleted')\n"
        "    b = 'git lock' in s.detail\n"
        "    c = o.reasons[0].split(':', 1)\n"
        "    d = o.headline == 'x'\n"
        "    e = err.message.endswith('; nothing was changed')\n"
        "    g = f'{a}; nothing was changed'\n"
        "    detail = s.text\n"
        "    h = detail.startswith('removed')\n"
        "    i = f'REFUSED: {h}'\n"
        "    return a, b, c, d, e, g, h, i\n"
    )
    (tmp_path / "act").mkdir()
    (tmp_path / "act" / "tool.py").write_text(
        "def f(result, r, LOCK):\n"
        "    a = 'is not leased' in result.output\n"
        "    b = r.stderr.strip().startswith('fatal:')\n"
        "    c = LOCK.search(result.output)\n"
        "    d = r.err == 'no server running'\n"
        "    return a, b, c, d, r.out.split(b'\\0'), r.stdout.splitlines()\n"
    )
    (tmp_path / "adapters").mkdir()
    (tmp_path / "adapters" / "pool.py").write_text(
        "def f(result):\n    return 'is not leased' in result.output\n"
    )
    (tmp_path / "good.py").write_text(
        '"""Says: nothing was changed (a docstring only describes)."""\n'
        "def f(s, o):\n"
        "    return s.result.what, len(o.reasons), s.step == 'pool'\n"
    )
    found = violations(tmp_path)
    assert [f.split(":", 2)[:2] for f in found] == [
        ["act/tool.py", "2 (f)"],
        ["act/tool.py", "3 (f)"],
        ["act/tool.py", "4 (f)"],
        ["act/tool.py", "5 (f)"],
        ["bad.py", "2 (f)"],
        ["bad.py", "3 (f)"],
        ["bad.py", "4 (f)"],
        ["bad.py", "5 (f)"],
        ["bad.py", "6 (f)"],
        ["bad.py", "6 (f)"],
        ["bad.py", "7 (f)"],
        ["bad.py", "9 (f)"],
        ["bad.py", "10 (f)"],
    ]
