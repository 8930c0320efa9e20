"""Every line a command prints is written in report/ (the narrated demo and the completion
protocol aside): a scan of the package's source for `print(...)`, `sys.stdout.write(...)` and
`sys.stderr.write(...)` outside `fm_teardown/report/`."""

from __future__ import annotations

import ast
from pathlib import Path

import fm_teardown

PACKAGE = Path(fm_teardown.__file__).resolve().parent

# Allowed outside report/: the narrated demo (a script read top to bottom) and the completion
# protocol (what the shells read: the scripts, `fm __complete`, installing them).
ALLOWED_MODULES = {"commands/demo.py", "commands/completion.py"}
ALLOWED_FUNCTIONS = {("cli.py", "_show_completion"), ("cli.py", "_install_completion")}


def _writes(path: Path, name: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), name)
    found: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef) else function
            if isinstance(child, ast.Call):
                f = child.func
                printed = isinstance(f, ast.Name) and f.id == "print"
                written = (
                    isinstance(f, ast.Attribute)
                    and f.attr == "write"
                    and isinstance(f.value, ast.Attribute)
                    and f.value.attr in ("stdout", "stderr")
                    and isinstance(f.value.value, ast.Name)
                    and f.value.value.id == "sys"
                )
                if (printed or written) and (name, function) not in ALLOWED_FUNCTIONS:
                    found.append(f"{name}:{child.lineno} ({function or 'module'})")
            visit(child, inner)

    visit(tree, "")
    return found


def violations(package: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(package.rglob("*.py")):
        name = str(path.relative_to(package))
        if name.startswith("report/") or name in ALLOWED_MODULES:
            continue
        out += _writes(path, name)
    return out


def test_only_report_writes_what_people_read() -> None:
    assert violations(PACKAGE) == []


def test_the_scan_sees_prints_and_writes(tmp_path: Path) -> None:
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "x.py").write_text(
        "import sys\n"
        "def f():\n"
        "    print('a')\n"
        "    sys.stderr.write('b')\n"
        "    sys.stdout.write('c')\n"
        "    open('f').write('not output')\n"
    )
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "y.py").write_text("print('fine here')\n")
    assert violations(tmp_path) == [
        "commands/x.py:3 (f)",
        "commands/x.py:4 (f)",
        "commands/x.py:5 (f)",
    ]


def _worded_warnings(path: Path, name: str) -> list[str]:
    """`….warnings.append(<a sentence>)` / `.extend([...])`: a string literal or f-string
    given as a warning (an error's own message, passed on as it is, is no new sentence)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), name)
    found: list[str] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend", "insert")
            and isinstance(node.func.value, ast.Attribute | ast.Name)
            and (getattr(node.func.value, "attr", None) or getattr(node.func.value, "id", ""))
            == "warnings"
        ):
            continue
        for arg in node.args:
            for sub in ast.walk(arg):
                if isinstance(sub, ast.JoinedStr) or (
                    isinstance(sub, ast.Constant) and isinstance(sub.value, str)
                ):
                    found.append(f"{name}:{node.lineno}")
                    break
    return found


def test_act_hands_its_warnings_up_as_values() -> None:
    """A real run's warnings are values (`model/step_warnings.py`) that report/ words: no
    module of act/ writes a warning's sentence itself."""
    found = []
    for path in sorted((PACKAGE / "act").glob("*.py")):
        found += _worded_warnings(path, str(path.relative_to(PACKAGE)))
    assert found == []


def test_the_warning_scan_sees_a_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(run, w, x):\n"
        "    run.warnings.append(f'kept {x}')\n"
        "    w.extend(['a'])\n"
        "    warnings = []\n"
        "    warnings.append('lost')\n"
        "    run.warnings.append(x.message)\n"
    )
    assert _worded_warnings(bad, "bad.py") == ["bad.py:2", "bad.py:5"]


# The calls that make a refusal (or a stale slot) in decide/, and which of their arguments are
# its reasons and headline: by position, or by keyword.
_REFUSING = {"_refusal": (1, 3), "Refusal": (1, 3), "Stale": (0,)}
_REFUSING_KEYWORDS = {"reasons", "headline", "lines"}


def _sentences(node: ast.AST) -> bool:
    """A string literal or f-string anywhere in `node`, outside a call (a cause's own facts,
    `Observed(kind, tmp.problem)`, are given to a constructor, not said)."""
    if isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    ):
        return True
    if isinstance(node, ast.Call):
        return False
    return any(_sentences(child) for child in ast.iter_child_nodes(node))


