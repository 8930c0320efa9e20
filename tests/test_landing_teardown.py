"""`fm teardown` on work that only looks landed (spec §14.6): a change to one of two
identical blocks, a remote branch gone from the server, the task's branch beyond HEAD, a
repository nested in the slot. Real tmux, real git, the pool stand-in: each test asserts the
exit code, what fm says, and that nothing changed where nothing may change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fleet import Fleet, git, tid

ID_ALPHA = tid("alpha")
ID_BETA = tid("beta")
ID_GONE = tid("gone")
ID_W5 = tid("w5")
ID_NEST = tid("nest")


def block(name: str, timeout: int) -> str:
    """A block whose changed line has three identical lines of context on each side."""
    lines = [f"[{name}]", "host = db", "port = 5432", "user = app", f"timeout = {timeout}",
             "pool = 5", "ssl = on", "log = warn", ""]  # fmt: skip
    return "\n".join(lines) + "\n"


def conf(staging: int, production: int) -> str:
    return block("staging", staging) + block("production", production)


def on_main(fleet: Fleet, files: dict[str, str], message: str) -> str:
    """A commit on main in the project checkout, pushed to origin (origin/main follows)."""
    for name, text in files.items():
        (fleet.project / name).write_text(text)
    git(fleet.project, "add", "-A")
    git(fleet.project, "commit", "-q", "-m", message)
    git(fleet.project, "push", "-q", "origin", "main")
    return git(fleet.project, "rev-parse", "HEAD")


def in_slot(slot: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        path = slot / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(slot, "add", "-A")
    git(slot, "commit", "-q", "-m", message)
    return git(slot, "rev-parse", "HEAD")


def refs(fleet: Fleet) -> str:
    return git(fleet.project, "for-each-ref", "--format=%(refname) %(objectname)")


def lines(doc: dict[str, Any]) -> list[str]:
    return [str(r) for r in doc["reasons"]]


# --------------------------------------------------------------------------- identical blocks


def test_a_change_to_one_of_two_identical_blocks_is_never_torn_down(fleet: Fleet) -> None:
    """The reproduced loss: alpha (unpushed) sets staging's timeout; main later sets
    production's. The two diffs differ only in their line numbers."""
    on_main(fleet, {"conf.ini": conf(30, 30)}, "config")
    slot = fleet.slot(1, holder=ID_ALPHA)
    git(slot, "switch", "-q", "-c", f"fm/{ID_ALPHA}")
    mine = in_slot(slot, {"conf.ini": conf(60, 30)}, "staging: timeout 60")
    on_main(fleet, {"conf.ini": conf(30, 60)}, "production: timeout 60")
    fleet.task(ID_ALPHA, slot, "dead")
    before, refs_before = fleet.snapshot(slot), refs(fleet)

    code, doc = fleet.fm_json("teardown", ID_ALPHA, "--dry-run")
    assert (code, doc["verdict"]) == (3, "unlanded"), doc
    code, doc = fleet.fm_json("teardown", ID_ALPHA)
    assert (code, doc["verdict"]) == (3, "unlanded"), doc
    assert any(f"unpushed: {mine[:7]} staging: timeout 60" in x for x in lines(doc)), doc
    assert not any(x.startswith("own work: patches") for x in lines(doc))

    code, doc = fleet.fm_json("teardown", "--landed", "--min-age", "0")
    assert (code, doc["results"]) == (0, []), doc
    assert ID_ALPHA in [n["task"] for n in doc["not_selected"]]

    assert fleet.snapshot(slot) == before
    assert refs(fleet) == refs_before, "the branch and every ref are as they were"
    assert git(fleet.project, "rev-parse", f"refs/heads/fm/{ID_ALPHA}") == mine
    assert (slot / "conf.ini").read_text() == conf(60, 30), "staging's 60 is still there"


def test_the_same_change_squash_merged_on_main_is_torn_down(fleet: Fleet) -> None:
    on_main(fleet, {"conf.ini": conf(30, 30)}, "config")
    slot = fleet.slot(1, holder=ID_BETA)
    git(slot, "switch", "-q", "-c", f"fm/{ID_BETA}")
    in_slot(slot, {"conf.ini": conf(60, 30)}, "staging: timeout 60")
    in_slot(slot, {"notes.md": "why\n"}, "notes")
    on_main(fleet, {"other.txt": "theirs\n"}, "unrelated")
    on_main(fleet, {"conf.ini": conf(60, 30), "notes.md": "why\n"}, "staging (#7, squashed)")
    on_main(fleet, {"conf.ini": conf(61, 30)}, "staging: timeout 61")
    fleet.task(ID_BETA, slot, "dead")
    code, doc = fleet.fm_json("teardown", ID_BETA)
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert any(x.startswith("own work: squash: ") for x in lines(doc)), doc
    assert not (fleet.state / f"{ID_BETA}.meta").exists()


