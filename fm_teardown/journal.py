"""The journal: one JSON line per real run in `data/teardown-log.jsonl`.

One append per run (refusals included, invalid requests not). A journal that cannot be
written warns and never changes the result.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

JOURNAL = "teardown-log.jsonl"


def append(data_dir: Path, entry: dict[str, Any]) -> bool:
    line = (json.dumps(entry, ensure_ascii=False) + "\n").encode()
    path = data_dir / JOURNAL
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        try:
            os.write(fd, line)  # one write of one line: appends never interleave
        finally:
            os.close(fd)
    except OSError as exc:
        sys.stderr.write(f"warning: could not append to the journal {path}: {exc.strerror}\n")
        return False
    return True
