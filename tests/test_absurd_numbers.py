"""An absurd number is one record's problem, or an invalid request, never a crash (spec
§15.2): a 5,000-digit `spawn_gen` in another record, `--min-age 9…9d`, a time knob of 1e300
seconds, a count knob in another script's digits."""

from __future__ import annotations

import pytest

from tests.fleet import Fleet, tid

ID_ALPHA = tid("an-alpha")
ID_BRAVO = tid("an-bravo")


SPAWN_GEN_ABSURD = "s" + "9" * 5000 + ".1.a"


def test_an_absurd_spawn_gen_is_its_own_records_problem(fleet: Fleet) -> None:
    """A 5,000-digit spawn_gen in bravo's record: the audit and alpha's teardown go on
    (were exit 1); bravo's own teardown refuses its record as invalid."""
    alpha = fleet.task(ID_ALPHA, fleet.slot(1, holder=ID_ALPHA), "dead")
    fleet.task(
        ID_BRAVO, fleet.slot(2, holder=ID_BRAVO), "dead", extra={"spawn_gen": SPAWN_GEN_ABSURD}
    )
    for args in (["--dry-run"], ["--landed", "--dry-run", "--min-age", "0"]):
        r = fleet.fm("teardown", *args)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr and "unexpected" not in r.stderr
    code, doc = fleet.fm_json("teardown", "--dry-run")
    [row] = [row for row in doc["tasks"] if row["task"] == ID_BRAVO]
    assert "spawn_gen" in " ".join(row["reasons"]), row
    code, doc = fleet.fm_json("teardown", ID_BRAVO, "--dry-run")
    assert code == 5 and "spawn_gen" in doc["reasons"][0] and len(doc["reasons"][0]) < 300
    r = fleet.fm("teardown", ID_ALPHA)
    assert r.returncode == 0, r.stderr
    assert not alpha.meta.exists()


@pytest.mark.parametrize(
    "min_age", ["9" * 5000 + "d", "1" + "0" * 40 + "s", "36526d", "٣h", "1e9s"]
)
def test_an_absurd_min_age_is_an_invalid_request(fleet: Fleet, min_age: str) -> None:
    fleet.task(ID_ALPHA, fleet.slot(1, holder=ID_ALPHA), "dead")
    for args in (["--landed"], ["--landed", "--dry-run"], ["--dry-run"]):
        r = fleet.fm("teardown", *args, "--min-age", min_age)
        assert r.returncode == 2, r.stderr  # was 1: an unexpected error (ValueError, OverflowError)
        first = r.stderr.splitlines()[0]
        assert "--min-age takes a duration of at most 100 years" in first and len(first) < 200
        assert "Traceback" not in r.stderr
    # The longest duration there is still works.
    assert fleet.fm("teardown", "--landed", "--dry-run", "--min-age", "36525d").returncode == 0


@pytest.mark.parametrize("value", ["1e300", "9" * 5000])
def test_an_absurd_time_knob_is_an_invalid_request(fleet: Fleet, value: str) -> None:
    fleet.task(ID_ALPHA, fleet.slot(1, holder=ID_ALPHA), "dead")
    r = fleet.fm("teardown", ID_ALPHA, "--dry-run", env=fleet.env(FM_TMUX_TIMEOUT_SECS=value))
    # 1e300 was 1 (OverflowError in the tmux call's wait); 5,000 digits a 5,000-character line.
    assert r.returncode == 2, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith("fm: FM_TMUX_TIMEOUT_SECS must be a number of seconds from 0 to")
    assert len(first) < 200 and "Traceback" not in r.stderr


@pytest.mark.parametrize("value", ["9" * 5000, "²"])
def test_an_absurd_count_knob_falls_back_to_its_default(fleet: Fleet, value: str) -> None:
    """The lock-retry counts are firstmate's knobs, lenient as its scripts are: an unusable
    value is its default (was 1: int() of 5,000 digits, of a superscript two)."""
    alpha = fleet.task(ID_ALPHA, fleet.slot(1, holder=ID_ALPHA), "dead")
    env = fleet.env(FM_ATTRIBUTION_LOCK_ATTEMPTS=value, FM_TREEHOUSE_RETURN_LOCK_RETRIES=value)
    r = fleet.fm("teardown", ID_ALPHA, env=env)
    assert r.returncode == 0, r.stderr
    assert not alpha.meta.exists()
