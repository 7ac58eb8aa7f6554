"""The hook path's small files in the Cortex home: its log, per-host status and per-session state.

The standard library and ``cortex.files`` only, and none of these files is data Cortex cannot
lose: they are written atomically (``atomic_write_text``) but not fsynced, and a failure to
write one is swallowed (the log line then goes to stderr, which hosts show only in their
debug logs).

- ``logs/hooks.log``: one line per problem (bad input, an error), capped at ``LOG_MAX_BYTES``
  and rotated once to ``hooks.log.1``.
- ``hooks/status/<host>.json``: the last event each host sent, when, and whether it was
  handled, for ``cortex doctor``.
- ``hooks/latency.jsonl``: one line per handled event (``at``, ``host``, ``event``, ``ms``:
  the time from the event's input to its answer, interpreter start-up not included), capped
  at ``LATENCY_MAX_BYTES`` and rotated once; the dashboard's health page reads it.
- ``hooks/sessions/<session id>.json``: what the hooks remember about a session between
  processes (whether its start injected context, whether it had a prompt, the last compaction
  summary); a session's file goes at its end, and a start removes those idle for a day (of
  sessions that sent no end) when the stamp of its last look (``hooks/sessions.pruned``) is
  an hour old.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from cortex.errors import StorageError
from cortex.files import atomic_write_text, read_json

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

LOG_MAX_BYTES = 1_000_000
MAX_LOG_LINE = 600
LATENCY_FILE = "latency.jsonl"
LATENCY_MAX_BYTES = 200_000
"""About 2,500 events; the file is then rotated once to ``latency.jsonl.1``."""


def utc_stamp() -> str:
    """The wall clock in UTC ISO 8601 (bookkeeping, so not the injected clock)."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def log_line(home: Path, message: str) -> None:
    """Append one redacted line to ``logs/hooks.log``; stderr if the log cannot be written."""
    line = " ".join(f"{utc_stamp()} {_redacted(message)}".split())[:MAX_LOG_LINE] + "\n"
    if not _append_capped(home / "logs" / "hooks.log", line, LOG_MAX_BYTES):
        try:
            sys.stderr.write("cortex hook: " + line)
        except (OSError, ValueError):
            pass


def record_latency(home: Path, host: str, event: str, elapsed_ms: float) -> None:
    """Append how long one event took to ``hooks/latency.jsonl`` (what the dashboard's health
    page reads); a failure to write it is ignored."""
    line = json.dumps({"at": utc_stamp(), "host": host, "event": event[:80], "ms": elapsed_ms})
    _append_capped(latency_path(home), line + "\n", LATENCY_MAX_BYTES)


def latency_path(home: Path) -> Path:
    return home / "hooks" / LATENCY_FILE


def _append_capped(path: Path, line: str, max_bytes: int) -> bool:
    """Append ``line`` (one write, O_APPEND) after rotating a file over ``max_bytes`` to
    ``<name>.1``; False when it could not be written."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            if path.stat().st_size > max_bytes:
                os.replace(path, path.with_name(path.name + ".1"))
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def _redacted(message: str) -> str:
    try:
        from cortex.core.redaction import redact
    except Exception:  # noqa: BLE001 - the log line must be written whatever fails
        return message
    return redact(message)


def write_small_json(path: Path, data: Any) -> bool:
    """Atomically replace ``path`` with ``data`` (no fsync); False if it could not be written."""
    try:
        atomic_write_text(path, json.dumps(data, ensure_ascii=False), durable=False)
    except (StorageError, TypeError, ValueError):
        return False
    return True


def read_small_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` when missing or unreadable."""
    try:
        data = read_json(path)
    except (StorageError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def status_path(home: Path, host: str) -> Path:
    return home / "hooks" / "status" / f"{host}.json"


def record_status(
    home: Path, host: str, event: str, session_id: str | None, error: str | None
) -> None:
    """Remember the last event ``host`` sent and whether it was handled (for doctor)."""
    write_small_json(
        status_path(home, host),
        {
            "host": host,
            "event": event[:80],
            "at": utc_stamp(),
            "session_id": session_id,
            "ok": error is None,
            "error": None if error is None else _redacted(error)[:MAX_LOG_LINE],
        },
    )


def read_status(home: Path, host: str) -> dict[str, Any]:
    return read_small_json(status_path(home, host))


def session_state_path(home: Path, session_id: str) -> Path:
    """Caller passes an id already checked by ``cortex.files.check_id``."""
    return home / "hooks" / "sessions" / f"{session_id}.json"


STATE_IDLE_SECONDS = 24 * 3600
"""A session's hook state untouched this long belongs to a session that ended without a
SessionEnd (crashed, killed, or its host never sends one): it is pruned."""
PRUNE_EVERY_SECONDS = 3600
"""How often a start looks for such files: a look stats every file of the folder (one per
session of the last day that sent no end), a start between looks stats one stamp."""
PRUNED_STAMP = "sessions.pruned"
"""The file next to ``hooks/sessions`` whose modification time is the last look's."""


def prune_session_states(
    home: Path, idle_seconds: float = STATE_IDLE_SECONDS, every: float = PRUNE_EVERY_SECONDS
) -> int:
    """Remove ``hooks/sessions/*.json`` files idle for ``idle_seconds``, when the last look
    was ``every`` seconds ago or more (or never happened); how many went."""
    folder = home / "hooks" / "sessions"
    stamp = folder.with_name(PRUNED_STAMP)
    now = time.time()
    try:
        if 0 <= now - stamp.stat().st_mtime < every:  # (a stamp from the future: look now)
            return 0
    except OSError:
        pass  # never looked (or the folder is gone: the scan below finds out)
    try:
        entries = list(os.scandir(folder))
        stamp.touch()
    except OSError:
        return 0
    cutoff = now - idle_seconds
    removed = 0
    for entry in entries:
        try:
            if entry.name.endswith(".json") and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue  # gone already, or not ours to remove
    return removed
