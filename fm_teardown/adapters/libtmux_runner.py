"""libtmux's command runner, without the rest of libtmux.

fm runs tmux through `libtmux.common.tmux_cmd` and needs nothing else of libtmux. But
`import libtmux.common` first runs the package's `__init__`, which imports its whole object
API (Server, Session, Window, Pane, Client and their dataclasses): about 25 ms of every
command that lists panes, an eighth of the audit of a hundred tasks. So fm enters the package
without running its body: a module for `libtmux` that knows where its files are (so
`libtmux.common`, `libtmux.exc` and what they import load as usual) and runs the body the
first time anyone asks it for a name it does not have yet (`libtmux.Server`, say), so that a
program (or a test) importing libtmux itself, before or after, gets the whole package.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import logging
import sys
import threading
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from libtmux.common import tmux_cmd
    from libtmux.exc import TmuxCommandNotFound

__all__ = ["runner"]

PACKAGE = "libtmux"

# The package's body runs once, and a thread that asks for a name while another runs it
# waits for it. Reentrant: the body's own imports may ask the package for a name.
_BODY = threading.RLock()


def runner() -> tuple[type[tmux_cmd], type[TmuxCommandNotFound]]:
    """`tmux_cmd` and the error it raises when there is no tmux, libtmux's body not run
    unless something else has run it or asks for it."""
    with _BODY:
        if PACKAGE not in sys.modules:
            _enter()
    exc = importlib.import_module(f"{PACKAGE}.exc")
    common = importlib.import_module(f"{PACKAGE}.common")
    found: type[tmux_cmd] = common.tmux_cmd
    missing: type[TmuxCommandNotFound] = exc.TmuxCommandNotFound
    return found, missing


def _enter(name: str = PACKAGE) -> None:
    """Put a module for the package `name` in `sys.modules` that loads its submodules but
    runs its body only when asked for a name that is neither in it nor one of its
    submodules."""
    spec = importlib.util.find_spec(name)
    loader = None if spec is None else spec.loader
    places = None if spec is None else spec.submodule_search_locations
    if spec is None or loader is None or places is None:
        importlib.import_module(name)  # not a package as expected: the usual import
        return
    package: ModuleType = importlib.util.module_from_spec(spec)

    def rest(attr: str) -> object:
        # A submodule is loaded, not the body: `from . import x` in a submodule being
        # imported asks the package for `x` first, and the body run then, halfway through
        # that submodule, could import it again half made.
        if importlib.machinery.PathFinder.find_spec(f"{name}.{attr}", places) is not None:
            return importlib.import_module(f"{name}.{attr}")
        with _BODY:
            if package.__dict__.pop("__getattr__", None) is not None:
                loader.exec_module(package)
        return getattr(package, attr)

    package.__dict__["__getattr__"] = rest
    # What the body does for the package's logger, done here too: the submodules log to it,
    # and without a handler Python prints their errors on stderr.
    logging.getLogger(name).addHandler(logging.NullHandler())
    sys.modules[name] = package
