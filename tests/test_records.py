"""Task ids and task records (spec §3): the id rule, parsing and validation of
`state/<id>.meta`, reading it safely (no symlink, no FIFO, bounded), and loading the fleet."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fm_teardown.model import record_files
from fm_teardown.model.errors import ExitCode, FmError
from fm_teardown.model.homes import MAX_HOME_DEPTH
from fm_teardown.model.record_files import MAX_RECORD_BYTES
from fm_teardown.model.records import (
    InvalidRecord,
    Record,
    RecordProblem,
    check_task_id,
    load_fleet,
    load_record,
    parse_record,
    quick_record,
    read_meta,
    task_id_problem,
)
from tests.fleet import Fleet, gone, tid

SLOT = "/pool/p/1/proj"
PROJECT = "/src/proj"


# -- helpers -------------------------------------------------------------------------------


def meta_lines(task_id: str = "a", **extra: str) -> list[str]:
    """The lines of a valid record for `task_id`, plus `extra` keys."""
    return [
        f"window=firstmate:fm-{task_id}",
        f"worktree={SLOT}",
        f"project={PROJECT}",
        *(f"{k}={v}" for k, v in extra.items()),
    ]


def text_of(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def parse(text: str, task_id: str = "a") -> Record:
    return parse_record(task_id, f"/state/{task_id}.meta", text, 0)


def problem_of(text: str, task_id: str = "a") -> str:
    with pytest.raises(RecordProblem) as info:
        parse(text, task_id)
    return info.value.problem


def write(state: Path, task_id: str, content: str | bytes) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    path = state / f"{task_id}.meta"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def exit_code_of(call: Callable[[], object]) -> int:
    with pytest.raises(FmError) as info:
        call()
    return int(info.value.exit_code)


def finishes_fast(call: Callable[[], object], seconds: float = 5.0) -> object:
    """Run `call` in a daemon thread; fail (without hanging the run) if it blocks."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised below, in the test's thread
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the call blocked"
    if "error" in box:
        raise box["error"]
    return box.get("value")


# -- task ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "task_id",
    ["a", "a.b_c-1", "-x", "x" * 64, "A9", "a..b", "_", "9"],
)
def test_valid_task_ids(task_id: str) -> None:
    assert task_id_problem(task_id) is None
    check_task_id(task_id)  # does not raise


@pytest.mark.parametrize(
    "task_id",
    [
        "",
        "x" * 65,
        "../x",
        "a/b",
        ".hidden",
        ".",
        "..",
        "a b",
        "a\nb",
        "a\n",
        "tâche",
        "a\tb",
        "a:b",
        "a*",
        "a\x00b",
    ],
)
def test_invalid_task_ids_exit_2(task_id: str) -> None:
    assert task_id_problem(task_id)
    assert exit_code_of(lambda: check_task_id(task_id)) == ExitCode.INVALID


def test_task_id_message_is_one_line() -> None:
    with pytest.raises(FmError) as info:
        check_task_id("a\nb")
    assert "\n" not in info.value.message


# -- parsing: keys and values --------------------------------------------------------------


def test_valid_record_fields() -> None:
    r = parse(text_of(meta_lines(pr="https://x/pr/1", kind="scout", tasktmp="/tmp/fm-a")))
    assert (r.task_id, r.session, r.window_name, r.target) == (
        "a",
        "firstmate",
        "fm-a",
        "=firstmate:=fm-a",
    )
    assert (r.worktree, r.project, r.backend, r.kind) == (SLOT, PROJECT, "tmux", "scout")
    assert r.pr == "https://x/pr/1"
    assert r.tasktmp == "/tmp/fm-a"


def test_repeated_ordinary_key_last_wins() -> None:
    r = parse(text_of([*meta_lines(), "pr=https://x/pr/1", "pr=https://x/pr/2"]))
    assert r.pr == "https://x/pr/2"


def test_value_keeps_everything_after_first_equals() -> None:
    r = parse(text_of(meta_lines(pr="https://x/y?a=b=c")))
    assert r.pr == "https://x/y?a=b=c"
    r = parse(text_of(["window=s:fm-a", "worktree=/p/a=b", f"project={PROJECT}"]))
    assert r.worktree == "/p/a=b"


def test_missing_final_newline_is_fine() -> None:
    r = parse("\n".join(meta_lines()))
    assert r.project == PROJECT


