"""Settings: precedence flag > env > config.toml > openclaw.json > default, and range checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortex.config import SETTINGS, load_config, parse_assignments
from cortex.errors import ConfigError


def test_defaults_match_the_spec_table(tmp_path: Path) -> None:
    c = load_config(tmp_path, {})
    assert (
        c.enabled,
        c.lookback_days,
        c.relevance_threshold,
        c.max_sessions_scored,
        c.max_inherited_pins,
        c.decay_min_floor,
        c.critical_inheritance_days,
        c.debug,
        c.lease_seconds,
    ) == (True, 7, 0.25, 3, 5, 0.3, 7, False, 300)
    assert c.sessions_dir == tmp_path / "sessions"
    assert c.working_memory_path == tmp_path / "working_memory.json"


def test_precedence(tmp_path: Path) -> None:
    (tmp_path / "openclaw.json").write_text(
        json.dumps(
            {
                "plugins": {
                    "cortex": {
                        "session_persistence": {
                            "lookback_days": 2,
                            "max_sessions_scored": 9,
                            "max_inherited_pins": 2,
                        }
                    }
                }
            }
        )
    )
    (tmp_path / "config.toml").write_text(
        "lookback_days = 3\n[session_persistence]\nmax_sessions_scored = 4\n"
    )
    env = {"CORTEX_LOOKBACK_DAYS": "5"}
    c = load_config(tmp_path, env, {"lookback_days": "6"})
    assert c.lookback_days == 6
    assert load_config(tmp_path, env).lookback_days == 5
    assert load_config(tmp_path, {}).lookback_days == 3
    assert load_config(tmp_path, {}).max_sessions_scored == 4
    assert load_config(tmp_path, {}).max_inherited_pins == 2


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("lookback_days", "0", "out of range; use a value in 1-30"),
        (
            "relevance_threshold",
            "abc",
            "'abc' \\(from flag\\): expected a number; use a number in 0.1-1",
        ),
        ("max_inherited_pins", "9", "out of range; use a value in 1-8"),
        ("enabled", "maybe", "is not true or false"),
        ("lookback_days", "2.5", "expected an integer; use a number in 1-30"),
        ("file_mode_layout", "xyz", "'xyz' \\(from flag\\) is out of range; use rfc or openclaw"),
    ],
)
def test_bad_values_are_one_line_errors(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_config(tmp_path, {}, {name: value})
    assert "\n" not in str(info.value)


def test_unknown_setting_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting 'nope'"):
        load_config(tmp_path, {}, {"nope": "1"})
    (tmp_path / "config.toml").write_text("lookback_days = [")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(tmp_path, {})
    (tmp_path / "config.toml").write_text("typo_days = 3\n")
    with pytest.raises(ConfigError, match="unknown setting 'typo_days' in"):
        load_config(tmp_path, {})


def test_a_table_other_than_session_persistence_is_refused_not_ignored(tmp_path: Path) -> None:
    """A setting under a mistyped table (``[cortex]``) was silently ignored."""
    (tmp_path / "config.toml").write_text("lookback_days = 3\n[cortex]\nlookback_days = 9\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, {})
    assert str(info.value) == (
        f"unknown table [cortex] in {tmp_path / 'config.toml'}; put settings at the top level "
        "or in [session_persistence] (see `cortex config show` for names)"
    )
    (tmp_path / "config.toml").write_text("[session_persistence]\nlookback_days = 9\n")
    assert load_config(tmp_path, {}).lookback_days == 9


def test_session_debug_env_and_paths(tmp_path: Path) -> None:
    c = load_config(tmp_path, {"CORTEX_SESSION_DEBUG": "1", "CORTEX_SESSIONS_DIR": "{home}/mirror"})
    assert c.debug is True and c.sessions_dir == tmp_path / "mirror"


def test_parse_assignments() -> None:
    assert parse_assignments(["a=1", "b = x"]) == {"a": "1", "b": "x"}
    with pytest.raises(ConfigError, match="is not NAME=VALUE"):
        parse_assignments(["novalue"])


def test_every_setting_has_help_and_a_valid_default(tmp_path: Path) -> None:
    for setting in SETTINGS:
        assert setting.help.endswith(")") or setting.help.endswith(".")
    load_config(tmp_path, {})


def test_config_fields_are_exactly_the_settings() -> None:
    from dataclasses import fields

    from cortex.config import Config

    assert [f.name for f in fields(Config)] == ["home", *(s.name for s in SETTINGS)]


def test_load_config_takes_the_home_as_a_str_or_a_path(tmp_path: Path) -> None:
    as_str = load_config(str(tmp_path / "h"), {})
    assert as_str.home == load_config(tmp_path / "h", {}).home == tmp_path / "h"
    assert as_str.db_path == tmp_path / "h" / "brain.db"
