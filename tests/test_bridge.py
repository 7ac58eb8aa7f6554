"""``cortex bridge``: the JSON-lines protocol the OpenClaw plugin speaks, in-process and real."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import copy_home
from cortex.adapters.openclaw.bridge import MAX_LINE_BYTES, Bridge, openclaw_config, serve
from cortex.clock import FixedClock
from cortex.config import Config, load_config
from cortex.core.topics import display_name as project_name
from cortex.services.app import Services
from cortex.services.sessions.manager import SessionPersistenceManager


@pytest.fixture
def bridge(services: Services) -> Bridge:
    return Bridge(services, project="radio", workdir="/home/u/Projects/radio")


def call(bridge: Bridge, method: str, **params: Any) -> Any:
    response = bridge.handle({"id": 1, "method": method, "params": params})
    assert "error" not in response, response
    return response["result"]


def error(bridge: Bridge, request: Any) -> dict[str, Any]:
    response = bridge.handle(request)
    assert "result" not in response, response
    return dict(response["error"])


def test_service_session_is_adopted_by_the_first_conversation(bridge: Bridge) -> None:
    started = call(bridge, "session_start")
    assert started["cold_start"] is True and started["preamble_pending"] is False
    bound = call(bridge, "session_start", session_key="oc-1")
    assert bound == {
        "session_id": started["session_id"],
        "adopted": True,
        "preamble_pending": False,
        "pins": [],
    }
    other = call(bridge, "session_start", session_key="oc-2")
    assert other["session_id"] != started["session_id"] and other["adopted"] is False
    assert call(bridge, "view", session_key="oc-1")["session_id"] == started["session_id"]


def test_turn_signals_are_captured_as_they_happen(
    bridge: Bridge, manager: SessionPersistenceManager
) -> None:
    sid = call(bridge, "session_start")["session_id"]
    call(bridge, "before_prompt_build", session_key="k", prompt="wire the ft991a cat control")
    call(
        bridge,
        "after_tool_call",
        session_key="k",
        tool_name="exec",
        params={"workdir": "/home/u/Projects/lbf-ham-radio", "command": "pytest"},
    )
    messages = [{"role": "assistant", "content": [{"type": "text", "text": "serial timeouts"}]}]
    call(bridge, "agent_end", session_key="k", messages=messages)
    call(bridge, "pin", session_key="k", label="step", content="3 of 5")
    compacted = call(bridge, "before_compaction", session_key="k", messages=[])
    assert compacted["captured"] is True and compacted["checkpoint_id"].startswith("ckpt-")
    after = call(bridge, "before_prompt_build", session_key="k")
    assert after["checkpoint"].startswith(f"[CORTEX CHECKPOINT {compacted['checkpoint_id']} - ")
    assert "PINS:\n- step: 3 of 5" in after["checkpoint"]
    assert after["prepend_context"] == after["checkpoint"]
    later = call(bridge, "before_prompt_build", session_key="k")
    assert later["checkpoint"] is None  # the checkpoint comes back once, then the pins
    assert later["prepend_context"] == later["pins"] == "WORKING MEMORY PINS:\n- step: 3 of 5"
    state = manager.resolve(sid)
    assert state.is_open
    assert {"ft991a", "serial"} <= set(state.hot_topics)
    transcript = bridge.events.snapshots(sid)[0].transcript_md  # written before the compaction
    assert "wire the ft991a cat control" in transcript and "serial timeouts" in transcript
    assert "lbf-ham-radio" in state.active_projects


def test_tool_params_are_redacted_before_they_feed_topics(
    bridge: Bridge, manager: SessionPersistenceManager
) -> None:
    sid = call(bridge, "session_start")["session_id"]
    token = "ghp_" + "A1b2C3d4" * 5
    command = f"curl -H 'Authorization: token {token}' https://api.github.com/user"
    call(bridge, "after_tool_call", tool_name="exec", params={"command": command})
    assert token.lower() not in json.dumps(manager.resolve(sid).to_dict()).lower()


@pytest.mark.parametrize(
    ("project", "name"),
    [
        ("git:github.com/org/radio#1a2b3c4d5e6f", "radio"),
        ("git:#1a2b3c4d5e6f", "git:#1a2b3c4d5e6f"),
        ("path:/home/u/Projects/radio", "radio"),
        ("/home/u/Projects/radio/", "radio"),
        ("radio", "radio"),
        (None, None),
    ],
)
def test_project_name_is_the_readable_part(project: str | None, name: str | None) -> None:
    assert project_name(project) == name


def test_a_project_id_is_scoped_by_id_and_shown_by_name(
    services: Services, manager: SessionPersistenceManager
) -> None:
    project = "git:github.com/org/radio#1a2b3c4d5e6f"
    sid = call(Bridge(services, project=project), "session_start")["session_id"]
    state = manager.resolve(sid)
    assert state.project == project and "radio" in state.active_projects
    assert not any("github" in topic for topic in state.hot_topics)


def test_without_pins_every_prompt_only_the_checkpoint_comes_back(bridge: Bridge) -> None:
    call(bridge, "session_start", session_key="k")
    call(bridge, "pin", session_key="k", label="step", content="3 of 5")
    quiet = call(bridge, "before_prompt_build", session_key="k", with_pins=False)
    assert quiet["prepend_context"] is None and quiet["pins"].startswith("WORKING MEMORY PINS")
    call(bridge, "before_compaction", session_key="k", messages=[])
    after = call(bridge, "before_prompt_build", session_key="k", with_pins=False)
    assert after["prepend_context"] == after["checkpoint"]


def test_preamble_once_then_pins_every_prompt(
    services: Services, manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    first = Bridge(services, project="radio")
    call(first, "session_start", session_key="a")
    call(first, "pin", session_key="a", label="baud", content="38400", critical=True)
    ended = call(first, "session_end", session_key="a")
    assert ended["ended"] is True and ended["state"] == "COMPLETE"
    clock.advance(hours=3)

    second = Bridge(services, project="radio")
    assert call(second, "session_start")["preamble_pending"] is True
    prompt = call(second, "before_prompt_build", session_key="b", prompt="go on")
    assert prompt["preamble"].startswith("[SESSION CONTINUITY")
    assert prompt["prepend_context"].startswith(
        '<session-continuity hint="inherited from prior sessions">\n[SESSION CONTINUITY'
    )
    assert prompt["pins"].startswith("WORKING MEMORY PINS:\n- [CRITICAL] baud [inherited from")
    again = call(second, "before_prompt_build", session_key="b")
    assert again["preamble"] is None and again["prepend_context"] == again["pins"]


def test_session_end_of_an_unknown_conversation_ends_nothing(bridge: Bridge) -> None:
    sid = call(bridge, "session_start")["session_id"]
    assert call(bridge, "session_end", session_key="never-seen") == {
        "session_id": None,
        "ended": False,
    }
    assert bridge.sessions.resolve(sid).is_open


def test_continue_chain_and_shutdown(bridge: Bridge, clock: FixedClock) -> None:
    old = call(bridge, "session_start", session_key="old")["session_id"]
    call(bridge, "pin", session_key="old", label="k", content="v")
    call(bridge, "session_end", session_key="old")
    clock.advance(hours=24 * 20)  # beyond the lookback: only a manual continue brings it back
    new = call(bridge, "session_start", session_key="new")["session_id"]
    assert call(bridge, "view", session_key="new")["count"] == 0
    cont = call(bridge, "session_continue", session_key="new", target_session_id=old)
    assert cont["continued_from"] == old and len(cont["inherited_pins"]) == 1
    chain = call(bridge, "chain", session_key="new", depth=3)
    assert [s["session_id"] for s in chain["sessions"]] == [old, new]
    assert call(bridge, "shutdown") == {"ended": [new]}
    assert bridge.stopping and not bridge.sessions.resolve(new).is_open


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ([], "a request is an object"),
        ({"id": 3}, "no method; use one of: after_tool_call, agent_end,"),
        ({"id": 3, "method": "drop_tables"}, "unknown method 'drop_tables'; use one of: "),
        ({"id": 3, "method": "ping", "params": [1]}, "params must be an object, not an array"),
        ({"id": 3, "method": "ping", "params": []}, "params must be an object, not an array"),
        ({"id": 3, "method": "ping", "params": False}, "params must be an object, not a boolean"),
        ({"id": 3, "method": "ping", "params": ""}, "params must be an object, not a string"),
        ({"id": 3, "method": "pin", "params": {"label": "x", "content": "y"}}, "no session yet"),
    ],
)
def test_bad_requests_get_one_line_errors(bridge: Bridge, request_: Any, message: str) -> None:
    assert message in error(bridge, request_)["message"]


def test_bad_parameters_are_validation_errors(bridge: Bridge) -> None:
    call(bridge, "session_start", session_key="k")
    cases = [
        ({"label": 5, "content": "x"}, "label must be a string, not a number"),
        ({"label": "x"}, 'content is required; send e.g. "content": "text"'),
        ({"label": "x", "content": "y", "critical": "yes"}, "critical must be true or false"),
        ({"label": "x", "content": "y", "confidence": "high"}, "confidence must be a number"),
        ({"label": "x", "content": "y", "confidence": 3}, "confidence 3.0 is outside 0-1"),
        ({"label": "x", "content": "y", "confidence": float("nan")}, "must be a finite number"),
    ]
    for params, message in cases:
        got = error(bridge, {"id": 9, "method": "pin", "params": {"session_key": "k", **params}})
        assert got["type"] == "ValidationError" and message in got["message"], got
    got = error(bridge, {"id": 9, "method": "chain", "params": {"session_id": "../../etc"}})
    assert got == {
        "type": "UnsafeIdError",
        "status": 400,
        "message": "invalid session id '../../etc': use 1-128 letters, digits or . _ : @ + - "
        "(no '/', no '..'), e.g. a UUID",
    }


MESSAGES = '"messages": [{"role": "user", "content": "text"}]'


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        # an array of strings: never a string taken as an array of one, never an item
        # dropped or written as text
        (
            "after_tool_call",
            {"derived_paths": "src/app.py"},
            "derived_paths must be an array of strings, not a string; "
            'send e.g. "derived_paths": ["text"]',
        ),
        (
            "after_tool_call",
            {"derived_paths": ["src/app.py", 7]},
            'derived_paths[1] must be a string, not a number; send e.g. "derived_paths": ["text"]',
        ),
        (
            "agent_end",
            {"categories": ["bug", None]},
            'categories[1] must be a string, not null; send e.g. "categories": ["text"]',
        ),
        (
            "session_start",
            {"keywords": {"a": 1}},
            'keywords must be an array of strings, not an object; send e.g. "keywords": ["text"]',
        ),
        # an object: never false, 0, "" or [] taken for {}
        (
            "after_tool_call",
            {"params": []},
            'params must be an object, not an array; send e.g. "params": {"key": "value"}',
        ),
        (
            "after_tool_call",
            {"params": "ls -la"},
            'params must be an object, not a string; send e.g. "params": {"key": "value"}',
        ),
        # messages: an array of message objects, never a string read as no text
        (
            "agent_end",
            {"messages": "all done"},
            f"messages must be an array of messages, not a string; send e.g. {MESSAGES}",
        ),
        (
            "before_compaction",
            {"messages": ["all done"]},
            f"messages[0] must be an object, not a string; send e.g. {MESSAGES}",
        ),
        (
            "agent_end",
            {"messages": [{"role": "assistant", "content": 5}]},
            f"messages[0].content must be a string or an array, not a number; send e.g. {MESSAGES}",
        ),
        (
            "agent_end",
            {"messages": [{"role": "assistant", "content": [{"type": "text", "text": 5}]}]},
            f"messages[0].content[0].text must be a string, not a number; send e.g. {MESSAGES}",
        ),
        (
            "agent_end",
            {"messages": [{"role": 1, "content": "x"}]},
            f"messages[0].role must be a string, not a number; send e.g. {MESSAGES}",
        ),
        # booleans: true or false only; numbers: never a string or a boolean
        (
            "before_prompt_build",
            {"with_pins": "false"},
            'with_pins must be true or false, not a string; send e.g. "with_pins": true',
        ),
        (
            "pin",
            {"label": "a", "content": "b", "critical": 1},
            'critical must be true or false, not a number; send e.g. "critical": false',
        ),
        (
            "pin",
            {"label": "a", "content": "b", "confidence": True},
            'confidence must be a number, not a boolean; send e.g. "confidence": 1.0',
        ),
        ("chain", {"depth": "5"}, 'depth must be a number, not a string; send e.g. "depth": 5'),
        (
            "shutdown",
            {"end_sessions": "no"},
            'end_sessions must be true or false, not a string; send e.g. "end_sessions": true',
        ),
        # strings
        (
            "before_prompt_build",
            {"prompt": ["deploy"]},
            'prompt must be a string, not an array; send e.g. "prompt": "text"',
        ),
        (
            "session_end",
            {"reason": 5},
            'reason must be a string, not a number; send e.g. "reason": "text"',
        ),
    ],
)
def test_a_parameter_of_another_json_type_is_refused_naming_it(
    bridge: Bridge, method: str, params: dict[str, Any], message: str
) -> None:
    sid = call(bridge, "session_start", session_key="k")["session_id"]
    before = bridge.sessions.resolve(sid)
    got = error(bridge, {"id": 9, "method": method, "params": {"session_key": "k", **params}})
    assert got == {"type": "ValidationError", "status": 400, "message": message}
    assert bridge.sessions.resolve(sid) == before and not bridge.stopping


DOCUMENTED = {
    # a JSON type as docs/mcp.md's table names it: a value of another type, and the words
    # of the refusal
    "string": (5, "a string"),
    "boolean": ("true", "true or false"),
    "number": ("0.5", "a number"),
    "integer": ("5", "a number"),
    "object": ([], "an object"),
    "array of strings": ("text", "an array of strings"),
    "array of messages": ("text", "an array of messages"),
}
REQUIRED = {
    "pin": {"label": "a", "content": "b"},
    "unpin": {"label": "a"},
    "session_continue": {"target_session_id": "s-1"},
    "memory_remember": {"content": "x"},
}


def documented_parameters() -> list[tuple[str, str, str]]:
    """(method, parameter, JSON type) of each row of docs/mcp.md's bridge parameter table."""
    text = (Path(__file__).parents[1] / "docs" / "mcp.md").read_text(encoding="utf-8")
    table = text.split("| method | parameters (JSON type) |", 1)[1].split("\n\n", 1)[0]
    found = []
    for row in table.splitlines()[2:]:
        method_cell, params_cell = row.strip("| ").split(" | ")
        method = re.findall(r"`([a-z_]+)`", method_cell)[0]
        for name, kind in re.findall(r"`([a-z_]+)`: ([a-z ]+?)(?: \(|;|$)", params_cell):
            found.append((method, name, kind))
    return found


