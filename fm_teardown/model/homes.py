"""The records of secondmates' homes, loaded as claimants of the parent fleet's slots
(`<secondmate>/<id>`), followed `MAX_HOME_DEPTH` homes deep and failing closed past that."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from fm_teardown.model.records import (
    InvalidRecord,
    Record,
    RecordKind,
    RecordProblem,
    claimed_slots,
    parse_lines,
    parse_record,
    read_meta,
    shown,
    task_id_problem,
)

__all__ = ["MAX_HOME_DEPTH", "load_children"]


# How deep secondmates' homes are followed (a secondmate's child may be a secondmate). Past
# it, a home that has a state dir is not read: that fails closed (`_too_deep`).
MAX_HOME_DEPTH = 4


def _home_of(record: Record) -> str:
    """A secondmate's home: `home=`, else its worktree (firstmate writes both the same)."""
    return record.home or record.worktree


def load_children(
    state_dir: Path,
    records: dict[str, Record],
    bad: dict[str, InvalidRecord],
    canon: Callable[[str], str],
) -> frozenset[str]:
    """Add the records of every secondmate's home to `records` / `bad`, keyed
    `<secondmate>/<id>`: a child task works in a slot the parent fleet's pool may also hand
    out, so it claims that slot for every teardown here. A home's state dir that cannot be
    read, or lies deeper than fm follows, makes an invalid record naming no slot fm can tell
    (fail closed: every teardown refuses, naming that home)."""
    seen = {_canonical(str(state_dir), canon)}
    children: set[str] = set()
    todo = [(tid, r, 1) for tid, r in sorted(records.items()) if r.kind == RecordKind.SECONDMATE]
    while todo:
        parent, record, depth = todo.pop(0)
        home = _home_of(record)
        sub = os.path.join(home, "state")
        real = _canonical(sub, canon)
        if real in seen:
            continue
        seen.add(real)
        key = f"{parent}/state"
        if depth > MAX_HOME_DEPTH:
            if os.path.lexists(sub):
                bad[key] = InvalidRecord(key, sub, _too_deep(home, depth), None)
                children.add(key)
            continue  # a home without a state dir holds no task: nothing lies beyond
        try:
            with os.scandir(sub) as it:
                names = sorted(e.name for e in it if e.name.endswith(".meta"))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            bad[key] = InvalidRecord(key, sub, f"cannot be listed ({exc.strerror})", None)
            children.add(key)
            continue
        for name in names:
            child, key = name[:-5], f"{parent}/{name[:-5]}"
            meta_path = os.path.join(sub, name)
            try:
                text, mtime = read_meta(meta_path)
            except FileNotFoundError:
                continue
            except RecordProblem as exc:
                bad[key] = InvalidRecord(key, meta_path, exc.problem, None)
                children.add(key)
                continue
            children.add(key)
            if task_id_problem(child):
                claimed = claimed_slots(parse_lines(text))
                bad[key] = InvalidRecord(key, meta_path, task_id_problem(child) or "", claimed)
                continue
            try:
                parsed = parse_record(child, meta_path, text, mtime)
            except RecordProblem as exc:
                bad[key] = InvalidRecord(key, meta_path, exc.problem, exc.claimed)
                continue
            records[key] = replace(parsed, task_id=key)
            if parsed.kind == RecordKind.SECONDMATE:
                todo.append((key, parsed, depth + 1))
    return frozenset(children)


def _canonical(path: str, canon: Callable[[str], str]) -> str:
    return canon(path) if os.path.isabs(path) else os.path.realpath(path)


def _too_deep(home: str, depth: int) -> str:
    """Why a secondmate's home was not followed: what lies beyond is not known to be empty."""
    return (
        f"belongs to secondmate home {shown(home, 200)}, {depth} homes deep; fm follows "
        f"secondmates' homes {MAX_HOME_DEPTH} deep, so the tasks it holds cannot be told"
    )