# --------------------------------------------------------------------------- remote refs


def test_a_remote_branch_gone_from_the_server_does_not_land_the_real_run(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_GONE)
    mine = in_slot(slot, {"feature.txt": "f\n"}, "feature")
    git(slot, "push", "-q", "origin", f"HEAD:refs/heads/fm/{ID_GONE}")
    tracking = f"refs/remotes/origin/fm/{ID_GONE}"
    assert git(fleet.project, "rev-parse", tracking) == mine
    # The branch is deleted on the server; the project's remote-tracking ref is all that is
    # left of the commit.
    git(fleet.origin, "branch", "-q", "-D", f"fm/{ID_GONE}")
    fleet.task(ID_GONE, slot, "dead")
    before = fleet.snapshot(slot)

    code, doc = fleet.fm_json("teardown", ID_GONE, "--dry-run")
    assert (code, doc["verdict"]) == (0, "proceed"), doc
    assert (
        "not fetched: a dry run uses a remote-tracking branch as last fetched; the real run "
        "fetches first (with prune) and may decide otherwise"
    ) in lines(doc)
    r = fleet.fm("teardown", ID_GONE, "--dry-run")
    assert "not fetched: a dry run uses a remote-tracking branch as last fetched" in r.stdout
    assert git(fleet.project, "rev-parse", tracking) == mine, "a dry run fetches nothing"

    code, doc = fleet.fm_json("teardown", ID_GONE)
    assert (code, doc["verdict"]) == (3, "unlanded"), doc
    assert f"unpushed: {mine[:7]} feature" in lines(doc)
    assert not any(x.startswith("not fetched") for x in lines(doc))
    assert git(fleet.project, "for-each-ref", tracking) == "", "the fetch pruned it"
    assert fleet.snapshot(slot) == before
    assert git(slot, "rev-parse", "HEAD") == mine


# --------------------------------------------------------------------------- the task's branch


def test_the_tasks_branch_beyond_head_is_its_work_too(fleet: Fleet) -> None:
    slot = fleet.slot(1, holder=ID_W5)
    git(slot, "switch", "-q", "-c", f"fm/{ID_W5}")
    beyond = in_slot(slot, {"w5.txt": "unpushed\n"}, "beyond HEAD")
    git(slot, "switch", "-q", "--detach", "main")  # HEAD itself is on main: landed
    fleet.task(ID_W5, slot, "dead")
    before, refs_before = fleet.snapshot(slot), refs(fleet)
    for dry in (["--dry-run"], []):
        code, doc = fleet.fm_json("teardown", ID_W5, *dry)
        assert (code, doc["verdict"]) == (3, "unlanded"), doc
        assert f"branch fm/{ID_W5} has commits beyond HEAD" in doc["headline"], doc
        assert f"unpushed: {beyond[:7]} beyond HEAD" in lines(doc)
    assert fleet.snapshot(slot) == before and refs(fleet) == refs_before


# --------------------------------------------------------------------------- nested repositories


def test_a_nested_repository_with_a_fix_is_refused_and_force_cannot_discard_it(
    fleet: Fleet,
) -> None:
    slot = fleet.slot(1, holder=ID_NEST)
    lib = slot / "vendor" / "lib"
    lib.mkdir(parents=True)
    git(lib, "init", "-q", "-b", "main")
    for k, v in (("user.name", "Test"), ("user.email", "t@example.invalid")):
        git(lib, "config", k, v)
    (lib / "lib.py").write_text("v1\n")
    git(lib, "add", "-A")
    git(lib, "commit", "-q", "-m", "lib v1")
    (lib / "lib.py").write_text("v1, with the fix\n")
    fleet.task(ID_NEST, slot, "dead")
    before = fleet.snapshot(slot)

    code, doc = fleet.fm_json("teardown", ID_NEST)
    assert (code, doc["verdict"]) == (3, "unlanded"), doc
    assert (
        "nested repository: vendor/lib/ (uncommitted changes in 1 path (vendor/lib/lib.py); "
        "1 commit on none of its remote-tracking branches)"
    ) in lines(doc), doc
    assert any("--force cannot save the nested repositories" in h for h in doc["hints"])

    for dry in (["--dry-run"], []):
        r = fleet.fm("teardown", ID_NEST, "--force", *dry, "--json")
        doc = json.loads(r.stdout)
        assert (r.returncode, doc["verdict"]) == (5, "unsafe"), doc
        assert doc["headline"] == (
            f"{ID_NEST}'s slot holds nested repositories (vendor/lib/): --force cannot save "
            "them with their history"
        )
    assert fleet.snapshot(slot) == before
    assert (lib / "lib.py").read_text() == "v1, with the fix\n"
    assert git(fleet.project, "for-each-ref", f"refs/fm/discarded/{ID_NEST}") == ""
