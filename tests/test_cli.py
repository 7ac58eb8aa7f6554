"""The real ``cortex`` CLI in a subprocess: exact output, exit codes and error lines."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from cli_helpers import T0, cortex, help_text, ok


def test_two_day_story_through_the_cli(home: Path) -> None:
    start = cortex(home, "--json", "session", "start", "--session-id", "s1", "--project", "radio")
    assert json.loads(ok(start))["preamble"] is None
    ok(cortex(home, "pin", "add", "ft991a control", "CAT over USB", "--critical"))
    ok(cortex(home, "task", "add", "task-7", "CAT control", "--stage", "build"))
    ok(cortex(home, "session", "record", "--text", "hamlib ft991a cat control"))
    ended = ok(cortex(home, "session", "end"))
    assert re.fullmatch(r"session s1 captured: 1 pins, 1 pending tasks, \d+ hot topics\n", ended)
    later = cortex(
        home,
        "session",
        "start",
        "--session-id",
        "s2",
        "--project",
        "radio",
        now="2026-02-18T09:00:00Z",
    )
    text = ok(later)
    assert text.startswith(
        "[SESSION CONTINUITY — inherited from 1 prior session(s)]\n\n"
        "PENDING TASKS:\n- [task-7] CAT control (last stage: build, 2d ago)"
    )
    assert text.rstrip().endswith(
        "WORKING MEMORY RESTORED: 1 pins inherited "
        "(see all with `cortex pin list` or the working_memory_view tool)"
    )
    assert later.stderr == "session s2 started\n"
    pins = json.loads(ok(cortex(home, "--json", "pin", "list")))
    assert pins[0]["label"].startswith("ft991a control [inherited from s1 @ ")
    assert pins[0]["confidence"] == pytest.approx(0.886, abs=0.001)
    restored = json.loads(
        ok(
            cortex(
                home,
                "--json",
                "session",
                "start",
                "--session-id",
                "s3",
                "--project",
                "radio",
                now="2026-02-18T09:01:00Z",
            )
        )
    )
    assert set(restored) == {
        "session_id",
        "preamble",
        "inherited_pins",
        "session_ids",
        "relevance_scores",
        "pending_task_count",
    }
    chain = json.loads(ok(cortex(home, "--json", "session", "chain", "s2")))
    assert [s["session_id"] for s in chain] == ["s1", "s2"]
    assert ok(cortex(home, "metrics", "verify")).startswith("ok: ")


def test_continue_prints_what_it_inherited(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "old", "--project", "radio"))
    ok(cortex(home, "pin", "add", "baud", "38400"))
    ok(cortex(home, "task", "add", "task-7", "CAT control", "--stage", "build"))
    ok(cortex(home, "session", "record", "--text", "hamlib ft991a cat control"))
    ok(cortex(home, "session", "end"))
    later = "2026-03-30T09:00:00Z"  # six weeks on: too old for a restore, not for a continue
    ok(cortex(home, "session", "start", "--session-id", "new", "--project", "other", now=later))
    text = ok(cortex(home, "session", "continue", "old", now=later))
    topics = json.loads(ok(cortex(home, "--json", "session", "show", "old")))["hot_topics"]
    assert text == (
        "Inherited from session old (2026-02-16 09:00 UTC):\n"
        "- 1 working memory pins restored\n"
        "- 1 pending tasks surfaced\n"
        f"- {len(topics)} hot topics loaded\n"
        "Pins written to working memory.\n"
    )
    again = ok(cortex(home, "session", "continue", "old", now=later))
    assert "- 0 working memory pins restored" in again and "nothing written" in again


def test_memories_added_in_a_session_are_its_recent_learnings(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1", "--project", "radio"))
    added = [
        json.loads(ok(cortex(home, "--json", "memory", "add", text, "--session-id", "s1")))["id"]
        for text in ("the rig wants 38400 baud", "CAT needs RTS off")
    ]
    ok(cortex(home, "memory", "add", "a global fact from no session"))
    ok(cortex(home, "session", "end"))
    ended = json.loads(ok(cortex(home, "--json", "session", "show", "s1")))
    assert ended["recent_learnings"] == added


def test_metrics_verify_reports_a_chain_emptied_with_its_head(home: Path) -> None:
    import sqlite3

    assert ok(cortex(home, "metrics", "verify")) == "ok: 0 events verified\n"
    assert not (home / "metrics.key").exists()  # verifying creates no chain
    ok(cortex(home, "session", "start", "--session-id", "s1"))
    ok(cortex(home, "session", "end"))
    assert ok(cortex(home, "metrics", "verify")) == "ok: 1 events verified\n"
    with sqlite3.connect(home / "brain.db") as db:
        db.execute("DELETE FROM metrics")
    (home / "metrics.head").unlink()
    result = cortex(home, "metrics", "verify")
    assert (result.returncode, result.stdout) == (
        1,
        f"TAMPERED:\n  chain head file {home / 'metrics.head'} is missing and there are no "
        "events, but the chain was started (all events and the head deleted?)\n",
    )


def test_a_recovered_session_is_reported_in_one_readable_line(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1", "--project", "api"))
    later = cortex(home, "session", "start", "--session-id", "s2", "--project", "api",
                   now="2026-02-16T10:00:00Z")  # fmt: skip
    assert re.fullmatch(
        r"cortex: incident: session s1 interrupted, suspended \(last activity 2026-02-16 09:00 "
        r"UTC\); checkpoint ckpt-2026-02-16-[0-9a-f]{8}\nsession s2 started\n",
        later.stderr,
    )


def test_cold_start_prints_nothing_on_stdout(home: Path) -> None:
    result = cortex(home, "session", "start", "--session-id", "only")
    assert (result.returncode, result.stdout) == (0, "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("session", "show", "nope"), "error: no session 'nope'; see `cortex session list`\n"),
        (
            ("session", "start", "--session-id", "../x"),
            "error: invalid session id '../x': use 1-128 letters, digits or . _ : @ + - "
            "(no '/', no '..'), e.g. a UUID\n",
        ),
        (
            ("pin", "list"),
            "error: no active session; start one with `cortex session start` or "
            "pass --session-id\n",
        ),
    ],
)
def test_user_errors_are_one_line(home: Path, args: tuple[str, ...], message: str) -> None:
    result = cortex(home, *args)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", message)


@pytest.mark.parametrize(
    "args",
    [
        ("session", "end", "--session-id", ""),
        ("session", "state", "", "suspended"),
        ("session", "show", ""),
        ("session", "continue", ""),
        ("pin", "add", "a", "b", "--session-id", ""),
        ("memory", "add", "x", "--session-id", ""),
        ("checkpoint", "create", "--task", "t", "--summary", "s", "--session-id", ""),
    ],
    ids=" ".join,
)
def test_an_empty_session_id_is_an_error_not_the_current_session(
    home: Path, args: tuple[str, ...]
) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1"))
    result = cortex(home, *args)
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        "error: invalid session id '': use 1-128 letters, digits or . _ : @ + - "
        "(no '/', no '..'), e.g. a UUID\n",
    )
    shown = json.loads(ok(cortex(home, "--json", "session", "show")))
    assert (shown["session_id"], shown["state"], shown["working_memory"]) == ("s1", "ACTIVE", [])


def test_an_invalid_task_id_is_refused_with_an_example_of_a_task_id(home: Path) -> None:
    result = cortex(home, "task", "add", "bad slug!", "Title")
    assert (result.returncode, result.stderr) == (
        1,
        "error: invalid task id 'bad slug!': use 1-128 letters, digits or . _ : @ + - "
        "(no '/', no '..'), e.g. task-12\n",
    )


EMPTY_PROJECT = {
    ("session", "start"): "this directory's project",
    ("session", "list"): "every project's sessions",
    ("task", "add", "t1", "Title"): "this directory's project",
    ("task", "list"): "every project's tasks",
    ("task", "start", "t1"): "this directory's project",
    ("memory", "add", "x"): "the session's project",
    ("memory", "list"): "global memories only",
    ("memory", "search", "x"): "global memories only",
    ("memory", "recall", "x"): "the session's project",
    ("memory", "stale"): "global memories only",
    ("memory", "review"): "global memories only",
    ("consolidate", "run"): "every project",
    ("procedure", "add", "Deploy", "make"): "a global procedure",
    ("procedure", "list"): "global procedures only",
    ("openclaw", "memory", "sync"): "global memories",
    ("openclaw", "memory", "bootstrap"): "global memories",
    ("openclaw", "memory", "remember", "x"): "the session's project",
    ("bridge",): "this directory's project",
    ("install", "claude-code"): "your user settings",
    ("uninstall", "claude-code"): "your user settings",
    ("doctor",): "this directory",
}


@pytest.mark.parametrize(("args", "omitted"), EMPTY_PROJECT.items(), ids=" ".join)
@pytest.mark.parametrize("form", ["--project", "--project="])
def test_an_empty_project_is_an_error_not_the_directorys_project(
    home: Path, args: tuple[str, ...], omitted: str, form: str
) -> None:
    """``--project "$UNSET"`` never falls back to another project (or directory)."""
    given = ("--project", "") if form == "--project" else ("--project= ",)
    result = cortex(home, *args, *given)
    folder = omitted in ("this directory", "your user settings")
    instead = "a directory (--project .)" if folder else "a project name"
    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "",
        f"error: --project is empty; omit it for {omitted} or give {instead}\n",
    )
    assert not list(home.glob("*.db"))  # refused before any store was opened


def test_every_project_option_refuses_an_empty_value() -> None:
    """Each command taking ``--project`` is in the test above (a new one joins it)."""
    from cortex.adapters.cli.main import cli

    def walk(
        group: click.Group, ctx: click.Context, path: tuple[str, ...]
    ) -> Iterator[tuple[str, ...]]:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                yield from walk(
                    command, click.Context(command, info_name=name, parent=ctx), (*path, name)
                )
            elif command is not None and any("--project" in p.opts for p in command.params):
                yield (*path, name)

    taking = set(walk(cli, click.Context(cli, info_name="cortex"), ()))
    tested = {
        tuple(w for w in args if w not in ("t1", "Title", "x", "Deploy", "make", "claude-code"))
        for args in EMPTY_PROJECT
    }
    assert taking == tested


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--set", "lookback_days=99", "session", "list"),
            "error: lookback_days='99' (from flag) is out of range; use a value in 1-30\n",
        ),
        (
            ("--set", "lookback_days=abc", "config", "show"),
            "error: lookback_days='abc' (from flag): expected an integer; use a number in 1-30\n",
        ),
        (
            ("--set", "no_such=1", "config", "show"),
            "error: unknown setting 'no_such'; see `cortex config show` for names\n",
        ),
        (
            ("task", "add", "task-1", "Title", "--stage", "bogus"),
            "error: unknown stage 'bogus'; use one of build, verify, validate, design, review, "
            "test, testing, plan, planning, research, implement, implementation, deploy, "
            "requirements, spec, draft, done, complete, completed, closed, cancelled, abandoned\n",
        ),
        (
            ("memory", "edit", "3f2a9c1e"),
            "error: nothing to change; pass --content, --layer, --type, --tags, --confidence, "
            "--explicit or --upsert-key\n",
        ),
    ],
)
def test_bad_option_values_are_one_line_usage_errors(
    home: Path, args: tuple[str, ...], message: str
) -> None:
    result = cortex(home, *args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message)
    assert not (home / "pipeline" / "state.json").exists()


def test_env_out_of_range_is_an_error(home: Path) -> None:
    result = cortex(home, "config", "show", env={"CORTEX_RELEVANCE_THRESHOLD": "2"})
    assert result.returncode == 1
    assert result.stderr == (
        "error: relevance_threshold='2' (from CORTEX_RELEVANCE_THRESHOLD) "
        "is out of range; use a value in 0.1-1\n"
    )


@pytest.mark.parametrize("now", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
@pytest.mark.parametrize(
    "args",
    [("session", "start", "--project", "x"), ("memory", "add", "hello", "--layer", "working")],
)
def test_a_fixed_clock_outside_its_years_is_one_line(
    home: Path, now: str, args: tuple[str, ...]
) -> None:
    message = (
        f"error: --now/CORTEX_NOW {now!r} is out of range; give a time in the years 1970 to "
        "9000, e.g. 2026-02-18T09:00:00Z\n"
    )
    for result in (cortex(home, *args, now=now), cortex(home, "--now", now, *args)):
        assert (result.returncode, result.stdout, result.stderr) == (1, "", message)
    assert ok(cortex(home, "session", "list")).startswith("no sessions yet")


def test_huge_pin_refused_and_nothing_lost(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1"))
    ok(cortex(home, "pin", "add", "keep", "me"))
    big = "x" * 10_000_000
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from cortex.entry import main; "
            "sys.exit(main(['pin', 'add', 'big', sys.stdin.read()]))",
        ],
        input=big,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CORTEX_HOME": str(home), "CORTEX_NOW": T0},
    )
    assert result.returncode == 1 and "pins hold at most 4,000" in result.stderr
    assert [p["label"] for p in json.loads(ok(cortex(home, "--json", "pin", "list")))] == ["keep"]


def test_non_utf8_argument_is_stored_with_replacement(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env.update(CORTEX_HOME=str(home), CORTEX_NOW=T0)
    raw = subprocess.run(
        [
            sys.executable,
            "-m",
            "cortex.entry",
            "pin",
            "add",
            "bytes",
            b"caf\xe9 \xff".decode("utf-8", "surrogateescape"),
        ],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert raw.returncode == 0, raw.stderr
    pins = json.loads(ok(cortex(home, "--json", "pin", "list")))
    assert pins[0]["content"] == "caf\ufffd \ufffd"


def test_unwritable_home_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the home's parent should be")
    result = cortex(blocker / "home", "session", "start")
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_every_command_and_group_has_help_with_an_example(home: Path) -> None:
    import importlib.util

    from cortex.adapters.cli.main import cli

    spec = importlib.util.spec_from_file_location(
        "gen_cli_reference", Path(__file__).parent.parent / "scripts" / "gen_cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    commands = [path for path, cmd in gen.walk(cli, ()) if not hasattr(cmd, "commands")]
    groups = [path for path, cmd in gen.walk(cli, ()) if hasattr(cmd, "commands")]
    assert len(commands) >= 20 and len(groups) >= 10
    # In this process for each command; the real CLI in a subprocess prints the same text.
    assert ok(cortex(home, *commands[0], "--help")) == help_text(*commands[0])
    lacking = [" ".join(c) for c in commands + groups if "Example" not in help_text(*c)]
    assert lacking == []


def test_demo_runs(home: Path) -> None:
    text = ok(cortex(home, "demo"))
    assert "[SESSION CONTINUITY — inherited from" in text
    assert "RECOVERED AFTER CRASH" in text
    assert "api_key=[REDACTED]" in text
    assert "ok: " in text
    # README.md shows an excerpt of this story: each of its lines is printed (ids differ).
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    excerpt = readme.split("What `make demo` prints", 1)[1].split("```\n", 2)[1]
    for line in filter(None, excerpt.splitlines()):
        pattern = re.sub(r"(?<![0-9a-f])[0-9a-f]{8}(?![0-9a-f])", "[0-9a-f]{8}", re.escape(line))
        assert re.search(f"^{pattern}$", text, re.M), line


def test_the_demo_refuses_a_home_that_holds_anything(home: Path, tmp_path: Path) -> None:
    used = tmp_path / "used"
    ok(cortex(home, "demo", "--home", str(used)))
    before = sorted(p.name for p in used.rglob("*"))
    again = cortex(home, "demo", "--home", str(used))
    assert again.returncode != 0 and again.stdout == ""
    assert again.stderr == f"error: {used} is not empty; give the demo a new or empty directory\n"
    assert sorted(p.name for p in used.rglob("*")) == before


def test_json_is_accepted_after_the_command(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1"))
    before = json.loads(ok(cortex(home, "--json", "session", "show")))
    after = json.loads(ok(cortex(home, "session", "show", "--json")))
    assert before == after and after["session_id"] == "s1"


def test_a_task_belongs_to_the_current_project_unless_told(home: Path) -> None:
    def projects() -> dict[str, str | None]:
        listed = json.loads(ok(cortex(home, "--json", "task", "list")))
        return {t["task_id"]: t.get("project") for t in listed}

    ok(cortex(home, "task", "add", "t0", "before any session"))  # the directory's project
    ok(cortex(home, "session", "start", "--session-id", "s1", "--project", "radio"))
    ok(cortex(home, "task", "add", "t1", "Wire CAT"))  # the open session's project
    ok(cortex(home, "task", "add", "t2", "Ship the site", "--project", "web"))
    ok(cortex(home, "task", "add", "t3", "Rotate keys", "--any-project"))
    first = projects()
    assert str(first.pop("t0")).startswith(("git:", "path:"))
    assert first == {"t1": "radio", "t2": "web", "t3": None}
    ok(cortex(home, "task", "add", "t1", "Wire CAT control", "--any-project"))
    assert projects()["t1"] is None


def test_db_migrate_says_which_steps_it_applies_and_how_long_they_took(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1"))
    db = home / "brain.db"
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # as before m024 to m026
        conn.execute("DROP TABLE memory_embeddings")
        conn.execute(
            "DELETE FROM _cortex_migrations WHERE name IN ('m024_memory_supersedes_column', "
            "'m025_memory_embeddings_in_rows', 'm026_open_sessions_by_start')"
        )
    result = cortex(home, "db", "migrate")
    assert ok(result) == f"database {db} is at m026_open_sessions_by_start\n"
    first, second = result.stderr.splitlines()
    assert first == (
        f"migrating {db}: m024_memory_supersedes_column, m025_memory_embeddings_in_rows, "
        "m026_open_sessions_by_start"
    )
    assert re.fullmatch(r"migrated in \d+\.\d s", second)
    again = cortex(home, "db", "migrate")  # nothing pending: nothing on stderr
    assert (ok(again), again.stderr) == (result.stdout, "")


def test_db_migrate_waits_for_the_background_migration_a_hook_started(home: Path) -> None:
    import fcntl
    import threading

    ok(cortex(home, "session", "start", "--session-id", "s1"))
    (home / "run").mkdir(exist_ok=True)
    lock = os.open(home / "run" / "migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    threading.Timer(1.0, os.close, (lock,)).start()  # the migration ends a second later
    result = cortex(home, "db", "migrate")
    assert ok(result).startswith(f"database {home / 'brain.db'} is at m026_")
    assert result.stderr == "waiting for the background migration a hook started\n"


def test_db_vacuum_hands_the_free_pages_back_and_keeps_the_data(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1"))
    ok(cortex(home, "pin", "add", "note", "keep me"))
    db = home / "brain.db"
    with sqlite3.connect(db) as conn:  # two MB of pages made free, as an archive leaves them
        conn.execute("CREATE TABLE scratch (data BLOB)")
        conn.executemany("INSERT INTO scratch VALUES (?)", [(b"x" * 4000,)] * 500)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE scratch")
    report = json.loads(ok(cortex(home, "--json", "db", "vacuum")))
    assert report["database"] == str(db)
    assert report["bytes_freed"] == report["bytes_before"] - report["bytes_after"] >= 2_000_000
    assert db.stat().st_size == report["bytes_after"]  # the log moved in and emptied
    assert "keep me" in ok(cortex(home, "pin", "list"))
    text = ok(cortex(home, "db", "vacuum"))  # nothing left to hand back
    assert re.fullmatch(
        r"database .+: ([\d.,]+) MB -> \1 MB \(0\.0 MB handed back to the disk\)\n", text
    )


def test_db_vacuum_reports_the_search_index_merged(home: Path) -> None:
    from cortex.store import SQLiteStore
    from store_contract_memory import memory

    ok(cortex(home, "session", "start", "--session-id", "s1"))
    with SQLiteStore(home / "brain.db") as store:
        for i in range(4):  # a commit, a segment of the full-text index, each
            store.add_memories([memory(f"m{i}", f"deploy note {i}")])
        held = store.search_index_segments()
    assert held > 1
    text = ok(cortex(home, "db", "vacuum"))
    assert text.endswith(f" handed back to the disk); search index merged, {held} segments -> 1\n")
    report = json.loads(ok(cortex(home, "--json", "db", "vacuum")))  # merged already
    assert (report["search_index_segments_before"], report["search_index_segments_after"]) == (1, 1)
    assert "deploy note 3" in ok(cortex(home, "memory", "search", "deploy note"))


def test_db_vacuum_behind_another_writer_fails_in_one_line(home: Path) -> None:
    ok(cortex(home, "session", "start", "--session-id", "s1"))
    with sqlite3.connect(home / "brain.db", isolation_level=None) as conn:
        conn.execute("BEGIN IMMEDIATE")  # another process's write transaction
        result = cortex(home, "db", "vacuum")  # waits out the busy timeout (5 s)
        conn.execute("ROLLBACK")
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1
    assert "locked" in result.stderr or "busy" in result.stderr


def test_db_vacuum_in_client_mode_names_the_local_database(home: Path) -> None:
    result = cortex(home, "db", "vacuum", env={"CORTEX_SERVER": "http://127.0.0.1:9"})
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1
    assert "unset CORTEX_SERVER" in result.stderr
