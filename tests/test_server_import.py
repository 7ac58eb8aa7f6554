"""``cortex server import``: a SQLite home made by the real services lands in a PostgreSQL
tenant record for record (compared through both stores' protocols), its metrics re-chained
so that the server verifies them, and a second import adds nothing."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cortex.adapters.cli.main import cli
from cortex.clock import FixedClock
from cortex.config import load_config
from cortex.core.tasks import TaskRecord
from cortex.services.app import Services
from cortex.services.hosting import ServiceHost
from cortex.store import SQLiteStore
from cortex.store.protocol import Store

SECRET = "import-secret-0123456789abcdefghij"


def populate(home: Path) -> None:
    """Two sessions with turns, pins, events, a checkpoint and a compaction; memories with a
    superseded one, an edit and a forget (audit rows)."""
    clock = FixedClock("2026-03-01T09:00:00Z")
    with Services.open(load_config(home, env={}), clock) as app:
        for n in range(2):
            sid = app.sessions.on_session_start(project="api", keywords=["auth"]).session_id
            app.sessions.record(sid, text=f"auth refactor step {n}")
            app.sessions.add_pin(f"step{n}", f"finish step {n}", session_id=sid)
            app.events.append(sid, f"user asks about step {n}")
            app.events.append(sid, f"answer {n}", role="assistant")
            app.compaction.checkpoint(sid, summary=f"half {n}", next_steps=[f"step {n + 1}"])
            app.compaction.run(sid, force=True, summary=f"compacted {n}")
            app.sessions.on_session_end(sid)
            clock.advance(hours=1)
        first = app.memory.add("Deploys go to us-east-1", project="api", upsert_key="region")
        app.memory.add("Deploys go to eu-west-1", project="api", upsert_key="region")
        note = app.memory.add("Use ruff", tags=["lint"])
        app.memory.edit(note.memory.id, tags=["lint", "style"])
        app.memory.forget(app.memory.add("temporary").memory.id)
        assert app.store.memory_links(first.memory.id)
        app.procedures.add("Release", ["bump the version", "tag", "push"], project="api")
        app.consolidation.run(dry_run=True)
        app.tasks.add("task-1", "Wire CAT", "build", "api")
        app.tasks.add("task-2", "Rotate keys", "verify", "")
        app.tasks.add("task-3", "Ship", "design", "api")
        app.tasks.done("task-3")
    # A real pipeline's file carries fields Cortex does not read: they are kept too.
    state = json.loads((home / "pipeline/state.json").read_text())
    state["active_tasks"][0]["owner"] = "ana"
    (home / "pipeline/state.json").write_text(json.dumps(state))


def cortex(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["--json", *args], obj={"CORTEX_SERVER_SECRET": SECRET})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def audit(store: Store) -> list[tuple[Any, ...]]:
    return sorted(
        (e.action, e.actor, e.target, json.dumps(e.detail), e.created_at)
        for e in store.list_audit(limit=10_000)  # type: ignore[attr-defined]
    )


def assert_same(source: Store, target: Store) -> None:
    sessions = source.list_sessions(limit=1000)
    assert sessions and sessions == target.list_sessions(limit=1000)
    for s in sessions:
        sid = s.session_id
        for read in ("list_session_events", "list_snapshots", "list_checkpoints"):
            mine = getattr(source, read)(sid)
            assert mine == getattr(target, read)(sid), read
        assert source.list_compaction_events(sid) == target.list_compaction_events(sid)
    ids = [row["id"] for row in source.export_rows("memories")]
    assert len(ids) == 4
    for mid in ids:
        assert source.get_memory(mid) == target.get_memory(mid)
        assert sorted(map(repr, source.memory_links(mid))) == sorted(
            map(repr, target.memory_links(mid))
        )
    assert source.list_consolidation_runs() == target.list_consolidation_runs() != []
    assert source.list_procedures("api", None) == target.list_procedures("api", None) != []
    assert audit(source) == audit(target) != []
    fields = lambda s: [(e.event, e.session_id, e.payload, e.created_at) for e in s.iter_metrics()]  # noqa: E731
    assert fields(source) == fields(target) != []


def test_import_copies_everything_once_and_verifies(pg_url: str, tmp_path: Path) -> None:
    home = tmp_path / "laptop"
    populate(home)
    tenant = f"imp-{secrets.token_hex(4)}"
    cortex("tenant", "create", tenant, "--db", pg_url)
    db = str(home / "brain.db")

    first = cortex("server", "import", db, "--tenant", tenant, "--db", pg_url)["tables"]
    assert all(c["added"] == c["read"] for c in first.values()), first
    assert first["memories"]["read"] == 4 and first["metrics"]["read"] > 0
    assert first["tasks"] == {"read": 3, "added": 3}
    again = cortex("server", "import", db, "--tenant", tenant, "--db", pg_url)["tables"]
    assert all(c["added"] == 0 and c["read"] == first[t]["read"] for t, c in again.items())

    host = ServiceHost(pg_url, tmp_path / "server", secret=SECRET)
    source = SQLiteStore(db)
    try:
        with host.open(tenant) as app:
            assert_same(source, app.store)
            with Services.open(load_config(home, env={})) as laptop:
                local = laptop.tasks.list_tasks()
            assert app.tasks.list_tasks() == local and len(local) == 3
            assert app.store.get_task("task-1").detail == {"owner": "ana"}
            report = app.metrics.verify()
            assert report.ok and report.checked == first["metrics"]["read"], report.problems
    finally:
        source.close()
        host.close()


def failure(*args: str, secret: str = SECRET) -> str:
    result = CliRunner().invoke(cli, list(args), obj={"CORTEX_SERVER_SECRET": secret})
    assert result.exit_code == 1
    return str(result.exception)


def test_import_names_what_is_missing(pg_url: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "none.db")
    message = failure("server", "import", missing, "--tenant", "nobody", "--db", pg_url)
    assert "no such file" in message and not Path(missing).exists()
    populate(tmp_path / "h")
    args = ["server", "import", str(tmp_path / "h" / "brain.db"), "--tenant", "nobody"]
    assert "cortex tenant create nobody" in failure(*args, "--db", pg_url)
    assert "CORTEX_SERVER_SECRET" in failure(*args, "--db", pg_url, secret="")


def test_import_copies_the_files_own_task_table(pg_url: str, tmp_path: Path) -> None:
    """A file a server ran on keeps its tasks in its ``tasks`` table, not in a pipeline file:
    they are imported too, beside the pipeline's, once."""
    home = tmp_path / "devserver"
    populate(home)
    db = str(home / "brain.db")
    source = SQLiteStore(db)
    try:
        source.save_task(TaskRecord("task-9", "Index the logs", "build", "2026-03-01T10:00:00Z"))
        source.save_task(TaskRecord("task-8", "Trim the index", "design", "2026-03-01T10:00:00Z"))
    finally:
        source.close()
    tenant = f"imp-{secrets.token_hex(4)}"
    cortex("tenant", "create", tenant, "--db", pg_url)

    tables = cortex("server", "import", db, "--tenant", tenant, "--db", pg_url)["tables"]
    assert tables["tasks"] == {"read": 5, "added": 5}
    again = cortex("server", "import", db, "--tenant", tenant, "--db", pg_url)["tables"]
    assert again["tasks"] == {"read": 5, "added": 0}
    host = ServiceHost(pg_url, tmp_path / "server", secret=SECRET)
    try:
        with host.open(tenant) as app:
            assert app.store.get_task("task-9").title == "Index the logs"
            assert [t.task_id for t in app.store.list_tasks()] == [
                "task-9", "task-8", "task-1", "task-2", "task-3"
            ]  # fmt: skip
    finally:
        host.close()
