"""The operator's `no-mistakes` CLI, as the parked-run step asks it (spec §15.5b): `axi status`,
`axi abort --run <id>` and `axi status --run <id>`, each run in the slot, and their answers
read into values (`model/parked_run.py`). Nothing here decides whose a run is
(`decide/parked_run.py` does).

`no-mistakes` is the operator's own tool, found on PATH when the settings are read
(`settings.no_mistakes_bin`, made absolute there so that running it in the slot never finds
another); it is no program a repository names. Each call goes through the one door
(`runner.run`: stdin closed, a session of its own, its whole process group killed at the
timeout).

Its output is TOON (`key: value` lines, nested by indentation), read as firstmate's
`bin/fm-nm-run-lib.sh` reads it: for each key the first line that starts with `key:` after
any indentation, the value trimmed and one pair of surrounding double quotes stripped.
"""

from __future__ import annotations

from fm_teardown.adapters import runner
from fm_teardown.model.parked_run import Asked, RunStatus
from fm_teardown.model.records import shown

__all__ = ["abort", "field", "parse", "status", "status_of", "strip_quotes"]

# What the shell's [[:space:]] is in the C locale firstmate's reads run under.
_SPACE = " \t\n\v\f\r"


def strip_quotes(raw: str) -> str:
    """The value trimmed, and a pair of surrounding double quotes stripped (then trimmed
    again): firstmate's `fm_nm_strip_quotes`."""
    s = raw.strip(_SPACE)
    if len(s) >= 2 and s.startswith('"') and s.endswith('"'):
        s = s[1:-1]
    return s.strip(_SPACE)


def _lines(text: str) -> list[str]:
    return [line.lstrip(_SPACE) for line in text.split("\n")]


def field(text: str, key: str) -> str | None:
    """The value of the first line that starts with `key:` (after its indentation), quotes
    stripped; None when no line does."""
    prefix = key + ":"
    for line in _lines(text):
        if line.startswith(prefix):
            return strip_quotes(line[len(prefix) :])
    return None


def parse(text: str) -> RunStatus | None:
    """The fields of one `axi status` answer; None when no line names any of them."""
    lines = _lines(text)
    values = {k: field(text, k) for k in ("id", "branch", "head", "outcome", "status")}
    awaiting = any(line.startswith("awaiting_agent:") for line in lines)
    gate = any(line.startswith("gate:") for line in lines)
    if not awaiting and not gate and all(v is None for v in values.values()):
        return None
    return RunStatus(
        id=values["id"] or "",
        branch=values["branch"] or "",
        head=values["head"] or "",
        outcome=values["outcome"] or "",
        status=values["status"] or "",
        awaiting_agent=awaiting,
        gate=gate,
    )


def _call(binary: str, slot: str, args: list[str], timeout: float) -> runner.Result:
    return runner.run([binary, *args], timeout=timeout, cwd=slot)


def _problem(r: runner.Result, timeout: float) -> str:
    if r.timed_out:
        return f"timed out after {timeout:g}s"
    if r.rc is None:
        return r.why()
    first = next((line.strip() for line in r.text.splitlines() if line.strip()), "")
    said = r.why() if r.err.strip() else (shown(first, 160) if first else "no message")
    return f"exited {r.rc}: {said}"


def status(binary: str, slot: str, timeout: float) -> Asked:
    """`no-mistakes axi status` in the slot: the active or most recent run. Only its standard
    output is read, as firstmate reads it."""
    r = _call(binary, slot, ["axi", "status"], timeout)
    out = r.out.decode("utf-8", "replace")
    if not r.ok:
        return Asked(False, parse(out), out.strip(_SPACE), _problem(r, timeout))
    return Asked(True, parse(out), out.strip(_SPACE))


def abort(binary: str, slot: str, run_id: str, timeout: float) -> Asked:
    """`no-mistakes axi abort --run <id>` in the slot. Whether it answered is only said: the
    run read back afterwards (`status_of`) is what confirms the abort."""
    r = _call(binary, slot, ["axi", "abort", "--run", run_id], timeout)
    if not r.ok:
        return Asked(False, problem=_problem(r, timeout))
    return Asked(True)


def status_of(binary: str, slot: str, run_id: str, timeout: float) -> Asked:
    """`no-mistakes axi status --run <id>` in the slot, its standard output and error read
    together (firstmate reads them as one): the run's fields when it answered, and what it
    said (the not-found error comes on a non-zero exit)."""
    r = _call(binary, slot, ["axi", "status", "--run", run_id], timeout)
    out = r.out.decode("utf-8", "replace")
    both = out + ("\n" if out and r.err else "") + r.err
    said = both.strip(_SPACE)
    if not r.ok:
        return Asked(False, parse(both), said, _problem(r, timeout))
    return Asked(True, parse(both), said)