def test_the_documented_parameters_take_their_documented_types(bridge: Bridge) -> None:
    documented = documented_parameters()
    assert len(documented) == 34 and {kind for *_, kind in documented} == set(DOCUMENTED)
    call(bridge, "session_start", session_key="k")
    for method, name, kind in documented:
        wrong, words = DOCUMENTED[kind]
        params = {"session_key": "k", **REQUIRED.get(method, {}), name: wrong}
        got = error(bridge, {"id": 1, "method": method, "params": params})
        assert got["message"].startswith(f"{name} must be {words}, not "), (method, got)


def test_a_refused_request_does_nothing(bridge: Bridge) -> None:
    """Parameters are read before anything is written: the request can be sent again."""
    sid = call(bridge, "session_start", session_key="k")["session_id"]
    prompt = {"session_key": "k", "prompt": "deploy it", "with_pins": 1}
    error(bridge, {"id": 1, "method": "before_prompt_build", "params": prompt})
    assert bridge.events.events(sid) == []  # the prompt was not recorded before the refusal
    error(bridge, {"id": 2, "method": "pin", "params": {"session_key": "new", "label": 5}})
    assert "new" not in bridge.bindings and bridge.opened == [sid]  # no session started


def test_null_is_an_omitted_parameter(bridge: Bridge) -> None:
    sid = call(bridge, "session_start", session_key="k", keywords=None)["session_id"]
    nulls = {"session_key": "k", "session_id": None, "project": None}
    assert call(bridge, "after_tool_call", **nulls, params=None, derived_paths=None)
    assert call(bridge, "agent_end", **nulls, messages=None, text="shipped", categories=None)
    pin = call(bridge, "pin", **nulls, label="a", content="b", critical=None, confidence=None)
    assert pin["pin"]["importance"] != "CRITICAL" and pin["pin"]["confidence"] == 1.0
    built = call(bridge, "before_prompt_build", **nulls, prompt=None, with_pins=None)
    assert built["pins"] == built["prepend_context"]  # with_pins: null is its default, true
    assert [s["session_id"] for s in call(bridge, "chain", **nulls, depth=None)["sessions"]] == [
        sid
    ]
    assert "shipped" in bridge.sessions.resolve(sid).hot_topics


