"""Every id Cortex prints is taken back: the whole id, or a unique prefix of 4+ characters."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from cli_helpers import cortex, ok
from cortex.errors import NotFoundError, ValidationError
from cortex.services.app import Services
from cortex.services.ids import new_uuid


def test_services_take_unique_prefixes_and_list_the_candidates_of_ambiguous_ones(
    services: Services,
) -> None:
    m = services.sessions
    for sid in ("abcd1111-x", "abcd2222-y", "beef0000-z"):
        m.on_session_start(sid, project="radio")
    assert m.resolve("beef").session_id == "beef0000-z"
    assert m.resolve("abcd1").session_id == "abcd1111-x"
    with pytest.raises(
        ValidationError, match="'abcd' is ambiguous: it begins abcd1111-x, abcd2222-y"
    ):
        m.resolve("abcd")
    with pytest.raises(
        ValidationError, match="session id prefix 'bee' is too short; type at least 4 characters"
    ):
        m.resolve("bee")  # under four characters: only a whole id
    with pytest.raises(NotFoundError, match="no session 'cafe'"):
        m.resolve("cafe")  # begins no id
    m.add_pin("deploy", "make deploy", "beef0")
    assert [p.label for p in m.list_pins("beef0000-z")] == ["deploy"]
    services.events.append("beef00", "a turn")
    assert [e.session_id for e in services.events.events("beef")] == ["beef0000-z"]
    snap = services.events.snapshot("beef")
    assert services.events.get_snapshot(snap.id[:8]).id == snap.id
    assert m.on_session_end("abcd2").session_id == "abcd2222-y"
    restored = m.force_inherit_session("abcd2", "beef")
    assert restored.session_ids == ("abcd2222-y",)
    assert [s.session_id for s in m.get_session_chain("beef")][-1] == "beef0000-z"
    added = services.memory.add("deploys go to eu-west-1", session_id="beef0")
    assert added.memory.source_session_id == "beef0000-z" and added.memory.project == "radio"
    short = added.memory.id[:8]
    assert services.memory.get(short).id == added.memory.id
    assert services.memory.edit(short, content="deploys go to eu-west-2").id == added.memory.id
    assert services.memory.forget(short).id == added.memory.id


def test_the_cli_takes_back_the_short_ids_it_prints(home: Path) -> None:
    first = json.loads(ok(cortex(home, "session", "start", "--project", "radio", "--json")))
    sid = first["session_id"]
    ok(cortex(home, "pin", "add", "deploy", "make deploy", "--session-id", sid[:8]))
    assert sid in ok(cortex(home, "session", "show", sid[:8]))
    ok(cortex(home, "session", "end", "--session-id", sid[:8]))
    nxt = json.loads(ok(cortex(home, "session", "start", "--project", "radio", "--json")))
    ok(cortex(home, "session", "continue", sid[:8], "--session-id", nxt["session_id"][:8]))
    mid = json.loads(ok(cortex(home, "memory", "add", "deploys go to eu-west-1", "--json")))
    mid = mid["memory"]["id"] if "memory" in mid else mid["id"]
    assert "eu-west-1" in ok(cortex(home, "memory", "show", mid[:8]))
    ok(cortex(home, "memory", "forget", mid[:8]))


def test_the_cli_says_a_prefix_under_four_characters_is_too_short(home: Path) -> None:
    for sid in ("abcd1-x", "abcd2-x"):
        ok(cortex(home, "session", "start", "--project", "p", "--session-id", sid))
    short = cortex(home, "session", "show", "abc")
    assert (short.returncode, short.stdout, short.stderr) == (
        1,
        "",
        "error: session id prefix 'abc' is too short; type at least 4 characters\n",
    )
    assert cortex(home, "session", "show", "xyz").stderr == (
        "error: no session 'xyz'; see `cortex session list`\n"
    )


def test_new_uuid_is_a_random_version_4_uuid_as_uuid_writes_it() -> None:
    made = {new_uuid() for _ in range(200)}
    assert len(made) == 200
    for text in made:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text


def test_procedure_and_checkpoint_ids_take_a_prefix_too(home: Path) -> None:
    saved = json.loads(ok(cortex(home, "--json", "procedure", "add", "Release", "bump", "tag")))
    pid = saved["id"]
    used = json.loads(ok(cortex(home, "--json", "procedure", "use", pid[:8])))
    assert used["id"] == pid and used["usage_count"] == 1
    ok(cortex(home, "session", "start", "--project", "web", "--session-id", "ab12cd34-rel"))
    ok(cortex(home, "session", "event", "tag the release", "--session-id", "ab12cd34-rel"))
    ok(cortex(home, "session", "end", "--session-id", "ab12cd34-rel"))
    promoted = json.loads(ok(cortex(home, "--json", "procedure", "promote", "ab12cd34")))
    assert promoted["source_session_id"] == "ab12cd34-rel"
    ok(cortex(home, "task", "init", "rel"))
    ok(cortex(home, "task", "start", "rel"))
    made = json.loads(
        ok(cortex(home, "--json", "checkpoint", "create", "--task", "rel", "--summary", "s"))
    )
    cid = made["checkpoint_id"]
    shown = json.loads(ok(cortex(home, "--json", "checkpoint", "show", cid[:-4])))
    assert shown["checkpoint_id"] == cid
    forgotten = json.loads(ok(cortex(home, "--json", "procedure", "forget", pid[:8])))
    assert forgotten["id"] == pid
