"""The credential corpus through every input path: none raw anywhere under the home, none in
what Cortex answers (pins, task titles, turns, memories with their tags and upsert keys,
events, hook payloads, MCP arguments; the database, its WAL, mirrors, logs and archives)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_helpers import cortex, ok
from conftest import START
from cortex.adapters.hooks.dispatch import handle
from cortex.adapters.mcp.server import ProjectScope, build_server
from cortex.services.app import Services
from cortex.services.pipeline import upsert_task
from secret_corpus import CORPUS
from test_mcp import data, run_client


def _hook(home: Path, sid: str, **fields: Any) -> str:
    payload = {"session_id": sid, "cwd": str(home), **fields}
    env = {"CORTEX_HOME": str(home), "CORTEX_HOOK_SERVER": "0", "CORTEX_NOW": START}
    return handle("claude-code", json.dumps(payload).encode(), env, str(home))


def _through_the_services(app: Services, home: Path, index: int, text: str) -> list[str]:
    """One input path per corpus entry, in turn; returns what Cortex answered."""
    m, step = app.sessions, index % 6
    if step == 0:
        pin = m.add_pin(f"note {text}"[:190], text, "sec")
        return [pin.label, pin.content]
    if step == 1:
        task = upsert_task(app.config.pipeline_state_path, f"t-{index}", text, "build", "x")
        return [json.dumps(task)]
    if step == 2:
        state = m.record("sec", text=text, workdir=f"/w/{text}", tool_name="Bash",
                         tool_input={"command": text}, files=[f"/w/{text}"])  # fmt: skip
        return [json.dumps(state.to_dict())]
    if step == 3:
        added = app.memory.add(f"fact {text}", tags=[text], upsert_key=f"k {text}")
        return [json.dumps(added.to_dict())]
    if step == 4:
        return [app.events.append("sec", text).content]
    return [
        _hook(home, "hook-sec", hook_event_name="UserPromptSubmit", prompt=text),
        _hook(home, "hook-sec", hook_event_name="PostToolUse", tool_name="Bash",
              tool_input={"command": text}),
    ]  # fmt: skip


def test_no_credential_of_the_corpus_is_stored_or_answered_raw(
    services: Services, home: Path
) -> None:
    answers: list[str] = []
    services.sessions.on_session_start("sec", project="radio")
    for index, (_kind, _secret, text) in enumerate(CORPUS):
        answers += _through_the_services(services, home, index, text)
    server = build_server(
        lambda: Services.open(services.config, services.clock), ProjectScope(str(home))
    )

    async def body(client: Any) -> None:
        for _kind, _secret, text in CORPUS[::3]:
            for name, args in (
                ("working_memory_pin", {"label": f"m {text}"[:190], "content": text}),
                ("working_memory_unpin", {"label": f"m {text}"[:190]}),
                ("add_memory", {"content": text, "tags": [text] if len(text) <= 64 else []}),
                ("checkpoint_session", {"summary": text, "next_steps": [text]}),
            ):
                answers.append(json.dumps(data(await client.call_tool(name, args))))

    run_client(server, body)
    answers.append(ok(cortex(home, "--json", "task", "add", "t-cli", CORPUS[0][2])))
    services.compaction.checkpoint("sec", type="manual")
    services.sessions.on_session_end("sec")
    services.clock.advance(hours=1)  # type: ignore[attr-defined]
    assert services.sessions.archive(older_than_days=0).archived >= 1
    leaks = {
        (kind, path.relative_to(home).as_posix())
        for path in home.rglob("*")
        if path.is_file()
        for kind, secret, _text in CORPUS
        if secret.encode() in path.read_bytes()
    }
    assert leaks == set()
    said = "\n".join(answers)
    assert [kind for kind, secret, _ in CORPUS if secret in said] == []
