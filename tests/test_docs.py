"""Docs are tested: every setting documented, the CLI reference current, docs link up."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from cortex.config import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_every_setting_is_documented() -> None:
    text = (DOCS / "settings.md").read_text()
    for setting in SETTINGS:
        assert f"`{setting.name}`" in text, setting.name
        assert f"`{setting.env_var}`" in text, setting.env_var


def _settings_rows() -> dict[str, list[str]]:
    rows = {}
    for line in (DOCS / "settings.md").read_text().splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells
    return rows


def test_the_settings_table_gives_each_default_range_and_variable_the_code_has() -> None:
    rows = _settings_rows()
    assert sorted(rows) == sorted(s.name for s in SETTINGS)
    for setting in SETTINGS:
        _, default, allowed = (cell.strip("`") for cell in rows[setting.name][:3])
        if setting.kind in (int, float):
            assert float(default) == setting.default, setting.name
            low, high = (float(v) for v in allowed.split("-"))
            assert (low, high) == (setting.minimum, setting.maximum), setting.name
        elif setting.kind is bool:
            assert (default, allowed) == (str(setting.default).lower(), "true/false")
        elif setting.choices:
            assert default == setting.default, setting.name
            assert re.findall(r"`(\w+)`", rows[setting.name][2]) == list(setting.choices)
        elif setting.default == "":
            assert default.startswith("empty"), setting.name
        else:
            assert default == str(setting.default), setting.name
        named = re.findall(r"`([A-Z_]+)`", rows[setting.name][3])
        assert named == [setting.env_var, *setting.legacy_env], setting.name


def _documented_command_lines() -> Iterator[tuple[str, str]]:
    """Every ``cortex ...`` line of the docs' code blocks (not the benchmark records, the
    decisions table or the generated reference), with its continuation lines; a ``$ `` line
    whose shown answer is an ``error:`` is an error on purpose and left out."""
    skip = {"benchmarks.md", "benchmarks-history.md", "spec-decisions.md", "cli-reference.md"}
    pages = [ROOT / "README.md", *(p for p in sorted(DOCS.glob("*.md")) if p.name not in skip)]
    for page in pages:
        for language, block in re.findall(r"```([a-z]*)\n(.*?)```", page.read_text(), re.S):
            if language not in ("", "bash", "sh"):
                continue
            lines = block.replace("\\\n", " ").splitlines()
            for number, line in enumerate(lines):
                answer = lines[number + 1] if number + 1 < len(lines) else ""
                if line.startswith("$ ") and answer.startswith("error:"):
                    continue
                for part in re.split(r" \| |&&|;", line.removeprefix("$ ")):
                    words = part.strip().removeprefix(".venv/bin/").split(" ")
                    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                        words = words[1:]  # an environment assignment before the command
                    if words[:1] == ["cortex"] and len(words) > 1:
                        yield page.name, " ".join(words)


def _help_example_lines() -> Iterator[tuple[str, str]]:
    from cortex.adapters.cli.main import cli

    def walk(group: click.Group, ctx: click.Context) -> Iterator[click.Command]:
        yield group
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                yield from walk(command, click.Context(command, info_name=name, parent=ctx))
            elif command is not None:
                yield command

    for command in walk(cli, click.Context(cli, info_name="cortex")):
        lines = iter((command.help or "").replace("\\\n", " ").splitlines())
        for line in lines:
            example = line.strip()
            while example.startswith("cortex ") and _unclosed(example):
                example += " " + next(lines).strip()  # a quoted value over several lines
            if example.startswith("cortex "):
                yield "--help", example


def _unclosed(line: str) -> bool:
    try:
        shlex.split(line)
    except ValueError:
        return True
    return False


def _parse(line: str) -> None:
    """Parse ``line`` as the CLI would (its command path, options, argument types), without
    running the command. Placeholders (``<id>``, ``[<id>]``) stand for an id."""
    from cortex.adapters.cli.main import _json_first, cli

    text = re.sub(r"\[?<[^>]+>\]?", "3f2a9c1e", line.split("  #")[0])
    command: click.Command = cli
    parent: click.Context | None = None
    name, args = "cortex", _json_first(shlex.split(text)[1:])
    while True:
        ctx = command.make_context(name, args, parent=parent)
        if not isinstance(command, click.Group):
            return
        rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]
        if not rest:
            return
        found, sub, args = command.resolve_command(ctx, rest)
        assert found is not None and sub is not None
        command, parent, name = sub, ctx, found


@pytest.mark.parametrize(("where", "line"), [*_documented_command_lines(), *_help_example_lines()])
def test_every_documented_command_line_parses(where: str, line: str) -> None:
    # A renamed command or option, or a value the parser refuses, fails here, not on a reader.
    try:
        _parse(line)
    except click.exceptions.Exit:
        pass  # --help, --version


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


def test_each_decision_has_one_row_numbered_in_order() -> None:
    """Rows of the decisions table are cited by number from code and docs: each number is used
    once and the numbers rise down the table (57 was never used), so a merged row cannot shadow
    another and no row is left unnumbered."""
    rows = re.findall(r"^\| (\w+) \|", (DOCS / "spec-decisions.md").read_text(), re.M)
    numbers = [int(row) for row in rows if row.isdigit()]
    assert len(numbers) > 100 and "NN" not in rows
    assert numbers == sorted(set(numbers))
