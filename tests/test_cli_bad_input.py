"""The real ``cortex`` command line on bad input and in a bad environment: one line on stderr
that names the next step, exit 2 for a usage error and 1 for any other, no traceback, and
nothing written that the failed command should not have written."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from cli_helpers import cortex


def one_line(result: object) -> str:
    """The stderr of a failed command, checked to be a single ``error:`` line."""
    stderr = result.stderr  # type: ignore[attr-defined]
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr and "unexpected" not in stderr, stderr
    return str(stderr.rstrip("\n"))


def test_an_infinite_integer_setting_in_config_toml_is_a_settings_error(home: Path) -> None:
    """TOML's ``inf`` for a whole-number setting: int() of it overflows, which was an
    "unexpected OverflowError" instead of the settings error a word or a fraction gets."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("lookback_days = inf\n")
    result = cortex(home, "session", "list")
    assert result.returncode == 1
    assert one_line(result) == (
        f"error: lookback_days=inf (from {home / 'config.toml'}): expected an integer; "
        "use a number in 1-30"
    )


UNDECODABLE = "\udcff\udcfeab"
"""An argument of bytes that are not UTF-8 (``b"\\xff\\xfeab"``), as Python hands it over."""


def test_an_undecodable_id_names_nothing(home: Path) -> None:
    """An id of bytes that are not UTF-8 reached SQLite, which could not encode it: an
    "unexpected UnicodeEncodeError" instead of "no such memory"."""
    for words, kind, listing in (
        (("memory", "show"), "memory", "memory list"),
        (("memory", "forget"), "memory", "memory list"),
        (("memory", "review", "--keep"), "memory", "memory list"),
        (("procedure", "forget"), "procedure", "procedure list"),
    ):
        result = cortex(home, *words, UNDECODABLE)
        assert result.returncode == 1, words
        assert one_line(result) == (
            f"error: no {kind} '\\udcff\\udcfeab'; see `cortex {listing}`"
        ), words


def test_an_undecodable_filter_or_name_is_refused_and_nothing_is_written(home: Path) -> None:
    """A value no service checked reaches the store, whose encoding error is now one line
    (on SQLite and PostgreSQL alike), and the transaction it was in writes nothing."""
    refusal = (
        "error: a value holds a lone surrogate (bytes that are not UTF-8, or half of an "
        "emoji), which Cortex does not keep; send it as plain text"
    )
    for args in (
        ("metrics", "list", "--event", UNDECODABLE),
        ("procedure", "list", "--user", UNDECODABLE),
        ("procedure", "add", "Deploy", "make deploy", "--user", UNDECODABLE),
        ("procedure", "use", UNDECODABLE),
    ):
        result = cortex(home, *args)
        assert result.returncode == 1, args
        assert one_line(result) == refusal, args
    assert cortex(home, "--json", "procedure", "list").stdout.strip() == "[]"


def test_a_workspace_that_cannot_be_made_fails_a_trigger_before_it_stores_anything(
    home: Path, tmp_path: Path
) -> None:
    """``openclaw memory remember`` (and flush, snapshot) stored the memory, then failed to
    write the workspace and exited 1: a retry once the path was fixed stored it twice."""
    cortex(home, "session", "start", "--project", "api")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    workspace = blocker / "workspace"
    for trigger in (("remember", "The user prefers tabs"), ("flush",), ("snapshot",)):
        result = cortex(home, "openclaw", "memory", *trigger, "--workspace", str(workspace))
        assert result.returncode == 1, trigger
        assert one_line(result) == (
            f"error: cannot create directory {workspace} (Not a directory); check permissions "
            "or set CORTEX_HOME"
        ), trigger
    assert cortex(home, "--json", "memory", "list", "--all-projects").stdout.strip() == "[]"
    assert json.loads(cortex(home, "--json", "session", "show").stdout)["checkpoint_count"] == 0
    assert cortex(home, "--json", "session", "snapshot", "--list").stdout.strip() == "[]"


