"""What a one-task dry run loads and works out (issue 14): structure, never wall-clock time.

Performance itself is measured in benchmarks/ (ratios against a floor, in one run); these
tests pin the structure that keeps it there: no pydantic behind typer's option parsing, rich
only on a terminal, and, for one task of a large fleet, only the endpoints and slot facts
that its decision reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fleet import Fleet, tid

REPO = Path(__file__).resolve().parent.parent

PROBE = """
import json, sys
from fm_teardown import cli
from fm_teardown.observe import endpoint
from fm_teardown.observe import gitdir
from fm_teardown.observe import observation as observe
calls = {"endpoints": 0, "git_checks": 0, "tasktmps": 0}
real_endpoint, real_git, real_tmp = observe.endpoint_of, observe.slot_git_problem, observe.task_tmp
def counted_endpoint(*a, **k):
    calls["endpoints"] += 1
    return real_endpoint(*a, **k)
def counted_git(*a, **k):
    calls["git_checks"] += 1
    return real_git(*a, **k)
def counted_tmp(*a, **k):
    calls["tasktmps"] += 1
    return real_tmp(*a, **k)
observe.endpoint_of, observe.slot_git_problem = counted_endpoint, counted_git
observe.task_tmp = counted_tmp
typer_main = sys.modules["typer.main"]
typer_main.get_command(cli.app)  # what each start builds
strings = [
    (cb.__name__, name)
    for info in [cli.app.registered_callback, *cli.app.registered_commands]
    for cb in [info.callback]
    for name, a in cb.__annotations__.items()
    if isinstance(a, str)
]
try:
    cli.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"pydantic", "rich", "psutil"})
own = sorted(m for m in sys.modules if m.startswith("fm_teardown."))
from fm_teardown.model import results
made = sorted(
    n for n, c in vars(results).items() if isinstance(c, type) and "__value_fields__" in c.__dict__
)
libtmux = sorted(m for m in sys.modules if m in ("libtmux.common", "libtmux.server"))
out = {"code": code, "loaded": loaded, "libtmux": libtmux, "strings": strings, "own": own}
out.update(made=made, **calls)
sys.stderr.write(json.dumps(out) + "\\n")
"""


def probe(fleet: Fleet, *args: str) -> dict[str, Any]:
    r = fleet.python("-c", PROBE, *args)
    return json.loads(r.stderr.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_one_task_dry_run_works_out_only_what_its_decision_reads(fleet: Fleet) -> None:
    # Twelve slots, two records each; the task's slot is shared with one live other task.
    tasks = []
    for n in range(1, 13):
        slot = fleet.slot(n, holder=tid(f"n{n}"))
        fleet.task(tid(f"o{n}"), slot, "dead", extra={"spawn_gen": "s1000.1.a"})
        fleet.task(
            tid(f"n{n}"), slot, "alive" if n == 1 else "dead", extra={"spawn_gen": "s2000.1.a"}
        )
        tasks += [tid(f"o{n}"), tid(f"n{n}")]
    seen = probe(fleet, "teardown", tid("o1"), "--dry-run")
    assert seen["code"] == 4  # n1, live, owns o1's slot
    # o1's and n1's endpoints, o1's slot's .git, o1's tasktmp: not 24, 12 and 24.
    assert (seen["endpoints"], seen["git_checks"], seen["tasktmps"]) == (2, 1, 1), seen
    # typer reads the commands' signatures on every start: string annotations would make it
    # compile and eval each one (fm_teardown/cli.py has no `from __future__ import ...`).
    assert seen["strings"] == [], seen
    # typer's parsing never pulls in pydantic (fm_teardown/cli_values.py); no terminal: no
    # rich; a dry run signals nothing: no psutil.
    assert seen["loaded"] == [], seen
    # A dry run writes no journal (it reads it, for a teardown of the task that ended
    # partway, and asks whether its real run could write its intent there: spec §15.9), and
    # runs no step: no step result's class is ever made a dataclass (`model/values.py` makes a
    # class's `__init__` at its first instance).
    assert not (fleet.data / "teardown-log.jsonl").exists()
    assert [n for n in seen["made"] if n.endswith("Result")] == [], seen["made"]
    # The audit reads them all, of course.
    audit = probe(fleet, "teardown", "--dry-run")
    assert (audit["endpoints"], audit["git_checks"], audit["tasktmps"]) == (24, 12, 24), audit
    # A dry run acts on nothing: the audit imports no module of `act` (where its rows' slot
    # locks would lie is the model's to say), nor a run's results or their words.
    acting = [
        m for m in audit["own"] if m.startswith(("fm_teardown.act", "fm_teardown.report.render"))
    ]
    assert acting == [], acting
    assert audit["made"] == [], audit["made"]
    # Both list tmux's panes with libtmux's runner, and neither runs the rest of libtmux
    # (adapters/libtmux_runner.py: its object API is a quarter of an audit's start).
    assert seen["libtmux"] == audit["libtmux"] == ["libtmux.common"], (seen, audit)


def test_every_option_parses_without_pydantic() -> None:
    code = (
        "import sys\n"
        "from fm_teardown import cli\n"
        "for argv in (['teardown', 'a', 'b', '--dry-run', '--force', '--json', '--state-dir',"
        " '/nonexistent', '--discard-live-owner', 'x'], ['restore', 'a', '--to', '/n/x',"
        " '--ref', 'r', '--project', '/n', '--json'], ['runbook', 'live-owner']):\n"
        "    try:\n"
        "        cli.main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "sys.stderr.write(str(sorted(m for m in sys.modules if m.startswith('pydantic'))))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert r.stderr.strip().splitlines()[-1] == "[]", r.stderr


def test_fm_keeps_the_collector_off_what_its_imports_made(tmp_path: Path) -> None:
    """`fm` (the console script, `python -m fm_teardown`) freezes the objects its imports made
    and lets the collector pass less often; a caller of `cli.main(argv)` keeps its own."""
    code = (
        "import gc, sys\n"
        "from fm_teardown import cli\n"
        "def told():\n"
        "    sys.stderr.write(f'{gc.get_freeze_count() > 0} {gc.get_threshold()[0]}\\n')\n"
        "try:\n"
        "    cli.main(['runbook'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "told()\n"
        "sys.argv = ['fm', 'runbook']\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "told()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert r.stderr.splitlines()[-2:] == ["False 700", "True 100000"], r.stderr
