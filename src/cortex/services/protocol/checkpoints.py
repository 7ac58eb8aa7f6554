"""A task's checkpoints beyond the store: the file, the index entry, the evidence line and the
memory mirror (so checkpoints are searchable); and the check that files, index and store agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock, parse_time
from cortex.config import Config
from cortex.core.checkpoint_schema import checkpoint_problems
from cortex.core.history_models import Checkpoint
from cortex.core.lifecycle import GATE_IDS, checkpoint_line
from cortex.core.models import SessionState
from cortex.core.redaction import redact
from cortex.errors import CortexError, StorageError, ValidationError
from cortex.logs import getLogger
from cortex.services.protocol.folders import TaskFolder, content_hash, index_entry

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


def mirror_memory(
    store: Store, config: Config, clock: Clock, state: SessionState, checkpoint: Checkpoint
) -> None:
    """Mirror a task-bound session's checkpoint into memory (in the checkpoint's transaction:
    the memory is stored with it or not at all)."""
    from cortex.services.memory import MemoryService

    assert state.task_slug is not None
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


def publish_checkpoint(
    store: Store, config: Config, clock: Clock, state: SessionState, checkpoint: Checkpoint
) -> dict[str, Any]:
    """Once the store committed a task-bound session's checkpoint: its file and index entry,
    the task's status (gate, last session), the pending task's title (with the status's gate)
    and the evidence line; return the index entry.

    Runs after the commit, so a kill or failure before it leaves nothing in the folder for a
    checkpoint the store does not hold; one after it leaves a stored checkpoint missing from
    the folder, which ``cortex checkpoint verify --repair`` writes from the store.
    """
    from cortex.clock import to_iso

    assert state.task_slug is not None
    at = to_iso(clock.now())
    folder = folder_of(config, state.task_slug)
    fresh: list[Checkpoint] = []
    if not folder.exists():  # gone: made anew as a repair makes it, where the checkpoints left it
        fresh = store.task_checkpoints(folder.slug, limit=VERIFY_LIMIT)
        remake_status(config, folder, fresh, store.task_sessions(folder.slug), at)
    entry = folder.write_checkpoint(checkpoint)

    def move(status: dict[str, Any]) -> None:
        for each in [*fresh, checkpoint]:  # (``fresh`` holds it too: it is committed)
            moved_by(status, each, at)

    status = folder.update_status(move)
    show_gate(config, folder.slug, status, at)
    folder.evidence(at, checkpoint_line(config.protocol_service_name, checkpoint.checkpoint_id))
    return entry


def moved_by(status: dict[str, Any], checkpoint: Checkpoint, at: str) -> None:
    """What a checkpoint writes into its task's status: its session as the last one, the
    activity time and its gate (one without a gate leaves the task's)."""
    status["last_session"] = checkpoint.session_id
    status["last_activity"] = at
    if checkpoint.gate:
        status["current_gate"] = checkpoint.gate


def show_gate(config: Config, slug: str, status: dict[str, Any], at: str) -> None:
    """The task's pending pipeline entry titled with the gate ``status`` holds now, so the next
    preamble lists the task at its current gate: rewritten when it reads otherwise (a
    checkpoint moved the gate, or an earlier one was killed between its status and its
    title), left alone (no write) when it is right; a pipeline file that cannot be read or
    edited is logged, and the checkpoint stands. It is written after the status: a command
    killed between the two leaves a title the task's next checkpoint rewrites, as
    ``cortex checkpoint verify --repair`` does."""
    from cortex.services.pipeline import retitle_task

    try:
        gap = _title_gap(config, slug, status)
        if gap is not None:
            retitle_task(config.pipeline_state_path, slug, gap[1], at)
    except CortexError as exc:
        getLogger("cortex").warning("task %s keeps its pipeline title: %s", slug, exc)


def gate_title(slug: str, status: dict[str, Any]) -> str:
    """The pending task's title as ``status`` gives it: its title with its current gate."""
    from cortex.services.pipeline import task_title

    title = task_title(str(status.get("title") or slug), str(status.get("current_gate") or "G0"))
    return redact(title)  # as the pipeline file keeps it


def title_gap(config: Config, slug: str, status: dict[str, Any]) -> tuple[str, str] | None:
    """(the title the pipeline holds the task pending under, the one ``status`` gives it)
    when they differ; None when they agree, the task is not pending or the pipeline file
    cannot be read (every command reading it says so; its titles are checked once it can)."""
    try:
        return _title_gap(config, slug, status)
    except ValidationError:
        return None


def _title_gap(config: Config, slug: str, status: dict[str, Any]) -> tuple[str, str] | None:
    """``title_gap``, raising ``ValidationError`` when the pipeline file cannot be read."""
    from cortex.services.pipeline import pending_title

    shown = pending_title(config.pipeline_state_path, slug)
    wanted = gate_title(slug, status)
    return None if shown is None or shown == wanted else (shown, wanted)


def remake_status(
    config: Config,
    folder: TaskFolder,
    stored: Sequence[Checkpoint],
    sessions: Sequence[SessionState],
    at: str,
) -> tuple[str, str] | None:
    """Make the task's missing status file anew (``init``), titled as what outlives it has
    the title (``surviving_title`` over the task's ``stored`` checkpoints and its
    ``sessions``), else with the slug; the caller moves it as the checkpoints did. Returns the
    title found and where, or None."""
    found = surviving_title(config, folder, stored, sessions)
    folder.init(found[0] if found else folder.slug, at)
    return found


def surviving_title(
    config: Config,
    folder: TaskFolder,
    checkpoints: Sequence[Checkpoint] = (),
    sessions: Sequence[SessionState] = (),
) -> tuple[str, str] | None:
    """The title of a task whose status file is gone, from what outlives it, and where it was
    found: the pipeline's entry of the task (its title less the gate the protocol appends to
    it), a copy of the status a repair kept, then the pending tasks the task's
    ``checkpoints`` and ``sessions`` carried, newest first. None when none has it: the slug
    stands in."""
    for title, where in _surviving_titles(config, folder, checkpoints, sessions):
        if title:
            return title, where
    return None


def _surviving_titles(
    config: Config,
    folder: TaskFolder,
    checkpoints: Sequence[Checkpoint],
    sessions: Sequence[SessionState],
) -> Iterator[tuple[str | None, str]]:
    """Each title a source holds for the task (None where it holds none the protocol wrote),
    with the source, in the order ``surviving_title`` trusts them."""
    from cortex.services.pipeline import load_pipeline

    slug = folder.slug
    try:
        entry = (load_pipeline(config.pipeline_state_path) or {}).get(slug)
    except CortexError:  # not a pipeline document, unreadable: every command reading it says so
        entry = None
    if entry is not None:
        yield _without_gate(entry.get("title")), f"the pipeline's task {slug}"
    for name, copy in folder.status_copies():
        yield (copy["title"] if isinstance(copy.get("title"), str) else None), name
    for checkpoint in reversed(checkpoints):  # a compaction's carries the pending tasks
        carried = checkpoint.state.get("pending_tasks")
        for task in carried if isinstance(carried, list) else ():
            if isinstance(task, dict) and task.get("task_id") == slug:
                yield _without_gate(task.get("title")), f"checkpoint {checkpoint.checkpoint_id}"
    for session in reversed(sessions):
        for pending in session.pending_tasks:
            if pending.task_id == slug:
                yield _without_gate(pending.title), f"session {session.session_id}"


def _without_gate(title: object) -> str | None:
    """The title ``task_title`` was given to make ``title``: the text before its ``[G<n>]``;
    None when it ends with no gate (not a title the protocol wrote)."""
    text, _, gate = str(title or "").rpartition(" [")
    return text if gate.endswith("]") and gate[:-1] in GATE_IDS else None


def unlogged(folder: TaskFolder, stored: list[Checkpoint]) -> list[str]:
    """The stored checkpoints with no evidence line in ``logs/sessions.log``: the line is the
    last thing a checkpoint writes, so their publishing stopped short (or the log lost it)."""
    text = folder.read_evidence()
    return [
        c.checkpoint_id for c in stored if f"Checkpoint created: {c.checkpoint_id}\n" not in text
    ]


def status_after(
    status: dict[str, Any],
    stored: list[Checkpoint],
    missed: list[str],
    at: str,
    *,
    fresh: bool = False,
) -> dict[str, Any]:
    """The status as the checkpoints would have left it, moved at ``at``: by each ``missed``
    one (in order) that is not older than the status's last activity, since a later write of
    the status (a start, a hand edit, a checkpoint after it) stands; by every stored one for
    a ``fresh`` status. The status as it is when none applies."""
    since = None if fresh else _time(status.get("last_activity"))
    wanted = dict(status)
    for checkpoint in stored:
        missing = checkpoint.checkpoint_id in missed
        if fresh or (missing and (since is None or since <= parse_time(checkpoint.timestamp))):
            moved_by(wanted, checkpoint, at)
    return wanted


def _time(text: object) -> datetime | None:
    """A time the status holds; None when it has none or not a time (edited by hand)."""
    try:
        return parse_time(str(text)) if text else None
    except ValidationError:
        return None


STATUS_MOVES = ("current_gate", "last_session")
"""The fields of the status a repair restores (the activity time only goes with them)."""


def status_gaps(status: dict[str, Any], wanted: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Each field a checkpoint moves that differs from what the checkpoints left: (name, as
    it is, as they left it)."""
    return [
        (name, status.get(name), wanted.get(name))
        for name in STATUS_MOVES
        if status.get(name) != wanted.get(name)
    ]


@dataclass
class VerifyReport:
    """What ``verify`` found: how many checkpoints each source holds, and every disagreement."""

    task_slug: str
    files: int = 0
    indexed: int = 0
    stored: int = 0
    problems: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)

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
            "repaired": self.repaired,
        }


def verify_task(store: Store, config: Config, folder: TaskFolder) -> VerifyReport:
    """Files, index and store hold the same checkpoints with the same content; the evidence
    log has each one's line, the status what they wrote, and the pending task the title with
    the status's gate."""
    checkpoints = store.task_checkpoints(folder.slug, limit=VERIFY_LIMIT)
    stored = {c.checkpoint_id: c.to_dict() for c in checkpoints}
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
    missed = unlogged(folder, checkpoints)
    report.problems += [f"{cid}: no 'Checkpoint created' line in sessions.log" for cid in missed]
    status = folder.status()
    report.problems += [
        f"{folder.status_path.name}: {name} is {now or 'unset'}, not {wanted} as the "
        "checkpoints left it"
        for name, now, wanted in status_gaps(
            status, status_after(status, checkpoints, missed, str(status.get("last_activity")))
        )
    ]
    gap = title_gap(config, folder.slug, status)
    if gap is not None:
        report.problems.append(
            f"pipeline {config.pipeline_state_path.name}: the pending task {folder.slug} reads "
            f"{gap[0]!r}, not {gap[1]!r} as {folder.status_path.name} gives it"
        )
    return report


def repair_task(
    store: Store, config: Config, folder: TaskFolder, stamp: str, *, fresh: bool = False
) -> list[str]:
    """Make the folder agree with the store, where a checkpoint commits: write each stored
    checkpoint's missing or differing file and rebuild the index from the store; a file with
    no stored record, or one replaced, and an unreadable index are moved aside, never
    deleted. Then what the checkpoints whose publishing stopped short did not write: the
    status's gate and last session (the file replaced kept aside; all of them for a ``fresh``
    status, which is not kept: no one had it), the pending task's title with the status's
    gate (a checkpoint killed between its status and its title left the old one), and their
    evidence lines. Returns what it did, one line each."""
    checkpoints, done = _repair_files(store, folder, stamp)
    missed = unlogged(folder, checkpoints)
    status, moved = _repair_status(folder, checkpoints, missed, stamp, fresh)
    done += moved + _repair_title(config, folder, status, stamp)
    for checkpoint in checkpoints:
        if checkpoint.checkpoint_id in missed:
            line = checkpoint_line(config.protocol_service_name, checkpoint.checkpoint_id)
            folder.evidence(checkpoint.timestamp, line)
            done.append(f"{checkpoint.checkpoint_id}: logged '{line}' in sessions.log")
    return done


def _repair_status(
    folder: TaskFolder,
    stored: list[Checkpoint],
    missed: list[str],
    stamp: str,
    fresh: bool,
) -> tuple[dict[str, Any], list[str]]:
    """The status with what the checkpoints moved, the one replaced kept aside (not a
    ``fresh`` one: the repair just made it); returns it and what was done."""
    gaps: list[tuple[str, Any, Any]] = []

    def change(status: dict[str, Any]) -> None:
        wanted = status_after(status, stored, missed, stamp, fresh=fresh)
        gaps.extend(status_gaps(status, wanted))
        if gaps:
            status.update(wanted)

    status = folder.update_status(change, set_aside=None if fresh else stamp)
    if not gaps:
        return status, []
    moves = ", ".join(f"{name} {now or 'unset'} -> {wanted}" for name, now, wanted in gaps)
    kept = folder.set_aside_path(folder.status_path, stamp).name
    aside = "" if fresh else f" (the file it replaces kept as {kept})"
    return status, [f"{folder.status_path.name}: {moves}, as the checkpoints left it{aside}"]


def _repair_title(
    config: Config, folder: TaskFolder, status: dict[str, Any], stamp: str
) -> list[str]:
    """The pending task retitled with the gate ``status`` holds, when its title differs."""
    from cortex.services.pipeline import retitle_task

    gap = title_gap(config, folder.slug, status)
    if gap is None:
        return []
    retitle_task(config.pipeline_state_path, folder.slug, gap[1], stamp)
    return [
        f"pipeline {config.pipeline_state_path.name}: retitled the pending task {folder.slug} "
        f"{gap[0]!r} -> {gap[1]!r}, as {folder.status_path.name} gives it"
    ]


def _repair_files(
    store: Store, folder: TaskFolder, stamp: str
) -> tuple[list[Checkpoint], list[str]]:
    """The checkpoint files and the index, from the store; returns the stored checkpoints it
    read and what it did."""
    done: list[str] = []
    with folder.index_lock():  # checkpoints are published under it after their commit,
        stored = {  # so each file here belongs to a checkpoint this read sees
            c.checkpoint_id: c for c in store.task_checkpoints(folder.slug, limit=VERIFY_LIMIT)
        }
        try:
            entries = folder.index()["checkpoints"]
        except ValidationError:
            entries = None
            moved = folder.set_aside(folder.index_path, stamp)
            done.append(f"moved the unreadable {folder.index_path.name} aside to {moved.name}")
        for cid, path in folder.checkpoint_files().items():
            if cid not in stored:
                moved = folder.set_aside(path, stamp)
                done.append(f"{cid}: not in the store; moved {path.name} aside to {moved.name}")
        for cid, checkpoint in stored.items():
            path = folder.checkpoint_path(cid)
            if _file_matches(folder, checkpoint):
                continue
            if os.path.lexists(path):
                moved = folder.set_aside(path, stamp)
                done.append(f"{cid}: moved the differing {path.name} aside to {moved.name}")
            folder.write_checkpoint_file(checkpoint)
            done.append(f"{cid}: wrote {path.name} from the store")
        wanted = [index_entry(c) for c in stored.values()]
        if entries != wanted:
            folder.write_index(wanted)
            done.append(f"rebuilt {folder.index_path.name} from the store ({len(wanted)} entries)")
    return list(stored.values()), done


def _file_matches(folder: TaskFolder, checkpoint: Checkpoint) -> bool:
    try:
        return bool(folder.read_checkpoint_file(checkpoint.checkpoint_id) == checkpoint.to_dict())
    except CortexError:  # unreadable, not JSON, a directory: it does not match
        return False


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
    path = folder.checkpoint_path(cid)
    if path.is_dir():
        return [*problems, f"{cid}: {path.name} is a directory, not a file"]
    try:
        data = folder.read_checkpoint_file(cid)
    except ValidationError:
        return [*problems, f"{cid}: the file is not valid JSON (tampered or damaged)"]
    except StorageError as exc:  # unreadable: one more problem, and the others still reported
        return [*problems, f"{cid}: the file cannot be read ({exc.__cause__ or exc})"]
    schema = checkpoint_problems(data)
    if schema:
        problems.append(f"{cid}: the file fails the checkpoint schema ({schema[0]})")
    if stored is not None and data != stored:
        problems.append(f"{cid}: the file differs from the stored record (tampered)")
    if entry is not None and isinstance(data, dict) and entry.get("sha256") != content_hash(data):
        problems.append(f"{cid}: the file's SHA-256 differs from the index (tampered)")
    return problems
