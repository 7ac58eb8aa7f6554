"""Each way in names the next step in its own terms: the same service error reads as a flag
and a command on the command line, a JSON field and an endpoint over HTTP, an argument and a
tool to an MCP client, a keyword argument to a Python caller."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402
from mcp import Client  # noqa: E402

from cli_helpers import T0, cortex  # noqa: E402
from cortex.adapters.cli.plain import CLI  # noqa: E402
from cortex.adapters.mcp.errors import MCP  # noqa: E402
from cortex.adapters.mcp.server import ProjectScope, build_server  # noqa: E402
from cortex.adapters.server.app import HTTP, create_app  # noqa: E402
from cortex.adapters.server.ui.app import DASHBOARD  # noqa: E402
from cortex.clock import FixedClock  # noqa: E402
from cortex.config import load_config  # noqa: E402
from cortex.errors import CortexError, ValidationError, command, param  # noqa: E402
from cortex.services.app import Services  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src" / "cortex"
FLAG = re.compile(r"(?<![\w-])--[a-z]")
OPERATOR_COMMANDS = (
    "db migrate",
    "key create",
    "key list",
    "tenant create",
    "tenant list",
    "sync",
    "serve",
)
"""Commands only the operator of a home or server runs: every surface names them as they are."""


# -- the mechanism ------------------------------------------------------------------------------
def test_a_reference_renders_in_each_surfaces_terms() -> None:
    error = ValidationError(
        f"{param('add_tokens', -3)} is negative; pass {param('project', metavar='NAME')} "
        f"or see {command('pin remove', ' LABEL')}"
    )
    assert error.params == ("add_tokens", "project")
    assert error.render(CLI) == (
        "--tokens -3 is negative; pass --project NAME or see `cortex pin remove LABEL`"
    )
    assert error.render(HTTP) == (
        '"add_tokens": -3 is negative; pass "project" or see '
        "DELETE /v1/sessions/{session_id}/pins/{label}"
    )
    assert error.render(MCP) == (
        "`add_tokens`: -3 is negative; pass `project` or see working_memory_unpin"
    )
    assert (
        str(error) == "`add_tokens=-3` is negative; pass `project` or see `cortex pin remove LABEL`"
    )
    assert error.render(DASHBOARD) == (
        "add tokens -3 is negative; pass the Project field or see a pin's Remove button on "
        "the session's page"
    )


def test_references_survive_redaction_and_typed_control_characters() -> None:
    secret = ValidationError(f"no pin 'password=hunter22'; see {command('pin list')}")
    assert secret.render(CLI) == "no pin 'password=[REDACTED]'; see `cortex pin list`"
    typed = "a\x1eb\x1f"  # quoted with !r, as every typed value is: escaped, never a reference
    error = ValidationError(f"no pin {typed!r}; pass {param('x')}")
    assert error.render(CLI) == "no pin 'a\\x1eb\\x1f'; pass --x"
    assert error.params == ("x",)


# -- the same errors on every surface -----------------------------------------------------------
@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """The team server's app over a SQLite file, and a write key's headers."""
    host = ServiceHost(str(tmp_path / "server.db"), tmp_path / "data")
    with host.registry() as app:
        app.tenants.create_tenant("default")
        key = app.tenants.create_key("default", "write")[1]
    yield (
        TestClient(create_app(host.url, host=host, burst=10_000)),
        {"Authorization": f"Bearer {key}"},
    )
    host.close()


def http_error(served: tuple[TestClient, dict[str, str]], method: str, path: str,
               body: Any = None) -> str:  # fmt: skip
    client, headers = served
    response = client.request(method, path, json=body, headers=headers)
    assert 400 <= response.status_code < 500, response.text
    return str(response.json()["error"]["message"])


def mcp_results(tmp_path: Path, calls: list[tuple[str, dict[str, Any]]],
                home: Path | None = None, **env: str) -> list[Any]:  # fmt: skip
    """Each call's result through the SDK's client, with the settings ``env`` in ``home``
    (default: a fresh one), the project being ``tmp_path``."""
    config = load_config(home or tmp_path / "mcp-home", env)
    server = build_server(
        lambda: Services.open(config, FixedClock(T0)), ProjectScope(project_dir=str(tmp_path))
    )
    results: list[Any] = []

    async def main() -> None:
        async with Client(server) as client:
            for name, args in calls:
                results.append(await client.call_tool(name, args))

    anyio.run(main)
    return results


def mcp_errors(tmp_path: Path, calls: list[tuple[str, dict[str, Any]]], home: Path | None = None,
               **env: str) -> list[str]:  # fmt: skip
    """The text of each failed call's result ("" for one that succeeded)."""
    return [
        " ".join(getattr(b, "text", "") for b in result.content) if result.is_error else ""
        for result in mcp_results(tmp_path, calls, home, **env)
    ]