@pytest.mark.parametrize("key", ["window", "worktree", "project"])
def test_identity_key_twice_is_refused(key: str) -> None:
    lines = meta_lines()
    same = next(line for line in lines if line.startswith(f"{key}="))
    assert "exactly once" in problem_of(text_of([*lines, same]))


@pytest.mark.parametrize("key", ["window", "worktree", "project"])
def test_identity_key_missing_is_refused(key: str) -> None:
    lines = [line for line in meta_lines() if not line.startswith(f"{key}=")]
    assert "exactly once" in problem_of(text_of(lines))


@pytest.mark.parametrize("key", ["window", "worktree", "project"])
def test_identity_key_empty_is_refused(key: str) -> None:
    lines = [f"{key}=" if line.startswith(f"{key}=") else line for line in meta_lines()]
    assert problem_of(text_of(lines))


@pytest.mark.parametrize(
    "window",
    [
        "firstmate:fm-b",
        "firstmatefm-a",
        ":fm-a",
        "firstmate:fm-a:x",
        "firstmate:a",
        "firstmate:fm-a ",
        "firstmate:=fm-a",
    ],
)
def test_window_must_be_session_colon_fm_id(window: str) -> None:
    lines = [f"window={window}", f"worktree={SLOT}", f"project={PROJECT}"]
    assert problem_of(text_of(lines))


def test_session_with_a_space_is_fine() -> None:
    r = parse(text_of(["window=my session:fm-a", f"worktree={SLOT}", f"project={PROJECT}"]))
    assert r.session == "my session"
    assert r.target == "=my session:=fm-a"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("worktree", "/p/1\r"),
        ("worktree", "/p/\t1"),
        ("project", "/src/\rproj"),
        ("window", "firstmate:fm-a\r"),
        ("window", "first\tmate:fm-a"),
    ],
)
def test_identity_values_with_cr_or_tab_are_refused(key: str, value: str) -> None:
    lines = [f"{key}={value}" if line.startswith(f"{key}=") else line for line in meta_lines()]
    assert problem_of(text_of(lines))


def test_crlf_record_is_refused() -> None:
    """CR inside identity values: a CRLF file cannot name a window or slot exactly."""
    assert problem_of("\r\n".join(meta_lines()) + "\r\n")


@pytest.mark.parametrize("key", ["worktree", "project"])
def test_relative_paths_are_refused(key: str) -> None:
    lines = [f"{key}=rel/path" if line.startswith(f"{key}=") else line for line in meta_lines()]
    assert "absolute" in problem_of(text_of(lines))


def test_endpoint_task_id_absent_or_equal_is_fine() -> None:
    parse(text_of(meta_lines()))
    parse(text_of(meta_lines(endpoint_task_id="a")))


@pytest.mark.parametrize(
    "lines",
    [
        ["endpoint_task_id=b"],
        ["endpoint_task_id="],
        ["endpoint_task_id=a", "endpoint_task_id=a"],
        ["endpoint_task_id=b", "endpoint_task_id=a"],
    ],
)
def test_endpoint_task_id_other_empty_or_twice_is_refused(lines: list[str]) -> None:
    assert problem_of(text_of([*meta_lines(), *lines]))


@pytest.mark.parametrize("lines", [[], ["backend=tmux"]])
def test_backend_tmux_or_absent_is_fine(lines: list[str]) -> None:
    assert parse(text_of([*meta_lines(), *lines])).backend == "tmux"


def test_own_record_with_other_backend_is_refused_as_unsupported(tmp_path: Path) -> None:
    write(tmp_path, "a", text_of(meta_lines(backend="herdr")))
    with pytest.raises(FmError) as info:
        load_record(tmp_path, "a")
    assert info.value.exit_code == ExitCode.UNSAFE
    assert "not supported" in info.value.message
    write(tmp_path, "a", text_of(meta_lines(backend="")))
    assert exit_code_of(lambda: load_record(tmp_path, "a")) == ExitCode.UNSAFE


def test_other_record_with_other_backend_is_well_formed(tmp_path: Path) -> None:
    """spec §4: its endpoint cannot be read (so it is live), but it is not invalid."""
    write(tmp_path, "a", text_of(meta_lines()))
    write(tmp_path, "b", text_of(meta_lines("b", backend="herdr")))
    fleet = load_fleet(tmp_path)
    assert sorted(fleet.records) == ["a", "b"]
    assert fleet.records["b"].backend == "herdr"
    assert dict(fleet.invalid) == {}


