"""Acting on a plan. Not available yet: a real run refuses plainly instead of pretending."""

from __future__ import annotations

from fm_teardown import report
from fm_teardown.decide import Flags
from fm_teardown.errors import ExitCode, FmError, Verdict
from fm_teardown.pipeline import Planned
from fm_teardown.settings import Settings


def run(settings: Settings, planned: Planned, flags: Flags, *, json_out: bool) -> int:
    err = FmError(
        Verdict.FAILED,
        f"acting is not available yet: nothing was changed for {planned.decision.task} "
        "(use --dry-run to see the verdict and the plan)",
    )
    if json_out:
        report.emit_json(report.error_json(planned.decision.task, err, dry_run=False))
    report.render_error(err)
    return int(ExitCode.FAILED)
