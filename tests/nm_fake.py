"""A stand-in for the operator's `no-mistakes` CLI, as the parked-run step asks it: `axi status`,
`axi abort --run <id>`, `axi status --run <id>`. Like firstmate's own fake, but driven by files
in its control dir (`NM_FAKE_DIR`), so one fake serves a whole test:

- `status`: what `axi status` prints (nothing when absent), and once its run was aborted
  (unless `noop`), `outcome: cancelled` after it; `status.rc`: its exit code;
- `after`, `after.err`, `after.rc`: what `axi status --run <id>` prints, on stdout and stderr,
  and its exit code, once `<id>` was aborted (by default the run reads back `cancelled`);
- `noop`: `axi abort` records the call but aborts nothing (`status --run` keeps answering
  `status`);
- `hang`: every call first sleeps that many seconds (a CLI that does not answer);
  `after.hang`: only the read-back of an aborted run does;
- `watch`: a pid; each `axi abort` notes whether it is still running (`alive`/`gone`).

Every call is appended to `calls`: its working directory, a tab, its arguments."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["NmFake", "parked_toon", "running_toon"]

_SCRIPT = r"""#!/usr/bin/env bash
d=${NM_FAKE_DIR:?}
printf '%s\t%s\n' "$PWD" "$*" >> "$d/calls"
[ -f "$d/hang" ] && sleep "$(cat "$d/hang")"
[ "${1:-}" = axi ] || exit 0
shift
case "${1:-}" in
  status)
    shift
    run_id=
    [ "${1:-}" = --run ] && run_id=${2:-}
    if [ -n "$run_id" ] && grep -Fxq "$run_id" "$d/aborted" 2>/dev/null && [ ! -f "$d/noop" ]; then
      [ -f "$d/after.hang" ] && sleep "$(cat "$d/after.hang")"
      if [ -f "$d/after" ] || [ -f "$d/after.err" ]; then
        [ -f "$d/after" ] && cat "$d/after"
        [ -f "$d/after.err" ] && cat "$d/after.err" >&2
        exit "$(cat "$d/after.rc" 2>/dev/null || echo 0)"
      fi
      printf 'run:\n  id: "%s"\n  outcome: cancelled\n' "$run_id"
      exit 0
    fi
    [ -f "$d/status" ] && cat "$d/status"
    # The most recent run, once aborted, reads ended.
    id=$(sed -n 's/^[[:space:]]*id:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}[[:space:]]*$/\1/p' \
      "$d/status" 2>/dev/null | head -1)
    if [ -n "$id" ] && grep -Fxq "$id" "$d/aborted" 2>/dev/null && [ ! -f "$d/noop" ]; then
      printf '  outcome: cancelled\n'
    fi
    exit "$(cat "$d/status.rc" 2>/dev/null || echo 0)"
    ;;
  abort)
    shift
    [ "${1:-}" = --run ] && printf '%s\n' "${2:-}" >> "$d/aborted"
    if [ -f "$d/watch" ]; then
      w=gone
      kill -0 "$(cat "$d/watch")" 2>/dev/null && w=alive
      echo "$w" >> "$d/watched"
    fi
    exit 0
    ;;
esac
exit 0
"""


def parked_toon(branch: str, head: str, run_id: str = "01RUN") -> str:
    """A run parked at a gate, in the shape no-mistakes emits (firstmate's fixture)."""
    return (
        f'run:\n  id: "{run_id}"\n  branch: {branch}\n  status: awaiting_approval\n'
        f'  awaiting_agent: parked 2m10s\n  head: "{head}"\n  pr: ""\n  findings: none\n'
        "gate: review\n"
    )


def running_toon(branch: str, head: str, run_id: str = "01RUN") -> str:
    """A run with an autonomous step under way."""
    return (
        f'run:\n  id: "{run_id}"\n  branch: {branch}\n  status: running\n  head: "{head}"\n'
        '  pr: ""\nsteps[1]{step,status,findings,summary}:\n  test,running,0,"agent under way"\n'
    )


class NmFake:
    """The fake's `bin` dir (put it first on PATH) and its control dir."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "nm-bin"
        self.dir = root / "nm-control"
        self.bin.mkdir(parents=True)
        self.dir.mkdir(parents=True)
        self.binary = self.bin / "no-mistakes"
        self.binary.write_text(_SCRIPT)
        self.binary.chmod(0o755)

    def env(self, path: str) -> dict[str, str]:
        """PATH with the fake first, and its control dir."""
        return {"PATH": f"{self.bin}:{path}", "NM_FAKE_DIR": str(self.dir)}

    def set(self, name: str, text: str) -> None:
        (self.dir / name).write_text(text)

    def calls(self) -> list[tuple[str, str]]:
        log = self.dir / "calls"
        if not log.exists():
            return []
        out = []
        for line in log.read_text().splitlines():
            cwd, _, args = line.partition("\t")
            out.append((cwd, args))
        return out

    def aborted(self) -> list[str]:
        log = self.dir / "aborted"
        return log.read_text().split() if log.exists() else []

    def watched(self) -> list[str]:
        log = self.dir / "watched"
        return log.read_text().split() if log.exists() else []

    def __repr__(self) -> str:
        return json.dumps({"calls": self.calls(), "aborted": self.aborted()})