def test_a_path_whose_name_is_too_long_is_one_line_naming_the_path(tmp_path: Path) -> None:
    """A folder name longer than the system takes (255 bytes) made ``Path.is_file()`` raise,
    an "unexpected OSError" on every command whose home, --db or file had one."""
    long = tmp_path / ("a" * 300)
    result = cortex(long, "session", "list")
    assert result.returncode == 1
    assert one_line(result) == (
        f"error: cannot look for {long / 'config.toml'} (File name too long); point --home "
        "or CORTEX_HOME at a usable directory"
    )
    home = tmp_path / "home"
    for args, said in (
        (("tenant", "list", "--db", str(long)), f"error: no database at {long}; check the path"),
        (
            ("server", "import", str(long), "--tenant", "default", "--db", str(home / "s.db")),
            f"error: no such file {long}; give the path of a Cortex brain.db",
        ),
    ):
        secret = {"CORTEX_SERVER_SECRET": "k" * 40}
        result = cortex(home, *args, env=secret)
        assert result.returncode == 1, args
        assert one_line(result).startswith(said), args


def test_an_empty_demo_home_is_a_usage_error(home: Path) -> None:
    """``cortex demo --home "$UNSET"``: was "error:  is not empty" (the current folder)."""
    result = cortex(home, "demo", "--home", "")
    assert result.returncode == 2
    assert one_line(result) == (
        "error: --home is empty; omit it for a temporary directory or give a new one"
    )


def test_a_brain_db_whose_session_states_another_program_made_is_set_aside(home: Path) -> None:
    """Its table failed the first migration, and every command said to run `cortex db
    migrate`, which failed the same way. Now its rows are kept under another name."""
    home.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(home / "brain.db")) as conn, conn:
        conn.execute("CREATE TABLE session_states (name TEXT, value TEXT)")
        conn.execute("INSERT INTO session_states VALUES ('theirs', 'kept')")
    assert cortex(home, "db", "migrate").returncode == 0
    assert cortex(home, "session", "start", "--project", "api").returncode == 0
    assert len(json.loads(cortex(home, "--json", "session", "list").stdout)) == 1
    with contextlib.closing(sqlite3.connect(home / "brain.db")) as conn:
        kept = conn.execute("SELECT * FROM session_states_legacy").fetchall()
    assert kept == [("theirs", "kept")]


def test_an_empty_path_setting_is_refused_not_taken_for_the_current_directory(
    home: Path, tmp_path: Path
) -> None:
    """``CORTEX_SESSIONS_DIR="$UNSET"`` made the sessions' JSON mirrors land in whatever
    directory the command ran in (``Path("")`` is "."), and an empty working_memory_path in
    config.toml was an unexpected ValueError."""
    here = tmp_path / "some-project"
    here.mkdir()
    result = cortex(home, "session", "start", env={"CORTEX_SESSIONS_DIR": ""}, cwd=here)
    assert result.returncode == 1
    assert one_line(result) == (
        "error: sessions_dir='' (from CORTEX_SESSIONS_DIR) is empty; give a path, or leave "
        "it out for the default"
    )
    assert list(here.iterdir()) == []
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('working_memory_path = ""\n')
    result = cortex(home, "session", "start", cwd=here)
    assert result.returncode == 1
    assert one_line(result) == (
        f"error: working_memory_path='' (from {home / 'config.toml'}) is empty; give a path, "
        "or leave it out for the default"
    )


def test_a_malformed_set_is_a_usage_error_like_a_bad_value(home: Path) -> None:
    """``--set x`` exited 1 while ``--set lookback_days=x`` exits 2: both are usage errors."""
    for given in ("", "x", "=3"):
        result = cortex(home, "--set", given, "session", "list")
        assert result.returncode == 2, given
        assert one_line(result) == (
            f"error: --set {given!r} is not NAME=VALUE; e.g. --set lookback_days=3"
        )
    assert cortex(home, "--set", "lookback_days=x", "session", "list").returncode == 2


