"""Words that tell the truth (spec §15.10): a plan-changed refusal lists only the fields that
changed; a discard hint says what is saved, under whose name, and what is not (ignored files,
nested repositories); a row's reason fits its row and is said in full once below the table.

(`[include with --include-live]` offered only when the flag would include the task:
tests/test_people.py, `test_include_live_is_offered_only_when_it_would_include_the_task`.)
"""

from __future__ import annotations

import re

from tests.fleet import Fleet, git, tid
from tests.test_plan_token import base, token_of

ROW = 200  # the longest reason a row of a table shows


def test_a_plan_changed_refusal_lists_only_the_fields_that_changed(fleet: Fleet) -> None:
    """The approved plan read the slot's HEAD and returned the slot on TASK's lease; another
    task's agent comes back, so the plan now refuses before reading HEAD and returns nothing.
    HEAD and the lease did not change: the refusal does not list them; what did, it does."""
    t = base(fleet, "tw-plan")
    other = tid("tw-plan2")
    fleet.task(other, t.slot, "missing")
    token = token_of(fleet, t.id)
    head = git(t.slot, "rev-parse", "HEAD")
    fleet.tracked.update(fleet.endpoint(other, t.slot, "alive"))  # its agent comes back
    code, doc = fleet.fm_json("teardown", t.id, "--expect-plan", token)
    assert (code, doc["verdict"], doc["headline_code"]) == (4, "plan-changed", "plan-changed")
    headline = doc["reasons"][0]
    assert headline.startswith("REFUSED: the plan changed since it was approved: "), headline
    assert "the verdict" in headline and "the owners of the slot" in headline, headline
    for unchanged in ("the slot's HEAD", "the pool lease", "uncommitted or untracked"):
        assert unchanged not in headline, (unchanged, headline)
        assert not any(r.startswith(unchanged) for r in doc["reasons"]), doc["reasons"]
    assert "the verdict: proceed → live-owner" in doc["reasons"], doc["reasons"]
    assert git(t.slot, "rev-parse", "HEAD") == head  # indeed, HEAD is as it was


def test_a_discard_hint_for_a_lease_says_the_work_is_saved_and_what_is_not(fleet: Fleet) -> None:
    """A lease no task holds is a live owner; discarding it saves the slot's work first, under
    TASK's name, as the forced plan shows: the hint says so (not "nothing is saved"), and that
    ignored files and nested repositories are not saved."""
    t = tid("tw-lease")
    slot = fleet.slot(1, holder="ci-bot")
    fleet.task(t, slot, "dead")
    (slot / "draft.txt").write_text("work\n")
    code, doc = fleet.fm_json("teardown", t, "--dry-run")
    assert (code, doc["verdict"]) == (4, "live-owner"), doc
    assert [o["code"] for o in doc["owners"] if o["live"]] == ["pool-lease"], doc["owners"]
    last = doc["hints"][-1]  # the last resort
    assert last.startswith("last resort, destroys lease:ci-bot's live work"), doc["hints"]
    assert f"saved first under refs/fm/discarded/{t}/<time>" in last, last
    assert "nothing of it is saved" not in last
    assert "ignored files and repositories nested in the slot are not saved" in last, last
    code, forced = fleet.fm_json(
        "teardown", t, "--dry-run", "--force", "--discard-live-owner=lease:ci-bot"
    )
    saves = [s["target"] for s in forced["steps"] if s["step"] == "save-discarded"]
    assert (code, saves) == (0, [f"refs/fm/discarded/{t}/<UTC timestamp>"]), forced


def test_the_force_hint_says_ignored_files_are_not_in_the_save(fleet: Fleet) -> None:
    """An unlanded task's `--force` hint promises a restorable save: it says that ignored
    files (and nested repositories) are not in it, and they are not."""
    t = tid("tw-ignored")
    slot = fleet.slot(1, holder=t)
    fleet.task(t, slot, "dead")
    (slot / ".gitignore").write_text("*.env\n")
    (slot / "notes.txt").write_text("work\n")
    (slot / "secret.env").write_text("TOKEN=1\n")
    code, doc = fleet.fm_json("teardown", t, "--dry-run")
    assert (code, doc["verdict"]) == (3, "unlanded"), doc
    forced = next(h for h in doc["hints"] if f"fm teardown {t} --force" in h)
    assert f"saved first under refs/fm/discarded/{t}/<time>" in forced, forced
    assert "ignored files and repositories nested in the slot are not saved" in forced, forced
    code, ran = fleet.fm_json("teardown", t, "--force")
    assert code == 0 and ran["discarded_ref"], ran
    saved = git(fleet.project, "ls-tree", "-r", "--name-only", ran["discarded_ref"]).split()
    assert "notes.txt" in saved and "secret.env" not in saved, saved


def test_a_rows_reason_fits_the_row_and_is_said_in_full_once_below(fleet: Fleet) -> None:
    """A task refused for an agent in a pane of a session with a long name: the `--landed`
    preview's row and the batch summary's row cut the reason at 200 characters; below each
    table it is said once, in full; the JSON has it in full."""
    t, u = tid("tw-long"), tid("tw-short")
    slot = fleet.slot(1, holder=t)
    fleet.task(t, slot, "dead")
    fleet.task(u, fleet.slot(2, holder=u), "alive")
    session = "x" * 180
    window = fleet.tmux.new_window(session, "scratch", slot, f"{fleet.bin}/claude 100000")
    fleet.tracked.update(fleet.tmux.pane_pids(window))
    code, doc = fleet.fm_json("teardown", t, "--dry-run")
    assert code == 4 and len(doc["headline"]) > ROW, doc["headline"]
    reason = doc["headline"]

    preview = fleet.fm("teardown", "--landed", "--dry-run").stdout.splitlines()
    row = next(line for line in preview if re.match(rf"  {t} +refused \(live-owner\): ", line))
    shown = row.split("  refused (live-owner)", 1)[1]
    assert len("refused (live-owner)" + shown) <= ROW and row.endswith("…"), row
    code, doc = fleet.fm_json("teardown", "--landed", "--dry-run")
    said = {n["task"]: n["reason"] for n in doc["not_selected"]}[t]
    assert len(said) > ROW and said.startswith("refused (live-owner): "), said
    full = [line for line in preview if said in line]
    assert full == [f"  {t}: {said}"], preview
    assert preview[preview.index(full[0]) - 1] == "in full (cut above; --json has every task's):"

    summary = fleet.fm("teardown", t, u, "--dry-run").stdout.splitlines()
    row = next(line for line in summary if re.match(rf"  {t} +live-owner +4  ", line))
    assert len(re.split(r" 4  ", row, maxsplit=1)[1]) <= ROW and row.endswith("…"), row
    assert [line for line in summary if reason in line] == [f"  {t}: refused: {reason}"], summary
