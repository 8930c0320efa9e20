"""The import direction between the stages: model <- adapters <- observe <- decide <- act <-
report <- pipeline <- top. A module imports only from its own stage and the stages before it,
and every import counts: the ones at the top and the lazy ones inside functions alike (read
with `ast`, never by importing). Three stricter rules: the model imports only the model;
decide imports neither the adapters, observe nor act (it decides from values; what runs,
runs elsewhere); act imports nothing from observe (what it reads again comes through the
pipeline's `Seams`).

A module's stage is its folder under `fm_teardown/` (`model/`, `adapters/`, `observe/`,
`decide/`, `act/`, `report/`, and `pipeline/`, which strings the others together for the
commands); what lies outside them is in the `STAGE_OF` table below."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fm_teardown"

# The stages, in the order they may import each other: each may import the ones before it.
STAGES = ("model", "adapters", "observe", "decide", "act", "report", "pipeline", "top")

# What is not in a stage folder: the entry points and the commands (they parse, run the
# pipeline and render), the runbooks (report's texts) and the pool stand-in.
STAGE_OF = {
    **dict.fromkeys(
        ("__init__", "__main__", "entry", "cli", "cli_values", "commands", "standin"), "top"
    ),
    "runbooks": "report",
}

# Imports a stage may never make, beyond the order above.
FORBIDDEN = {
    "model": set(STAGES) - {"model"},
    "decide": {"adapters", "act", "observe"},
    # act reads the world again only through the `Seams` the pipeline builds.
    "act": {"observe"},
}


def module_name(path: Path) -> str:
    """`fm_teardown/commands/demo.py` -> `fm_teardown.commands.demo`."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" and len(rel.parts) > 1 else rel.parts
    return ".".join(parts)


def stage_of(module: str) -> str:
    """The stage of `fm_teardown.x[.y]`: its folder's, when the folder is a stage, else the
    table's entry for its first part below the package."""
    parts = module.split(".")[1:] or ["__init__"]
    if len(parts) > 1 and parts[0] in STAGES:
        return parts[0]
    if parts[0] in STAGES:  # a stage folder's own __init__
        return parts[0]
    assert parts[0] in STAGE_OF, f"{module} has no stage: add it to STAGE_OF or a stage folder"
    return STAGE_OF[parts[0]]


def imports_of(path: Path) -> set[str]:
    """Every fm_teardown module `path` imports, wherever the import statement stands."""
    return imports_of_file(path, module_name(path))


def imports_of_file(path: Path, name: str) -> set[str]:
    """As `imports_of`, for a file read as the module `name` (a file outside the package)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name.rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from fm_teardown import act` imports the module act; `from x.y import Name`, x.y.
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                sub = PACKAGE.parent / Path(*candidate.split("."))
                out.add(candidate if sub.with_suffix(".py").exists() or sub.is_dir() else base)
    return {m for m in out if m == "fm_teardown" or m.startswith("fm_teardown.")}


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = module_name(path)
        mine = stage_of(here)
        for target in sorted(imports_of(path)):
            theirs = stage_of(target)
            if STAGES.index(theirs) > STAGES.index(mine) or theirs in FORBIDDEN.get(mine, ()):
                found.append(f"{here} ({mine}) imports {target} ({theirs})")
    return found


def test_every_import_goes_from_a_later_stage_to_an_earlier_one() -> None:
    assert violations() == []


def test_the_scan_sees_imports_inside_functions_and_every_module_has_a_stage() -> None:
    # The cli imports the commands only when one runs: the scan must still see it.
    assert "fm_teardown.commands.teardown" in imports_of(PACKAGE / "cli.py")
    for path in PACKAGE.rglob("*.py"):
        stage_of(module_name(path))


def _exports(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            assert isinstance(node.value, ast.List | ast.Tuple)
            return [str(e.value) for e in node.value.elts if isinstance(e, ast.Constant)]
    return None


def test_every_module_says_what_it_exports_and_names_its_helpers_private() -> None:
    """`__all__` in every module (the empty `__init__.py` files and `__main__` aside); every
    function and class defined at module level is either in it or `_`-named, so a reader
    tells a module's surface from its helpers by the name alone."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        if path.name in ("__init__.py", "__main__.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), name)
        exported = _exports(tree)
        if exported is None:
            found.append(f"{name}: no __all__")
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.ClassDef) or node.name[0] == "_":
                continue
            if node.name not in exported:
                found.append(f"{name}: {node.name} is neither in __all__ nor _-named")
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)} | {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign | ast.AnnAssign)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        found += [
            f"{name}: __all__ names {x}, which it does not define"
            for x in exported
            if x not in defined
        ]
    assert found == []


def _cycles(modules: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles among `modules` (name -> the names it imports), each once."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def walk(here: str, path: list[str]) -> None:
        for nxt in sorted(modules.get(here, ())):
            if nxt == path[0]:
                key = frozenset(path)
                if key not in seen:
                    seen.add(key)
                    found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:
                walk(nxt, [*path, nxt])

    for start in sorted(modules):
        walk(start, [start])
    return found


def test_no_import_cycle_among_the_commands() -> None:
    """One command module may use another, never both ways: what two need goes into a third
    (`pipeline/one_task.py`: one task's run, shared by `teardown`, `batch` and `firstmate`)."""
    commands = {module_name(p): imports_of(p) for p in sorted((PACKAGE / "commands").glob("*.py"))}
    graph = {m: {t for t in targets if t in commands and t != m} for m, targets in commands.items()}
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]  # the check sees one


# The words of refusal leads and tails, reasons, proofs of landing, finished and not-selected
# reasons (`messages`), of each step's result and each warning of a run (`step_words`), and
# of each cause of a refusal (`cause_words`).
WORDS = (
    "fm_teardown.report.messages",
    "fm_teardown.report.step_words",
    "fm_teardown.report.cause_words",
)
BELOW_REPORT = STAGES[: STAGES.index("report")]


def test_the_words_live_in_report_and_nothing_below_it_imports_them() -> None:
    """The stages below report/ hand typed values up and never word them: none of them
    imports the words module, lazily or not, and there is no second one anywhere else."""
    for words in WORDS:
        assert stage_of(words) == "report"
        assert (PACKAGE.parent / Path(*words.split("."))).with_suffix(".py").is_file()
    assert sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("messages.py")) == [
        "report/messages.py"
    ]
    found = [
        f"{module_name(path)} imports {words}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if stage_of(module_name(path)) in BELOW_REPORT
        for words in WORDS
        if words in imports_of(path)
    ]
    assert found == []


def test_the_words_check_sees_a_lazy_import_below_report(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from fm_teardown.report import messages\n    return messages\n")
    assert WORDS[0] in imports_of_file(bad, "fm_teardown.act.bad")


# The commands that tear down: they parse their line, run the pipeline and render.
TEARDOWN_COMMANDS = ("teardown", "batch", "firstmate")


def test_the_teardown_commands_only_parse_run_the_pipeline_and_render() -> None:
    """What strings the stages together lives in `pipeline/`: `fm teardown`, its batches and
    the drop-in import nothing that observes, acts or starts anything (decide/ only for the
    syntax of what they parse: a plan token, a duration)."""
    found = [
        f"commands/{name}.py imports {target}"
        for name in TEARDOWN_COMMANDS
        for target in sorted(imports_of(PACKAGE / "commands" / f"{name}.py"))
        if stage_of(target) in ("adapters", "observe", "act")
    ]
    assert found == []
    assert "fm_teardown.pipeline.one_task" in imports_of(PACKAGE / "commands" / "teardown.py")