def test_server_import_of_a_file_no_cortex_made_imports_nothing_and_leaves_it(
    tmp_path: Path,
) -> None:
    """An empty file or another program's SQLite file was opened as a store, which migrated
    Cortex's tables into it, and the import then succeeded with the tasks of the pipeline
    file beside it."""
    home = tmp_path / "home"
    (home / "pipeline").mkdir(parents=True)
    tasks = {"active_tasks": [{"task_id": "t1", "title": "Ship", "stage": "build"}]}
    (home / "pipeline" / "state.json").write_text(json.dumps(tasks))
    server = tmp_path / "server.db"
    env = {"CORTEX_SERVER_SECRET": "k" * 40}
    assert cortex(home, "tenant", "create", "default", "--db", str(server)).returncode == 0
    empty = home / "brain.db"
    empty.touch()
    theirs = tmp_path / "theirs.db"
    with contextlib.closing(sqlite3.connect(theirs)) as conn, conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    for source, why in ((empty, "it is empty"), (theirs, "it has no Cortex schema")):
        args = ("server", "import", str(source), "--tenant", "default", "--db", str(server))
        result = cortex(home, *args, env=env)
        assert result.returncode == 1
        assert one_line(result) == (
            f"error: {source} is not a Cortex brain.db ({why}); give the path of one (one older "
            "than Cortex's migrations: run `cortex db migrate` with its folder as the home "
            "first)"
        )
    assert empty.read_bytes() == b""
    with contextlib.closing(sqlite3.connect(theirs)) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]
    with contextlib.closing(sqlite3.connect(server)) as conn:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone() == (0,)


def test_an_empty_user_is_refused_by_every_command_that_takes_one(home: Path) -> None:
    """``--user "$UNSET"`` stored a memory or a procedure of no user, and listed every user's
    procedures, where the memory listings refuse it (as --project and --session-id are); and
    their refusal named a flag no command has (``--user-id``)."""
    for args, omitted in (
        (("memory", "add", "Deploys go through staging"), "a memory of no user"),
        (("procedure", "add", "Deploy", "make deploy"), "a procedure of no user"),
        (("procedure", "list"), "every user's procedures"),
        (("consolidate", "run", "--dry-run"), "every user's memories"),
        (("memory", "list"), "the memories of every user"),
    ):
        result = cortex(home, *args, "--user", " ")
        assert result.returncode == 1, args
        assert (
            one_line(result) == f"error: --user is empty; omit it for {omitted} or give a user id"
        )
    assert cortex(home, "--json", "memory", "list", "--all-projects").stdout.strip() == "[]"
    assert cortex(home, "--json", "procedure", "list").stdout.strip() == "[]"


def test_a_home_that_cannot_be_one_is_a_one_line_usage_error(tmp_path: Path) -> None:
    """``--home ""`` was the current directory (its brain.db made there), and a file as the
    home was click's four lines naming --home even when CORTEX_HOME had set it."""
    here = tmp_path / "some-project"
    here.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    result = cortex(here, "--home", "", "session", "start", cwd=here)
    assert result.returncode == 2
    assert one_line(result) == (
        "error: --home is empty; omit it for the default home or give a directory"
    )
    assert list(here.iterdir()) == []
    for command in (("session", "start"), ("memory", "search", "x")):  # (click's and plain's)
        result = cortex(Path(" "), *command, cwd=here)  # CORTEX_HOME=" "
        assert result.returncode == 2, command
        assert one_line(result) == (
            "error: CORTEX_HOME is empty; omit it for the default home or give a directory"
        )
    assert list(here.iterdir()) == []
    for args, named in ((("--home", str(afile)), "--home"), ((), "CORTEX_HOME")):
        result = cortex(afile, *args, "session", "start")
        assert result.returncode == 2, named
        assert one_line(result) == (
            f"error: {named} {str(afile)!r} is a file; give a directory (one that is missing "
            "is created)"
        )
    assert afile.read_text() == "x\n"


