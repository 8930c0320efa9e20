"""fm teardown: safe teardown of finished agent tasks in a shared worktree pool."""

__all__ = []

__version__ = "0.1.0"
