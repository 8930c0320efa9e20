"""The fleet audit (`fm teardown --dry-run` with no TASK): every task's verdict, and the slots
claimed by more than one record. Read-only; one observation for the whole fleet."""

from __future__ import annotations

from dataclasses import dataclass

from fm_teardown.decide import decide
from fm_teardown.errors import Verdict
from fm_teardown.observe import observe
from fm_teardown.plan import Flags
from fm_teardown.records import load_fleet
from fm_teardown.settings import Settings


@dataclass(frozen=True)
class AuditNotChecked:
    """The audit decides without git: no subprocess per record."""

    landed: bool = True
    summary: str = "landed-work not checked by the fleet audit"
    dirty: tuple[str, ...] = ()
    unpushed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditRow:
    task: str
    slot: str | None
    endpoint: str | None
    verdict: Verdict
    reasons: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        return int(self.verdict.exit_code)


@dataclass(frozen=True)
class Audit:
    rows: tuple[AuditRow, ...]
    shared_slots: tuple[tuple[str, tuple[str, ...]], ...]


def audit(settings: Settings) -> Audit:
    fleet = load_fleet(settings.state_dir)
    obs = observe(settings, fleet)
    rows = []
    flags = Flags(dry_run=True)
    for task in fleet.task_ids:
        if task in fleet.invalid:
            bad = fleet.invalid[task]
            claimed = obs.invalid_slots.get(task)
            rows.append(
                AuditRow(
                    task,
                    claimed[0] if claimed else None,
                    None,
                    Verdict.UNSAFE,
                    (f"record {bad.meta_path} is invalid: {bad.problem}",),
                )
            )
            continue
        d = decide(task, fleet, obs, flags, landed=AuditNotChecked())
        rows.append(AuditRow(task, d.slot, str(obs.endpoints[task].state), d.verdict, d.reasons))
    claims: dict[str, list[str]] = {slot: list(t) for slot, t in obs.claimants.items()}
    for task, slots in obs.invalid_slots.items():
        for slot in slots or ():
            claims.setdefault(slot, []).append(task)
    shared = tuple(
        (slot, tuple(sorted(tasks))) for slot, tasks in sorted(claims.items()) if len(tasks) > 1
    )
    return Audit(tuple(rows), shared)
