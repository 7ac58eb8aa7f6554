"""Write docs/cli-reference.md from the CLI's own help, so the reference never drifts.

Run: ``.venv/bin/python scripts/gen_cli_reference.py`` (tests/test_docs.py fails when the
committed file differs from what this prints).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cortex.adapters.cli.main import cli

OUT = Path(__file__).resolve().parent.parent / "docs" / "cli-reference.md"


def walk(
    group: click.Group, path: tuple[str, ...], parent: click.Context | None = None
) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group`` (lazy ones included), depth first, sorted by name."""
    out: list[tuple[tuple[str, ...], click.Command]] = [(path, group)]
    ctx = click.Context(group, info_name=" ".join(("cortex", *path)), parent=parent)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            out += walk(command, (*path, name), ctx)
        elif command is not None:
            out.append(((*path, name), command))
    return out


def render() -> str:
    parts = [
        "# CLI reference\n",
        "Generated from `cortex --help` by `scripts/gen_cli_reference.py`; do not edit.\n",
        "See [cli.md](cli.md) for a guided tour.\n",
    ]
    for path, command in walk(cli, ()):
        name = " ".join(("cortex", *path))
        with click.Context(
            command, info_name=name, terminal_width=100, max_content_width=100
        ) as ctx:
            text = command.get_help(ctx)
        parts.append(f"## {name}\n\n```\n{text}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if OUT.read_text() == text else 1)
    OUT.write_text(text)
    print(f"wrote {OUT}")
