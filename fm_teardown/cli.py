"""The command line: parse flags, call the pipeline, render, exit with the verdict's code.

Nothing heavy is imported at module level: completion and `--help` load only typer and the
standard library. The pipeline (and with it psutil, libtmux and rich) is imported on use.
"""

# No `from __future__ import annotations` here: typer reads every command's signature on
# each start, and string annotations make it compile and eval each one (~7 ms a run).
import contextlib
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fm_teardown import cli_values

if TYPE_CHECKING:
    from fm_teardown.model.errors import FmError

__all__ = ["ENVIRONMENT", "EXIT_CODES", "app", "demo", "main", "restore", "runbook", "teardown"]

# fm's str/bool/list[str] values skip typer's pydantic coercion (about 100 ms of imports).
cli_values.install()
cli_values.plain_argument_help()

EXIT_CODES = """\b
Exit codes:
  0    torn down, stale slot cleared, or already torn down (--dry-run: would proceed)
  1    failed partway; the record is kept: re-run the same command
  2    invalid request: usage, bad task id, no such task
  3    refused: this task's own work is not landed (--force lifts it)
  4    refused: another live task owns the slot (--force --discard-live-owner=ID)
  5    refused: unsafe or unsupported record, path or environment
  130  interrupted; stopped at a step boundary"""

ENVIRONMENT = """\b
Environment:
  FM_HOME (else FM_ROOT_OVERRIDE, else .)   the fleet home
  FM_STATE_OVERRIDE, FM_DATA_OVERRIDE        state/ and data/ elsewhere
  FM_TMUX_SOCKET, FM_TMUX_SOCKET_NAME        the tmux server (as -S, -L)
  FM_TREEHOUSE_BIN                           the pool executable
  FM_QUIT_GRACE_SECS                         wait for an agent asked to quit
  FM_QUIT_HOOK_GRACE_SECS                    ... and for its exit hooks (30 s)
  FM_TERM_GRACE_SECS, FM_KILL_WAIT_SECS      waits after SIGTERM, SIGKILL
  FM_GIT_FETCH_TIMEOUT_SECS, FM_TMUX_TIMEOUT_SECS, FM_TREEHOUSE_TIMEOUT_SECS
  FM_TREEHOUSE_RETURN_LOCK_RETRIES, FM_TREEHOUSE_RETURN_LOCK_RETRY_WAIT_SECS,
  FM_STALE_WORKTREE_LOCK_AGE_SECS            a git index.lock in the way
  FM_LOCK_WAIT_SECS                          wait for a lock another process holds
  FM_AGENT_NAMES                             more agents, comma-separated (fm runbook agents)
  GROK_HOME, FM_CONFIG_OVERRIDE, FM_ATTRIBUTION_LOCK_ATTEMPTS   firstmate duties
  NO_MISTAKES_GATE, FM_GATE_REFUSE_BYPASS    the gate-agent refusal
  FM_TEARDOWN_NM_TIMEOUT                     each no-mistakes call (a parked run, 10 s)
  NO_COLOR                                   plain output on a terminal
See `fm runbook` for what to do about each refusal."""

app = typer.Typer(
    name="fm",
    help="fm: safe teardown for agent fleets.",
    epilog=EXIT_CODES + "\n\n" + ENVIRONMENT,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    # Our own --install-completion/--show-completion (on the root callback) install the static
    # scripts of completions/, which answer task ids without starting Python.
    add_completion=False,
)


def _line_tasks(ctx: typer.Context) -> list[str]:
    """The task ids typed so far (typer's completion path). Click stops parsing at an option
    that still lacks its value (`--discard-live-owner <TAB>`), leaving the TASKs in ctx.args."""
    given = ctx.params.get("tasks")
    tasks = [given] if isinstance(given, str) else list(given or ())
    return [str(t) for t in tasks] + [a for a in ctx.args if not a.startswith("-")]


