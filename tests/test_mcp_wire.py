"""``cortex mcp`` over stdio given request lines the SDK's own parser refuses.

A lone surrogate, an integer of thousands of digits, nesting thousands deep, a request whose
params are no object, JSON that is no request at all and a line that is not JSON: each must
get one answer (the old server dropped the line and the client waited for ever) and leave the
server serving. The SDK's client cannot send a lone surrogate
or deep nesting (it refuses to serialise them), so those tests write the JSON-RPC lines
themselves to the real server process; the long integer goes through the SDK's client.
"""

from __future__ import annotations

import json
import os
import select
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from pydantic import ValidationError

from cortex.adapters.mcp.wire import mend
from test_mcp import data, error_text, run_client

PROJECT = "/home/u/Projects/radio"
ANSWER_SECONDS = 20.0
"""Long enough for a loaded machine; the old server never answered at all."""


class RawServer:
    """``cortex mcp`` in a subprocess, spoken to in JSON-RPC lines written by hand."""

    def __init__(self, home: Path, cwd: Path) -> None:
        env = {**os.environ, "CORTEX_HOME": str(home), "CLAUDE_PROJECT_DIR": PROJECT}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cortex.entry", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        self.next_id = 0
        self.unread = b""
        """What the server wrote after the last line read."""
        self.others: list[dict[str, Any]] = []
        """Messages that answered no request of this client's (none are expected)."""
        hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
        assert "result" in self.request("initialize", json.dumps(hello))
        self.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send(self, line: str | bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: str) -> dict[str, Any]:
        """Send one request (``params`` as JSON text) and return its answer."""
        self.next_id += 1
        self.send(
            f'{{"jsonrpc": "2.0", "id": {self.next_id}, "method": "{method}", "params": {params}}}'
        )
        return self.answer(self.next_id)

    def call(self, tool: str, arguments: str) -> dict[str, Any]:
        """A tools/call's result (``arguments`` as JSON text)."""
        answer = self.request("tools/call", f'{{"name": "{tool}", "arguments": {arguments}}}')
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def answer(self, request_id: int) -> dict[str, Any]:
        while (message := self.next_message()).get("id") != request_id:
            self.others.append(message)
        return message

    def next_message(self) -> dict[str, Any]:
        """The next line the server writes, one JSON object (else the test fails)."""
        assert self.process.stdout is not None
        # Read past the file's buffer: a second line read along with the first would sit in
        # it, unseen by select(), and the answer on it would seem never to come.
        while b"\n" not in self.unread:
            if not select.select([self.process.stdout], [], [], ANSWER_SECONDS)[0]:
                raise AssertionError(f"no answer in {ANSWER_SECONDS} s")
            chunk = os.read(self.process.stdout.fileno(), 65536)
            assert chunk, f"the server exited ({self.process.poll()})"
            self.unread += chunk
        line, _, self.unread = self.unread.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        assert isinstance(message, dict)
        return message

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


@pytest.fixture
def raw(home: Path, tmp_path: Path) -> Iterator[RawServer]:
    server = RawServer(home, tmp_path)
    try:
        yield server
    finally:
        server.close()


def text(result: dict[str, Any]) -> str:
    return " ".join(block.get("text", "") for block in result["content"])