def test_the_documented_types_are_taken(bridge: Bridge) -> None:
    """What the plugin sends, and what an integer stands for in a number (``5.0`` too)."""
    sid = call(bridge, "session_start", session_key="k", keywords=["radio"])["session_id"]
    tool = {"tool_name": "edit", "params": {"path": "src/serial.py"}}
    call(bridge, "after_tool_call", session_key="k", derived_paths=["src/serial.py"], **tool)
    blocks = [{"type": "image", "source": {}}, {"type": "text", "text": "baud fixed"}]
    messages = [{"role": "user", "content": "fix"}, {"role": "assistant", "content": blocks}]
    call(bridge, "agent_end", session_key="k", categories=["bugfix"], messages=messages)
    call(bridge, "pin", session_key="k", label="a", content="b", critical=True, confidence=1)
    assert len(call(bridge, "chain", session_key="k", depth=5.0)["sessions"]) == 1
    state = bridge.sessions.resolve(sid)
    assert "baud" in state.hot_topics and state.working_memory[0].confidence == 1.0
    assert [e.content for e in bridge.events.events(sid)] == ["baud fixed"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
METHOD_PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "session_key": JSON | st.sampled_from(["../x", "k", ""]),
        "session_id": JSON | st.sampled_from(["../x", "..", "a/b"]),
        "label": JSON,
        "content": JSON,
        "prompt": JSON
        | st.builds(str.__mul__, st.text(min_size=1, max_size=3), st.integers(10_000, 40_000)),
        "messages": JSON,
        "params": JSON,
        "tool_name": JSON,
        "depth": JSON,
        "critical": JSON,
        "keywords": JSON,
        "target_session_id": JSON,
    },
)


