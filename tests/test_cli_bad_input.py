"""The real ``cortex`` command line on bad input and in a bad environment: one line on stderr
that names the next step, exit 2 for a usage error and 1 for any other, no traceback, and
nothing written that the failed command should not have written."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import cortex


def one_line(result: object) -> str:
    """The stderr of a failed command, checked to be a single ``error:`` line."""
    stderr = result.stderr  # type: ignore[attr-defined]
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr and "unexpected" not in stderr, stderr
    return str(stderr.rstrip("\n"))


def test_an_infinite_integer_setting_in_config_toml_is_a_settings_error(home: Path) -> None:
    """TOML's ``inf`` for a whole-number setting: int() of it overflows, which was an
    "unexpected OverflowError" instead of the settings error a word or a fraction gets."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("lookback_days = inf\n")
    result = cortex(home, "session", "list")
    assert result.returncode == 1
    assert one_line(result) == (
        f"error: lookback_days=inf (from {home / 'config.toml'}): expected an integer; "
        "use a number in 1-30"
    )
