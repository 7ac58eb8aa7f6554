"""The real CLI in a subprocess: ``memory``, ``compact`` and the session history commands."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from cli_helpers import cortex, help_text, ok


def as_json(home: Path, *args: str, input: str | None = None) -> object:
    return json.loads(ok(cortex(home, "--json", *args, input=input)))


def test_memory_story(home: Path) -> None:
    rule = as_json(home, "memory", "add", "run make check first", "--type", "rule")
    assert rule["layer"] == "rule"  # type: ignore[index]
    first = as_json(home, "memory", "add", "deploys go to eu-west-1", "--project", "api",
                    "--upsert-key", "region")  # fmt: skip
    out = ok(cortex(home, "memory", "add", "deploys go to us-east-2", "--project", "api",
                    "--upsert-key", "region"))  # fmt: skip
    assert out.startswith("added long_term memory ") and f"(supersedes {first['id']})" in out  # type: ignore[index]
    ok(cortex(home, "memory", "add", "rotating keys", "--layer", "working", "--project", "api"))
    listed = as_json(home, "memory", "list", "--project", "api", "--layer", "long_term")
    assert [m["content"] for m in listed] == ["deploys go to us-east-2"]  # type: ignore[attr-defined]
    hits = as_json(home, "memory", "search", 'where do "deploys" go? NEAR -*', "--project", "api")
    assert [h["content"] for h in hits] == ["deploys go to us-east-2"]  # type: ignore[attr-defined]
    recall = as_json(home, "memory", "recall", "deploys", "--mode", "working", "--project", "api")
    assert [r["content"] for r in recall["rules"]] == ["run make check first"]  # type: ignore[index]
    assert [m["content"] for m in recall["memories"]] == ["rotating keys"]  # type: ignore[index]
    text = ok(cortex(home, "memory", "recall", "--mode", "rules_only", "--budget", "100"))
    assert text == (
        "context (rules_only): 9 tokens, budget 100, 0 dropped\nRULES:\n- run make check first\n"
    )


def test_a_query_of_several_words_need_not_be_quoted(home: Path) -> None:
    """``cortex memory search deploy region`` searches for both words, as the quoted query
    does (the plain path takes the one-argument form, click the other: the same hits), and
    ``memory recall`` takes its words the same way."""
    ok(cortex(home, "memory", "add", "deploys go to eu-west-1, the region we use"))
    ok(cortex(home, "memory", "add", "keys rotate monthly"))
    quoted = as_json(home, "memory", "search", "deploy region")
    words = as_json(home, "memory", "search", "deploy", "region")
    assert words == quoted and [h["content"] for h in words] == [  # type: ignore[attr-defined]
        "deploys go to eu-west-1, the region we use"
    ]
    missing = cortex(home, "memory", "search")
    assert missing.returncode == 2 and "Missing argument 'QUERY...'" in missing.stderr
    recalled = as_json(home, "memory", "recall", "deploy", "region")
    assert recalled == as_json(home, "memory", "recall", "deploy region")
    assert as_json(home, "memory", "recall") == as_json(home, "memory", "recall", "")


def test_recall_prints_no_empty_heading(home: Path) -> None:
    empty = cortex(home, "memory", "recall")
    assert (empty.returncode, empty.stdout) == (
        0,
        "context (all): 0 tokens, no budget, 0 dropped\n",
    )
    ok(cortex(home, "memory", "add", "keys rotate monthly"))
    text = ok(cortex(home, "memory", "recall"))
    assert text == (
        "context (all): 9 tokens, no budget, 0 dropped\n"
        "MEMORIES:\n- [long_term] keys rotate monthly\n"
    )


def test_memory_list_says_when_project_memories_are_hidden(home: Path) -> None:
    shared = as_json(home, "memory", "add", "keys rotate monthly")
    for project in ("api", "web", "api"):
        ok(cortex(home, "memory", "add", f"a {project} fact", "--project", project))
    assert ok(cortex(home, "memory", "list")) == (
        f"{shared['id']}  long_term note       global\n"  # type: ignore[index]
        "    keys rotate monthly\n"
        "3 project memories hidden; add --project NAME or --all-projects\n"
    )
    listed = ok(cortex(home, "memory", "list", "--project", "web"))
    assert "hidden" not in listed and "a web fact" in listed
    assert "hidden" not in ok(cortex(home, "memory", "list", "--all-projects"))
    assert [m["content"] for m in as_json(home, "memory", "list")] == ["keys rotate monthly"]  # type: ignore[attr-defined]


def test_edit_show_and_forget(home: Path) -> None:
    added = as_json(home, "memory", "add", "uses postgres", "--tags", "db")
    mid = added["id"]  # type: ignore[index]
    assert ok(cortex(home, "memory", "edit", mid, "--content", "uses sqlite")) == f"edited {mid}\n"
    shown = as_json(home, "memory", "show", mid)
    assert (shown["content"], shown["tags"], shown["links"]) == ("uses sqlite", ["db"], [])  # type: ignore[index]
    assert ok(cortex(home, "memory", "forget", mid)) == f"forgot {mid}\n"
    assert ok(cortex(home, "memory", "list")) == "no memories\n"
    again = cortex(home, "memory", "forget", mid)
    assert (again.returncode, again.stderr) == (
        1,
        f"error: memory {mid} is already forgotten; nothing to do (see `cortex memory list` "
        "for the live ones)\n",
    )


def test_content_from_stdin_and_the_size_limit(home: Path) -> None:
    assert as_json(home, "memory", "add", "-", input="from stdin\n")["content"] == "from stdin"  # type: ignore[index]
    big = as_json(home, "memory", "add", "-", input="a" * 1_048_576)["content"]  # type: ignore[index]
    assert big.endswith("\n[truncated: 1,048,576 bytes, the first 65,484 kept]")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("memory", "add", ""), "memory content is empty; give the text to store"),
        (
            ("memory", "add", "x", "--layer", "short"),
            "unknown layer 'short'; use one of rule, working, long_term",
        ),
        (
            ("memory", "list", "--layer", "x"),
            "unknown layer 'x'; use one of rule, working, long_term",
        ),
        (("memory", "search", "  "), "search query is empty; give words to look for"),
        (
            ("memory", "recall", "--mode", "most"),
            "unknown mode 'most'; use one of rules_only, working, long_term, all",
        ),
        (
            ("memory", "recall", "--budget", "-5"),
            "--budget -5 is negative; give 0 or more, e.g. 4000",
        ),
        (("memory", "list", "--limit", "0"), "limit 0 is out of range; use 1-1000"),
        (  # (one clause a tag: SQLite refused the query, "database ... failed")
            ("memory", "list", "--tags", ",".join(f"t{i}" for i in range(1000))),
            "--tags names 1000 tags; name at most 100",
        ),
        (
            ("memory", "add", "x", "--upsert-key", "k" * 201),
            "--upsert-key is longer than 200 characters; shorten it",
        ),
        (("memory", "forget", "nope"), "no memory 'nope'; see `cortex memory list`"),
        (
            ("memory", "add", "deploys go to eu-west-1", "--session-id", "nope"),
            "no session 'nope'; see `cortex session list`",
        ),
        (
            ("session", "status"),
            "no active session; start one with `cortex session start` or pass --session-id",
        ),
    ],
)
def test_user_errors_are_one_line(home: Path, args: tuple[str, ...], error: str) -> None:
    result = cortex(home, *args)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"error: {error}\n")


def test_session_history_and_compaction(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1", "--project", "api"))
    for text in ("fix the login bug", "we decided to keep JWT"):
        ok(cortex(home, "session", "event", text))
    out = ok(cortex(home, "session", "event", "looking", "--role", "assistant"))
    assert out.endswith(": turn 1, 2 tokens\n")
    status = as_json(home, "--set", "compaction_turn_budget=2", "session", "status")
    assert status["compaction"]["due"] is True  # type: ignore[index]
    assert status["compaction"]["trigger_type"] == "count"  # type: ignore[index]
    checkpoint = ok(cortex(home, "session", "checkpoint", "--summary", "login half done",
                           "--next-step", "write the test"))  # fmt: skip
    assert "SUMMARY: login half done" in checkpoint and "- we decided to keep JWT" in checkpoint
    snapshot = ok(cortex(home, "session", "snapshot", "--trigger", "manual"))
    assert snapshot.startswith("# Session s1 - fix-the-login-bug (manual, 2026-02-16 09:00 UTC)")
    assert ok(cortex(home, "compact", "run", "--if-due")) == "compaction not due: within budget\n"
    run = as_json(home, "--set", "compaction_turn_budget=2", "compact", "run", "--if-due")
    assert run["compacted"] is True and run["event"]["trigger_type"] == "count"  # type: ignore[index]
    listed = ok(cortex(home, "session", "snapshot", "--list"))
    assert [line.split()[2] for line in listed.splitlines()] == ["auto_compaction", "manual"]
    final = as_json(home, "session", "status")
    assert (final["status"], final["compactions"], final["checkpoint_count"]) == ("compacted", 1, 2)  # type: ignore[index]


def test_a_snapshot_slug_is_refused_as_file_mode_refuses_it(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1", "--project", "api"))
    message = (
        "error: invalid snapshot slug '../../x': use 1-64 lowercase letters, digits or dashes, "
        "starting with a letter or digit (no '/', no '..'), e.g. auth-refactor\n"
    )
    workspace = ("--workspace", str(home / "ws"))
    for command in (("session", "snapshot"), ("openclaw", "memory", "snapshot", *workspace)):
        result = cortex(home, *command, "--slug", "../../x")
        assert (result.returncode, result.stdout, result.stderr) == (1, "", message), command
    assert ok(cortex(home, "session", "snapshot", "--list")) == "no snapshots\n"
    named = ok(cortex(home, "session", "snapshot", "--slug", "auth-refactor"))
    assert named.startswith("# Session s1 - auth-refactor (manual, ")


def test_a_memory_that_would_be_expired_already_is_refused(home: Path) -> None:
    past = cortex(home, "memory", "add", "x", "--layer", "working", "--expires-at", "2020-01-01")
    assert (past.returncode, past.stdout, past.stderr) == (
        1,
        "",
        "error: expires_at '2020-01-01' is not in the future; give a later time, or leave it out\n",
    )
    assert ok(cortex(home, "memory", "list")) == "no memories\n"


def test_every_new_command_has_help_with_an_example() -> None:
    commands = [
        ("memory", sub) for sub in ("add", "list", "search", "recall", "show", "edit", "forget")
    ] + [("session", sub) for sub in ("event", "checkpoint", "status", "snapshot")]
    commands.append(("compact", "run"))
    for group, sub in commands:
        assert "Example:" in help_text(group, sub), (group, sub)


def test_recall_takes_the_rfc_layer_filter(home: Path) -> None:
    as_json(home, "memory", "add", "run make check first", "--type", "rule")
    as_json(home, "memory", "add", "parser refactor in progress", "--layer", "working")
    as_json(home, "memory", "add", "the api uses postgres 16")
    rules = as_json(home, "memory", "recall", "--layer", "rule")
    working = as_json(home, "memory", "recall", "--layer", "working")
    assert isinstance(rules, dict) and isinstance(working, dict)
    assert (rules["mode"], rules["memories"]) == ("rules_only", [])
    assert [m["content"] for m in working["memories"]] == ["parser refactor in progress"]
    assert [r["content"] for r in working["rules"]] == ["run make check first"]


def test_the_embedder_setting_makes_search_hybrid(home: Path) -> None:
    hybrid = ("--set", "embedder=hashing")  # the model-free embedder; minilm needs the extra
    as_json(home, *hybrid, "memory", "add", "kubernetes cluster upgrade scheduled")
    as_json(home, *hybrid, "memory", "add", "lunch order for friday")
    hits = as_json(home, *hybrid, "memory", "search", "kubernetes")
    assert hits[0]["content"] == "kubernetes cluster upgrade scheduled"  # type: ignore[index]
    assert "similar in meaning (cosine " in hits[0]["why"]  # type: ignore[index]
    plain = as_json(home, "memory", "search", "kubernetes")  # the setting off: words alone
    assert [h["why"] for h in plain] == ["full-text match (relevance 1)"]  # type: ignore[attr-defined]
    bad = cortex(home, "--set", "embedder=bert", "memory", "search", "kubernetes")
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "unknown embedder 'bert'; use minilm" in bad.stderr
    # the hybrid's extra hits are only memories clearly closer in meaning than the others
    assert len(hits) == 1  # type: ignore[arg-type]


def test_memory_embed_backfills_what_was_added_before_the_embedder_was_set(home: Path) -> None:
    ok(cortex(home, "memory", "add", "kubernetes cluster upgrade scheduled"))
    ok(cortex(home, "memory", "add", "lunch order for friday"))
    off = cortex(home, "memory", "embed")  # no embedder set: a one-line error naming the fix
    assert off.returncode != 0 and off.stderr.count("\n") == 1
    assert "set embedder=minilm" in off.stderr
    hybrid = ("--set", "embedder=hashing")
    before = as_json(home, *hybrid, "memory", "search", "kubernetes")
    assert "similar in meaning" not in before[0]["why"]  # type: ignore[index]  # no vectors yet
    done = cortex(home, *hybrid, "memory", "embed", "--batch", "1")
    assert (done.returncode, done.stdout) == (0, "embedded 2 memories (hashing-256)\n")
    assert done.stderr.splitlines() == ["embed: 1 memories", "embed: 2 memories"]
    after = as_json(home, *hybrid, "memory", "search", "kubernetes")
    assert "similar in meaning (cosine " in after[0]["why"]  # type: ignore[index]
    again = as_json(home, *hybrid, "memory", "embed")
    assert again == {"embedded": 0, "model": "hashing-256"}


def test_standard_input_that_is_not_utf8_is_stored_with_replacement_characters(
    home: Path,
) -> None:
    from subprocess import run

    from cli_helpers import T0

    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env |= {"CORTEX_HOME": str(home), "CORTEX_NOW": T0}
    added = run(
        [sys.executable, "-m", "cortex.entry", "--json", "memory", "add", "-"],
        input=b"caf\xe9 menu\n", capture_output=True, env=env, timeout=60,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["content"] == "caf\ufffd menu"