@settings(max_examples=60, deadline=None)
@given(
    requests=st.lists(
        st.fixed_dictionaries(
            {
                "id": JSON,
                "method": st.sampled_from(
                    [
                        "ping",
                        "pin",
                        "unpin",
                        "view",
                        "chain",
                        "session_start",
                        "agent_end",
                        "after_tool_call",
                        "before_prompt_build",
                        "before_compaction",
                        "session_continue",
                        "session_end",
                        "nope",
                    ]  # fmt: skip
                ),
                "params": METHOD_PARAMS,
            }
        )
        | JSON,
        max_size=8,
    )
)
def test_fuzzed_requests_always_get_a_response_and_keep_data(
    requests: list[Any], tmp_path_factory: pytest.TempPathFactory, kept_home: tuple[Path, str]
) -> None:
    template, kept = kept_home
    home = copy_home(template, tmp_path_factory.mktemp("bridge"))
    services = Services.open(load_config(home, {}, {}), FixedClock("2026-02-16T09:00:00Z"))
    manager = services.sessions
    before = manager.store.get_session(kept)
    assert before is not None and before.working_memory
    bridge = Bridge(services)
    for request in requests:
        if kept in json.dumps(request, default=str):
            continue
        response = bridge.handle(request)
        assert set(response) in ({"id", "result"}, {"id", "error"})
        json.dumps(response)  # always serializable
    assert manager.store.get_session(kept) == before
    assert not (home.parent / "x").exists()


