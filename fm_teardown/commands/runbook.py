"""`fm runbook [NAME]`: the operator runbooks, shipped inside the package (spec §11).

One per verdict and refusal cause; every refusal and failure names the one to read in its
last hint line (`hint: runbook: fm runbook NAME`) and in its JSON (`"runbook"`). The texts
live in `fm_teardown/runbooks/<NAME>.md` (`docs/runbooks/` indexes them); what is printed is
`report/runbook_page.py`'s.
"""

from __future__ import annotations

import difflib

from fm_teardown.commands.completion import RUNBOOKS
from fm_teardown.model.errors import ExitCode
from fm_teardown.report import runbook_page

__all__ = ["runbook"]


def runbook(name: str | None) -> int:
    if name is None:
        runbook_page.render_index(RUNBOOKS)
        return 0
    if name not in RUNBOOKS:
        runbook_page.render_unknown(name, difflib.get_close_matches(name, RUNBOOKS, n=3))
        return int(ExitCode.INVALID)
    runbook_page.render_page(name)
    return 0
