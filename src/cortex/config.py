"""Settings are data: one table of (name, type, default, range, help) and one loader.

Precedence, highest first: a flag (``--set name=value``), the ``CORTEX_<NAME>`` environment
variable, ``config.toml`` in ``CORTEX_HOME`` (top level or a ``[session_persistence]`` table),
the spec's ``openclaw.json`` block (``plugins.cortex.session_persistence``) in ``CORTEX_HOME``,
then the default. Only entry points pass the environment in; nothing else reads it.
Paths may use ``~`` and ``{home}`` (the Cortex home).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

import cortex.codecache  # noqa: F401 - installs itself before the classes below are made
from cortex.errors import ConfigError

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class Setting:
    """One row of the settings table: its name, type, default, range and help."""

    name: str
    kind: type
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    legacy_env: tuple[str, ...] = ()
    """Older variable names read after ``CORTEX_<NAME>``, in this order."""
    env: str | None = None
    """The variable read instead of ``CORTEX_<NAME>``, when the setting has a shorter one."""
    secret: bool = False
    """Never shown: ``cortex config show`` masks it."""
    choices: tuple[str, ...] = ()
    """A text setting's only values, when it has a fixed set."""

    @property
    def env_var(self) -> str:
        return self.env or "CORTEX_" + self.name.upper()

    def range_text(self) -> str:
        if self.kind is bool:
            return "true/false"
        if self.kind is Path:
            return "path"
        if self.kind is str:
            return "|".join(self.choices) or "text"
        return f"{self.minimum:g}-{self.maximum:g}"


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "enabled",
        bool,
        True,
        "Master switch: false turns restore off (sessions are still recorded).",
    ),
    Setting("lookback_days", int, 7, "How many days back prior sessions are scored.", 1, 30),
    Setting(
        "relevance_threshold",
        float,
        0.25,
        "Minimum relevance score for a prior session to be restored.",
        0.1,
        1.0,
    ),
    Setting(
        "max_sessions_scored",
        int,
        3,
        "Most prior sessions that contribute to one restoration.",
        1,
        10,
    ),
    Setting(
        "max_inherited_pins",
        int,
        5,
        "Most working-memory pins inherited at start (working memory holds 10).",
        1,
        8,
    ),
    Setting(
        "decay_min_floor",
        float,
        0.3,
        "Floor of the decay factor, and the confidence below which an inherited pin is dropped.",
        0.1,
        0.9,
    ),
    Setting(
        "critical_inheritance_days",
        int,
        7,
        "CRITICAL pins are inherited from sessions this recent, whatever their score.",
        1,
        30,
    ),
    Setting(
        "sessions_dir",
        Path,
        "{home}/sessions",
        "Directory of the JSON mirror of each session, and of the archive.",
    ),
    Setting(
        "debug",
        bool,
        False,
        "Print the scoring breakdown of every restoration to stderr (also CORTEX_SESSION_DEBUG=1).",
    ),
    Setting(
        "pipeline_state_path",
        Path,
        "{home}/pipeline/state.json",
        "The pipeline state file whose active tasks are pending work.",
    ),
    Setting(
        "working_memory_path",
        Path,
        "{home}/working_memory.json",
        "The OpenClaw-compatible working-memory file that mirrors the current session's "
        "pins (OpenClaw: ~/.openclaw/workspace/memory/working_memory.json).",
    ),
    Setting(
        "lease_seconds",
        int,
        300,
        "An open session idle this long (and not known alive) counts as crashed.",
        10,
        604800,
    ),
    Setting(
        "working_memory_ttl_hours",
        float,
        24.0,
        "Hours a working-layer memory lives before it expires (also read from "
        "MEMORIES_WORKING_MEMORY_TTL_HOURS, then MCP_WORKING_MEMORY_TTL_HOURS).",
        0.01,
        8760,
        ("MEMORIES_WORKING_MEMORY_TTL_HOURS", "MCP_WORKING_MEMORY_TTL_HOURS"),
    ),
    Setting(
        "compaction_token_budget",
        int,
        80000,
        "Tokens of session events since the last compaction that make compaction due "
        "(the protocol's soft cap: 80% of a 100K window).",
        1000,
        10000000,
    ),
    Setting(
        "compaction_turn_budget",
        int,
        100,
        "Turns since the last compaction that make compaction due.",
        1,
        100000,
    ),
    Setting(
        "compaction_inactivity_minutes",
        int,
        30,
        "Idle minutes after which a session with new turns is due for compaction.",
        1,
        10080,
    ),
    Setting(
        "raise_errors",
        bool,
        False,
        "Re-raise unexpected errors with their traceback instead of failing open (a failed "
        "restoration starts cold, a bridge request answers an error): for debugging and tests.",
    ),
    Setting(
        "server_url",
        str,
        "",
        "A Cortex team server (http[s]://host:port): when set, hooks, CLI, MCP and the bridge "
        "talk to it instead of the local database (client mode).",
        env="CORTEX_SERVER",
    ),
    Setting(
        "api_key",
        str,
        "",
        "The API key (ctx_<id>_<secret>) sent to server_url as a Bearer token; never shown.",
        secret=True,
    ),
    Setting(
        "server_timeout_seconds",
        float,
        2.0,
        "Bound of each whole request to server_url (connecting, sending, reading the "
        "answer); a request that takes longer is spooled to the local journal and the call "
        "returns.",
        0.05,
        60,
    ),
    Setting(
        "tasks_root",
        Path,
        "{home}/tasks",
        "Where task folders live (tasks_root/<slug>/json, work, logs); a relative path is "
        "taken from the working directory.",
    ),
    Setting(
        "protocol_service_name",
        str,
        "cortex",
        "The [<service>] prefix of the session-continuity log lines.",
    ),
    Setting(
        "governance_config_path",
        Path,
        ".agentic-governance/config.json",
        "The repository file whose smoke_command the startup ritual runs as its health check "
        "(relative: from the working directory).",
    ),
    Setting(
        "smoke_timeout_seconds",
        float,
        300.0,
        "Time limit of the startup ritual's smoke command; a command that runs longer is "
        "stopped and the health check fails.",
        1,
        86400,
    ),
    Setting(
        "session_complete_command",
        str,
        "",
        "A command (split like a shell would, never run through one) that gets each "
        "session.complete payload as JSON on stdin; empty: none.",
    ),
    Setting(
        "session_complete_webhook",
        str,
        "",
        "An http(s) URL each session.complete payload is POSTed to as JSON; empty: none.",
    ),
    Setting(
        "session_complete_timeout_seconds",
        float,
        10.0,
        "Time limit of the session.complete command and webhook; a failure is logged and the "
        "event stays in the event log.",
        0.1,
        600,
    ),
    Setting(
        "model_context_window",
        int,
        200_000,
        "The model's stable context window in tokens; a session's soft cap is 80 % of it.",
        1_000,
        10_000_000,
    ),
    Setting(
        "safety_probe_command",
        str,
        "",
        "A command that gets a session's last 2,000 tokens on stdin and prints JSON "
        "{refusal_rate_window, baseline_refusal_rate, severity} at each task checkpoint; "
        "empty: no probe.",
    ),
    Setting(
        "file_mode_enabled",
        bool,
        False,
        "OpenClaw file mode: the bridge reads memory.md and today's and yesterday's daily logs "
        "into a new session, appends a checkpoint to the daily log before a compaction, and "
        "writes a snapshot file on /new or /reset (also MEMORY_OPENCLAW_FILE_MODE_ENABLED).",
        legacy_env=("MEMORY_OPENCLAW_FILE_MODE_ENABLED",),
    ),
    Setting(
        "file_mode_workspace",
        Path,
        "{home}/workspace",
        "The workspace whose memory files file mode keeps (OpenClaw: ~/.openclaw/workspace; "
        "the bridge uses its --workspace).",
    ),
    Setting(
        "file_mode_layout",
        str,
        "rfc",
        "rfc: memory.md, memory/daily/YYYY-MM-DD.md, memory/snapshots/YYYY-MM-DD/SLUG.md; "
        "openclaw: MEMORY.md (or memory.md), memory/YYYY-MM-DD.md, memory/YYYY-MM-DD-SLUG.md.",
        choices=("rfc", "openclaw"),
    ),
    Setting(
        "file_mode_memory_lines",
        int,
        200,
        "Most lines of the semantic file (memory.md); memories that do not fit stay in the "
        "database, highest ranked first in the file.",
        20,
        100000,
    ),
    Setting(
        "memory_session_enabled",
        bool,
        True,
        "Session memory: the session block and session summary of get_context, and the "
        "worker's closing of idle sessions (also read from MEMORY_SESSION_ENABLED).",
        legacy_env=("MEMORY_SESSION_ENABLED",),
    ),
    Setting(
        "memory_compaction_enabled",
        bool,
        True,
        "The compaction trigger: false never reports compaction as due (a checkpoint a harness "
        "asks for is still written; also read from MEMORY_COMPACTION_ENABLED).",
        legacy_env=("MEMORY_COMPACTION_ENABLED",),
    ),
    Setting(
        "memory_consolidation_enabled",
        bool,
        True,
        "Consolidation (duplicates merged, newer explicit truths supersede, conflicts linked); "
        "also read from MEMORY_CONSOLIDATION_ENABLED.",
        legacy_env=("MEMORY_CONSOLIDATION_ENABLED",),
    ),
    Setting(
        "memory_procedural_enabled",
        bool,
        True,
        "Procedural memory: procedures ranked first in context when the task matches; also "
        "read from MEMORY_PROCEDURAL_ENABLED.",
        legacy_env=("MEMORY_PROCEDURAL_ENABLED",),
    ),
    Setting(
        "embedder",
        str,
        "",
        "Hybrid search: minilm (the embeddings extra, a local model), or the path of a "
        "directory holding a sentence-transformers model exported to ONNX, embeds each memory "
        "as it is added, and a search adds a bonus for closeness in meaning to the lexical "
        "ranking; empty: lexical search alone.",
    ),
    Setting(
        "search_widening",
        bool,
        True,
        "With an embedder, a search also looks for the words that the memories closest to the "
        "question in meaning use for its words (query expansion); false: its own words alone.",
    ),
    Setting(
        "consolidation_shadow",
        bool,
        True,
        "Scheduled consolidation (cortex worker) only records what it would change (shadow "
        "mode) until this is false.",
    ),
    Setting(
        "consolidation_similarity",
        float,
        0.8,
        "Shingle similarity (Jaccard) at or above which two memories are near duplicates.",
        0.5,
        1.0,
    ),
    Setting(
        "consolidation_related",
        float,
        0.6,
        "Word overlap (Jaccard) at or above which two memories are about the same subject "
        "(a newer explicit one supersedes, otherwise they are linked as a conflict).",
        0.3,
        1.0,
    ),
    Setting(
        "consolidation_batch",
        int,
        2000,
        "Most live memories (newest first) one consolidation run compares.",
        10,
        100000,
    ),
    Setting(
        "consolidation_extractor",
        str,
        "",
        "A candidate extractor as module:callable (e.g. a model-backed one); empty: the "
        "built-in rules, no model.",
    ),
    Setting(
        "stale_after_days",
        int,
        90,
        "A memory not confirmed or changed for this many days is stale (cortex memory stale).",
        1,
        36500,
    ),
    Setting(
        "session_idle_close_minutes",
        int,
        120,
        "The worker closes an open session idle this long whose lease has lapsed.",
        5,
        10080,
    ),
    Setting(
        "archive_after_days",
        int,
        30,
        "The worker archives sessions that ended more than this many days ago.",
        1,
        36500,
    ),
    Setting(
        "worker_interval_seconds",
        int,
        60,
        "Seconds between two passes of cortex worker (each pass runs the jobs that are due).",
        1,
        86400,
    ),
    Setting(
        "worker_archive_hours",
        float,
        24.0,
        "Hours between two archive jobs of the worker.",
        0.01,
        8760,
    ),
    Setting(
        "worker_consolidate_hours",
        float,
        6.0,
        "Hours between two consolidation jobs of the worker.",
        0.01,
        8760,
    ),
    Setting(
        "hook_migrate_max_mb",
        float,
        32.0,
        "Largest database (MB) a hook migrates itself after an upgrade (a larger one is "
        "migrated by a background process the hook starts), or copies into memory to answer "
        "a start from when the home is read-only.",
        0,
        1_000_000,
    ),
)
SETTINGS_BY_NAME = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class Config:
    """Resolved settings plus the home they were resolved for.

    Built by ``load_config`` only: the defaults live in ``SETTINGS``, once.
    """

    home: Path
    enabled: bool
    lookback_days: int
    relevance_threshold: float
    max_sessions_scored: int
    max_inherited_pins: int
    decay_min_floor: float
    critical_inheritance_days: int
    sessions_dir: Path
    debug: bool
    pipeline_state_path: Path
    working_memory_path: Path
    lease_seconds: int
    working_memory_ttl_hours: float
    compaction_token_budget: int
    compaction_turn_budget: int
    compaction_inactivity_minutes: int
    raise_errors: bool
    server_url: str
    api_key: str
    server_timeout_seconds: float
    tasks_root: Path
    protocol_service_name: str
    governance_config_path: Path
    smoke_timeout_seconds: float
    session_complete_command: str
    session_complete_webhook: str
    session_complete_timeout_seconds: float
    model_context_window: int
    safety_probe_command: str
    file_mode_enabled: bool
    file_mode_workspace: Path
    file_mode_layout: str
    file_mode_memory_lines: int
    memory_session_enabled: bool
    memory_compaction_enabled: bool
    memory_consolidation_enabled: bool
    memory_procedural_enabled: bool
    embedder: str
    search_widening: bool
    consolidation_shadow: bool
    consolidation_similarity: float
    consolidation_related: float
    consolidation_batch: int
    consolidation_extractor: str
    stale_after_days: int
    session_idle_close_minutes: int
    archive_after_days: int
    worker_interval_seconds: int
    worker_archive_hours: float
    worker_consolidate_hours: float
    hook_migrate_max_mb: float

    @property
    def db_path(self) -> Path:
        return self.home / "brain.db"

    def as_dict(self, *, reveal: bool = False) -> dict[str, Any]:
        """Every value, JSON-ready; secrets masked unless ``reveal``."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = str(value) if isinstance(value, Path) else value
            setting = SETTINGS_BY_NAME.get(f.name)
            if setting is not None and setting.secret and not reveal:
                out[f.name] = mask(str(value))
        if not reveal:
            out["server_url"] = mask_url(self.server_url)
        return out

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"Config({shown})"


def mask(secret: str) -> str:
    """A secret as shown: its key id part at most (``ctx_abc_****``), never the secret."""
    if not secret:
        return ""
    prefix, _, rest = secret.partition("_")
    key_id = rest.partition("_")[0] if prefix == "ctx" and "_" in rest else ""
    return f"ctx_{key_id}_****" if key_id else "****"


def mask_url(url: str) -> str:
    """``url`` as shown: a password in it and its query and fragment as ``****``
    (``http://admin:****@host/?****``); the user and host stay, to tell which one it is."""
    if not any(c in url for c in "@?#"):
        return url
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return "****"
    user, at, host = parts.netloc.rpartition("@")
    if at:
        user = user.partition(":")[0] + (":****" if ":" in user else "")
    netloc = f"{user}@{host}" if at else host
    query, fragment = ("****" if part else "" for part in (parts.query, parts.fragment))
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def default_home(env: Mapping[str, str]) -> Path:
    """``CORTEX_HOME`` or ``~/.cortex``."""
    raw = env.get("CORTEX_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".cortex"


def coerce(setting: Setting, raw: Any, home: Path, origin: str) -> Any:
    """Turn a raw value (string from a flag or env, typed from a file) into a checked value."""
    where = f"{setting.name}={raw!r} (from {origin})"
    if setting.kind is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where} is not true or false; use true or false")
    if setting.kind is Path:
        if not str(raw).strip():  # (an unset variable: not the current directory, which "" is)
            raise ConfigError(f"{where} is empty; give a path, or leave it out for the default")
        text = str(raw).replace("{home}", str(home))
        return Path(os.path.expanduser(text))
    if setting.kind is str:
        text = str(raw).strip()
        if setting.choices and text not in setting.choices:
            raise ConfigError(f"{where} is out of range; use {' or '.join(setting.choices)}")
        return text
    try:
        value = setting.kind(raw) if not isinstance(raw, bool) else None
    except (TypeError, ValueError, OverflowError):  # (OverflowError: int() of an infinity)
        value = None
    if value is None or (setting.kind is int and isinstance(raw, float) and raw != int(raw)):
        kind = "an integer" if setting.kind is int else "a number"
        raise ConfigError(f"{where}: expected {kind}; use a number in {setting.range_text()}")
    assert setting.minimum is not None and setting.maximum is not None
    if not setting.minimum <= value <= setting.maximum:
        raise ConfigError(f"{where} is out of range; use a value in {setting.range_text()}")
    return value


CONFIG_FILES = ("config.toml", "openclaw.json")
SECTION = "session_persistence"
"""The one table of ``config.toml`` (settings may also sit at its top level)."""
"""The settings files of a home, highest precedence first: what a process that keeps settings
between uses watches for an edit."""


def _file_values(home: Path) -> list[tuple[dict[str, Any], str]]:
    """Raw values from config.toml and openclaw.json in ``home``, highest precedence first."""
    found: list[tuple[dict[str, Any], str]] = []
    toml_path, json_path = (home / name for name in CONFIG_FILES)
    if _settings_file(toml_path):
        import tomllib  # only when there is a file: it costs ~20 ms of a hook's start

        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{toml_path} is not valid TOML ({exc}); fix or remove it") from exc
        block = data.get(SECTION)
        others = sorted(k for k, v in data.items() if isinstance(v, dict) and k != SECTION)
        if others:
            raise ConfigError(
                f"unknown table [{others[0]}] in {toml_path}; put settings at the top level or in "
                "[session_persistence] (see `cortex config show` for names)"
            )
        merged = {k: v for k, v in data.items() if not isinstance(v, dict)}
        if isinstance(block, dict):
            merged.update(block)
        found.append((merged, str(toml_path)))
    if _settings_file(json_path):
        try:
            data = json.loads(json_path.read_text(encoding="utf-8"))
            block = data["plugins"]["cortex"][SECTION]
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{json_path} is not valid JSON ({exc}); fix or remove it") from exc
        except (KeyError, TypeError):
            block = {}
        if isinstance(block, dict):
            found.append((block, str(json_path)))
    return found


def _settings_file(path: Path) -> bool:
    """Whether the settings file ``path`` is there; a home the system refuses to look into
    (a name longer than it takes) is one line, not an ``OSError``."""
    try:
        return path.is_file()
    except OSError as exc:
        raise ConfigError(
            f"cannot look for {path} ({exc.strerror}); point --home or CORTEX_HOME at a "
            "usable directory"
        ) from exc


def load_config(
    home: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    files: bool = True,
) -> Config:
    """Resolve every setting for ``home`` from overrides > env > files > defaults.

    ``env`` defaults to the process environment; pass ``{}`` to ignore it. ``files=False``
    ignores the files in ``home`` too.
    """
    env = env if env is not None else os.environ
    home = Path(home).expanduser() if home else default_home(env).expanduser()
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(SETTINGS_BY_NAME))
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]!r}; see `cortex config show` for names")
    layers = _file_values(home) if files else []
    for values, origin in layers:
        bad = sorted(k for k in values if k not in SETTINGS_BY_NAME)
        if bad:
            raise ConfigError(
                f"unknown setting {bad[0]!r} in {origin}; see `cortex config show` for names"
            )
    resolved: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.name in overrides:
            resolved[setting.name] = coerce(setting, overrides[setting.name], home, "flag")
        elif env_name := _env_name(setting, env):
            resolved[setting.name] = coerce(setting, env[env_name], home, env_name)
        else:
            for values, origin in layers:
                if setting.name in values:
                    resolved[setting.name] = coerce(setting, values[setting.name], home, origin)
                    break
            else:
                resolved[setting.name] = coerce(setting, setting.default, home, "default")
    if env.get("CORTEX_SESSION_DEBUG", "").strip() not in ("", "0"):
        resolved["debug"] = True
    return Config(home=home, **resolved)


def _env_name(setting: Setting, env: Mapping[str, str]) -> str | None:
    """The first of ``CORTEX_<NAME>`` and the setting's legacy variables that is set."""
    for name in (setting.env_var, *setting.legacy_env):
        if name in env:
            return name
    return None


def parse_assignments(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``, for ``--set``."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set {pair!r} is not NAME=VALUE; e.g. --set lookback_days=3")
        out[name.strip()] = value.strip()
    return out
