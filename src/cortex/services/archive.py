"""Retention: sessions ended long ago move to JSON cold storage, nothing lost.

Each session is written to ``{sessions_dir}/archive/YYYY-MM/{id}.json`` (atomic, fsynced) and
read back before its row is deleted, batch by batch, each batch in one transaction: a failure
at any point leaves every session either still in the table or safely in its file. Once a
batch is committed, the sessions' live JSON mirrors (``{sessions_dir}/{id}.json``) go: the
archive file is their copy now.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cortex.core.models import SessionState
from cortex.errors import StorageError, command
from cortex.files import check_id, file_lock, read_json, write_json

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from cortex.store.protocol import Store


@dataclass(frozen=True)
class ArchiveReport:
    """How many sessions an archive run moved to cold storage, and the files it wrote."""

    archived: int
    paths: tuple[str, ...]


def archive_path(sessions_dir: Path, state: SessionState) -> Path:
    month = (state.end_time or state.start_time)[:7]
    return sessions_dir / "archive" / month / f"{check_id(state.session_id)}.json"


def archive_sessions(
    store: Store, sessions_dir: Path, before: str, batch: int = 500
) -> ArchiveReport:
    """Archive every session that ended before ``before`` (an ISO time)."""
    paths: list[str] = []
    while True:
        with store.transaction():
            states = store.sessions_ended_before(before, limit=batch)
            if not states:
                break
            for state in states:
                path = archive_path(sessions_dir, state)
                write_json(path, state.to_dict(), lock=False)  # (the transaction serializes)
                if read_json(path) != state.to_dict():
                    raise StorageError(
                        f"archive file {path} did not read back; nothing was "
                        f"deleted, check the disk and run {command('archive')} again"
                    )
                paths.append(str(path))
            store.delete_sessions([s.session_id for s in states])
        for state in states:
            remove_mirror(sessions_dir / f"{check_id(state.session_id)}.json")
    return ArchiveReport(len(paths), tuple(paths))


def remove_mirror(mirror: Path) -> None:
    """Best effort: a session's live mirror and its lock file, under that lock (a writer that
    opened the lock before it went writes a mirror again, as a resumed session would)."""
    if not mirror.exists():
        return
    try:
        with file_lock(mirror):
            mirror.unlink(missing_ok=True)
            mirror.with_name(mirror.name + ".lock").unlink(missing_ok=True)
    except (OSError, StorageError):
        pass
