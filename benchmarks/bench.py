#!/usr/bin/env python3
"""The performance benchmark of `fm teardown`, in one command (issue 14):

    python3 benchmarks/bench.py            # full: N = 10, 100, 500, 1000 (about 10 minutes)
    python3 benchmarks/bench.py --quick    # smoke check: N = 10, 100, few runs (about 1 minute)

For each N it builds a real fleet (fleetgen.py: private tmux server, N records over N/2 real
git worktree slots, half the windows running an agent stand-in, 200 idle processes), checks
that fm, the floor (floor.py) and the shell-style baseline (shell_baseline.sh) give the same
answers, then times them in alternating, paired rounds (timing.py): `fm teardown T --dry-run`,
the fleet audit `fm teardown --dry-run`, task-id completion and `fm --help`. It also times a
real teardown against its dry run and the pool return alone ("acting without waiting"), and
writes everything, with the machine, the command and the noise seen, to benchmarks/results.md
(report.py). See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import os
import py_compile
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import answers
import report
import where
from fleetgen import (
    REPO,
    STANDIN_TREEHOUSE,
    Fleet,
    act_layout,
    become_subreaper,
    built,
    mixed_layout,
)
from report import (
    AA1,
    CMP,
    CMPF,
    FI1,
    FI4,
    FIA,
    FL1,
    FLA,
    FM1,
    FMA,
    HELP,
    NOSITE,
    PASS,
    SH1,
    SHA,
    TYPER,
)
from timing import Command, Samples, Timer, time_once

HERE = Path(__file__).resolve().parent
IDLE = 200  # idle processes padding the process table (the figure)
ACT_IDLE = 20
# Sampled shell audits: K tasks of N, two sample sizes to separate the fixed cost.
SHELL_SAMPLES = (1, 3)
# Below this N the whole shell audit is timed in every round; above, it is extrapolated.
SHELL_FULL_MAX = 10


@dataclass(frozen=True)
class Mode:
    name: str
    sizes: tuple[int, ...]
    rounds: int
    runs: int
    shell_audit_rounds: int
    act_rounds: int
    validate_at: int | None  # N at which the whole shell audit is also timed once


MODES = {
    "quick": Mode("quick", (10, 100), 2, 2, 1, 2, None),
    "full": Mode("full", (10, 100, 500, 1000), 5, 3, 3, 5, 100),
}


@dataclass(frozen=True)
class Tools:
    py: str  # the interpreter itself, never a pyenv shim (a shim is a bash script)
    fm: str  # the snapshot's own launcher, as its console script starts it (`launcher`)
    floor: str  # floor.py, precompiled
    shell: str
    completion: Path
    completion_fn: str | None
    pythonpath: str  # the snapshot of fm's package that is measured
    digest: str  # of that snapshot

    @property
    def bin_dir(self) -> str:
        """The interpreter's own bin directory (its `fm` console script), first on PATH."""
        return str(Path(self.py).parent)

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` with the snapshot of fm first on the import path."""
        return {**base, "PYTHONPATH": self.pythonpath}


# --------------------------------------------------------------------------- preparing


def fm_digest(package: Path) -> str:
    """A digest of a copy of fm's sources (every .py file, by relative path)."""
    h = hashlib.sha256()
    for p in sorted(package.rglob("*.py")):
        h.update(str(p.relative_to(package)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def snapshot(tmp: Path) -> Path:
    """A frozen copy of fm's package, precompiled, measured for the whole run.

    Other engineers edit the work tree while the benchmark runs: without a snapshot, one run
    would mix versions (or time a half-edited file that fails). PYTHONPATH puts the copy in
    front of the editable install's path, so the `fm` console script imports it. Bytecode:
    PYTHONDONTWRITEBYTECODE=1 is set on these machines, so without this precompilation an
    editable install recompiles every module on every run."""
    root = tmp / "fm"
    shutil.copytree(
        REPO / "fm_teardown",
        root / "fm_teardown",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(REPO / "completions" / "fm.bash", root / "fm.bash")
    compileall.compile_dir(str(root / "fm_teardown"), quiet=1)
    launcher(root, (REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return root


def launcher(root: Path, pyproject: str) -> Path:
    """`root/fm`: what pip's console script for `fm` does (the entry point that version's
    pyproject.toml names), so that each version is started its own way; a version whose entry
    point moved (issue 39: `fm_teardown.entry:fm`) would fail under another's script."""
    m = re.search(r'^fm = "([\w.]+):(\w+)"', pyproject, re.MULTILINE)
    if m is None:
        raise SystemExit('no `fm = "module:function"` in [project.scripts]')
    script = root / "fm"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom {m.group(1)} import {m.group(2)}\n"
        f"sys.exit({m.group(2)}())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def prepare(tmp: Path) -> Tools:
    root = snapshot(tmp)
    floor = tmp / "floor.pyc"
    # A script is compiled on every run; a .pyc given to the interpreter is not.
    py_compile.compile(str(HERE / "floor.py"), cfile=str(floor), doraise=True)
    if not (Path(sys.executable).parent / "fm").exists():
        raise SystemExit(f"no fm console script beside {sys.executable}: pip install -e .")
    tools = Tools(
        sys.executable,
        str(root / "fm"),
        str(floor),
        str(HERE / "shell_baseline.sh"),
        root / "fm.bash",
        completion_function(root / "fm.bash"),
        str(root),
        fm_digest(root / "fm_teardown"),
    )
    # The snapshot, not the work tree, must be what `fm` runs.
    probe = "import fm_teardown.cli as m; print(m.__file__)"
    where_from = subprocess.run(
        [tools.py, "-c", probe],
        env=tools.env(os.environ),
        cwd=tmp,  # not the checkout: `-c` puts the current directory first on the path
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not where_from.startswith(str(root)):
        raise SystemExit(f"fm is not imported from the snapshot {root} but from {where_from!r}")
    return tools


def completion_function(script: Path) -> str | None:
    """The function `complete -F <fn> fm` registers (the script is being rewritten)."""
    r = subprocess.run(
        [
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            f"source {shlex.quote(str(script))}; complete -p fm",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    m = re.search(r"-F\s+(\S+)", r.stdout)
    return m.group(1) if m else None


def completion_argv(tools: Tools) -> tuple[str, ...]:
    """A bash that sources the script and computes COMPREPLY for `fm teardown <empty>`."""
    script = (
        f"source {shlex.quote(str(tools.completion))}; "
        'COMP_WORDS=(fm teardown ""); COMP_CWORD=2; COMP_LINE="fm teardown "; '
        f"COMP_POINT=${{#COMP_LINE}}; {tools.completion_fn} fm '' teardown; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    return ("bash", "--norc", "--noprofile", "-c", script)


COMPLETION_FLOOR = ("bash", "--norc", "--noprofile", "-c", 'ls -- "$FM_HOME/state"')


# --------------------------------------------------------------------------- one fleet


@dataclass(frozen=True)
class Commands:
    python: tuple[Command, ...]
    shell_one: Command
    completion: tuple[Command, ...]


def commands(tools: Tools, target: str) -> Commands:
    py, floor, fm = tools.py, tools.floor, tools.fm
    imp = "--mandated-imports"
    python = (
        Command(FM1, (fm, "teardown", target, "--dry-run", "--json"), 4),
        Command(FL1, (py, floor, "one", target), 4),
        Command(FI1, (py, floor, imp, "one", target), 4),
        Command(AA1, (py, floor, imp, "one", target), 4),
        Command(FMA, (fm, "teardown", "--dry-run", "--json"), 0),
        Command(FLA, (py, floor, "audit"), 0),
        Command(FIA, (py, floor, imp, "audit"), 0),
        Command(FI4, (py, floor, imp, "--no-rule5", "audit"), 0),
    )
    completion = (
        Command(CMP, completion_argv(tools), 0) if tools.completion_fn else None,
        Command(CMPF, COMPLETION_FLOOR, 0),
    )
    return Commands(
        python,
        Command(SH1, ("bash", tools.shell, "one", target), 4),
        tuple(c for c in completion if c is not None),
    )


@dataclass(frozen=True)
class Ask:
    """Runs a program once on a fleet and parses its answer."""

    tools: Tools
    env: Mapping[str, str]
    cwd: Path

    def _json(self, *argv: str) -> dict[str, Any]:
        return answers.json_of(answers.run(argv, self.env, self.cwd))

    def fm_one(self, task: str) -> tuple[answers.Key, int]:
        r = answers.run(
            (self.tools.fm, "teardown", task, "--dry-run", "--json"), self.env, self.cwd
        )
        return answers.key_of(answers.json_of(r)), r.returncode

    def floor_one(self, task: str, *flags: str) -> answers.Key:
        return answers.key_of(self._json(self.tools.py, self.tools.floor, *flags, "one", task))

    def shell_one(self, task: str) -> answers.Key:
        r = answers.run(("bash", self.tools.shell, "one", task), self.env, self.cwd)
        return answers.shell_rows(r.stdout).get(task, ("no answer", -1, frozenset()))

    def fm_audit(self) -> dict[str, tuple[str, int]]:
        return answers.audit_rows(self._json(self.tools.fm, "teardown", "--dry-run", "--json"))

    def floor_audit(self) -> dict[str, Any]:
        return self._json(self.tools.py, self.tools.floor, "audit")

    def shell_audit(self, *sample: str) -> dict[str, tuple[str, int]]:
        r = answers.run(("bash", self.tools.shell, "audit", *sample), self.env, self.cwd)
        return {t: (v, c) for t, (v, c, _) in answers.shell_rows(r.stdout).items()}


def check_answers(
    tools: Tools, fleet: Fleet, env: Mapping[str, str]
) -> tuple[list[answers.Check], dict[str, int | str]]:
    """Run each program once and compare; returns the checks and facts for the report."""
    ask = Ask(tools, env, fleet.fm_home)
    target = fleet.layout.target
    fm_one, code = ask.fm_one(target)
    others = {
        "floor": ask.floor_one(target),
        "floor+imports": ask.floor_one(target, "--mandated-imports"),
        "shell": ask.shell_one(target),
    }
    checks = answers.compare_one(fm_one, code, others, target, fleet.layout.target_owner)

    fm_audit = ask.fm_audit()
    floor_doc = ask.floor_audit()
    floor_audit = answers.audit_rows(floor_doc)
    sampled = len(fleet.layout.tasks) > SHELL_FULL_MAX
    shell = ask.shell_audit("--sample", str(SHELL_SAMPLES[-1])) if sampled else ask.shell_audit()
    # For each kind of audit row that differs: what does fm's own one-task dry run say?
    asked = answers.differing(fm_audit, floor_audit) + answers.differing(fm_audit, shell)
    fm_one_of = {t: ask.fm_one(t)[0] for t in asked[:6]}
    shell_name = "shell (sampled rows)" if sampled else "shell"
    checks += [
        answers.compare_rows("floor", fm_audit, floor_audit, fm_one_of),
        answers.compare_rows(shell_name, fm_audit, shell, fm_one_of),
        answers.compare_rows(shell_name, floor_audit, shell, ref="floor"),
        check_completion(tools, fleet, env),
    ]
    facts: dict[str, int | str] = {
        "rule5_rows": sum(1 for t in floor_doc["tasks"] if t.get("rule5")),
        "mix": answers.verdict_mix(fm_audit),
        "floor_mix": answers.verdict_mix(floor_audit),
    }
    return checks, facts


def check_completion(tools: Tools, fleet: Fleet, env: Mapping[str, str]) -> answers.Check:
    ids = {t.id for t in fleet.layout.tasks}
    if tools.completion_fn is None:
        return answers.Check(
            "completion = task ids", False, "completions/fm.bash registers no `complete -F` for fm"
        )
    r = answers.run(completion_argv(tools), env, fleet.fm_home)
    got = {line.strip() for line in r.stdout.splitlines() if line.strip()}
    ok = got == ids
    detail = f"{tools.completion_fn}: {len(got)} words for {len(ids)} task ids"
    if not ok:
        detail += f"; missing e.g. {sorted(ids - got)[:3]}, extra e.g. {sorted(got - ids)[:3]}"
        detail += f"; stderr: {r.stderr.strip()[-200:]}" if r.stderr.strip() else ""
    return answers.Check("completion = task ids", ok, detail)


def time_shell_audit(
    tools: Tools, timer: Timer, fleet: Fleet, env: Mapping[str, str], samples: Samples, rnd: int
) -> None:
    """The whole loop when it is small; else K1 and K2 sampled tasks, extrapolated linearly
    (each decision re-reads all N records, so every task costs about the same)."""
    n = len(fleet.layout.tasks)
    cwd = fleet.fm_home
    if n <= SHELL_FULL_MAX:
        timer.round(
            [Command(SHA, ("bash", tools.shell, "audit"), 0)],
            runs=1,
            warmup=0,
            env=env,
            cwd=cwd,
            into=samples,
            rnd=rnd,
        )
        return
    k1, k2 = SHELL_SAMPLES
    group = [
        Command(f"{SHA} sample {k}", ("bash", tools.shell, "audit", "--sample", str(k)), 0)
        for k in (k1, k2)
    ]
    timer.round(group, runs=1, warmup=0, env=env, cwd=cwd, into=samples, rnd=rnd)
    t1 = samples.per_round(group[0].name)[rnd]
    t2 = samples.per_round(group[1].name)[rnd]
    per_task = (t2 - t1) / (k2 - k1)
    samples.put(SHA, rnd, t1 + per_task * (n - k1))


def time_rounds(
    mode: Mode, tools: Tools, timer: Timer, fleet: Fleet, env: Mapping[str, str]
) -> Samples:
    """The paired rounds on one fleet: the Python commands, the shell-style one-task check,
    completion, and (in the first rounds) the shell-style audit."""
    cmds = commands(tools, fleet.layout.target)
    samples = Samples()
    cwd = fleet.fm_home
    for rnd in range(mode.rounds):
        print(f"N={len(fleet.layout.tasks)}: round {rnd + 1}/{mode.rounds}", flush=True)
        timer.round(cmds.python, runs=mode.runs, warmup=1, env=env, cwd=cwd, into=samples, rnd=rnd)
        timer.round([cmds.shell_one], runs=1, warmup=0, env=env, cwd=cwd, into=samples, rnd=rnd)
        timer.round(cmds.completion, runs=5, warmup=1, env=env, cwd=cwd, into=samples, rnd=rnd)
        if rnd < mode.shell_audit_rounds:
            time_shell_audit(tools, timer, fleet, env, samples, rnd)
    return samples


def bench_size(n: int, mode: Mode, tools: Tools, timer: Timer) -> report.SizeResult:
    print(f"N={n}: building the fleet ...", flush=True)
    started = time.perf_counter()
    with built(mixed_layout(n), IDLE) as fleet:
        env = fleet.env(tools.bin_dir)
        print(
            f"N={n}: built in {time.perf_counter() - started:.1f} s; checking answers", flush=True
        )
        checks, facts = check_answers(tools, fleet, env)
        for c in checks:
            if not c.ok:
                print(f"  DISAGREEMENT {c.what}: {c.detail}", flush=True)
        samples = time_rounds(mode, tools, timer, fleet, env)
        full_audit = None
        if mode.validate_at == n:
            print(
                f"N={n}: timing the whole shell audit once (checks the extrapolation) ...",
                flush=True,
            )
            full_audit, fm_rows = validate_shell_audit(tools, fleet, env)
            checks.append(fm_rows)
        profile = (
            where.profile_fm(tools, env, fleet.fm_home, fleet.layout.target)
            if n == max(mode.sizes)
            else None
        )
        return report.SizeResult(
            n=n,
            worktrees=len(fleet.layout.slots),
            target=fleet.layout.target,
            owner=fleet.layout.target_owner,
            checks=checks,
            rule5_rows=int(facts["rule5_rows"]),
            mix=str(facts["mix"]),
            floor_mix=str(facts["floor_mix"]),
            samples=samples,
            shell_audit_measured=full_audit,
            shell_audit_extrapolated=n > SHELL_FULL_MAX,
            profile=profile,
        )


def validate_shell_audit(
    tools: Tools, fleet: Fleet, env: Mapping[str, str]
) -> tuple[float, answers.Check]:
    """Time the whole O(N²) shell audit once, and check every one of its rows against fm."""
    ask = Ask(tools, env, fleet.fm_home)
    start = time.perf_counter()
    shell = ask.shell_audit()
    seconds = time.perf_counter() - start
    return seconds, answers.compare_rows("shell (all rows)", ask.fm_audit(), shell)


# --------------------------------------------------------------------------- acting, help


def act_round(tools: Tools) -> report.ActRound:
    """Fresh identical small fleets: one for the pool return alone, one for the dry run and
    then the real teardown (each destroys what it measures)."""
    with built(act_layout(), ACT_IDLE) as alone, built(act_layout(), ACT_IDLE) as real:
        task = real.layout.target
        env = tools.env(real.env(tools.bin_dir))
        dry_argv = (tools.fm, "teardown", task, "--dry-run", "--json")
        planned = answers.json_of(answers.run(dry_argv, env, real.fm_home))
        dry = statistics.median(time_once(dry_argv, env, real.fm_home)[0] for _ in range(3))
        ret_argv = (
            str(STANDIN_TREEHOUSE),
            "return",
            "--force",
            "--if-lease-id",
            alone.lease_of(task),
            "--if-lease-holder",
            task,
            str(alone.slot_of(task)),
        )
        ret_env = {**tools.env(alone.env(tools.bin_dir)), "TREEHOUSE_NO_UPDATE_CHECK": "1"}
        # The return in a real teardown comes after the endpoint step: the window is gone.
        alone.end_window(task)
        ret, ret_code = time_once(ret_argv, ret_env, alone.project)
        teardown, code = time_once((tools.fm, "teardown", task), env, real.fm_home)
        gone = not (real.state / f"{task}.meta").exists()
        return report.ActRound(
            dry, ret, teardown, str(planned.get("verdict")), ret_code, code, gone
        )


def help_samples(tools: Tools, mode: Mode, timer: Timer) -> Samples:
    base = {
        "PATH": f"{tools.bin_dir}:{os.environ.get('PATH', '')}",
        "HOME": os.environ.get("HOME", "/"),
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env = tools.env(base)
    group = [
        Command(HELP, (tools.fm, "--help"), 0),
        Command(PASS, (tools.py, "-c", "pass"), 0),
        Command(TYPER, (tools.py, "-c", "import typer"), 0),
        Command(NOSITE, (tools.py, "-S", "-c", "pass"), 0),
    ]
    samples = Samples()
    for rnd in range(mode.rounds):
        timer.round(
            group, runs=5, warmup=1, env=env, cwd=Path(tools.pythonpath), into=samples, rnd=rnd
        )
    return samples


# --------------------------------------------------------------------------- main


@contextmanager
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fmbench") as tmp:
        yield Path(tmp)


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smoke check: N=10 and 100, few runs")
    ap.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        help="override N, e.g. 10,100",
    )
    ap.add_argument(
        "--out", type=Path, default=HERE / "results.md", help="where to write the results"
    )
    ap.add_argument("--no-write", action="store_true", help="print the results, do not write them")
    ap.add_argument("--no-hyperfine", action="store_true", help="use the small timer of our own")
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    mode = MODES["quick" if args.quick else "full"]
    if args.sizes:
        mode = replace(mode, name=f"{mode.name}, sizes {args.sizes}", sizes=args.sizes)
    become_subreaper()
    # A SIGTERM ends the run through the `finally`s, so every fleet is cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    timer = Timer(use_hyperfine=not args.no_hyperfine)
    info = report.RunInfo.collect(
        command=shlex.join(["python3", "benchmarks/bench.py", *argv]),
        mode=mode.name,
        timer=timer.name,
        rounds=mode.rounds,
        runs=mode.runs,
    )
    started = time.perf_counter()
    with workdir() as tmp:
        tools = prepare(tmp)
        sizes = [bench_size(n, mode, tools, timer) for n in mode.sizes]
        print("acting without waiting: fresh small fleets ...", flush=True)
        act = [act_round(tools) for _ in range(mode.act_rounds)]
        print("fm --help ...", flush=True)
        help_ = help_samples(tools, mode, timer)
        info.snapshot = tools.digest
    info.finish(time.perf_counter() - started, fm_digest(REPO / "fm_teardown"))
    setup = report.Setup(IDLE, SHELL_FULL_MAX, SHELL_SAMPLES, tools.completion_fn)
    text = report.render(info, sizes, act, help_, setup)
    if args.no_write:
        print(text)
    else:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    print(report.targets_table(sizes, act))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
