"""Pending-task detection: the pure parts."""

from __future__ import annotations

from typing import Any

import pytest

from cortex.core.models import PendingTask, Pin
from cortex.core.tasks import (
    DONE_STAGES,
    PENDING_STAGES,
    SOURCE_PINS,
    SOURCE_PIPELINE,
    merge_tasks,
    pending_from_pipeline,
    pipeline_tasks,
    scan_pins_for_tasks,
    still_pending,
)
from cortex.errors import ValidationError

STATE = {
    "active_tasks": [
        {
            "task_id": "task-004-session-persistence",
            "title": "Cross-Session State Preservation",
            "current_stage": "build",
            "updated_at": "2026-02-18T07:00:00Z",
        },
        {"id": "task-003-pre-action-hooks", "name": "Pre-Action Hooks", "stage": "done"},
        {"task_id": "task-005", "title": "Metrics", "current_stage": "design"},
        {"task_id": 6, "current_stage": "verify", "last_activity": "2026-02-17T00:00:00Z"},
    ]
}


def pin(label: str, content: str = "", pinned_at: str = "2026-02-18T08:00:00Z") -> Pin:
    return Pin(label=label, content=content, pinned_at=pinned_at)


def test_pipeline_tasks_normalises_the_list_form():
    tasks = pipeline_tasks(STATE)
    assert list(tasks) == [
        "task-004-session-persistence",
        "task-003-pre-action-hooks",
        "task-005",
        "6",
    ]
    assert tasks["task-003-pre-action-hooks"] == {
        "task_id": "task-003-pre-action-hooks",
        "title": "Pre-Action Hooks",
        "stage": "done",
        "updated_at": None,
    }
    assert tasks["6"] == {
        "task_id": "6",
        "title": "6",
        "stage": "verify",
        "updated_at": "2026-02-17T00:00:00Z",
    }


def test_pipeline_tasks_accepts_the_object_form_and_the_tasks_key():
    by_id = pipeline_tasks({"active_tasks": {"task-7": {"title": "Seven", "stage": "validate"}}})
    assert by_id == {
        "task-7": {"task_id": "task-7", "title": "Seven", "stage": "validate", "updated_at": None}
    }
    assert list(pipeline_tasks({"tasks": [{"id": "t1"}]})) == ["t1"]


@pytest.mark.parametrize("data", [{}, {"active_tasks": None}, {"active_tasks": []}])
def test_pipeline_without_tasks(data: Any):
    assert pipeline_tasks(data) == {}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "must be a JSON object"),
        ("text", "must be a JSON object"),
        (None, "must be a JSON object"),
        ({"active_tasks": "build"}, '"active_tasks" must be a list or an object'),
        ({"active_tasks": 3}, '"active_tasks" must be a list or an object'),
        ({"active_tasks": [{"title": "no id"}]}, 'pipeline task #1 has no "task_id"'),
        ({"active_tasks": [{"task_id": "ok"}, "nope"]}, "pipeline task #2 is not an object"),
    ],
)
def test_pipeline_of_the_wrong_shape_is_a_one_line_error_naming_the_fix(data: Any, message: str):
    with pytest.raises(ValidationError, match=message) as caught:
        pipeline_tasks(data)
    text = str(caught.value)
    assert "\n" not in text
    assert "fix pipeline/state.json or delete it" in text


def test_pending_from_pipeline_keeps_build_verify_validate():
    pending = pending_from_pipeline(pipeline_tasks(STATE))
    assert pending == [
        PendingTask(
            "task-004-session-persistence",
            "Cross-Session State Preservation",
            "build",
            flagged_incomplete=False,
            updated_at="2026-02-18T07:00:00Z",
            source=SOURCE_PIPELINE,
        ),
        PendingTask("6", "6", "verify", False, "2026-02-17T00:00:00Z", SOURCE_PIPELINE),
    ]
    assert PENDING_STAGES == ("build", "verify", "validate")
    design = pending_from_pipeline(pipeline_tasks(STATE), stages=("DESIGN",))
    assert [t.task_id for t in design] == ["task-005"]


@pytest.mark.parametrize(
    ("label", "content", "task_id", "stage"),
    [
        (
            "task-004-session-persistence",
            "build stage, tests failing",
            "task-004-session-persistence",
            "build",
        ),
        ("[TASK] write docs", "", "pin:write-docs", "in-progress"),
        ("refactor", "incomplete: the parser", "pin:refactor", "in-progress"),
        ("TODO", "rotate the API key", "pin:todo", "in-progress"),
        ("scanner", "work in progress, stage: verify", "pin:scanner", "verify"),
        ("scanner2", "in-progress", "pin:scanner2", "in-progress"),
        ("WIP parser", "", "pin:wip-parser", "in-progress"),
        ("notes", "see TASK-012-Metrics next stage", "task-012-metrics", "in-progress"),
        ("task-9", "not done yet", "task-9", "in-progress"),
        ("task-10", "WIP, deploy done", "task-10", "in-progress"),  # open marker wins
    ],
)
def test_pins_that_flag_a_task(label: str, content: str, task_id: str, stage: str):
    found = scan_pins_for_tasks([pin(label, content)])
    assert [(t.task_id, t.stage, t.flagged_incomplete, t.source) for t in found] == [
        (task_id, stage, True, SOURCE_PINS)
    ]
    assert found[0].updated_at == "2026-02-18T08:00:00Z"