def test_serve_survives_garbage_lines() -> None:
    stdin = io.BytesIO(
        b"not json\n"
        b"\n"
        b"\xff\xfe\n"
        + b"[" * (MAX_LINE_BYTES + 10)
        + b"\n"
        + b'{"id": 7, "method": "ping"}\n'
        + b'{"id": 8, "method": "shutdown"}\n'
        + b'{"id": 9, "method": "ping"}\n'
    )
    stdout = io.BytesIO()
    services = Services.open(load_config(Path(os.environ["CORTEX_HOME"]), {}, {}))
    assert serve(Bridge(services), stdin, stdout) == 0
    lines = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [r["id"] for r in lines] == [None, None, None, 7, 8]  # nothing after shutdown
    assert lines[0]["error"]["message"].startswith("not JSON: ")
    assert "over 8388608 bytes" in lines[2]["error"]["message"]
    assert lines[3]["result"]["pong"] is True


def test_lone_surrogates_are_replaced_and_every_request_answered(home: Path) -> None:
    # What JavaScript sends for a string cut inside an emoji, in an id and in texts to store.
    lines = [
        r'{"id": "\ud800", "method": "ping"}',
        r'{"id": 2, "method": "before_prompt_build",'
        r' "params": {"session_key": "k", "prompt": "deploy the rocket \ud83d"}}',
        r'{"id": 3, "method": "pin",'
        r' "params": {"session_key": "k", "label": "cut \uDC00", "content": "emoji \ud83d"}}',
        r'{"id": 4, "method": "agent_end", "params": {"session_key": "k",'
        r' "messages": [{"role": "assistant", "content": "launched \ud83d"}]}}',
        r'{"id": 5, "method": "memory_remember",'
        r' "params": {"session_key": "k", "content": "likes emoji \ud83d\ude00 \ud83d"}}',
        r'{"id": 6, "method": "shutdown", "params": {"end_sessions": false}}',
    ]
    stdout = io.BytesIO()
    with Services.open(load_config(home, {}, {})) as services:
        bridge = Bridge(services)
        assert serve(bridge, io.BytesIO("\n".join(lines).encode()), stdout) == 0
        answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
        assert [(a["id"], a.get("error")) for a in answers] == [
            ("?", None),
            *[(n, None) for n in range(2, 7)],
        ]
        sid = answers[1]["result"]["session_id"]
        state = services.sessions.resolve(sid)
        assert {"rocket", "launched"} <= set(state.hot_topics)
        assert [(p.label, p.content) for p in state.working_memory] == [("cut ?", "emoji ?")]
        transcript = "\n".join(e.content for e in services.events.events(sid))
        assert "deploy the rocket ?" in transcript and "launched ?" in transcript
        remembered = services.memory.live(answers[4]["result"]["id"])
        assert remembered.content == "likes emoji \U0001f600 ?"