def test_tasktmp_must_be_exactly_tmp_fm_id() -> None:
    assert parse(text_of(meta_lines(tasktmp="/tmp/fm-a"))).tasktmp == "/tmp/fm-a"
    for bad in ("/tmp/fm-b", "/tmp/fm-a/", "/tmp/fm-a/../fm-a", "/tmp", "", "/var/tmp/fm-a"):
        assert problem_of(text_of(meta_lines(tasktmp=bad))), bad


def test_lease_and_launch_fields_are_read() -> None:
    r = parse(
        text_of(
            meta_lines(
                treehouse_lease="abc",
                treehouse_lease_holder="a",
                spawn_gen="s100.1.2",
                started_at="2026-01-01T00:00:00Z",
            )
        )
    )
    assert (r.lease_id, r.lease_holder, r.spawn_gen, r.started_at) == (
        "abc",
        "a",
        "s100.1.2",
        "2026-01-01T00:00:00Z",
    )


# -- reading the file ----------------------------------------------------------------------


def test_load_record_valid(tmp_path: Path) -> None:
    path = write(tmp_path, "a", text_of(meta_lines()))
    r = load_record(tmp_path, "a")
    assert r.meta_path == str(path)
    assert r.mtime_ns == os.stat(path).st_mtime_ns


def test_load_record_missing_task_is_exit_2(tmp_path: Path) -> None:
    assert exit_code_of(lambda: load_record(tmp_path, "nope")) == ExitCode.INVALID
    assert exit_code_of(lambda: load_record(tmp_path / "absent", "nope")) == ExitCode.INVALID


def test_load_record_invalid_is_exit_5(tmp_path: Path) -> None:
    write(tmp_path, "a", text_of(meta_lines("b")))
    assert exit_code_of(lambda: load_record(tmp_path, "a")) == ExitCode.UNSAFE


def test_symlinked_meta_is_refused_even_if_target_is_valid(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text(text_of(meta_lines()))
    (tmp_path / "a.meta").symlink_to(target)
    with pytest.raises(RecordProblem, match="symlink"):
        read_meta(str(tmp_path / "a.meta"))
    assert exit_code_of(lambda: load_record(tmp_path, "a")) == ExitCode.UNSAFE


def test_dangling_symlink_meta_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.meta").symlink_to(tmp_path / "nowhere")
    assert exit_code_of(lambda: load_record(tmp_path, "a")) == ExitCode.UNSAFE


def test_fifo_meta_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "a.meta")
    with pytest.raises(FmError) as info:
        finishes_fast(lambda: load_record(tmp_path, "a"))
    assert info.value.exit_code == ExitCode.UNSAFE
    fleet = finishes_fast(lambda: load_fleet(tmp_path))
    assert fleet.invalid["a"].claimed is None  # type: ignore[attr-defined]


def test_directory_named_meta_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.meta").mkdir()
    assert exit_code_of(lambda: load_record(tmp_path, "a")) == ExitCode.UNSAFE


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\n\n",
        text_of(meta_lines()).encode() + b"pr=x\x00y\n",
        b"\x00" * 10,
        text_of(meta_lines()).encode() + b"pr=\xff\xfe\n",
    ],
    ids=["empty", "blank-lines", "nul-in-value", "all-nul", "not-utf8"],
)
def test_empty_or_binary_meta_is_refused(tmp_path: Path, content: bytes) -> None:
    write(tmp_path, "a", content)
    assert exit_code_of(lambda: load_record(tmp_path, "a")) == ExitCode.UNSAFE


def test_huge_meta_is_refused(tmp_path: Path) -> None:
    body = text_of(meta_lines()) + "pr=" + "x" * (10 * 1024 * 1024) + "\n"
    write(tmp_path, "a", body)
    assert exit_code_of(lambda: load_record(tmp_path, "a")) == ExitCode.UNSAFE


@pytest.mark.non_root  # root reads a mode-000 file anyway
def test_unreadable_meta_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "a", text_of(meta_lines()))
    path.chmod(0)
    try:
        assert exit_code_of(lambda: load_record(tmp_path, "a")) == ExitCode.UNSAFE
    finally:
        path.chmod(0o644)


# -- the fleet -----------------------------------------------------------------------------


