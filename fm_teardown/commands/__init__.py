"""One module per command (pipx's `commands/`): each parses its command line, runs the
pipeline (`fm_teardown/pipeline/`) and turns the run into output and an exit code."""

__all__ = []
