"""Command-line values without pydantic (issue 14: start-up close to what the stack costs).

typer (0.26 and later) coerces every parameter's value through a pydantic `TypeAdapter` that
it builds on first use, and importing pydantic for that costs about 100 ms: more than all of
a one-task dry run's own work. fm's parameters are plain `str`, `bool` and `list[str]`, and
click hands their values over as exactly those types, for which typer's adapters return the
value unchanged (a list for `list[str]`). So for those annotations, with no parser and no
file mode, `install()` gives typer a pass-through coercion; any other annotation, or a value
of another type, still goes to typer's own. A typer without these internals is left as it
is: fm is then only slower, never different (`tests/test_startup.py` tells which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["install", "plain_argument_help"]

_PLAIN: tuple[object, ...] = (str, bool, list[str])


def _is_plain(annotation: object, value: object) -> bool:
    if annotation is str:
        return isinstance(value, str)
    if annotation is bool:
        return isinstance(value, bool)
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


def install() -> bool:
    """Route fm's plain parameters around pydantic; True when typer's internals allowed it."""
    try:
        from typer import core
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:
        return False
    parameter: Any = getattr(core, "_TyperParameter", None)
    original = getattr(parameter, "get_runtime_param", None)
    if original is None:
        return False
    if getattr(original, "fm_plain", False):
        return True

    @dataclass(frozen=True)
    class PlainParam(RuntimeParam):
        descriptor: Any

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if _is_plain(self.annotation, value):
                return list(value) if isinstance(value, tuple) else value
            full = build_runtime_param(self.descriptor)
            return full._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        if getattr(self, "_runtime_param", None) is None:
            d = getattr(self, "type_descriptor", None)
            info: Any = getattr(d, "parameter_info", None)
            if (
                d is None
                or getattr(d, "file_annotation", None) is not None
                or getattr(info, "parser", None) is not None
                or not any(d.annotation == p for p in _PLAIN)
            ):
                return original(self)
            self._runtime_param = PlainParam(info, d.annotation, d)
        return self._runtime_param

    get_runtime_param.fm_plain = True  # type: ignore[attr-defined]
    parameter.get_runtime_param = get_runtime_param
    return True


def plain_argument_help() -> None:
    """typer shows an argument as `TASK <list[str]>` in help and a required one as `{TASK}` in
    the usage line: Python's types and braces no shell user reads. fm's arguments read `TASK`,
    `[TASK]...`, as in every man page. A typer without these internals keeps its own."""
    from typer import core

    argument: Any = getattr(core, "TyperArgument", None)
    if argument is None or not hasattr(argument, "_usage_display_name"):
        return

    def usage_name(self: Any) -> str:
        name = str(self.display_name_raw)
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    argument.display_type = lambda self, ctx: ""
    argument._usage_display_name = usage_name
