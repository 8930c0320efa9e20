"""A batch of `fm teardown` (spec §9): `fm teardown A B C` and `fm teardown --landed`.

The selection and the run, one task after another, are the pipeline's
(`pipeline/batch.py`); here what is shown of them: the `--landed` selection, a progress line
per task on a terminal, each task's outcome as it ends, and the summary (for a stopped batch
the tasks not done and one command that finishes them), or one JSON document at the end.
"""

from __future__ import annotations

import sys

from fm_teardown.model.errors import FmError
from fm_teardown.model.outcome import Outcome
from fm_teardown.model.request import Asked, Request
from fm_teardown.model.settings import Settings
from fm_teardown.pipeline import batch
from fm_teardown.report import batch_view, console
from fm_teardown.report import render as report
from fm_teardown.report.json_out import emit_json

__all__ = ["run"]


def run(s: Settings, request: Request) -> int:
    """Select the batch's tasks, tear them down one after another; the batch's exit code."""
    return batch.run(s, request, _Shown(request))


class _Shown:
    """What a batch shows as it goes (`batch.Watch`): for people, or one JSON document."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.landed = request.asked == Asked.LANDED
        self.progress = not request.json and sys.stderr.isatty()

    def unselectable(self, err: FmError) -> None:
        outcome = Outcome.of_error(None, err, dry_run=self.request.flags.dry_run)
        report.render(outcome, json_out=self.request.json)

    def interrupted(self) -> None:
        console.interrupted("selecting")

    def selected(self, b: batch.Batch) -> None:
        if self.landed and not self.request.json:
            batch_view.render_selection(
                list(b.tasks), [(n.task, n.finished) for n in b.not_selected]
            )

    def starting(self, number: int, of: int, task: str) -> None:
        if self.progress:
            console.progress(number, of, task)

    def done(self, outcome: Outcome) -> None:
        if not self.request.json:
            report.render(outcome, json_out=False)

    def finished(self, b: batch.Batch, done: batch.Done) -> None:
        results = list(done.results)
        if not self.request.json:
            batch_view.render_summary(results, done.code, list(done.not_done), done.finish)
            return
        doc = batch_view.batch_json(results, dry_run=self.request.flags.dry_run, code=done.code)
        if done.finish is not None:
            doc["not_done"] = list(done.not_done)
            doc["finish"] = done.finish
        if self.landed:
            doc["not_selected"] = batch_view.not_selected_json(
                [(n.task, n.verdict, n.finished) for n in b.not_selected]
            )
        emit_json(doc)
