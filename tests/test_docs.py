"""Docs are tested: every setting documented, the CLI reference current, docs link up."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from cortex.config import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_every_setting_is_documented() -> None:
    text = (DOCS / "settings.md").read_text()
    for setting in SETTINGS:
        assert f"`{setting.name}`" in text, setting.name
        assert f"`{setting.env_var}`" in text, setting.env_var


def test_cli_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, "run: .venv/bin/python scripts/gen_cli_reference.py"


def test_readme_names_the_two_commands_first() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert [line.split()[0:2] for line in block[:2]] == [["make", "demo"], ["make", "test"]]


def test_docs_links_resolve() -> None:
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        for part in page.read_text().split("](")[1:]:
            target = part.split(")", 1)[0]
            if target.startswith(("http", "#")):
                continue
            assert (page.parent / target.split("#")[0]).exists(), f"{page.name} -> {target}"


def test_the_repository_cites_nothing_a_reader_cannot_open() -> None:
    # The specifications Cortex was built from are not in the repository: docs, help text,
    # comments and tests state decisions instead of citing requirement ids or outside files.
    cited = re.compile(
        r"\b(?:N?FR|AC)-\d{3}\b|\bAPI guide \d|\bdesign \d+\.\d|shared/spec|\.\./shared/(?!data)"
        r"|ARCHITECTURE\.md|memory-lifecycle-rfc|session-continuity-protocol\.md"
        r"|\bsection \d+\.\d|[Pp]rotocol \d+\.\d|\bRFC (?:phases? )?\d(?!\d{3})"
    )
    found = []
    for folder in ("src", "docs", "tests", "bench", "scripts"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".md", ".js", ".html", ".txt", ".toml"} and path.is_file():
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if cited.search(line) and path.name != "test_docs.py":
                        found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert found == [], "\n".join(found)


def test_the_hook_table_lists_exactly_the_installed_events() -> None:
    from cortex.adapters.hooks.install_hosts import (
        CLAUDE_HOOKS,
        CODEX_HOOKS,
        CURSOR_EVENTS,
        GEMINI_HOOKS,
    )

    text = (DOCS / "hooks.md").read_text().split("## What each event does", 1)[1]
    rows = [line.split("|")[1:5] for line in text.splitlines() if line.startswith("| ")][2:]
    columns: list[set[str]] = [set(), set(), set(), set()]
    for row in rows:
        for column, cell in zip(columns, row, strict=True):
            for name in re.split(r"[,/]", cell.replace("(Failure)", ", PostToolUseFailure")):
                if name.strip():
                    column.add(name.strip())
    installed = [
        {h.event for h in CLAUDE_HOOKS},
        {h.event for h in CODEX_HOOKS},
        {h.event for h in GEMINI_HOOKS},
        set(CURSOR_EVENTS),
    ]
    assert columns == installed


def test_the_bridge_methods_in_the_docs_are_the_bridge_methods() -> None:
    from cortex.adapters.openclaw.methods import METHODS

    text = (DOCS / "mcp.md").read_text().split("## `cortex bridge` (OpenClaw)", 1)[1]
    listed = text.split("Methods:", 1)[1].split(".\n", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", listed)) == set(METHODS)


def test_exit_codes_are_as_documented(tmp_path: Path) -> None:
    def run(*args: str) -> int:
        env = {"CORTEX_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
        command = [sys.executable, "-m", "cortex.entry", *args]
        return subprocess.run(command, capture_output=True, env=env).returncode

    assert "exits 2" in (DOCS / "cli.md").read_text()
    assert run("session", "show", "nope") == 1
    assert run("session", "start", "--no-such-option") == 2
    assert run("pin", "add") == 2