@pytest.mark.parametrize(
    ("label", "content"),
    [
        ("task-004", "done"),
        ("TODO list", "completed ✅"),
        ("[TASK] docs", "[DONE]"),
        ("task-3 finished", ""),
        ("ham radio", "CAT control for the FT991A"),  # no task marker at all
        ("incompleteness theorem", "a note"),
    ],
)
def test_pins_that_do_not_flag_a_task(label: str, content: str):
    assert scan_pins_for_tasks([pin(label, content)]) == []


def test_pin_task_titles():
    found = scan_pins_for_tasks(
        [
            pin("Parser rewrite [inherited from abc @ 2026-02-17]", "TODO finish"),
            pin("task-004", "Session persistence\nmore details"),
            pin("", "TODO: " + "x" * 300),
        ]
    )
    assert [t.title for t in found][:2] == ["Parser rewrite", "Session persistence"]
    assert len(found[2].title) == 120 and found[2].title.endswith("…")
    assert found[0].task_id == "pin:parser-rewrite"


def test_pin_scan_deduplicates_by_task_id():
    found = scan_pins_for_tasks([pin("task-4 a", "WIP"), pin("TASK-4 b", "TODO")])
    assert [t.title for t in found] == ["task-4 a"]


def _task(task_id: str, source: str = SOURCE_PIPELINE, stage: str = "build") -> PendingTask:
    return PendingTask(task_id, f"old {task_id}", stage, source == SOURCE_PINS, None, source)


def test_still_pending_drops_done_and_absent_pipeline_tasks():
    pipeline = pipeline_tasks(
        {
            "active_tasks": [
                {
                    "task_id": "t-live",
                    "title": "Live",
                    "current_stage": "verify",
                    "updated_at": "2026-02-18T00:00:00Z",
                },
                {"task_id": "t-done", "current_stage": "Done"},
                {"task_id": "t-pin-done", "current_stage": "completed"},
                {"task_id": "t-pin-live", "title": "Pin live", "current_stage": "design"},
            ]
        }
    )
    tasks = [
        _task("t-live"),
        _task("t-done"),
        _task("t-gone"),
        _task("t-pin-done", SOURCE_PINS),
        _task("T-PIN-LIVE", SOURCE_PINS),
        _task("pin:notes", SOURCE_PINS),
    ]
    kept = still_pending(tasks, pipeline)
    assert [(t.task_id, t.title, t.stage, t.source) for t in kept] == [
        ("t-live", "Live", "verify", SOURCE_PIPELINE),
        ("T-PIN-LIVE", "Pin live", "design", SOURCE_PINS),
        ("pin:notes", "old pin:notes", "build", SOURCE_PINS),
    ]
    assert kept[0].updated_at == "2026-02-18T00:00:00Z"


def test_still_pending_without_a_pipeline_file_keeps_only_pin_tasks():
    kept = still_pending([_task("t1"), _task("pin:x", SOURCE_PINS)], None)
    assert [t.task_id for t in kept] == ["pin:x"]


@pytest.mark.parametrize("stage", DONE_STAGES)
def test_every_done_stage_drops_the_task(stage: str):
    pipeline = pipeline_tasks({"active_tasks": [{"task_id": "t", "stage": stage.upper()}]})
    assert still_pending([_task("t"), _task("t", SOURCE_PINS)], pipeline) == []


def test_merge_tasks_first_wins_case_insensitively():
    pipeline = [_task("task-4"), _task("task-5")]
    pins = [_task("TASK-4", SOURCE_PINS), _task("pin:x", SOURCE_PINS)]
    merged = merge_tasks(pipeline, pins, [_task("pin:x")])
    assert [(t.task_id, t.source) for t in merged] == [
        ("task-4", SOURCE_PIPELINE),
        ("task-5", SOURCE_PIPELINE),
        ("pin:x", SOURCE_PINS),
    ]
    assert merge_tasks() == []


def test_a_task_that_names_a_project_is_pending_for_that_project_only():
    tasks = pipeline_tasks(
        {
            "active_tasks": [
                {"task_id": "t-api", "stage": "build", "project": "git:api"},
                {"task_id": "t-web", "stage": "build", "project": "git:web"},
                {"task_id": "t-any", "stage": "build"},
            ]
        }
    )
    assert [t.task_id for t in pending_from_pipeline(tasks, project="git:api")] == [
        "t-api",
        "t-any",
    ]
    assert [t.task_id for t in pending_from_pipeline(tasks)] == ["t-any"]
    surfaced = pending_from_pipeline(tasks, project="git:web")
    assert [t.task_id for t in still_pending(surfaced, tasks, "git:api")] == ["t-any"]
