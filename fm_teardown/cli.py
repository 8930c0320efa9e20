"""The command line: parse flags, call the pipeline, render, exit with the verdict's code.

Nothing heavy is imported at module level: completion and `--help` load only typer and the
standard library. The pipeline (and with it psutil, libtmux and rich) is imported on use.
"""

from __future__ import annotations

import contextlib
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


def _version(value: bool) -> None:
    if value:
        from fm_teardown import __version__

        sys.stdout.write(f"fm {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
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
    from fm_teardown.commands.teardown import teardown as run_teardown

    code = run_teardown(
        task=task,
        dry_run=dry_run,
        force=force,
        discard_live_owner=discard_live_owner,
        json_out=json_out,
        state_dir=state_dir,
    )
    raise typer.Exit(code)


def _usage_classes() -> tuple[type[Exception], ...]:
    """Click's usage-error classes (typer ≥ 0.20 vendors click as `typer._click`)."""
    try:
        from typer._click import exceptions as click_exceptions
    except ImportError:  # an older typer on the real click
        from click import exceptions as click_exceptions  # type: ignore[no-redef]
    return (click_exceptions.UsageError, click_exceptions.BadParameter)


def _usage_error(exc: Exception) -> str | None:
    """The message of a command-line usage error (typer/click raise these), else None."""
    if isinstance(exc, _usage_classes()):
        fmt = getattr(exc, "format_message", None)
        message = str(fmt() if callable(fmt) else exc)
        return " ".join(message.split())
    return None


def _no_args(exc: Exception) -> bool:
    try:
        from typer._click.exceptions import NoArgsIsHelpError
    except ImportError:
        return False
    return isinstance(exc, NoArgsIsHelpError)


def main(argv: list[str] | None = None) -> None:
    """Run the app; every error ends as one line on stderr and an exit code, never a traceback."""
    args = sys.argv[1:] if argv is None else argv
    try:
        code = app(prog_name="fm", args=args, standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        sys.stderr.write("fm: interrupted\n")
        code = 130
    except Exception as exc:  # the last line of defence: one line, never a traceback
        usage = _usage_error(exc)
        if usage is None:
            sys.stderr.write(f"fm: unexpected error: {type(exc).__name__}: {exc}\n")
            code = 1
        elif _no_args(exc):
            with contextlib.suppress(Exception):
                app(prog_name="fm", args=["--help"], standalone_mode=False)
            code = 2
        else:
            from fm_teardown.errors import invalid

            err = invalid(usage, "see `fm teardown --help`")
            if "--json" in args:
                from fm_teardown import report

                report.emit_json(report.usage_error_json(None, err, dry_run="--dry-run" in args))
            sys.stderr.write(f"fm: {usage}\nhint: see `fm teardown --help`\n")
            code = 2
    sys.exit(code if isinstance(code, int) else 0)