def full_session(home: Path) -> tuple[str, str, str]:
    """In ``home``: an open session with 10 pins (working memory full), an ended one and
    when it ended."""
    with Services.open(load_config(home, {}), FixedClock(T0)) as app:
        ended = app.sessions.on_session_start(None, "cli", project="api").session_id
        end_time = app.sessions.on_session_end(ended).end_time
        full = app.sessions.on_session_start(None, "cli", project="api").session_id
        for i in range(10):
            app.sessions.add_pin(f"p{i}", "x", full)
    return full, ended, str(end_time)


def test_service_errors_name_each_surfaces_own_parameters_and_steps(
    home: Path, tmp_path: Path, served: tuple[TestClient, dict[str, str]]
) -> None:
    full, ended, end_time = full_session(home)
    cli = {
        ("session", "show", "nope"): "no session 'nope'; see `cortex session list`",
        ("memory", "forget", "nope"): "no memory 'nope'; see `cortex memory list`",
        ("pin", "add", "p10", "x", "--session-id", full): "working memory is full (10 pins); "
        "remove one first with `cortex pin remove LABEL`",
        ("pin", "remove", "nope", "--session-id", full): f"no pin labelled 'nope' in session "
        f"{full}; see `cortex pin list`",
        ("pin", "add", "late", "x", "--session-id", ended): f"session {ended} ended at {end_time}; "
        "start a new one with `cortex session start`",
        ("memory", "add", "x", "--scope", "project"): "scope project needs a project; "
        "pass --project NAME",
        ("memory", "list", "--project", " "): "--project is empty; omit it for global memories "
        "only or give a project name",
        ("key", "create", "default", "--scopes", ",", "--db", str(tmp_path / "keys.db")): "a key "
        "needs at least one scope; pass --scopes read, write or admin",
    }  # fmt: skip
    for args, message in cli.items():
        result = cortex(home, *args)
        assert (result.returncode, result.stderr) == (1, f"error: {message}\n"), args

    sid = http_start(served)
    for i in range(10):
        http_ok(served, "PUT", f"/v1/sessions/{sid}/pins/p{i}", {"content": "x"})
    http = [
        ("GET", "/v1/sessions/nope", None, "no session 'nope'; see GET /v1/sessions"),
        ("DELETE", "/v1/memories/nope", None, "no memory 'nope'; see POST /v1/memories/list"),
        ("PUT", f"/v1/sessions/{sid}/pins/p10", {"content": "x"}, "working memory is full "
         "(10 pins); remove one first with DELETE /v1/sessions/{session_id}/pins/{label}"),
        ("DELETE", f"/v1/sessions/{sid}/pins/nope", None, f"no pin labelled 'nope' in session "
         f"{sid}; see GET /v1/sessions/{{session_id}}/pins"),
        ("POST", "/v1/memories/add", {"content": "x", "scope": "project"},
         'scope project needs a project; pass "project"'),
        ("POST", "/v1/sessions/nope/events", {"content": "x"},
         "no session 'nope'; start it with POST /v1/sessions/start"),
        ("POST", "/v1/tasks/nope/done", None, "no task 'nope'; see GET /v1/tasks"),
    ]  # fmt: skip
    for method, path, body, message in http:
        assert http_error(served, method, path, body) == message, path
    http_ok(served, "POST", "/v1/sessions/end", {"session_id": sid})
    assert http_error(served, "PUT", f"/v1/sessions/{sid}/pins/late", {"content": "x"}).endswith(
        "; start a new one with POST /v1/sessions/start"
    )

    calls = [("start_session", {})] + [
        ("working_memory_pin", {"label": f"p{i}", "content": "x"}) for i in range(11)
    ]
    calls += [
        ("session_chain", {"session_id": "nope"}),
        ("forget_memory", {"memory_id": "nope"}),
        ("working_memory_unpin", {"label": "nope"}),
        ("end_session", {}),
        ("working_memory_pin", {"label": "late", "content": "x", "session_id": "SID"}),
    ]
    texts = mcp_errors(tmp_path, calls[:-1])
    assert texts[11] == (
        "working memory is full (10 pins); remove one first with working_memory_unpin"
    )
    assert texts[12:15] == [
        "no session 'nope'; see the session_id that start_session or session_chain returned",
        "no memory 'nope'; see search_memories or list_memories",
        texts[14].split(";")[0] + "; see working_memory_view",
    ]
    assert texts[14].startswith("no pin labelled 'nope' in session ")
    for text in [*cli.values(), *(m for *_, m in http), *texts]:
        assert "\x1e" not in text and "\x1f" not in text
    for text in [*(m for *_, m in http), *texts]:
        assert not FLAG.search(text) and "`cortex " not in text, text