def _complete_task(ctx: typer.Context, incomplete: str) -> list[str]:
    from fm_teardown.commands import completion

    typed = set(_line_tasks(ctx))
    ids = completion.task_ids(ctx.params.get("state_dir"))
    return [i for i in ids if i.startswith(incomplete) and i not in typed]


def _complete_owner(ctx: typer.Context, incomplete: str) -> list[str]:
    from fm_teardown.commands import completion

    tasks = _line_tasks(ctx)
    if not tasks:
        return []
    owners = completion.live_owners(ctx.params.get("state_dir"), tasks[0])
    return [o for o in owners if o.startswith(incomplete)]


def _show_completion(value: str | None) -> None:
    if value is None:
        return
    from fm_teardown.commands import completion

    try:
        sys.stdout.write(completion.script(completion.shell_of(value, option="--show-completion")))
    except completion.CompletionError as exc:
        sys.stderr.write(f"fm: {exc}\n")
        raise typer.Exit(exc.code) from None
    raise typer.Exit(0)


def _install_completion(value: str | None) -> None:
    if value is None:
        return
    from fm_teardown.commands import completion

    try:
        lines = completion.install(value)
    except completion.CompletionError as exc:
        sys.stderr.write(f"fm: {exc}\n")
        raise typer.Exit(exc.code) from None
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    raise typer.Exit(0)


def _version(value: bool) -> None:
    if value:
        from fm_teardown import __version__
        from fm_teardown.report import console

        console.version(__version__)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
    install_completion: Annotated[
        str | None,
        typer.Option(
            "--install-completion",
            metavar="[SHELL]",
            help="Install completion for SHELL (bash, zsh, fish; default: $SHELL's) and exit.",
            callback=_install_completion,
            is_eager=True,
        ),
    ] = None,
    show_completion: Annotated[
        str | None,
        typer.Option(
            "--show-completion",
            metavar="[SHELL]",
            help="Print the completion script for SHELL (default: $SHELL's) and exit.",
            callback=_show_completion,
            is_eager=True,
        ),
    ] = None,
) -> None:
    """fm: safe teardown for agent fleets."""


@app.command(
    "__complete",
    hidden=True,
    add_help_option=False,
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
    },
)
def _complete(ctx: typer.Context, what: Annotated[str, typer.Argument()] = "") -> None:
    """For the completion scripts: `fm __complete owners [--state-dir DIR] TASK` prints the
    live owners of TASK's slot, `fm __complete saves [--state-dir DIR]` the tasks that have
    saves (what `fm restore` takes), one per line. Always exits 0."""
    from fm_teardown.commands import completion

    completion.print_answers(what, ctx.args)
    raise typer.Exit(0)