def test_non_finite_numbers_are_refused_and_never_written(home: Path) -> None:
    lines = [
        b'{"id": NaN, "method": "ping"}',
        b'{"id": 1e999, "method": "ping"}',
        b'{"id": 3, "method": "session_start", "params": {"session_key": "k"}}',
        b'{"id": 4, "method": "chain", "params": {"session_key": "k", "depth": -Infinity}}',
        b'{"id": 5, "method": "chain", "params": {"session_key": "k", "depth": -3}}',
        b'{"id": 6, "method": "chain", "params": {"session_key": "k", "depth": 1e300}}',
        b'{"id": 7, "method": "pin",'
        b' "params": {"session_key": "k", "label": "x", "content": "y", "confidence": 1e400}}',
        b"[" * 100_000,
        b'{"id": 9, "method": "chain", "params": {"session_key": "k", "depth": 2.0}}',
        b'{"id": 10, "method": "chain", "params": {"session_key": "k", "depth": 1%s}}'
        % (b"0" * 400),  # an integer past a float's range: no unexpected OverflowError
        b'{"id": 11, "method": "pin", "params": {"session_key": "k", "label": "x",'
        b' "content": "y", "confidence": -1%s}}' % (b"0" * 400),
    ]
    stdout = io.BytesIO()
    with Services.open(load_config(home, {}, {})) as services:
        assert serve(Bridge(services), io.BytesIO(b"\n".join(lines)), stdout) == 0

    def strict(name: str) -> None:
        raise AssertionError(f"{name} written")

    answers = [json.loads(line, parse_constant=strict) for line in stdout.getvalue().splitlines()]
    assert [(a["id"], a.get("error", {}).get("message")) for a in answers] == [
        (None, "not JSON: NaN is not a JSON number; send a finite number or null"),
        (None, "not JSON: number 1e999 is out of range; send a finite number"),
        (3, None),
        (None, "not JSON: -Infinity is not a JSON number; send a finite number or null"),
        (5, "depth must be a whole number from 1 to 100, e.g. 5"),
        (6, "depth must be a whole number from 1 to 100, e.g. 5"),
        (None, "not JSON: number 1e400 is out of range; send a finite number"),
        (None, "not JSON: nested too deeply"),
        (9, None),
        (10, 'depth must be a finite number; send e.g. "depth": 5'),
        (11, 'confidence must be a finite number; send e.g. "confidence": 1.0'),
    ]
    assert {a["error"]["status"] for a in answers if "error" in a} == {400}


