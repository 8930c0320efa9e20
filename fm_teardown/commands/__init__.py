"""One module per command (pipx's `commands/`): each turns flags into a run of the pipeline,
and the run into output, journal lines and an exit code."""

__all__ = []
