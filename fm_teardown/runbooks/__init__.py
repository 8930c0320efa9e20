"""The operator runbooks that `fm runbook NAME` prints: one Markdown file per name in
`fm_teardown.commands.completion.RUNBOOKS` (`<NAME>.md`), read as package data."""

__all__ = []