def _worded_refusals(path: Path, name: str) -> list[str]:
    """Reasons or a headline of a refusal given as words: a literal or f-string passed to
    `_refusal`/`Refusal`/`Stale`, or put in the variable passed (`lines = [f"..."]`,
    `lines += [...]`, `lines.append(f"...")` in the same function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), name)
    found: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            callee = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
            if callee not in _REFUSING:
                continue
            args = [call.args[i] for i in _REFUSING[callee] if i < len(call.args)]
            args += [k.value for k in call.keywords if k.arg in _REFUSING_KEYWORDS]
            names = {a.id for a in args if isinstance(a, ast.Name)}
            said = [getattr(a, "lineno", call.lineno) for a in args if _sentences(a)]
            for node in ast.walk(fn):
                values: list[ast.expr] = []
                if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                        values = [node.value] if node.value is not None else []
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("append", "extend", "insert")
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in names
                ):
                    values = list(node.args)
                said += [v.lineno for v in values if _sentences(v)]
            found += [f"{name}:{line} ({fn.name})" for line in said]
    return sorted(set(found))


def test_decide_hands_its_refusals_up_as_causes() -> None:
    """A refusal's reasons and headline (and a stale slot's reasons) are causes
    (`model/causes.py`) that report/ words: no module of decide/ writes them as sentences."""
    found = []
    for path in sorted((PACKAGE / "decide").glob("*.py")):
        found += _worded_refusals(path, str(path.relative_to(PACKAGE)))
    assert found == []


def test_the_refusal_scan_sees_a_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(c, x):\n"
        "    lines = [f'slot {x} is owned']\n"
        "    lines.append('more')\n"
        "    hints = ['a hint is words']\n"
        "    return _refusal(V, lines, hints, f'{x} works here')\n"
        "def g(c, x):\n"
        "    return Stale(reasons=(Cause(x, 'a fact'),), warnings=('w',), owner=x)\n"
        "def h(c, x):\n"
        "    return Stale(reasons=('stale',), warnings=(), owner=x)\n"
    )
    assert _worded_refusals(bad, "bad.py") == [
        "bad.py:2 (f)",
        "bad.py:3 (f)",
        "bad.py:5 (f)",
        "bad.py:9 (h)",
    ]


# The calls that carry why a task's work is not landed (`model/not_landed.py`), and which of
# their arguments hold it: by position, or by keyword.
_SUMMARY_CALLS = {"LandedFacts": (1,), "facts": (1,), "_unlanded": (1,), "NotLanded": (1,)}
_SUMMARY_KEYWORDS = {"summary", "merge_summary"}


def _embeds_summary(node: ast.AST) -> bool:
    """An f-string that says a summary (`f"… ({landed.summary})"`): words built on it."""
    return any(
        isinstance(sub, ast.Attribute) and sub.attr in _SUMMARY_KEYWORDS
        for value in ast.walk(node)
        if isinstance(value, ast.FormattedValue)
        for sub in ast.walk(value)
    )


def _worded_summaries(path: Path, name: str) -> list[str]:
    """Why work is not landed given as words: a literal or f-string passed as a summary
    (`LandedFacts(False, f"...")`, `summary=...`), put in the variable passed or in one named
    `summary`, or an f-string that embeds a summary."""
    tree = ast.parse(path.read_text(encoding="utf-8"), name)
    found: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        names = set(_SUMMARY_KEYWORDS)
        said: list[int] = []
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            callee = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
            at = _SUMMARY_CALLS.get(str(callee), ())
            args = [call.args[i] for i in at if i < len(call.args)]
            args += [k.value for k in call.keywords if k.arg in _SUMMARY_KEYWORDS]
            names |= {a.id for a in args if isinstance(a, ast.Name)}
            said += [getattr(a, "lineno", call.lineno) for a in args if _sentences(a)]
        for node in ast.walk(fn):
            if isinstance(node, ast.JoinedStr) and _embeds_summary(node):
                said.append(node.lineno)
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                named = any(isinstance(t, ast.Name) and t.id in names for t in targets)
                if named and node.value is not None and _sentences(node.value):
                    said.append(node.lineno)
        found += [f"{name}:{line} ({fn.name})" for line in said]
    return sorted(set(found))


def test_why_work_is_not_landed_is_a_value() -> None:
    """The judge (decide/) and the secondmate home's check (observe/home.py) hand up why work
    is not landed as values (`model/not_landed.py`) that report/ words: no sentence of it, and
    no warning or reason built on it, is written below report/."""
    paths = [*sorted((PACKAGE / "decide").glob("*.py")), PACKAGE / "observe" / "home.py"]
    found = []
    for path in paths:
        found += _worded_summaries(path, str(path.relative_to(PACKAGE)))
    assert found == []


def test_the_summary_scan_sees_a_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(c, x, landed):\n"
        "    summary = f'{x} commits'\n"
        "    return LandedFacts(False, summary, (), ())\n"
        "def g(c, x):\n"
        "    why = f'home {x} is not a directory'\n"
        "    return _unlanded(c, why, notes=(why,))\n"
        "def h(c, x, landed):\n"
        "    return GoOn(warnings=(f'--force: discarding ({landed.summary})',))\n"
        "def i(c, x):\n"
        "    return facts(False, 'cannot inspect', merge_summary=Why(x))\n"
        "def j(c, x):\n"
        "    return LandedFacts(False, Why(x), (), (), (f'note {x}',))\n"
    )
    assert _worded_summaries(bad, "bad.py") == [
        "bad.py:10 (i)",
        "bad.py:2 (f)",
        "bad.py:5 (g)",
        "bad.py:8 (h)",
    ]
