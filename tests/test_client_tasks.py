"""Pipeline tasks in client mode against the real team server on PostgreSQL: `cortex task`
(real processes) edits the tenant's tasks, two machines of a tenant see the same ones, hook
sessions carry the server's tasks rather than a local file's, and tasks added or finished
while the server is down arrive in order, once each, after `cortex sync`."""

# ruff: noqa: F811  (the tests take test_client_server's ``host`` fixture by name)
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from cortex.services.hosting import ServiceHost  # noqa: E402
from test_client_server import (  # noqa: E402, F401
    T2,
    cortex_json,
    free_port,
    hook,
    host,
    running,
    tenant_key,
)


def test_two_machines_of_a_tenant_share_its_tasks(
    host: ServiceHost, tmp_path: Path, home: Path
) -> None:
    laptop, desktop = home, tmp_path / "desktop"
    desktop.mkdir(mode=0o700)
    key = tenant_key(host, f"team-{time.time_ns()}")
    with running(host, free_port()) as url:
        added = cortex_json(laptop, url, key, "task", "add", "task-7", "CAT control",
                            "--project", "git:radio")  # fmt: skip
        assert added == {"task_id": "task-7", "title": "CAT control", "stage": "build",
                         "updated_at": added["updated_at"], "project": "git:radio",
                         "pending": True}  # fmt: skip
        cortex_json(laptop, url, key, "task", "add", "task-8", "Docs", "--any-project")
        seen = cortex_json(desktop, url, key, "task", "list", "--pending")
        assert [(t["task_id"], t.get("project")) for t in seen] == [
            ("task-7", "git:radio"), ("task-8", None)]  # fmt: skip
        done = cortex_json(desktop, url, key, "task", "done", "task-7")
        assert (done["stage"], done["pending"]) == ("done", False)
        listed = cortex_json(laptop, url, key, "task", "list")
        assert [(t["task_id"], t["pending"]) for t in listed] == [
            ("task-7", False), ("task-8", True)]  # fmt: skip
    for machine in (laptop, desktop):  # nothing was written to a local pipeline file
        assert not (machine / "pipeline").exists() and not (machine / "brain.db").exists()


def test_hook_sessions_carry_the_servers_tasks_not_the_local_file(
    host: ServiceHost, tmp_path: Path, home: Path
) -> None:
    project = tmp_path / "radio"
    project.mkdir()
    (home / "pipeline").mkdir(parents=True)
    local = {"active_tasks": [{"task_id": "local-1", "title": "Local only",
                               "current_stage": "build"}]}  # fmt: skip
    (home / "pipeline/state.json").write_text(json.dumps(local))
    key = tenant_key(host, f"team-{time.time_ns()}")
    with running(host, free_port()) as url:
        cortex_json(home, url, key, "task", "add", "task-9", "Tune the tuner", "--any-project")
        hook(home, url, key, project, T2, hook_event_name="SessionStart", session_id="s1",
             source="startup")  # fmt: skip
        hook(home, url, key, project, T2, hook_event_name="UserPromptSubmit",
             session_id="s1", prompt="tuning the antenna tuner")  # fmt: skip
        hook(home, url, key, project, T2, hook_event_name="SessionEnd", session_id="s1",
             reason="exit")  # fmt: skip
        out = hook(home, url, key, project, T2, hook_event_name="SessionStart",
                   session_id="s2", source="startup")  # fmt: skip
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "- [task-9] Tune the tuner (last stage: build" in context
    assert "local-1" not in context
    shown = json.loads((home / "pipeline/state.json").read_text())
    assert shown == local  # the local file is neither read nor edited in client mode


def test_task_changes_made_while_the_server_is_down_arrive_in_order_after_sync(
    host: ServiceHost, home: Path
) -> None:
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    offline = cortex_json(home, url, key, "task", "add", "t-1", "Draft", "--any-project")
    assert offline["title"] == "Draft" and offline["pending"] is True  # waiting in the journal
    cortex_json(home, url, key, "task", "add", "t-1", "Draft v2", "--stage", "verify")
    cortex_json(home, url, key, "task", "add", "t-2", "Other", "--project", "git:x")
    assert cortex_json(home, url, key, "task", "done", "t-2")["stage"] == "done"
    spooled = [json.loads(x) for x in (home / "spool/journal.jsonl").read_text().splitlines()]
    assert [(e["method"], e["path"]) for e in spooled] == [
        ("PUT", "/v1/tasks/t-1"), ("PUT", "/v1/tasks/t-1"), ("PUT", "/v1/tasks/t-2"),
        ("POST", "/v1/tasks/t-2/done")]  # fmt: skip
    with running(host, port):
        for sent in (4, 0):  # a second sync finds nothing left and sends nothing twice
            synced = cortex_json(home, url, key, "sync")
            assert isinstance(synced, dict) and synced["sent"] == sent
        listed = cortex_json(home, url, key, "task", "list")
    assert [(t["task_id"], t["title"], t["stage"]) for t in listed] == [
        ("t-1", "Draft v2", "verify"), ("t-2", "Other", "done")]  # fmt: skip
    with host.open(tenant) as app:  # every spooled request id was applied, once
        for entry in spooled:
            assert app.store.claim_request(entry["body"]["request_id"], T2) is False
