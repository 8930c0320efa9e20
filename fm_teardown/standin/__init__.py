"""A stand-in for the `treehouse` worktree-pool CLI, shipped for `fm demo` and the tests.

`treehouse` in this directory is a stdlib-only Python script that behaves like the real
pool CLI (v2.3.0) closely enough for `fm` to be exercised against it: the pool layout, the
state file, `status`, `get --lease` and `return`. It is a test and demo stand-in, never the
real pool: do not point a real fleet's `FM_TREEHOUSE_BIN` at it. See README.md beside it.
"""

from pathlib import Path

__all__ = ["TREEHOUSE"]

# The script itself (run it as `sys.executable TREEHOUSE`, so its executable bit does not matter).
TREEHOUSE: Path = Path(__file__).resolve().parent / "treehouse"
