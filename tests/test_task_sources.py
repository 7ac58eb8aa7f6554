"""One session code path over both task sources: the home's pipeline file (the local engine)
and the tasks kept in the store (a team server's tenant; here SQLite, as `cortex serve --db
brain.db` runs it). The same calls give the same preambles and records whichever is used."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.services.app import Services
from cortex.services.tasks import PipelineFile, StoreTasks
from cortex.store import open_store

PROJECT = "git:example.com/team/radio"


@pytest.fixture(params=["pipeline file", "store"])
def app(
    request: pytest.FixtureRequest, make_config: Callable[..., Config], clock: FixedClock
) -> Iterator[Services]:
    config = make_config()
    in_store = request.param == "store"
    with Services(open_store(config.db_path), config, clock, tasks_in_store=in_store) as opened:
        yield opened


def cycle(app: Services, sid: str, clock: FixedClock, **turn: str) -> str:
    """Start ``sid``, record a turn, end it; return the preamble it started with."""
    started = app.sessions.on_session_start(sid, project=PROJECT)
    app.sessions.record(sid, text=turn.get("text", "tuning the antenna"))
    app.sessions.on_session_end(sid)
    clock.advance(hours=1)
    return started.preamble or ""


def test_the_source_follows_the_services(app: Services) -> None:
    expected = StoreTasks if app.tasks_in_store else PipelineFile
    assert isinstance(app.task_source, expected)
    assert app.sessions._context.tasks is app.task_source  # one source for edits and sessions
    assert app.rebind(app.config).task_source.__class__ is expected


def test_tasks_reach_the_record_and_the_next_preamble_until_done(
    app: Services, clock: FixedClock
) -> None:
    app.tasks.add("task-7", "CAT control", "build", PROJECT)
    app.tasks.add("task-8", "Other project", "verify", "git:example.com/team/web")
    app.tasks.add("task-9", "Design only", "design", "")
    cycle(app, "s1", clock)
    record = app.sessions.get_session("s1")
    assert record is not None and [t.task_id for t in record.pending_tasks] == ["task-7"]
    assert "- [task-7] CAT control (last stage: build" in cycle(app, "s2", clock)
    app.tasks.add("task-7", "CAT control v2", "verify")  # the same services see the change
    assert "- [task-7] CAT control v2 (last stage: verify" in cycle(app, "s3", clock)
    app.tasks.done("task-7")
    assert "task-7" not in cycle(app, "s4", clock)
    listed = [(t["task_id"], t["pending"]) for t in app.tasks.list_tasks()]
    assert listed == [("task-7", False), ("task-8", True), ("task-9", False)]
    pending = app.tasks.list_tasks(pending_only=True, project=PROJECT)
    assert pending == []


def test_a_done_task_drops_the_pin_that_flagged_it(app: Services, clock: FixedClock) -> None:
    app.sessions.on_session_start("s1", project=PROJECT)
    app.sessions.add_pin("cat", "task-12 WIP: CAT timeouts", "s1")
    app.sessions.on_session_end("s1")
    clock.advance(hours=1)
    assert "[task-12]" in cycle(app, "s2", clock)
    app.tasks.add("task-12", "CAT timeouts", "build", "")
    app.tasks.done("task-12")
    assert "[task-12]" not in cycle(app, "s3", clock)


def test_the_store_source_keeps_the_pipeline_file_alone(app: Services, home: Path) -> None:
    app.tasks.add("t-1", "A task", "build", "")
    written = home / "pipeline" / "state.json"
    if app.tasks_in_store:
        assert not written.exists() and app.store.get_task("t-1") is not None
    else:
        assert json.loads(written.read_text())["active_tasks"][0]["task_id"] == "t-1"
        assert app.store.list_tasks() == []
