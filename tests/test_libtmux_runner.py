"""libtmux's command runner without the package's body (`adapters/libtmux_runner.py`): fm
runs tmux as libtmux runs it, and a program that uses the rest of libtmux still gets all of
it. Each case runs in its own interpreter: what it checks is what a process has imported."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.fleet import python_in

REPO = Path(__file__).resolve().parent.parent


def _python(code: str, *, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path if path is not None else "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}
    return python_in(REPO, env, "-c", code, timeout=60)


def _last_json(r: subprocess.CompletedProcess[str]) -> object:
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_runner_runs_tmux_without_libtmuxs_object_api() -> None:
    r = _python(
        "import json, sys\n"
        "from fm_teardown.adapters.libtmux_runner import runner\n"
        "tmux_cmd, missing = runner()\n"
        "out = tmux_cmd('-V')\n"
        "print(json.dumps({'out': out.stdout, 'rc': out.returncode,\n"
        "    'body': [m for m in ('libtmux.server', 'libtmux.pane', 'libtmux.client')\n"
        "             if m in sys.modules]}))\n"
    )
    seen = _last_json(r)
    assert isinstance(seen, dict)
    assert seen["rc"] == 0 and seen["out"][0].startswith("tmux "), seen
    assert seen["body"] == [], seen


def test_no_tmux_is_the_runners_own_error() -> None:
    r = _python(
        "from fm_teardown.adapters.libtmux_runner import runner\n"
        "tmux_cmd, missing = runner()\n"
        "try:\n"
        "    tmux_cmd('-V')\n"
        "except missing:\n"
        "    print('no tmux')\n",
        path="/nonexistent",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["no tmux"]


def test_the_rest_of_libtmux_is_there_for_whoever_asks_after() -> None:
    r = _python(
        "import json\n"
        "from fm_teardown.adapters.libtmux_runner import runner\n"
        "tmux_cmd, missing = runner()\n"
        "import libtmux\n"
        "from libtmux import Pane\n"
        "import libtmux.common, libtmux.exc\n"
        "print(json.dumps({'server': libtmux.Server.__name__, 'pane': Pane.__name__,\n"
        "    'version': libtmux.__version__, 'same': tmux_cmd is libtmux.common.tmux_cmd\n"
        "    and missing is libtmux.exc.TmuxCommandNotFound,\n"
        "    'all': sorted(libtmux.__all__)}))\n"
    )
    seen = _last_json(r)
    from importlib.metadata import version

    assert seen == {
        "server": "Server",
        "pane": "Pane",
        "version": version("libtmux"),
        "same": True,
        "all": sorted(__import__("libtmux").__all__),
    }


def test_a_libtmux_imported_first_is_the_one_used() -> None:
    r = _python(
        "import json, libtmux\n"
        "from fm_teardown.adapters.libtmux_runner import runner\n"
        "import libtmux.common\n"
        "tmux_cmd, missing = runner()\n"
        "import sys\n"
        "print(json.dumps([sys.modules['libtmux'] is libtmux,\n"
        "    tmux_cmd is libtmux.common.tmux_cmd]))\n"
    )
    assert _last_json(r) == [True, True]


def test_libtmuxs_log_stays_as_quiet_as_with_the_whole_package() -> None:
    # libtmux's body gives its logger a handler that drops records; without one, Python
    # prints a library's errors on stderr.
    for first in (
        "from fm_teardown.adapters.libtmux_runner import runner; runner()",
        "import libtmux",
    ):
        r = _python(
            f"{first}\n"
            "import logging\n"
            "logging.getLogger('libtmux.common').error('tmux subprocess failed')\n"
        )
        assert (r.returncode, r.stderr) == (0, ""), (first, r.stderr)


def test_a_submodule_asked_of_the_package_is_loaded_without_the_body(tmp_path: Path) -> None:
    # A package like libtmux whose runner module takes a sibling by `from . import helper`
    # and whose body imports that runner module: were the body run when `helper` is asked
    # for, halfway through the runner's import, it would import the half-made runner.
    pkg = tmp_path / "pkg_like_libtmux"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import sys\nsys.ran_body = True\nfrom .common import run\nfrom .api import Api\n"
    )
    (pkg / "helper.py").write_text("WORD = 'helped'\n")
    (pkg / "common.py").write_text("from . import helper\ndef run():\n    return helper.WORD\n")
    (pkg / "api.py").write_text("from pkg_like_libtmux.common import run\nclass Api: pass\n")
    r = _python(
        "import json, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from fm_teardown.adapters import libtmux_runner\n"
        "libtmux_runner._enter('pkg_like_libtmux')\n"
        "import pkg_like_libtmux.common as common\n"
        "before = getattr(sys, 'ran_body', False)\n"
        "import pkg_like_libtmux\n"
        "api = pkg_like_libtmux.Api.__name__\n"
        "print(json.dumps([common.run(), before, api, getattr(sys, 'ran_body', False)]))\n"
    )
    assert _last_json(r) == ["helped", False, "Api", True]
