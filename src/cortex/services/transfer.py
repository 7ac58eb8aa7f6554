"""Import one person's SQLite home into a server tenant: every record, once.

Tables move verbatim (``Store.export_rows``/``import_rows``): sessions, memories with their
supersession columns, memory links, session events, snapshots, checkpoints, compaction events
and audit rows; a row whose key the tenant already holds is skipped, so a re-run adds nothing.
The metrics chain is **re-chained** under the tenant's key (the server's, derived from its
secret): each event keeps its name, session, payload and time, and gets the next ``seq`` and
a hash the server can verify. Audit rows and metrics events have no key that survives the
copy, so each is claimed once per source (a request id naming the source and the row).
Tasks the file's own tenant holds in its ``tasks`` table (a file a server ran on) and the
home's pipeline tasks (its ``pipeline/state.json``) become the tenant's tasks: each task the
tenant does not hold yet is added with its title, stage, project and every other field of its
entry; one it holds stays as it is.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cortex.core.tasks import TaskRecord
from cortex.errors import ConfigError, NotFoundError, ValidationError
from cortex.services.app import Services
from cortex.services.hosting import ServiceHost
from cortex.services.metrics import ZERO_HASH, chain_hash
from cortex.store import open_store
from cortex.store.transfer import KEYLESS_TABLES, TRANSFER_TABLES

if TYPE_CHECKING:
    from cortex.store.protocol import Store

BATCH = 500
T = TypeVar("T")
Progress = Callable[[str, int], None]
"""Called after each batch with (table or ``"metrics"``, rows read so far)."""


@dataclass
class ImportSummary:
    """Per table (and ``metrics``): rows read from the source and rows added to the tenant."""

    read: dict[str, int] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            name: {"read": n, "added": self.added.get(name, 0)} for name, n in self.read.items()
        }


def batches(items: Iterable[T], size: int = BATCH) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def source_id(source: Store) -> str:
    """A name of the source that survives moving the file: when it was created, and its
    first metrics hash (16 hex digits)."""
    applied = source.applied_migrations()
    first = next(iter(source.list_metrics(limit=1)), None)
    seed = f"{applied[0][1] if applied else ''}|{first.hash if first else ''}"
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def import_home(source: Store, target: Services, progress: Progress | None = None) -> ImportSummary:
    """Copy everything of ``source`` into ``target``'s tenant (see the module docstring).

    Raises:
        ConfigError: ``target`` has no metrics key of its own (no server secret).
    """
    key = target.metrics_key
    if key is None:
        raise ConfigError("importing needs the server secret; set CORTEX_SERVER_SECRET")
    origin = source_id(source)
    summary = ImportSummary()
    store = target.store
    for table in TRANSFER_TABLES:
        summary.read[table] = summary.added[table] = 0
        for batch in batches(source.export_rows(table)):
            summary.read[table] += len(batch)
            with store.transaction():
                if table in KEYLESS_TABLES:
                    batch = [row for row in batch if _claim(store, origin, table, row)]
                summary.added[table] += store.import_rows(table, batch) if batch else 0
            if progress:
                progress(table, summary.read[table])
    _rechain(source, target.store, key, origin, summary, progress)
    _add_tasks(source.list_tasks(), target, summary)
    return summary


def _add_tasks(records: list[TaskRecord], target: Services, summary: ImportSummary) -> None:
    """Add the ``records`` ``target``'s tenant does not hold yet, counted under ``tasks``."""
    summary.read["tasks"] = summary.read.get("tasks", 0) + len(records)
    added = 0
    if records:
        with target.store.transaction():
            added = target.store.add_tasks(records)
    summary.added["tasks"] = summary.added.get("tasks", 0) + added


def _claim(store: Store, origin: str, table: str, row: dict[str, Any]) -> bool:
    """True the first time this source's row is imported (the claim commits with it)."""
    return store.claim_request(f"import:{origin}:{table}:{row['id']}", str(row["created_at"]))


def _rechain(
    source: Store,
    store: Store,
    key: bytes,
    origin: str,
    summary: ImportSummary,
    progress: Progress | None,
) -> None:
    """Append the source's metrics events to the tenant's chain, each once."""
    summary.read["metrics"] = summary.added["metrics"] = 0
    for batch in batches(source.iter_metrics()):
        with store.transaction():
            last = store.last_metric()  # locks the tenant's chain until the commit
            prev = last.hash if last is not None else ZERO_HASH
            for ev in batch:
                if not store.claim_request(f"import:{origin}:metrics:{ev.seq}", ev.created_at):
                    continue
                digest = chain_hash(key, prev, ev.event, ev.session_id, ev.payload, ev.created_at)
                store.append_metric(
                    ev.event, ev.session_id, ev.payload, ev.created_at, prev, digest
                )
                prev = digest
                summary.added["metrics"] += 1
        summary.read["metrics"] += len(batch)
        if progress:
            progress("metrics", summary.read["metrics"])


def import_tasks(pipeline: Path, target: Services, summary: ImportSummary) -> None:
    """Add the pipeline file's tasks that ``target``'s tenant does not hold yet."""
    from cortex.files import read_json
    from cortex.services.pipeline import load_pipeline
    from cortex.services.tasks import imported

    tasks = load_pipeline(pipeline) or {}
    _add_tasks(
        imported(tasks, read_json(pipeline) if tasks else None, target.now_iso()), target, summary
    )


def _source(path: Path) -> Store:
    """The brain.db at ``path`` to import from: one a Cortex made (an older one migrated, as
    opening it anywhere would). An empty file or another program's SQLite file is refused
    before anything is imported, or added to it (opening it as a store would make it one)."""

    def not_ours(why: str) -> ValidationError:
        return ValidationError(
            f"{path} is not a Cortex brain.db ({why}); give the path of one (one older than "
            "Cortex's migrations: run `cortex db migrate` with its folder as the home first)"
        )

    if os.path.getsize(path) == 0:
        raise not_ours("it is empty")
    source = open_store(path, migrate=False)
    try:
        if not source.applied_migrations():
            raise not_ours("it has no Cortex schema")
        source.migrate()
    except BaseException:
        source.close()
        raise
    return source


def import_file(
    path: Path,
    host: ServiceHost,
    tenant: str,
    progress: Progress | None = None,
    pipeline: Path | None = None,
) -> ImportSummary:
    """``import_home`` of the SQLite file at ``path`` into ``tenant`` of ``host``'s database,
    and the tasks of the ``pipeline`` state file (when given).

    Raises:
        NotFoundError: there is no such file, or no such tenant.
        ValidationError: the file is not a Cortex brain.db, or the pipeline file is not a
            pipeline document.
    """
    if not os.path.isfile(path):  # (False, not OSError, for a path the system refuses)
        raise NotFoundError(f"no such file {path}; give the path of a Cortex brain.db")
    with host.registry() as registry:
        if registry.store.get_tenant(tenant) is None:
            raise NotFoundError(
                f"tenant {tenant!r} does not exist; run `cortex tenant create {tenant}` first"
            )
    source = _source(path)
    try:
        with host.open(tenant) as target:
            summary = import_home(source, target, progress)
            if pipeline is not None:
                import_tasks(pipeline, target, summary)
            return summary
    finally:
        source.close()
