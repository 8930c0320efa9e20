"""No module of the package is over 700 lines: a module that grows past that holds more than
one thing (stages, or a stage and its words) and is split where its parts meet, each named for
what it does.

One exception, named here: `commands/demo.py`, `fm demo`'s narrated script. It is one story
told in order (the sandbox, the incident, each teardown and what it shows), read top to
bottom; cutting it into modules would scatter the narration, not separate concerns."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fm_teardown"
MAX_LINES = 700
# Modules allowed past the limit, each with why (relative to the package).
EXCEPTIONS = {"commands/demo.py": "a narrated script, read top to bottom"}


def oversized(package: Path, limit: int, exceptions: dict[str, str]) -> list[str]:
    """The modules under `package` over `limit` lines, but the exceptions."""
    found = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit and name not in exceptions:
            found.append(f"{name}: {lines} lines (at most {limit})")
    return found


def test_no_module_is_over_700_lines_but_the_demo() -> None:
    assert oversized(PACKAGE, MAX_LINES, EXCEPTIONS) == []


def test_the_exceptions_exist_and_the_check_sees_a_long_module(tmp_path: Path) -> None:
    # An exception that names no module is stale: it must go with the module.
    for name in EXCEPTIONS:
        assert (PACKAGE / name).is_file(), name
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * 701)
    (tmp_path / "short.py").write_text("x = 1\n" * 700)
    assert oversized(tmp_path, MAX_LINES, {}) == ["sub/long.py: 701 lines (at most 700)"]
    assert oversized(tmp_path, MAX_LINES, {"sub/long.py": "why"}) == []
