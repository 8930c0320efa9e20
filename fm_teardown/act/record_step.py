"""Steps 8 and 9 (the order and why: `act/steps.py`): the record goes last. It is checked
unchanged, then its duties run (the hook auth entries, the cost-attribution row, TASK's
browser stack and the remote-job sweep: `act/leaks.py`), then tasktmp, the `state/<id>.*`
sidecars, and the meta last."""

from __future__ import annotations

import os
import shutil
import stat

from fm_teardown.act import faults
from fm_teardown.act.leaks import step_leaks
from fm_teardown.act.run_state import Run
from fm_teardown.model import sidecars as _sidecars
from fm_teardown.model.plan import Step, StepName
from fm_teardown.model.records import Record, RecordKind, RecordProblem, parse_record, read_meta
from fm_teardown.model.results import (
    AttributionResult,
    AttributionWhat,
    RecordGone,
    RecordResult,
    RecordWhat,
)
from fm_teardown.model.step_warnings import AttributionFailed, RouteLeft

__all__ = ["act", "step_attribution", "step_auth", "step_record"]


def act(run: Run, step: Step) -> None:
    """The record step of the plan, with its duties (the plan's auth and attribution steps,
    TASK's browser stack and the remote-job sweep): the record last."""
    step_record(run, run.record)
    faults.at("after-record")


def step_record(run: Run, record: Record) -> None:
    """The record goes last: checked unchanged, then its duties (hook auth entries, the
    cost-attribution row), then tasktmp, the `state/<id>.*` sidecars, and the meta last."""
    try:
        text, mtime = read_meta(record.meta_path)
        now = parse_record(record.task_id, record.meta_path, text, mtime)
    except FileNotFoundError:
        for duty in (StepName.AUTH, StepName.ATTRIBUTION):
            run.note(duty, "-", RecordGone())
        run.note(StepName.RECORD, record.meta_path, RecordResult(RecordWhat.ALREADY_GONE))
        return
    except RecordProblem as exc:
        raise run.fail(
            StepName.RECORD, record.meta_path, RecordResult(RecordWhat.CHANGED, error=exc.problem)
        ) from None
    if now != record:
        raise run.fail(StepName.RECORD, record.meta_path, RecordResult(RecordWhat.REWRITTEN))
    step_auth(run, record)
    step_attribution(run, record)
    # TASK's browser stack and the remote-job sweep (spec §15.5), best effort: `act/leaks.py`.
    step_leaks(run, record)
    route = _remove_route(run, record) if record.kind == RecordKind.SECONDMATE else None
    removed = []
    try:
        if record.tasktmp and record.tasktmp == f"/tmp/fm-{record.task_id}":
            tmp = run.seams.tasktmp(record.tasktmp)
            if tmp.problem:
                raise run.fail(
                    StepName.RECORD,
                    record.meta_path,
                    RecordResult(RecordWhat.TMP_UNSAFE, error=tmp.problem),
                )
            if tmp.exists:
                _remove(record.tasktmp)
                removed.append(record.tasktmp)
        state_dir = os.path.dirname(record.meta_path)
        listed = _sidecars.split(record.task_id, os.listdir(state_dir))
        for name in listed.swept:
            _remove(os.path.join(state_dir, name))
            removed.append(name)
            faults.at("in-sweep")
        faults.at("before-meta")
        os.unlink(record.meta_path)
    except OSError as exc:
        raise run.fail(
            StepName.RECORD,
            record.meta_path,
            RecordResult(RecordWhat.REMOVE_FAILED, path=str(exc.filename), error=exc.strerror),
        ) from None
    done = RecordResult(
        RecordWhat.REMOVED,
        (*removed, os.path.basename(record.meta_path)),
        record.meta_path,
        route=route,
        kept=listed.foreign,
    )
    run.note(StepName.RECORD, record.meta_path, done)


def _remove_route(run: Run, record: Record) -> str | None:
    """A retired secondmate's route line leaves `data/secondmates.md` before its record
    goes, so firstmate never routes work to it again. A failure only warns."""
    from fm_teardown.act.registry import RegistryWarning, remove_route

    s = run.settings
    try:
        return remove_route(str(s.data_dir), str(s.state_dir), record.task_id, s.places)
    except RegistryWarning as exc:
        run.warnings.append(RouteLeft(str(exc), record.task_id))
        return None


def step_auth(run: Run, record: Record) -> None:
    """The grok, kimi and agy hook auth entries named by TASK's token files (proceed and
    stale)."""
    from fm_teardown.act.duties import remove_auth_entries

    s = run.settings
    state_dir = os.path.dirname(record.meta_path)
    found = remove_auth_entries(state_dir, record.task_id, s.home, s.grok_home, s.agy_config_home)
    run.warnings.extend(found.warnings)
    target = f"state/{record.task_id}.grok-turnend-token, .kimi-turnend-token, .agy-turnend-token"
    run.note(StepName.AUTH, target, found)


def step_attribution(run: Run, record: Record) -> None:
    """One cost-attribution row, exactly as firstmate writes it. A failure only warns."""
    import time

    from fm_teardown.act.duties import DutyWarning, append_attribution

    s = run.settings
    target = str(s.data_dir / "cost-attribution.tsv")
    try:
        result = append_attribution(
            str(s.data_dir), record, time.time(), s.attribution_lock_attempts, s.places
        )
    except (DutyWarning, OSError) as exc:
        run.warnings.append(AttributionFailed(record.task_id))
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        result = AttributionResult(AttributionWhat.FAILED, record.task_id, error=why)
    run.note(StepName.ATTRIBUTION, target, result)


def _remove(path: str) -> None:
    """Remove a file, a symlink (never its target) or a directory tree (links not followed)."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
