"""`fm runbook [NAME]`: the operator runbooks, shipped inside the package (spec §11).

One per verdict and refusal cause; every refusal and failure names the one to read in its
last hint line (`hint: runbook: fm runbook NAME`) and in its JSON (`"runbook"`). The texts
live in `fm_teardown/runbooks/<NAME>.md` (`docs/runbooks/` indexes them); what is printed is
`report/runbook_page.py`'s. `fm runbook agents` prints, with its text, the list of agents fm
knows as the code holds it (`model/process_kind.py`) and what `FM_AGENT_NAMES` adds.
"""

from __future__ import annotations

import difflib
import os

from fm_teardown.commands.completion import RUNBOOKS
from fm_teardown.model.errors import ExitCode, FmError
from fm_teardown.model.process_kind import configure
from fm_teardown.model.settings import agent_names
from fm_teardown.report import runbook_page

__all__ = ["runbook"]


def runbook(name: str | None) -> int:
    if name is None:
        runbook_page.render_index(RUNBOOKS)
        return 0
    if name not in RUNBOOKS:
        runbook_page.render_unknown(name, difflib.get_close_matches(name, RUNBOOKS, n=3))
        return int(ExitCode.INVALID)
    if name == "agents":
        # The list fm would run with here: its own, and FM_AGENT_NAMES's.
        try:
            configure(agent_names(os.environ))
        except FmError as err:
            runbook_page.render_bad_setting(err.message)
            return int(err.exit_code)
    runbook_page.render_page(name)
    return 0
