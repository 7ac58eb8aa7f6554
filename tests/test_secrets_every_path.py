"""The credential corpus through every input path: none raw anywhere under the home, none in
what Cortex answers (pins, task titles, turns, memories with their tags and upsert keys,
events, hook payloads, MCP arguments; the database, its WAL, mirrors, logs and archives)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import cortex, ok
from conftest import START
from cortex.adapters.hooks.dispatch import handle
from cortex.adapters.mcp.server import ProjectScope, build_server
from cortex.core.redaction import contains_secret, redact
from cortex.errors import ValidationError
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


def test_names_and_ids_that_hold_a_credential_are_redacted_or_refused(
    services: Services, home: Path
) -> None:
    """What names a project or a directory is redacted like any text; what is an id (a user,
    an agent, a task) is refused, since two redacted ids could become one."""
    # (a bare password is a secret only where its context says so: "password=...")
    keys = [(kind, secret) for kind, secret, _ in CORPUS[::4] if contains_secret(secret)]
    assert len(keys) > 30
    for index, (_kind, secret) in enumerate(keys):
        sid = f"named-{index}"
        services.sessions.on_session_start(
            sid, project=f"p-{secret}", project_name=f"n-{secret}", workdir=f"/w/{secret}/x"
        )
        services.memory.add("a fact", project=f"p-{secret}")
        services.tasks.add(f"t-{index}", "a task", project=f"p-{secret}")
        for field in ("user_id", "agent_id", "task_slug"):
            with pytest.raises(ValidationError, match="looks like a credential"):
                services.sessions.on_session_start(f"refused-{index}", **{field: f"u-{secret}"})
        with pytest.raises(ValidationError, match="looks like a credential"):
            services.memory.add("a fact", user_id=f"u-{secret}")
        with pytest.raises(ValidationError, match="looks like a credential"):
            services.tasks.add(f"t-{secret}", "a task")
        assert services.memory.list(project=redact(f"p-{secret}"))  # filed as redacted
        services.sessions.on_session_end(sid)
    leaks = {
        (kind, path.relative_to(home).as_posix())
        for path in home.rglob("*")
        if path.is_file()
        for kind, secret in keys
        if secret.encode() in path.read_bytes()
    }
    assert leaks == set()


def test_a_disguised_or_stated_credential_is_stored_nowhere(services: Services, home: Path) -> None:
    """Keys hidden by zero-width characters or written in full-width forms, and passwords stated
    in prose, through every kind of input path: no file under the home holds the secret, as a
    reader sees it (NFKC-folded, invisible characters dropped)."""
    import unicodedata

    secret = "Hunter2hunter2"
    texts = [
        "ｐａｓｓｗｏｒｄ＝" + "".join(chr(ord(c) + 0xFEE0) for c in secret),
        f"pass\u200bword={secret}",
        f"db_pass\ufeffword: {secret}",
        f"the pass\u2060word is {secret}, keep it",
        f"my password was {secret}",
    ]
    services.sessions.on_session_start("sec", project="radio")
    for index, text in enumerate(texts * 6):
        _through_the_services(services, home, index, text)
    services.sessions.on_session_end("sec")
    leaks = []
    for path in home.rglob("*"):
        if path.is_file():
            shown = unicodedata.normalize("NFKC", path.read_bytes().decode("utf-8", "replace"))
            if secret in "".join(c for c in shown if c not in "\u200b\ufeff\u2060"):
                leaks.append(path.relative_to(home).as_posix())
    assert leaks == []