def structured(result: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("isError"), text(result)
    found: dict[str, Any] = result["structuredContent"]
    return found


def test_a_lone_surrogate_is_answered_and_stored_as_a_replacement_character(
    raw: RawServer, home: Path
) -> None:
    sid = structured(raw.call("start_session", "{}"))["session_id"]
    # A JavaScript string cut inside an emoji: stored with U+FFFD, as free text is.
    pinned = raw.call("working_memory_pin", '{"label": "cut", "content": "deploy \\ud83d now"}')
    assert structured(pinned)["pin"]["content"] == "deploy \ufffd now"
    wrong = raw.call("session_status", '{"session_id": "\\udc00"}')
    assert wrong["isError"] is True
    assert text(wrong).startswith("invalid session id '\ufffd': use 1-128 letters")
    assert "\n" not in text(wrong)
    view = structured(raw.call("working_memory_view", json.dumps({"session_id": sid})))
    assert [(p["label"], p["content"]) for p in view["pins"]] == [("cut", "deploy \ufffd now")]
    raw.close()
    rows = sqlite3.connect(home / "brain.db").execute("SELECT working_memory FROM session_states")
    assert "deploy \ufffd now" in json.loads(rows.fetchone()[0])[0]["content"]


def test_nesting_deeper_than_the_sdk_parses_is_a_tool_error_naming_the_argument(
    raw: RawServer,
) -> None:
    structured(raw.call("start_session", "{}"))
    nested = "[" * 3000 + '"x"' + "]" * 3000
    result = raw.call("start_session", f'{{"keywords": {nested}}}')
    assert result["isError"] is True
    assert text(result) == (
        "argument `keywords[0]` should be a valid string, not a list; fix it and call "
        "start_session again"
    )
    deep = '{"a": ' * 300 + "1" + "}" * 300
    result = raw.call("working_memory_pin", f'{{"label": "l", "content": {deep}}}')
    assert text(result).startswith("argument `content` should be a valid string, not an object;")
    assert structured(raw.call("working_memory_view", "{}"))["count"] == 0


def test_a_request_that_is_no_json_rpc_request_gets_an_error_under_its_id(
    raw: RawServer,
) -> None:
    answer = raw.request("tools/call", '"session_status"')
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"].startswith("not a valid JSON-RPC request (")
    assert answer["error"]["message"].endswith("; fix the request and send it again")
    # A malformed answer to a request of the server's is not answered: its id is the
    # server's, and an error under it could fail a request of the client's with that id.
    raw.send('{"jsonrpc": "2.0", "id": 77, "result": "not an object"}')
    assert "isError" in raw.call("session_status", "{}")  # still serving
    assert raw.others == []


def test_an_integer_too_long_to_parse_is_a_tool_error_through_the_sdk_client(
    home: Path, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortex.entry", "mcp"],
        env={"CORTEX_HOME": str(home), "CLAUDE_PROJECT_DIR": PROJECT},
        cwd=str(tmp_path),
    )

    async def body(client: Client) -> None:
        sid = data(await client.call_tool("start_session", {}))["session_id"]
        with anyio.fail_after(ANSWER_SECONDS):
            result = await client.call_tool("session_chain", {"depth": 10**5000})
        assert error_text(result) == (
            "argument `depth` should be a finite number; fix it and call session_chain again"
        )
        with anyio.fail_after(ANSWER_SECONDS):
            result = await client.call_tool("list_memories", {"offset": -(10**5000)})
        assert error_text(result).startswith("argument `offset` should be a finite number")
        chain = data(await client.call_tool("session_chain", {"depth": 3}))
        assert [s["session_id"] for s in chain["sessions"]] == [sid]

    run_client(params, body)


NOT_JSON = [
    ("hello", "expecting value at column 1"),
    ('{"jsonrpc": "2.0", "id": 1', "expecting ',' delimiter at the end of the line"),
    (
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}',
        "expecting ',' delimiter at the end of the line",
    ),
    ("12abc", "extra data at column 3"),
    (b"\x00\xff\xfe\x80\x1b[2Jgarbage", "expecting value at column 1"),
    ("{'jsonrpc': '2.0'}", "expecting property name enclosed in double quotes at column 2"),
]


@pytest.mark.parametrize(("line", "where"), NOT_JSON)
def test_a_line_that_is_not_json_gets_a_parse_error_and_the_server_keeps_serving(
    raw: RawServer, line: str | bytes, where: str
) -> None:
    raw.send(line)
    answer = raw.next_message()  # the first line out is its answer, and the only one
    assert set(answer) == {"jsonrpc", "id", "error"} and answer["id"] is None
    assert answer["error"]["code"] == -32700
    assert answer["error"]["message"] == (
        f"Parse error: the line is not JSON ({where}); send each JSON-RPC message as one line "
        'of JSON, e.g. {"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    )
    assert "isError" in raw.call("session_status", "{}")  # still serving, nothing else said
    assert raw.others == []


INVALID = 'not a valid JSON-RPC request (each needs jsonrpc "2.0", an id, a method and, '
BATCH = "not a valid JSON-RPC request (a batch, a JSON array, is not supported); send each "


@pytest.mark.parametrize(
    ("line", "request_id", "message"),
    [
        ("5", None, INVALID),
        ('"tools/list"', None, INVALID),
        ("null", None, INVALID),
        ('{"foo": 1}', None, INVALID),
        ("{}", None, INVALID),
        ("[]", None, BATCH),
        ('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', None, BATCH),
        ('{"jsonrpc": "2.0", "method": 5}', None, INVALID),  # (a notification, yet no valid one)
        ('{"jsonrpc": "2.0", "method": "notifications/initialized", "params": 1}', None, INVALID),
        ('{"jsonrpc": "2.0", "id": 9}', None, INVALID),  # (an id, but a request or an answer?)
        ('{"jsonrpc": "2.0", "id": 8, "method": 5}', 8, INVALID),
        ('{"jsonrpc": "1.0", "id": "a", "method": "ping"}', "a", INVALID),
        ('{"id": 7, "method": "tools/list"}', 7, INVALID),
        ('{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": [1], "\\ud83d": 1}', 6, INVALID),
    ],
)
def test_json_that_is_no_request_gets_invalid_request_under_its_id_or_null(
    raw: RawServer, line: str, request_id: int | str | None, message: str
) -> None:
    raw.send(line)
    answer = raw.next_message()
    assert answer == {"jsonrpc": "2.0", "id": request_id, "error": answer["error"]}
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"].startswith(message)
    assert "\n" not in answer["error"]["message"]
    assert "isError" in raw.call("session_status", "{}")
    assert raw.others == []


def test_blank_lines_and_valid_notifications_get_no_answer(raw: RawServer) -> None:
    for line in ["", "   ", "\t", '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
                 '{"jsonrpc": "2.0", "method": "notifications/cancelled",'
                 ' "params": {"requestId": 99, "reason": "x"}}',
                 '{"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {}}',
                 '{"jsonrpc": "2.0", "method": "no/such/notification"}']:  # fmt: skip
        raw.send(line)
    raw.send("oops")  # the first answer after them is this line's: they had none
    assert raw.next_message()["error"]["code"] == -32700
    assert raw.request("ping", "{}") == {"jsonrpc": "2.0", "id": raw.next_id, "result": {}}
    assert raw.others == []


BAD_IDS = [
    '{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
    '{"jsonrpc": "2.0", "id": null, "method": "ping"}',
    '{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
    '{"jsonrpc": "2.0", "id": 5.0, "method": "ping"}',
    '{"jsonrpc": "2.0", "id": {}, "method": "tools/call", "params": {"name": "start_session"}}',
    '{"jsonrpc": "2.0", "id": [1], "method": "initialize"}',
    '{"jsonrpc": "2.0", "\\u0069d": false, "method": "ping"}',  # (an escaped key)
    '{"jsonrpc": "2.0", "id": 1, "id": true, "method": "ping"}',  # (the last one counts)
    '{"jsonrpc": "2.0", "id": false, "method": "ping"}\r{"jsonrpc": "2.0", "id": 1e3, '
    '"method": "ping", "params": {"x": "\\ud83d"}}',  # (two lines to the SDK, both answered)
]


@pytest.mark.parametrize("line", BAD_IDS)
def test_a_request_whose_id_is_no_string_or_integer_gets_one_invalid_request_under_null(
    raw: RawServer, line: str
) -> None:
    raw.send(line)
    raw.send('{"jsonrpc": "2.0", "method": "ping"}')  # a notification, even of a request method
    answers = line.count("\r") + 1
    ping = raw.request("ping", "{}")
    assert ping == {"jsonrpc": "2.0", "id": raw.next_id, "result": {}}
    error = {
        "code": -32600,
        "message": "not a valid JSON-RPC request (its id must be a string or an integer); "
        "fix the request and send it again",
    }
    assert raw.others == [{"jsonrpc": "2.0", "id": None, "error": error}] * answers
    assert raw.call("session_status", "{}")["isError"] is True  # no session was started


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "id": true, "method": "ping", "params": {"x": "\\ud83d"}}',
        '{"jsonrpc": "2.0", "id": ' + "9" * 5000 + ', "method": "ping"}',
    ],
)
def test_a_line_the_sdk_refuses_with_an_id_that_is_no_string_or_integer_is_refused_mended(
    line: str,
) -> None:
    # Mended, it would read as a notification, its id dropped (the gate answers these first;
    # mending answers them wherever stdin is served without it).
    with pytest.raises(ValidationError) as refused:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    answer = mend(refused.value)
    assert answer is not None and isinstance(answer.message, types.JSONRPCError)
    assert (answer.message.id, answer.message.error.code) == (None, -32600)


def test_the_gate_keeps_the_sdk_pointing_fd_0_at_the_null_device_while_serving(
    raw: RawServer,
) -> None:
    fds = Path(f"/proc/{raw.process.pid}/fd")
    if not fds.exists():
        pytest.skip("no /proc to read the server's descriptors from")
    # A handler or child that reads stdin reads EOF, not the client's requests.
    assert os.readlink(fds / "0") == os.devnull
    assert "result" in raw.request("ping", "{}")