def http_start(served: tuple[TestClient, dict[str, str]]) -> str:
    return str(http_ok(served, "POST", "/v1/sessions/start", {"project": "api"})["session_id"])


def http_ok(served: tuple[TestClient, dict[str, str]], method: str, path: str,
            body: Any = None) -> Any:  # fmt: skip
    client, headers = served
    response = client.request(method, path, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def test_python_callers_read_keyword_arguments(home: Path) -> None:
    """The errors the command line checks before a service sees them still name the flag
    there, and the keyword a Python caller passes."""
    with Services.open(load_config(home, {}), FixedClock(T0)) as app:
        sid = app.sessions.on_session_start(None, "cli", project="api").session_id
        cases: list[tuple[Any, str, str]] = [
            (lambda: app.sessions.get_session_chain(sid, 0),
             "depth 0 must be at least 1; e.g. `depth=5`",
             "depth 0 must be at least 1; e.g. --depth 5"),
            (lambda: app.protocol.budget("feat", -5),
             "`add_tokens=-5` is negative; give 0 or more",
             "--tokens -5 is negative; give 0 or more"),
            (lambda: app.sessions.project_named(" "),
             "empty project name; pass `project`", "empty project name; pass --project NAME"),
            (lambda: app.memory.add("x", scope="project"),
             "scope project needs a project; pass `project`",
             "scope project needs a project; pass --project NAME"),
            (lambda: app.sessions.resolve("nope"), "no session 'nope'; see `cortex session list`",
             "no session 'nope'; see `cortex session list`"),
        ]  # fmt: skip
        app.sessions.on_session_end(sid)
        cases.append(
            (lambda: app.sessions.resolve(None),
             "no active session; start one with `cortex session start` or pass `session_id`",
             "no active session; start one with `cortex session start` or pass --session-id")
        )  # fmt: skip
        for call, python, cli in cases:
            with pytest.raises(CortexError) as raised:
                call()
            assert (str(raised.value), raised.value.render(CLI)) == (python, cli)


def test_no_service_error_reaches_http_with_a_flag_or_a_command(
    served: tuple[TestClient, dict[str, str]],
) -> None:
    """Every service error a request can cheaply cause names the API's own fields and
    endpoints (``--session-id`` and `` `cortex session list` `` mean nothing to a client)."""
    sid = http_start(served)
    requests: list[tuple[str, str, Any]] = [
        ("GET", "/v1/sessions/nope", None),
        ("GET", "/v1/sessions/nope/chain", None),
        ("GET", "/v1/sessions/nope/pins", None),
        ("GET", "/v1/sessions/nope/snapshot", None),
        ("GET", "/v1/sessions/nope/snapshots", None),
        ("GET", "/v1/sessions/nope/checkpoints", None),
        ("GET", "/v1/sessions/nope/events", None),
        ("POST", "/v1/sessions/nope/events", {"content": "x"}),
        ("POST", "/v1/sessions/nope/snapshots", {}),
        ("POST", "/v1/sessions/nope/precompact", {}),
        ("POST", "/v1/sessions/nope/postcompact", {}),
        ("POST", "/v1/sessions/nope/turns", {"text": "x"}),
        ("POST", "/v1/sessions/end", {"session_id": "nope"}),
        ("POST", "/v1/sessions/checkpoint", {"session_id": "nope"}),
        ("POST", f"/v1/sessions/{sid}/continue", {"target_session_id": "nope"}),
        ("POST", f"/v1/sessions/{sid}/continue", {"target_session_id": sid}),
        ("PUT", "/v1/sessions/nope/pins/a", {"content": "x"}),
        ("DELETE", f"/v1/sessions/{sid}/pins/nope", None),
        ("GET", "/v1/memories/nope", None),
        ("DELETE", "/v1/memories/nope", None),
        ("POST", "/v1/memories/edit", {"id": "nope", "content": "y"}),
        ("POST", "/v1/memories/edit", {"upsert_key": "nope", "content": "y"}),
        ("POST", "/v1/memories/edit", {}),
        ("POST", "/v1/memories/add", {"content": "x", "scope": "project"}),
        ("POST", "/v1/memories/add", {"content": "x", "session_id": "nope"}),
        ("POST", "/v1/memories/add", {"content": "x", "expires_at": "soon"}),
        ("POST", "/v1/memories/search", {"query": "x", "session_id": "nope"}),
        ("POST", "/v1/memories/list", {"session_id": "nope"}),
        ("POST", "/v1/context/get", {"session_id": "nope"}),
        ("POST", "/v1/sessions/start", {"session_id": "a..b"}),
        ("POST", "/v1/tasks/nope/done", None),
        ("POST", "/v1/sessions/end", {"session_id": ""}),
        ("POST", "/v1/context/get", {"session_id": ""}),
    ]
    for method, path, body in requests:
        message = http_error(served, method, path, body)
        assert not FLAG.search(message) and "`cortex " not in message, (path, message)
        assert "\x1e" not in message, (path, message)
    empty = http_error(served, "POST", "/v1/sessions/end", {"session_id": ""})
    assert empty.startswith("body.session_id: "), empty


# -- the messages themselves --------------------------------------------------------------------
def _messages() -> Iterator[tuple[str, int, str, list[str]]]:
    """(file, line, the message's own text, the commands it names) of every error the
    services, the core and the store raise with a literal message."""
    for path in sorted(p for d in ("services", "core", "store") for p in (SRC / d).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _name(node).endswith("Error"):
                texts: list[str] = []
                commands: list[str] = []
                for arg in node.args:
                    _collect(arg, texts, commands)
                yield str(path.relative_to(SRC)), node.lineno, "".join(texts), commands


def _name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _collect(node: ast.AST, texts: list[str], commands: list[str]) -> None:
    """The literal text under ``node``, apart from what ``param`` and ``command`` render."""
    if isinstance(node, ast.Call) and _name(node) in ("param", "command"):
        if _name(node) == "command" and isinstance(node.args[0], ast.Constant):
            commands.append(str(node.args[0].value))
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        texts.append(node.value)
    for child in ast.iter_child_nodes(node):
        _collect(child, texts, commands)


def test_messages_name_flags_and_commands_only_through_references() -> None:
    """A flag or a command a person types, written into a message, would reach every surface
    as the command line's: ``param`` and ``command`` let each render its own."""
    found = []
    for where, line, text, _ in _messages():
        outside = FLAG.sub("", text.replace("optimum-cli export onnx --model", ""))
        if FLAG.search(text) and FLAG.search(outside) is not None:
            found.append(f"{where}:{line}: {text}")
        for typed in re.findall(r"`cortex ([a-z -]+?)(?: [A-Z{<]|`)", text):
            if not typed.startswith(OPERATOR_COMMANDS):
                found.append(f"{where}:{line}: `cortex {typed}`")
    assert found == []


UNSTEPPED = {
    "services/hosting.py": "batches of turns need",  # a guard: its caller takes turns alone
    "services/remote/transport.py": "without a JSON object",
}
"""Messages of Cortex errors whose text names no next step, by file (and a piece of it)."""


def test_every_message_names_a_next_step() -> None:
    """A Cortex error's message is one line naming the next step: after a ``;`` (``use 0 or
    more``), or after a ``:`` (``: use YYYY-MM-DD``, ``: pip install ...``)."""
    import cortex.errors as errors

    kinds = {n for n, c in vars(errors).items() if isinstance(c, type) and n.endswith("Error")}
    found = [
        f"{where}:{line}: {text}"
        for where, line, text, _ in _messages()
        if text and _kind(where, line) in kinds and "; " not in text and ": " not in text
        and UNSTEPPED.get(where, "\0") not in text
    ]  # fmt: skip
    assert found == []


def _kind(where: str, line: int) -> str:
    for node in ast.walk(ast.parse((SRC / where).read_text())):
        if isinstance(node, ast.Call) and node.lineno == line and _name(node).endswith("Error"):
            return _name(node)
    return ""


NOT_ON_HTTP = {
    "archive", "procedure list", "procedure add", "task init", "task start", "task end",
    "checkpoint verify", "checkpoint list",
}  # fmt: skip
"""Commands of work the HTTP API does not do (the continuity protocol, procedures, the
archive): no error of theirs reaches it."""
NOT_ON_MCP = NOT_ON_HTTP | {"task list", "session checkpoint list"}


def test_every_command_a_message_names_has_an_equivalent_on_each_surface() -> None:
    named = {c for *_, commands in _messages() for c in commands}
    assert named, "no message names a command?"
    assert named - set(HTTP.commands) == NOT_ON_HTTP
    assert named - set(MCP.commands) == NOT_ON_MCP


# -- an empty session id ------------------------------------------------------------------------
def test_an_empty_session_id_is_refused_by_the_tools_not_taken_for_the_current_one(
    tmp_path: Path,
) -> None:
    empty = "`{}` is empty; omit it for the current session or give a session id"
    texts = mcp_errors(
        tmp_path,
        [
            ("start_session", {}),
            ("end_session", {"session_id": ""}),
            ("working_memory_pin", {"label": "a", "content": "x", "session_id": ""}),
            ("get_context", {"session_id": ""}),
            ("cortex_session_continue", {"session_id": "nope", "into_session_id": ""}),
            ("session_status", {}),
        ],
    )
    assert texts[1:4] == [empty.format("session_id")] * 3
    assert texts[4] == empty.format("into_session_id")
    assert texts[5] == ""  # the current session is still open, with no pin added
    with Services.open(load_config(tmp_path / "mcp-home", {})) as app:
        (state,) = app.sessions.open_sessions()
        assert state.working_memory == ()


def test_an_empty_project_is_refused_not_taken_for_the_directorys(tmp_path: Path) -> None:
    texts = mcp_errors(tmp_path, [("start_session", {}), ("start_session", {"project": ""})])
    assert texts[1] == (
        "`project` is empty; omit it for this directory's project or give a project id"
    )
    with Services.open(load_config(tmp_path / "mcp-home", {})) as app:
        assert len(app.sessions.open_sessions()) == 1
    from cortex.adapters.openclaw.bridge import Bridge

    with Services.open(load_config(tmp_path / "home", {}), FixedClock(T0)) as app:
        bridge = Bridge(app)
        for method in ("session_start", "memory_bootstrap", "memory_sync"):
            answer = bridge.handle({"id": 1, "method": method, "params": {"project": ""}})
            assert answer["error"]["message"] == (
                "project is empty; omit it for the bridge's project or give a project id"
            ), method
        assert app.sessions.open_sessions() == []


def test_the_bridge_refuses_an_empty_session_id(tmp_path: Path) -> None:
    from cortex.adapters.openclaw.bridge import Bridge

    with Services.open(load_config(tmp_path / "home", {}), FixedClock(T0)) as app:
        bridge = Bridge(app)
        started = bridge.handle({"id": 1, "method": "session_start", "params": {}})
        assert "result" in started, started
        answer = bridge.handle({"id": 2, "method": "session_end", "params": {"session_id": ""}})
        assert answer["error"]["message"] == (
            "session_id is empty; omit it for the current session or give a session id"
        )
        assert [s.session_id for s in app.sessions.open_sessions()] == [
            started["result"]["session_id"]
        ]
