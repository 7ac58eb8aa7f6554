"""Procedural memory: matching and usage ranking (pure), procedures first in context, promotion
of a completed session, the flag, and ``cortex procedure`` end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_helpers import cortex, ok
from cortex.clock import FixedClock
from cortex.config import Config
from cortex.core.hygiene import Procedure
from cortex.core.procedures import match_procedures
from cortex.errors import ConfigError, NotFoundError, ValidationError
from cortex.services.app import Services


def proc(pid: str, title: str, steps: tuple[str, ...], usage: int = 0) -> Procedure:
    return Procedure(pid, pid, title, steps, usage_count=usage)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("release a new version", ["release"]),
        ("deploy the api to production", ["deploy"]),
        ("write the changelog", []),  # one of three terms: not this workflow
        ("", []),
    ],
)
def test_match_procedures_table(query: str, expected: list[str]) -> None:
    from cortex.core.retrieval import query_terms

    procedures = [
        proc("release", "Release a version", ("bump the version", "tag it", "push the tag")),
        proc("deploy", "Deploy the api", ("make test", "make deploy ENV=production")),
    ]
    terms = query_terms(query) if query else []
    assert [s.procedure.id for s in match_procedures(terms, procedures)] == expected


def test_usage_breaks_ties_but_never_beats_a_clearly_better_match() -> None:
    terms = ["deploy", "api"]
    used = proc("used", "Deploy things", ("deploy",), usage=50)
    exact = proc("exact", "Deploy the api", ("make deploy",))
    twin = proc("twin", "Deploy the api", ("make deploy",), usage=3)
    ranked = [s.procedure.id for s in match_procedures(terms, [used, exact, twin])]
    assert ranked == ["twin", "exact", "used"]


def test_procedures_come_first_in_context_and_count_in_the_budget(services: Services) -> None:
    services.memory.add("answer briefly", layer="rule")
    services.memory.add("deploys go to eu-west-1", project="api")
    services.procedures.add("Deploy the api", ["make test", "make deploy"], project="api")
    result = services.memory.get_context("deploy the api", project="api")
    assert [p.procedure.title for p in result.procedures] == ["Deploy the api"]
    assert result.to_dict()["procedures"][0]["steps"] == ["make test", "make deploy"]
    order = [r.memory.content for r in result.rules] + [m.memory.content for m in result.memories]
    assert order == ["answer briefly", "deploys go to eu-west-1"]
    assert result.used_tokens == sum(
        x.tokens for x in (*result.rules, *result.procedures, *result.memories)
    )
    tight = services.memory.get_context("deploy the api", project="api",
                                        budget_tokens=result.used_tokens - 1)  # fmt: skip
    assert tight.procedures and tight.dropped == 1  # the procedure outranks the memory
    assert services.memory.get_context("deploy the api", mode="rules_only").procedures == ()
    assert services.memory.get_context("write a poem", project="api").procedures == ()


def test_promote_a_completed_session_and_count_reuse(services: Services, clock: FixedClock) -> None:
    def episode() -> str:
        sid = services.sessions.on_session_start(project="api", task_slug="rotate-keys").session_id
        for text in ("list the api keys", "revoke the old key", "list the api keys"):
            services.events.append(sid, text)
        services.sessions.on_session_end(sid)
        clock.advance(hours=1)
        return sid

    first = episode()
    made = services.procedures.promote(first)
    assert (made.title, made.procedure_key, made.project) == ("rotate-keys", "rotate-keys", "api")
    assert made.steps == ("list the api keys", "revoke the old key")
    assert made.usage_count == 0 and made.source_session_id == first
    again = services.procedures.promote(episode())
    assert (again.id, again.usage_count) == (made.id, 1)
    open_sid = services.sessions.on_session_start(project="api").session_id
    with pytest.raises(ValidationError, match="did not complete"):
        services.procedures.promote(open_sid)
    with pytest.raises(NotFoundError):
        services.procedures.promote("no-such-session")


def test_procedural_flag_off(make_config: Callable[..., Config], clock: FixedClock) -> None:
    with Services.open(make_config(memory_procedural_enabled=True), clock) as app:
        app.procedures.add("Deploy the api", ["make deploy"])
    with Services.open(make_config(memory_procedural_enabled=False), clock) as app:
        assert app.memory.get_context("deploy the api").procedures == ()
        with pytest.raises(ConfigError, match="memory_procedural_enabled"):
            app.procedures.add("x", ["y"])


@pytest.mark.parametrize(
    ("title", "steps", "message"),
    [("", ["a"], "title is empty"), ("t", [], "1-50 steps"), ("t", ["  "], "1-50 steps"),
     ("t", ["s"] * 51, "1-50 steps")],
)  # fmt: skip
def test_bad_procedures_are_refused(
    services: Services, title: str, steps: list[str], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        services.procedures.add(title, steps)


def test_cli_refusals_name_the_flag_and_the_next_step(home: Path) -> None:
    long_key = cortex(home, "procedure", "add", "Release", "tag it", "--key", "k" * 201)
    assert long_key.stderr == "error: --key is longer than 200 characters; shorten it\n"
    ok(cortex(home, "session", "start", "--session-id", "quiet", "--project", "api"))
    ok(cortex(home, "session", "end", "--session-id", "quiet"))
    empty = cortex(home, "procedure", "promote", "quiet")
    assert empty.stderr == (
        "error: session quiet recorded no request to make a step of; give the steps yourself "
        "with `cortex procedure add`\n"
    )


def test_cli_procedure_commands(home: Path) -> None:
    added = json.loads(ok(cortex(home, "--json", "procedure", "add", "Release a version",
                                 "bump the version", "tag it", "--project", "api")))  # fmt: skip
    used = json.loads(ok(cortex(home, "--json", "procedure", "use", added["id"])))
    assert used["usage_count"] == 1
    text = ok(cortex(home, "procedure", "list", "--project", "api"))
    assert text.splitlines()[1:] == ["    Release a version", "    1. bump the version",
                                     "    2. tag it"]  # fmt: skip
    recall = ok(cortex(home, "memory", "recall", "release a version", "--project", "api"))
    assert "PROCEDURES:\nRelease a version\n1. bump the version" in recall
    ok(cortex(home, "procedure", "forget", added["id"]))
    missing = cortex(home, "procedure", "use", added["id"])
    assert missing.returncode == 1
    assert missing.stderr == f"error: no procedure {added['id']!r}; see `cortex procedure list`\n"
