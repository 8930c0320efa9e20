"""The command line: parse flags, call the pipeline, render, exit with the verdict's code.

Nothing heavy is imported at module level: completion and `--help` load only typer and the
standard library. The pipeline (and with it psutil, libtmux and rich) is imported on use.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

app = typer.Typer(
    name="fm",
    help="fm: safe teardown for agent fleets.",
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    add_completion=True,
)


def _complete_task(incomplete: str) -> list[str]:
    from fm_teardown import records, settings

    try:
        ids = records.list_task_ids(settings.load().state_dir)
    except Exception:
        return []
    return [i for i in ids if i.startswith(incomplete)]


def _complete_owner(ctx: typer.Context, incomplete: str) -> list[str]:
    task = ctx.params.get("task")
    if not task:
        return []
    try:
        from fm_teardown import pipeline, settings
        from fm_teardown.observe import observe
        from fm_teardown.ownership import owners_of

        s = settings.load(ctx.params.get("state_dir"))
        fleet = pipeline.load(s, task)
        live = [o.id for o in owners_of(task, fleet, observe(s, fleet)) if o.live]
    except Exception:
        return []
    return [o for o in live if o.startswith(incomplete)]


@app.callback()
def _root() -> None:
    """fm: safe teardown for agent fleets."""


@app.command()
def teardown(
    task: Annotated[
        str | None,
        typer.Argument(help="The task to tear down.", autocompletion=_complete_task),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the verdict and the plan; change nothing.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Also discard THIS task's unlanded work (saved first).")
    ] = False,
    discard_live_owner: Annotated[
        str | None,
        typer.Option(
            "--discard-live-owner",
            metavar="ID",
            help="With --force: proceed although ID, live, owns the slot (ID must match exactly).",
            autocompletion=_complete_owner,
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    state_dir: Annotated[
        str | None, typer.Option("--state-dir", metavar="DIR", help="Task records directory.")
    ] = None,
) -> None:
    """Tear down a finished task: end its endpoint and processes, return its slot, clear its
    record. Without TASK, --dry-run audits the whole fleet."""
    from fm_teardown import commands

    code = commands.teardown(
        task=task,
        dry_run=dry_run,
        force=force,
        discard_live_owner=discard_live_owner,
        json_out=json_out,
        state_dir=state_dir,
    )
    raise typer.Exit(code)


def main() -> None:
    try:
        app(prog_name="fm")
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.stderr.write("fm: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # the last line of defence: one line, never a traceback
        sys.stderr.write(f"fm: unexpected error: {type(exc).__name__}: {exc}\n")
        sys.exit(1)
