"""The runbook texts (spec §11): one file per name `fm runbook` knows, shaped for an
operator under pressure. Structure only: what each says is reviewed, not tested here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fm_teardown.commands.completion import RUNBOOKS

ROOT = Path(__file__).resolve().parent.parent
RUNBOOK_DIR = ROOT / "fm_teardown" / "runbooks"
INDEX = ROOT / "docs" / "runbooks" / "README.md"
# Short enough to read under pressure; unsafe.md, one section per cause of exit 5, is the
# longest.
MAX_LINES = 160

# Each refusal cause of exit 5 has its own `##` section; one keyword of its heading per cause.
UNSAFE_CAUSES = {
    "firstmate's lifecycle locks": "lifecycle",
    "TASK's own record": "own record",
    "another invalid record": "another record",
    "the slot claim": "slot claim",
    "the tasktmp": "tasktmp",
    "the state dir": "state dir",
    "a protected root": "protected root",
    "fm inside TASK's window": "own window",
    "another tool's worktree lock": "worktree lock",
    "the pool not ready": "pool",
    "a foreign .git": ".git",
    "a tmux server or client in the slot": "tmux server",
    "the tmux inventory": "inventory",
    "a secondmate home too deep": "too deep",
    "the no-mistakes gate": "gate",
    "fm's own file (the journal, the slot lock)": "own file",
    "a teardown that ended partway, of another launch": "another launch",
    "what fm does not carry from the shell script": "shell script",
}


def text(name: str) -> str:
    return (RUNBOOK_DIR / f"{name}.md").read_text(encoding="utf-8")


def headings(name: str, level: str) -> list[str]:
    prefix = level + " "
    return [
        line[len(prefix) :].lower() for line in text(name).splitlines() if line.startswith(prefix)
    ]


def test_the_runbook_dir_is_a_package_with_one_file_per_name() -> None:
    assert (RUNBOOK_DIR / "__init__.py").is_file()
    on_disk = {p.stem for p in RUNBOOK_DIR.glob("*.md")}
    assert on_disk == set(RUNBOOKS)


@pytest.mark.parametrize("name", RUNBOOKS)
def test_each_runbook_opens_with_a_heading_then_when_you_see_it(name: str) -> None:
    lines = text(name).splitlines()
    assert lines and lines[0].startswith("# "), f"{name}.md must start with a '# ' heading"
    first = next(line for line in lines[1:] if line.strip())
    assert first.startswith("When you see it:"), f"{name}.md: say when you see it first"


@pytest.mark.parametrize("name", RUNBOOKS)
def test_each_runbook_is_short_and_says_what_never_to_do(name: str) -> None:
    body = text(name)
    assert len(body.splitlines()) <= MAX_LINES
    assert "never" in " ".join(headings(name, "##")), f"{name}.md needs a Never section"
    assert body.count("```") % 2 == 0, f"{name}.md has an unclosed code block"


@pytest.mark.parametrize("name", RUNBOOKS)
def test_runbooks_use_placeholders_not_machine_paths(name: str) -> None:
    body = text(name)
    assert not re.search(r"/(?:home|Users|work|root)/\w", body), f"{name}.md names a machine path"


@pytest.mark.parametrize("cause", sorted(UNSAFE_CAUSES))
def test_unsafe_has_one_section_per_cause(cause: str) -> None:
    keyword = UNSAFE_CAUSES[cause]
    found = [h for h in headings("unsafe", "##") if keyword in h]
    assert found, f"unsafe.md has no '## ' section for {cause} (keyword {keyword!r})"


def test_unlanded_explains_restoring_a_save() -> None:
    body = text("unlanded")
    assert "fm restore" in body
    assert "git reset HEAD^" in body
    assert "refs/fm/discarded/" in body
    assert "worktree add --detach" in body


def commands(name: str) -> list[str]:
    """The `fm ...` command lines of a runbook's code blocks, in order (comments dropped)."""
    out, inside = [], False
    for line in text(name).splitlines():
        if line.strip().startswith("```"):
            inside = not inside
        elif inside and line.strip().startswith("fm "):
            out.append(line.split("#", 1)[0].strip())
    return out


def test_mass_cleanup_is_audit_first_then_landed() -> None:
    body = text("mass-cleanup")
    assert "--landed" in body
    assert "--dry-run" in body
    cmds = commands("mass-cleanup")
    assert cmds[0] == "fm teardown --dry-run", "the audit comes first"
    assert cmds.index("fm teardown --landed --dry-run") < cmds.index("fm teardown --landed")


def test_live_owner_never_suggests_force_alone() -> None:
    body = text("live-owner")
    assert "--force --discard-live-owner=" in body
    assert not re.search(r"fm teardown \S+ --force\s*$", body, re.MULTILINE)


def test_the_docs_index_links_every_runbook() -> None:
    index = INDEX.read_text(encoding="utf-8")
    links = re.findall(r"\]\((\.\./\.\./fm_teardown/runbooks/[^)]+\.md)\)", index)
    assert sorted(Path(link).stem for link in links) == sorted(RUNBOOKS)
    for link in links:
        assert (INDEX.parent / link).resolve().is_file(), link
    assert "fm runbook NAME" in index