def test_fleet_absent_state_dir_is_exit_5_not_an_empty_fleet(tmp_path: Path) -> None:
    """spec §7a: a state dir that does not exist is a wrong setting, never an empty fleet."""
    assert exit_code_of(lambda: load_fleet(tmp_path / "absent")) == ExitCode.UNSAFE


def test_fleet_state_dir_that_is_a_file_is_exit_5(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a dir\n")
    assert exit_code_of(lambda: load_fleet(tmp_path / "state")) == ExitCode.UNSAFE


@pytest.mark.non_root  # root lists a mode-000 directory anyway
def test_fleet_unreadable_state_dir_is_exit_5(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write(state, "a", text_of(meta_lines()))
    state.chmod(0)
    try:
        assert exit_code_of(lambda: load_fleet(state)) == ExitCode.UNSAFE
    finally:
        state.chmod(0o755)


def test_fleet_ignores_files_that_are_not_meta(tmp_path: Path) -> None:
    write(tmp_path, "a", text_of(meta_lines()))
    (tmp_path / "a.log").write_text("junk\n")
    (tmp_path / "README").write_text("junk\n")
    fleet = load_fleet(tmp_path)
    assert list(fleet.records) == ["a"]
    assert dict(fleet.invalid) == {}


@pytest.mark.parametrize(
    ("lines", "claimed"),
    [
        # usable worktree lines: the slot(s) it claims are known
        (
            ["window=s:fm-other", "worktree=/pool/p/2/proj", f"project={PROJECT}"],
            ("/pool/p/2/proj",),
        ),
        (
            [
                "window=s:fm-b",
                "worktree=/pool/p/2/proj",
                "worktree=/pool/p/3/proj",
                f"project={PROJECT}",
            ],
            ("/pool/p/2/proj", "/pool/p/3/proj"),
        ),
        (
            [
                "window=s:fm-b",
                "worktree=/pool/p/2/proj",
                f"project={PROJECT}",
                "tasktmp=/tmp/elsewhere",
            ],
            ("/pool/p/2/proj",),
        ),
        (["window=s:fm-b", "worktree=/pool/p/2/proj"], ("/pool/p/2/proj",)),
        # no usable worktree line: the slot cannot be told
        (["window=s:fm-b", f"project={PROJECT}"], None),
        (["window=s:fm-b", "worktree=", f"project={PROJECT}"], None),
        (["window=s:fm-b", "worktree=rel/2", f"project={PROJECT}"], None),
        (
            ["window=s:fm-b", "worktree=/pool/p/2/proj", "worktree=rel/2", f"project={PROJECT}"],
            None,
        ),
        # read leniently: a stray CR (CRLF line endings) or spaces still name the slot, so
        # the bad record blocks the tasks on that slot, not the whole fleet
        (["window=s:fm-b", "worktree=/pool/p/2/proj\r", f"project={PROJECT}"], ("/pool/p/2/proj",)),
        (["window=s:fm-b", "worktree =/pool/p/2/proj", f"project={PROJECT}"], ("/pool/p/2/proj",)),
    ],
)
def test_fleet_reports_invalid_other_with_claimed_slots(
    tmp_path: Path, lines: list[str], claimed: tuple[str, ...] | None
) -> None:
    write(tmp_path, "a", text_of(meta_lines()))
    write(tmp_path, "b", text_of(lines))
    fleet = load_fleet(tmp_path)
    assert list(fleet.records) == ["a"]
    bad = fleet.invalid["b"]
    assert isinstance(bad, InvalidRecord)
    assert (bad.task_id, bad.meta_path) == ("b", str(tmp_path / "b.meta"))
    assert bad.problem
    assert bad.claimed == claimed


def test_fleet_unreadable_kinds_of_other_have_unknown_slot(tmp_path: Path) -> None:
    write(tmp_path, "a", text_of(meta_lines()))
    (tmp_path / "sym.meta").symlink_to(tmp_path / "a.meta")
    (tmp_path / "dir.meta").mkdir()
    os.mkfifo(tmp_path / "fifo.meta")
    write(tmp_path, "nul", b"worktree=/pool/p/2/proj\n\x00")
    write(tmp_path, "big", "worktree=/pool/p/2/proj\n" + "x" * (10 * 1024 * 1024))
    fleet = finishes_fast(lambda: load_fleet(tmp_path))
    assert list(fleet.records) == ["a"]  # type: ignore[attr-defined]
    invalid = fleet.invalid  # type: ignore[attr-defined]
    assert sorted(invalid) == ["big", "dir", "fifo", "nul", "sym"]
    assert all(invalid[t].claimed is None for t in invalid)


def test_a_name_that_can_never_be_a_task_id_is_a_stray_not_a_record(tmp_path: Path) -> None:
    """No task is ever spawned under `a b` or `.hidden`: such a file owns no slot, even when
    it names one; an empty record of a valid id still counts (it may be a spawn in progress)."""
    write(tmp_path, "a", text_of(meta_lines()))
    (tmp_path / ".hidden.meta").write_text(text_of(meta_lines(".hidden")))
    (tmp_path / "a b.meta").write_text(text_of(meta_lines("a b")))
    (tmp_path / ".meta").write_text(text_of(meta_lines("")))
    (tmp_path / "zero.meta").write_text("")
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "a.status").write_text("done\n")  # a's sidecar
    (tmp_path / "zero.inbox").mkdir()  # zero's sidecar
    (tmp_path / ".fm-lock").write_text("")  # fm's own
    fleet = load_fleet(tmp_path)
    assert list(fleet.records) == ["a"]
    assert list(fleet.invalid) == ["zero"]
    assert "is empty" in fleet.invalid["zero"].problem
    assert [name for name, _ in fleet.strays] == [".hidden.meta", ".meta", "a b.meta", "notes.txt"]
    assert all("can never be a task id" in why for name, why in fleet.strays if name != "notes.txt")


def test_fleet_never_raises_for_bad_others_and_keeps_good_ones(tmp_path: Path) -> None:
    write(tmp_path, "a", text_of(meta_lines()))
    write(tmp_path, "c", text_of(meta_lines("c")))
    write(tmp_path, "empty", b"")
    write(tmp_path, "wrong-window", text_of(meta_lines("x")))
    write(tmp_path, "dup", text_of([*meta_lines("dup"), f"worktree={SLOT}"]))
    fleet = load_fleet(tmp_path)
    assert sorted(fleet.records) == ["a", "c"]
    assert sorted(fleet.invalid) == ["dup", "empty", "wrong-window"]
    assert fleet.task_ids == ["a", "c", "dup", "empty", "wrong-window"]


def test_a_crlf_record_is_told_it_has_crlf_line_endings() -> None:
    crlf = "\r\n".join(meta_lines()) + "\r\n"
    assert "the record has CRLF line endings" in problem_of(crlf)
    # One stray CR is not a line-ending problem: the plain message.
    lines = meta_lines()
    lines[0] += "\r"
    one = problem_of(text_of(lines))
    assert "control character" in one and "CRLF" not in one


# -- the quick path: a fleet's records cost a read and a split -----------------------------

_LINES = [
    "window=firstmate:fm-a",
    "window=firstmate:fm-b",
    "window=:fm-a",
    "window=fm-a",
    "window=",
    f"worktree={SLOT}",
    "worktree=rel/slot",
    "worktree=",
    f"worktree= {SLOT}",
    f"project={PROJECT}",
    "project=",
    "project=src",
    "endpoint_task_id=a",
    "endpoint_task_id=b",
    "kind=secondmate",
    "kind=",
    "kind=boat",
    "mode=direct-PR",
    "mode=yolo",
    "home=/h",
    "home=h",
    "home=",
    "tasktmp=/tmp/fm-a",
    "tasktmp=/tmp/x",
    "tasktmp=",
    "backend=ssh",
    "treehouse_lease=L1",
    "treehouse_lease_holder=a",
    "spawn_gen=s1.2.ab",
    "pr=",
    "harness=claude\tx",
    "harness=\u00e9t\u00e9",
    "pr=\u00a0x",
    "window=firstmate\u00a0:fm-a",
    "model=m\r",
    " window=firstmate:fm-a",
    "no equals sign",
    "",
    "=",
    "a=b=c",
]


@settings(max_examples=600, deadline=None)
@given(
    st.lists(st.sampled_from(_LINES), max_size=9),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)
def test_the_quick_path_accepts_only_what_the_full_parse_accepts_unchanged(
    lines: list[str], sep: str, final: bool
) -> None:
    """`quick_record` is an exact shortcut: when it accepts a text, `parse_record` returns the
    very same record; anything else is left to `parse_record` (None)."""
    text = sep.join(lines) + (sep if final else "")
    quick = quick_record("a", "/s/a.meta", text, 7)
    try:
        full: Record | None = parse_record("a", "/s/a.meta", text, 7)
    except RecordProblem:
        full = None
    if quick is not None:
        assert quick == full
    # The usual record is taken by the quick path (else it would save nothing).
    usual = text_of(meta_lines(kind="ship", tasktmp="/tmp/fm-a", treehouse_lease="L"))
    assert quick_record("a", "/s/a.meta", usual, 7) == parse_record("a", "/s/a.meta", usual, 7)


def test_fleet_records_read_the_quick_way_are_the_full_parse_s(tmp_path: Path) -> None:
    """Loading a fleet gives every record exactly as `load_record` reads it, and every bad
    one the same problem, whichever way it was read (a symlink, a FIFO, a big file and a
    malformed record still go through the careful reader)."""
    write(tmp_path, "a", text_of(meta_lines()))
    write(tmp_path, "b", text_of(meta_lines("b", kind="secondmate", home="/nowhere/h")))
    write(tmp_path, "c", text_of([*meta_lines("c"), "harness=x\ty"]))  # a tab: full parse
    write(tmp_path, "d", text_of(meta_lines("d", kind="boat")))
    write(tmp_path, "e", b"x" * (MAX_RECORD_BYTES + 1))
    os.mkfifo(tmp_path / "f.meta")
    os.symlink(tmp_path / "a.meta", tmp_path / "g.meta")
    fleet = load_fleet(tmp_path)
    for task in ("a", "b", "c"):
        assert fleet.records[task] == load_record(tmp_path, task)
    assert sorted(fleet.invalid) == ["d", "e", "f", "g"]
    problems = {t: fleet.invalid[t].problem for t in fleet.invalid}
    assert problems["d"].startswith("kind 'boat' is not supported")
    assert problems["e"] == f"is larger than {MAX_RECORD_BYTES} bytes"
    assert problems["f"] == "is not a regular file"
    assert problems["g"] == "is a symlink"
    assert fleet.invalid["d"].claimed == (SLOT,)


# -- secondmates' homes: followed MAX_HOME_DEPTH deep, and past that fail closed ------------


def _chain(root: Path, depth: int, *, last_state: bool = True) -> list[Path]:
    """A secondmate in `root/state` whose home holds a secondmate, `depth` homes deep; the
    deepest home has a state dir (with a task naming SLOT) unless `last_state` is False."""
    homes = [root / f"home{k}" for k in range(1, depth + 1)]
    state = root / "state"
    state.mkdir()
    for k, home in enumerate(homes, 1):
        home.mkdir()
        sm = f"sm{k}"
        (state / f"{sm}.meta").write_text(
            f"window=firstmate:fm-{sm}\nworktree={home}\nproject={home}\nkind=secondmate\n"
            f"mode=secondmate\nhome={home}\n"
        )
        if k < depth or last_state:
            state = home / "state"
            state.mkdir()
    if last_state:
        (state / "kid.meta").write_text(
            f"window=firstmate:fm-kid\nworktree={SLOT}\nproject={PROJECT}\n"
        )
    return homes


def test_a_home_as_deep_as_fm_follows_is_read(tmp_path: Path) -> None:
    _chain(tmp_path, MAX_HOME_DEPTH)
    fleet = load_fleet(tmp_path / "state")
    assert "sm1/sm2/sm3/sm4/kid" in fleet.records
    assert not fleet.invalid


def test_a_home_deeper_than_fm_follows_fails_closed_naming_it(tmp_path: Path) -> None:
    homes = _chain(tmp_path, MAX_HOME_DEPTH + 1)
    fleet = load_fleet(tmp_path / "state")
    key = "sm1/sm2/sm3/sm4/sm5/state"
    assert list(fleet.invalid) == [key], fleet.invalid
    bad = fleet.invalid[key]
    assert bad.claimed is None  # its slots cannot be told: it may claim any
    assert f"secondmate home {homes[-1]}, {MAX_HOME_DEPTH + 1} homes deep" in bad.problem
    assert key in fleet.children and key not in fleet.task_ids
    assert not any(k.endswith("/kid") for k in fleet.records)


def test_a_deeper_home_without_a_state_dir_holds_no_task(tmp_path: Path) -> None:
    _chain(tmp_path, MAX_HOME_DEPTH + 1, last_state=False)
    fleet = load_fleet(tmp_path / "state")
    assert not fleet.invalid
    assert "sm1/sm2/sm3/sm4/sm5" in fleet.records


def test_a_task_beside_a_too_deep_home_is_refused_and_its_live_agent_kept(
    fleet: Fleet,
) -> None:
    """A child recorded five homes deep runs a live agent in TASK's slot: fm cannot read it,
    so TASK's teardown refuses (exit 5) naming that home, and the agent keeps running."""
    task = tid("deep")
    slot = fleet.slot(1, holder=task)
    fleet.task(task, slot, "dead")
    home = fleet.root / "homes"
    home.mkdir()
    state = fleet.state
    deepest = home
    for k in range(1, MAX_HOME_DEPTH + 2):
        deepest = home / f"h{k}"
        deepest.mkdir()
        sm = tid(f"sm{k}")
        (state / f"{sm}.meta").write_text(
            f"window=firstmate:fm-{sm}\nworktree={deepest}\nproject={deepest}\n"
            f"kind=secondmate\nmode=secondmate\nhome={deepest}\n"
        )
        state = deepest / "state"
        state.mkdir()
    kid = tid("kid")
    (state / f"{kid}.meta").write_text(
        f"window=firstmate:fm-{kid}\nworktree={slot}\nproject={fleet.project}\n"
    )
    agent = fleet.endpoint(kid, slot, "alive", session="firstmate")
    fleet.tracked.update(agent)
    before = fleet.snapshot(slot)
    for args in (("--dry-run",), ()):
        code, doc = fleet.fm_json("teardown", task, *args)
        assert (code, doc["verdict"]) == (5, "unsafe"), doc
        assert f"secondmate home {deepest}, {MAX_HOME_DEPTH + 1} homes deep" in doc["reasons"][0]
    assert fleet.snapshot(slot) == before
    assert not any(gone(pid) for pid in agent)


# -- a name no task can have: warned where it matters, once -----------------------------------


def test_a_bad_id_meta_is_warned_only_to_the_task_whose_slot_it_names(fleet: Fleet) -> None:
    """`bad id.meta` naming t2's slot is said to t2 (and in the audit's loose ends), not to
    every other task's command; one naming no slot is a loose end only."""
    t1, t2 = tid("one"), tid("two")
    s1, s2 = fleet.slot(1, holder=t1), fleet.slot(2, holder=t2)
    fleet.task(t1, s1, "dead")
    fleet.task(t2, s2, "dead")
    (fleet.state / "bad id.meta").write_text(f"window=firstmate:fm-x\nworktree={s2}/\n")
    (fleet.state / "no slot.meta").write_text("window=firstmate:fm-y\n")

    def strays_said(doc: dict[str, Any]) -> list[str]:
        return [w for w in doc["warnings"] if ".meta in the state dir" in w]

    code, one = fleet.fm_json("teardown", t1, "--dry-run")
    assert code == 0 and strays_said(one) == [], one
    code, two = fleet.fm_json("teardown", t2, "--dry-run")
    assert code == 0 and [w.split(" in the state dir")[0] for w in strays_said(two)] == [
        "bad id.meta"
    ], two
    code, audit = fleet.fm_json("teardown", "--dry-run")
    files = sorted(o["id"] for o in audit["orphans"] if o["kind"] == "file")
    assert files == ["bad id.meta", "no slot.meta"], audit["orphans"]


@pytest.mark.parametrize("settled", [True, False])
def test_a_record_read_again_is_its_text_now(
    tmp_path: Path, settled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real run loads the fleet again right before each destructive call. A record that
    changed since the last load reads as it is now, even rewritten in place with the same
    length and the same modification time; one unchanged reads the same. `settled`: the
    file is taken as written long before it was read (its stat is then what tells)."""
    monkeypatch.setattr(record_files, "_KEEPING", [True])  # as in a real run
    if settled:
        monkeypatch.setattr(record_files, "_SETTLED_NS", -1)
    meta = write(tmp_path, "a", text_of(meta_lines(pr="11")))
    assert load_fleet(tmp_path).records["a"].pr == "11"
    assert load_fleet(tmp_path).records["a"].pr == "11"
    mtime = meta.stat().st_mtime_ns
    with open(meta, "r+", encoding="utf-8") as f:  # in place: the same inode and size
        f.write(text_of(meta_lines(pr="22")))
    os.utime(meta, ns=(mtime, mtime))
    assert meta.stat().st_mtime_ns == mtime and meta.stat().st_size == len(meta.read_bytes())
    assert load_fleet(tmp_path).records["a"].pr == "22"