def test_a_control_character_in_a_quoted_path_is_escaped_in_the_error_line(
    tmp_path: Path,
) -> None:
    """A message quotes a path as given: one with a newline broke the error into two lines,
    and an escape sequence in it reached the terminal."""
    db = tmp_path / "team\n\x1b[2Jserver.db"
    result = cortex(tmp_path / "home", "tenant", "list", "--db", str(db))
    assert result.returncode == 1
    assert one_line(result) == (
        f"error: no database at {tmp_path}/team\\n\\x1b[2Jserver.db; check the path "
        "(`cortex tenant create` makes one)"
    )


def test_a_consolidation_whose_metric_cannot_be_written_succeeds_with_a_warning(
    home: Path,
) -> None:
    """The run (its merges, in apply mode) was committed, then the metrics chain refused the
    event and the command exited 1, inviting a second run; a compaction only warns."""
    cortex(home, "memory", "add", "Deploys go through the staging gate")
    (home / "metrics.key").write_text("[]\n")
    result = cortex(home, "consolidate", "run")
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        f"cortex: consolidation_run metric not written: metrics key {home / 'metrics.key'} is "
        "malformed; restore it from a backup (a new key cannot verify the events already "
        "stored)\n"
    )
    assert len(json.loads(cortex(home, "--json", "consolidate", "list").stdout)) == 1


def test_an_empty_filter_or_choice_is_refused_never_taken_for_leaving_it_out(home: Path) -> None:
    """``--layer "$UNSET"`` listed every layer, stored a memory in the default one or left
    its layer as it was; ``--event ""``, ``--tenant ""`` and ``--gate ""`` did the same for
    their own defaults (every event, every tenant's keys, no gate)."""
    assert cortex(home, "session", "start", "--session-id", "s1").returncode == 0
    db = str(home / "brain.db")
    made = json.loads(cortex(home, "--json", "memory", "add", "Deploys go via staging").stdout)
    for args, flag, omitted, instead in (
        (("memory", "add", "x"), "--layer", "the default layer", "rule, working or long_term"),
        (("memory", "add", "x"), "--scope", "the default scope", "global or project"),
        (("memory", "add", "x"), "--expires-at", "the layer's default expiry", "an ISO-8601 time"),
        (("memory", "list"), "--layer", "every layer", "rule, working or long_term"),
        (("memory", "search", "x"), "--layer", "every layer", "rule, working or long_term"),
        (("memory", "stale"), "--layer", "every layer", "rule, working or long_term"),
        (
            ("memory", "edit", made["id"]),
            "--layer",
            "the layer it has",
            "rule, working or long_term",
        ),
        (("metrics", "list"), "--event", "every event", "an event name"),
        (("session", "start"), "--channel", "the default channel", "a channel name"),
        (("key", "list", "--db", db), "--tenant", "every tenant's keys", "a tenant name"),
        (("checkpoint", "create", "--task", "t1"), "--gate", "no gate", "a gate G0..G10"),
    ):
        result = cortex(home, *args, flag, " ")
        assert result.returncode == 1, (args, flag, result.stderr)
        assert (
            one_line(result) == f"error: {flag} is empty; omit it for {omitted} or give {instead}"
        )
    assert json.loads(cortex(home, "--json", "memory", "list").stdout)[0]["id"] == made["id"]


def test_nan_for_a_rate_or_a_confidence_is_refused_as_out_of_range_naming_the_flag(
    home: Path,
) -> None:
    """click's ``FloatRange`` lets NaN by: the service then refused it naming its own field
    (``refusal_rate_window``), not the flag, or stored it."""
    assert cortex(home, "task", "init", "t1").returncode == 0
    assert cortex(home, "session", "start", "--session-id", "s1").returncode == 0
    for args, flag in (
        (("task", "safety", "t1", "--window", "nan", "--baseline", "0.1"), "--window"),
        (("task", "safety", "t1", "--window", "0.1", "--baseline", "nan"), "--baseline"),
        (("pin", "add", "k", "v", "--confidence", "nan"), "--confidence"),
    ):
        result = cortex(home, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert f"Invalid value for '{flag}': 'nan' is not in the range 0<=x<=1." in result.stderr
    assert "nan" not in cortex(home, "--json", "pin", "list").stdout
