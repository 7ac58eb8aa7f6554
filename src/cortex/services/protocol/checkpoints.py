"""A task's checkpoints beyond the store: the file, the index entry, the evidence line and the
memory mirror (so checkpoints are searchable); and the check that files, index and store agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.checkpoint_schema import checkpoint_problems
from cortex.core.history_models import Checkpoint
from cortex.core.lifecycle import checkpoint_line
from cortex.core.models import SessionState
from cortex.errors import ValidationError
from cortex.services.protocol.folders import TaskFolder, content_hash

if TYPE_CHECKING:
    from cortex.store.protocol import Store

MEMORY_TYPE = "checkpoint"
VERIFY_LIMIT = 100_000


def tasks_root(config: Config) -> Path:
    return config.tasks_root


def folder_of(config: Config, slug: str) -> TaskFolder:
    return TaskFolder(tasks_root(config), slug)


def checkpoint_text(slug: str, checkpoint: Checkpoint) -> str:
    """The memory mirror's text: what a search for the task or its progress should find."""
    parts = [
        f"Checkpoint {checkpoint.checkpoint_id} of task {slug} ({checkpoint.type}"
        + (f", gate {checkpoint.gate}" if checkpoint.gate else "")
        + (f", step {checkpoint.step}" if checkpoint.step is not None else "")
        + f"): {checkpoint.summary or '(no summary)'}"
    ]
    if checkpoint.next_steps:
        parts.append("Next: " + "; ".join(checkpoint.next_steps))
    if checkpoint.resume_instructions:
        parts.append("Resume: " + checkpoint.resume_instructions)
    decisions = [
        d.get("decision") for d in checkpoint.state.get("decisions") or [] if isinstance(d, dict)
    ]
    if decisions:
        parts.append("Decisions: " + "; ".join(str(d) for d in decisions if d))
    return "\n".join(parts)


def mirror_checkpoint(
    store: Store, config: Config, clock: Clock, state: SessionState, checkpoint: Checkpoint
) -> dict[str, Any]:
    """Write a task-bound session's checkpoint to its task folder (file, index), log the
    evidence line and mirror it into memory; return the index entry."""
    from cortex.clock import to_iso
    from cortex.services.memory import MemoryService

    assert state.task_slug is not None
    at = to_iso(clock.now())
    folder = folder_of(config, state.task_slug)
    if not folder.exists():
        folder.init(state.task_slug, at)
    entry = folder.write_checkpoint(checkpoint)

    def touch(status: dict[str, Any]) -> None:
        status["last_session"] = state.session_id
        status["last_activity"] = at
        if checkpoint.gate:
            status["current_gate"] = checkpoint.gate

    folder.update_status(touch)
    folder.evidence(at, checkpoint_line(config.protocol_service_name, checkpoint.checkpoint_id))
    MemoryService(store, config, clock).add(
        checkpoint_text(state.task_slug, checkpoint),
        type=MEMORY_TYPE,
        project=state.project,
        user_id=state.user_id,
        tags=["checkpoint", state.task_slug, checkpoint.type],
        upsert_key=f"checkpoint:{checkpoint.checkpoint_id}",
        session_id=state.session_id,
        actor="protocol",
    )
    return entry


@dataclass
class VerifyReport:
    """What ``verify`` found: how many checkpoints each source holds, and every disagreement."""

    task_slug: str
    files: int = 0
    indexed: int = 0
    stored: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_slug": self.task_slug,
            "ok": self.ok,
            "files": self.files,
            "indexed": self.indexed,
            "stored": self.stored,
            "problems": self.problems,
        }


def verify_task(store: Store, folder: TaskFolder) -> VerifyReport:
    """Files, index and store hold the same checkpoints with the same content."""
    stored = {
        c.checkpoint_id: c.to_dict()
        for c in store.task_checkpoints(folder.slug, limit=VERIFY_LIMIT)
    }
    files = folder.checkpoint_files()
    report = VerifyReport(folder.slug, files=len(files), stored=len(stored))
    try:
        entries = {
            str(e.get("checkpoint_id")): e
            for e in folder.index()["checkpoints"]
            if isinstance(e, dict)
        }
    except ValidationError as exc:
        report.problems.append(str(exc))
        entries = {}
    report.indexed = len(entries)
    for cid in sorted(set(stored) | set(files) | set(entries)):
        report.problems += _disagreements(
            folder, cid, stored.get(cid), cid in files, entries.get(cid)
        )
    return report


def _disagreements(
    folder: TaskFolder,
    cid: str,
    stored: dict[str, Any] | None,
    has_file: bool,
    entry: dict[str, Any] | None,
) -> list[str]:
    problems: list[str] = []
    if stored is None:
        problems.append(f"{cid}: not in the store (a file or index entry with no stored record)")
    if entry is None:
        problems.append(f"{cid}: not in {folder.index_path.name}")
    if not has_file:
        problems.append(f"{cid}: no file {cid}.json")
        return problems
    try:
        data = folder.read_checkpoint_file(cid)
    except ValidationError:
        return [*problems, f"{cid}: the file is not valid JSON (tampered or damaged)"]
    schema = checkpoint_problems(data)
    if schema:
        problems.append(f"{cid}: the file fails the checkpoint schema ({schema[0]})")
    if stored is not None and data != stored:
        problems.append(f"{cid}: the file differs from the stored record (tampered)")
    if entry is not None and isinstance(data, dict) and entry.get("sha256") != content_hash(data):
        problems.append(f"{cid}: the file's SHA-256 differs from the index (tampered)")
    return problems
