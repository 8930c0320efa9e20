"""The pipeline level: the stages strung together for the commands, between a command's
parsing and its rendering (one task: `stages.py`, `one_task.py`; the audit: `audit.py`; a
batch: `selection.py`, `batch.py`). Each run's result is journalled here, in one place."""

__all__: list[str] = []