def test_openclaw_profile_paths(make_config: Callable[..., Config], tmp_path: Path) -> None:
    config = make_config()
    profiled = openclaw_config(config, None)
    assert profiled.working_memory_path == config.home / "workspace/memory/working_memory.json"
    assert profiled.sessions_dir == config.home / "sessions"
    assert openclaw_config(config, tmp_path).working_memory_path == (
        tmp_path / "memory/working_memory.json"
    )
    moved = make_config(working_memory_path=str(tmp_path / "wm.json"))
    assert openclaw_config(moved, None).working_memory_path == tmp_path / "wm.json"


def bridge_process(*args: str, home: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CORTEX_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "cortex.entry", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def ask(proc: subprocess.Popen[bytes], method: str, **params: Any) -> Any:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(
        json.dumps({"id": method, "method": method, "params": params}).encode() + b"\n"
    )
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def test_real_bridge_with_openclaw_profile(tmp_path: Path, home: Path) -> None:
    workspace = tmp_path / "ws"
    proc = bridge_process(
        "bridge", "--profile", "openclaw", "--workspace", str(workspace), home=home
    )
    sid = ask(proc, "session_start")["result"]["session_id"]
    ask(proc, "pin", label="deploy", content="make deploy")
    mirror = json.loads((workspace / "memory" / "working_memory.json").read_text())
    assert mirror["sessionId"] == sid and mirror["items"][0]["label"] == "deploy"
    # OpenClaw's own working-memory tool edits the file; the final capture reads it back.
    mirror["items"].append({"label": "added-in-openclaw", "content": "from the file"})
    (workspace / "memory" / "working_memory.json").write_text(json.dumps(mirror))
    assert ask(proc, "shutdown")["result"] == {"ended": [sid]}
    assert proc.wait(timeout=10) == 0
    manager = SessionPersistenceManager.open(load_config(home, {}, {}))
    labels = [p.label for p in manager.resolve(sid).working_memory]
    assert labels == ["deploy", "added-in-openclaw"]
    assert (home / "sessions" / f"{sid}.json").is_file()


@pytest.mark.parametrize("profile", ["default", "openclaw"])
def test_the_workspace_option_holds_with_either_profile(
    tmp_path: Path, home: Path, profile: str
) -> None:
    # (the OpenClaw plugin passes --workspace with either profile; the flag beats a setting)
    workspace, setting = tmp_path / "ws", tmp_path / "set"
    proc = bridge_process(
        *("--set", f"file_mode_workspace={setting}", "bridge", "--profile", profile),
        *("--workspace", str(workspace)),
        home=home,
    )
    ask(proc, "memory_remember", session_key="k", content="We deploy on Fridays")
    ask(proc, "pin", session_key="k", label="step", content="3 of 5")
    assert ask(proc, "shutdown")["result"]["ended"]
    assert proc.wait(timeout=10) == 0
    assert "We deploy on Fridays" in (workspace / "memory.md").read_text()
    assert not setting.exists() and not (home / "workspace").exists()
    mirror = workspace / "memory" / "working_memory.json"
    assert mirror.exists() == (profile == "openclaw")


def test_sigterm_ends_the_bridge_sessions(home: Path) -> None:
    proc = bridge_process("bridge", home=home)
    sid = ask(proc, "session_start")["result"]["session_id"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    manager = SessionPersistenceManager.open(load_config(home, {}, {}))
    assert manager.resolve(sid).state == "COMPLETE"


def test_stdin_eof_ends_the_bridge_sessions_as_shutdown_does(home: Path) -> None:
    proc = bridge_process("bridge", "--project", "radio", home=home)
    sid = ask(proc, "session_start", session_key="k")["result"]["session_id"]
    ask(proc, "before_prompt_build", session_key="k", prompt="tune the kafka consumer")
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    manager = SessionPersistenceManager.open(load_config(home, {}, {}))
    assert manager.resolve(sid).state == "COMPLETE"
    restored = manager.on_session_start(project="radio")
    assert not manager.store.get_session(sid).crash_recovered  # type: ignore[union-attr]
    assert restored.preamble is not None and "CRASH" not in restored.preamble


def test_the_bridge_imports_neither_click_nor_the_mcp_sdk() -> None:
    code = (
        "import sys, cortex.adapters.openclaw.bridge; "
        "print(sorted(m for m in ('click', 'mcp', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        (
            "memory_remember",
            {"content": "x", "kind": ""},
            'kind must be one of semantic, episodic, not ""; send e.g. "kind": "semantic"',
        ),
        (
            "memory_remember",
            {"content": "x", "kind": "weird"},
            'kind must be one of semantic, episodic, not "weird"; send e.g. "kind": "semantic"',
        ),
        (
            "memory_snapshot",
            {"trigger": ""},
            'trigger must be one of new_session, reset, manual, not ""; '
            'send e.g. "trigger": "manual"',
        ),
        (
            "session_start",
            {"workdir": ""},
            "workdir is empty; omit it for the bridge's own or give a directory",
        ),
        (
            "session_start",
            {"agent_id": " "},
            "agent_id is empty; omit it for the bridge's own or give an agent id",
        ),
    ],
)
def test_an_empty_value_is_refused_never_taken_for_the_default(
    bridge: Bridge, method: str, params: dict[str, Any], message: str
) -> None:
    """``kind: ""`` was semantic, ``trigger: ""`` manual, an empty workdir or agent id the
    bridge's own; a value out of the set started the conversation's session first."""
    request = {"id": 9, "method": method, "params": {"session_key": "new", **params}}
    assert error(bridge, request) == {"type": "ValidationError", "status": 400, "message": message}
    assert bridge.bindings == {} and bridge.opened == []  # nothing started


def test_session_end_takes_any_reason_the_host_sends(bridge: Bridge) -> None:
    """OpenClaw's reasons are open-ended (``idle``, ``exit``...): only ``new`` and ``reset``
    write a snapshot, and any other, "" too, ends the session without one."""
    call(bridge, "session_start", session_key="k")
    assert call(bridge, "session_end", session_key="k", reason="")["ended"] is True