@app.command(
    short_help="Tear down finished tasks (or, with --dry-run, audit the fleet).",
    epilog=EXIT_CODES + "\n\n" + ENVIRONMENT,
)
def teardown(
    tasks: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="TASK",
            help="The task(s) to tear down, one after another.",
            autocompletion=_complete_task,
            show_default=False,
        ),
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
    landed: Annotated[
        bool,
        typer.Option(
            "--landed",
            help="Tear down every finished task, in task-id order, each selected and decided "
            "again at its turn. Finished: verdict proceed or stale, own endpoint dead or "
            "missing, launched at least --min-age ago, and its work merged (not merely pushed).",
        ),
    ] = False,
    include_live: Annotated[
        bool,
        typer.Option(
            "--include-live",
            help="With --landed: also select tasks whose own endpoint is still alive "
            "(their agent is killed).",
        ),
    ] = False,
    include_pushed: Annotated[
        bool,
        typer.Option(
            "--include-pushed",
            help="With --landed: also select tasks whose work is pushed but not merged.",
        ),
    ] = False,
    min_age: Annotated[
        str | None,
        typer.Option(
            "--min-age",
            metavar="DURATION",
            help="With --landed: select only tasks launched at least this long ago "
            "(90s, 10m, 1h, 2d; default 1h; 0 for any age).",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    state_dir: Annotated[
        str | None, typer.Option("--state-dir", metavar="DIR", help="Task records directory.")
    ] = None,
    expect_plan: Annotated[
        list[str] | None,
        typer.Option(
            "--expect-plan",
            metavar="[TASK=]TOKEN",
            help="Refuse unless the plan is still the one a dry run printed (`plan: TOKEN`); "
            "with several tasks or --landed, once per task as TASK=TOKEN. A changed plan "
            "refuses: 4 when it now has a live owner, else 5 (fm runbook plan-changed).",
            show_default=False,
        ),
    ] = None,
    no_journal: Annotated[
        bool,
        typer.Option(
            "--no-journal",
            help="Act without the journal (no intent, no result line) when it cannot be written.",
        ),
    ] = False,
) -> None:
    """Tear down a finished task: end its endpoint and processes, return its slot, clear its
    record. Several TASKs: one after another. Without TASK, --dry-run audits the whole fleet."""
    from fm_teardown.commands.teardown import teardown as run_teardown
    from fm_teardown.model.request import CommandLine

    line = CommandLine(
        tasks=tuple(tasks or ()),
        dry_run=dry_run,
        force=force,
        discard_live_owner=discard_live_owner,
        landed=landed,
        include_live=include_live,
        include_pushed=include_pushed,
        min_age=min_age,
        json=json_out,
        state_dir=state_dir,
        expect_plan=tuple(expect_plan or ()),
        no_journal=no_journal,
    )
    raise typer.Exit(run_teardown(line))


@app.command(short_help="List a task's saved work, or put a save back as a new worktree.")
def restore(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task whose work was saved.")],
    to: Annotated[
        str | None,
        typer.Option("--to", metavar="DIR", help="Add a new worktree at DIR (must not exist)."),
    ] = None,
    ref: Annotated[
        str | None,
        typer.Option("--ref", metavar="REF", help="The save to restore (default: the newest)."),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project", metavar="DIR", help="The project checkout (default: from the journal)."
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    state_dir: Annotated[
        str | None, typer.Option("--state-dir", metavar="DIR", help="Task records directory.")
    ] = None,
) -> None:
    """List the saves `fm teardown TASK --force` made of TASK's unlanded work (newest first),
    or, with --to, put one back as a new worktree with the saved uncommitted and untracked
    files back as uncommitted changes. The save is never moved or deleted."""
    from fm_teardown.commands.restore import restore as run_restore

    raise typer.Exit(
        run_restore(
            task=task, to=to, ref=ref, project=project, json_out=json_out, state_dir=state_dir
        )
    )


@app.command(short_help="Print an operator runbook, or list them.")
def runbook(
    name: Annotated[
        str | None,
        typer.Argument(metavar="NAME", help="The runbook to print; none: list them."),
    ] = None,
) -> None:
    """Print an operator runbook (or list them): what happened, how to look, the safe ways on."""
    from fm_teardown.commands.runbook import runbook as run_runbook

    raise typer.Exit(run_runbook(name))


@app.command(short_help="Play the incident fm exists for, in a throw-away sandbox.")
def demo(
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Leave the sandbox running and print how to explore it."),
    ] = False,
) -> None:
    """Play the incident fm exists for, in a throw-away sandbox (its own tmux server, git
    repositories, pool stand-in and agents): the audit, the refusal naming the live owner,
    --force alone still refusing, a stale slot cleared, a clean teardown."""
    from fm_teardown.commands.demo import demo as run_demo

    raise typer.Exit(run_demo(keep=keep))


def _usage_classes() -> tuple[type[Exception], ...]:
    """Click's usage-error classes (typer ≥ 0.20 vendors click as `typer._click`)."""
    import importlib

    # By name: the one that is not installed must not fail the type check either.
    mod: Any
    try:
        mod = importlib.import_module("typer._click.exceptions")
    except ImportError:  # an older typer on the real click
        mod = importlib.import_module("click.exceptions")
    return (mod.UsageError, mod.BadParameter)


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


_SHELL_OPTIONS = ("--install-completion", "--show-completion")


def _optional_shell(args: list[str]) -> list[str]:
    """`fm --install-completion [SHELL]`: typer's parser has no options with an optional value,
    so a bare one (nothing or another option after it) becomes `--install-completion=`."""
    out = list(args)
    for i, arg in enumerate(out):
        if not arg.startswith("-"):
            break  # only the root's options, before the command
        if arg in _SHELL_OPTIONS and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out[i] = f"{arg}="
    return out


def _legacy_completion() -> None:
    """typer's own completion protocol (`_FM_COMPLETE=complete_bash fm`, what scripts that an
    older `fm --install-completion` installed still call): register typer's shell classes,
    which `add_completion=False` leaves out. A typer without them only loses this path."""
    if os.environ.get("_FM_COMPLETE"):
        with contextlib.suppress(Exception):
            from typer._completion_classes import completion_init

            completion_init()


def _valued(command: str) -> frozenset[str]:
    """The options of `fm COMMAND` that take a value, read from the command itself (so that an
    option added later is never taken for a TASK). Only a line that did not parse asks."""
    import typer.main

    group = typer.main.get_command(app)
    sub = getattr(group, "commands", {}).get(command)
    return frozenset(
        opt
        for param in (sub.params if sub is not None else ())
        if param.param_type_name == "option" and not getattr(param, "is_flag", False)
        for opt in param.opts
    )


def _task_in(args: list[str]) -> str | None:
    """The first TASK on a command line that did not parse (for its JSON error's `task`)."""
    if args[:1] != ["teardown"]:
        return None
    valued = _valued("teardown")
    words = iter(args[1:])
    for word in words:
        if word in valued:
            next(words, None)  # its value, not a TASK (`--opt=value` is one word)
        elif not word.startswith("-"):
            return word
    return None


def _usage_error_json(args: list[str], err: "FmError") -> dict[str, object]:
    """The JSON of a line that did not parse: the audit's shape for an audit's line (no TASK,
    `--dry-run`, no `--landed`), as every other refusal of the audit is said."""
    from fm_teardown.commands.teardown import audits

    task, dry_run = _task_in(args), "--dry-run" in args
    if args[:1] == ["teardown"] and audits(
        [task] if task else [], dry_run=dry_run, landed="--landed" in args
    ):
        from fm_teardown.report.audit_view import audit_error_json

        return audit_error_json(err)
    from fm_teardown.report import render

    return render.usage_error_json(task, err, dry_run=dry_run)


def _help_of(args: list[str]) -> str:
    """`fm COMMAND --help` for the command the line named, `fm --help` when it named none."""
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    for word in args:
        if not word.startswith("-"):
            return (
                f"fm {word} --help" if word in names and not word.startswith("_") else "fm --help"
            )
    return "fm --help"


def main(argv: list[str] | None = None) -> None:
    """Run the app; every error ends as one line on stderr and an exit code, never a traceback."""
    from fm_teardown.report import closed_stdout

    closed_stdout.guard()  # a reader that closes early never changes the exit code
    if argv is None:  # a process of its own (the console script, `python -m`), not a caller's
        from fm_teardown.entry import fewer_collections

        fewer_collections()
    args = _optional_shell(sys.argv[1:] if argv is None else argv)
    _legacy_completion()
    try:
        code = app(prog_name="fm", args=args, standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        from fm_teardown.report import console

        console.interrupted()
        code = 130
    except Exception as exc:  # the last line of defence: one line, never a traceback
        usage = _usage_error(exc)
        from fm_teardown.report import console

        if usage is None:
            console.unexpected(exc)
            code = 1
        elif _no_args(exc):
            with contextlib.suppress(Exception):
                app(prog_name="fm", args=["--help"], standalone_mode=False)
            code = 2
        else:
            from fm_teardown.model.errors import invalid

            see = f"see `{_help_of(args)}`"
            err = invalid(usage, see)
            if "--json" in args:
                from fm_teardown.report.json_out import emit_json

                emit_json(_usage_error_json(args, err))
            else:
                console.usage_error(usage, see)
            code = 2
    closed_stdout.settle()
    sys.exit(code if isinstance(code, int) else 0)
