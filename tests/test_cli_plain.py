"""``session start`` and ``memory search`` without click: the same bytes, exit codes and
errors as the click command line, in real processes, and click stays unimported."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import T0, cortex, ok
from cortex.adapters.cli import plain

CLICK_RUN = "import sys; from cortex.adapters.cli.main import run; sys.exit(run(sys.argv[1:]))"
ENTRY_RUN = (
    "import sys; from cortex.entry import main; code = main(sys.argv[1:]); "
    "names = ('click', 'logging', 'typing', 'ast', 'cortex.core.retrieval', 'cortex.core.models', "
    "'cortex.core.redaction', 'cortex.core.memory_models', 'cortex.store.sqlite.search', "
    "'cortex.core.history_models', 'cortex.services.project', 'cortex.store.sqlite.transfer', "
    "'enum', 're._parser'); "
    "open(sys.argv[0] + '.modules', 'w')"
    ".write(' '.join(m for m in names if m in sys.modules)); sys.exit(code)"
)


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with sessions of one project (one left open) and memories, one with ANSI codes."""
    home = tmp_path_factory.mktemp("plain") / "seed"
    ok(cortex(home, "session", "start", "--project", "api", "--session-id", "s1"))
    ok(cortex(home, "pin", "add", "deploy", "make deploy ENV=staging", "--session-id", "s1"))
    ok(cortex(home, "session", "end", "--session-id", "s1"))
    ok(cortex(home, "session", "start", "--project", "api", "--session-id", "s2"))
    for text, kind in (
        ("Deploys go to eu-west-1 in the deploy region", "fact"),
        ("Never deploy on Fridays", "rule"),
        ("The \x1b[31mred\x1b[0m deploy banner is shown", "fact"),
    ):
        ok(cortex(home, "memory", "add", text, "--project", "api", "--type", kind))
    return home


RANDOM = re.compile(
    rb"ckpt-\d{4}-\d\d-\d\d-[0-9a-f]{8}|[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}"
)


def same(output: bytes) -> bytes:
    """``output`` with its random ids (new sessions', checkpoints') made alike."""
    return RANDOM.sub(b"<random id>", output)


def run_both(seed: Path, tmp_path: Path, *args: str) -> tuple[list[object], list[object], set[str]]:
    """(stdout, stderr, exit code) through the click CLI and through ``cortex.entry`` (each on
    its own copy of the seed home), and which of click, logging, typing, ast, the ranking
    (``core.retrieval``), the session models (``core.models``), redaction, the memory and
    history records, the store's search and transfer and the project identity the entry's
    process imported."""
    results = []
    for name, code in (("click", CLICK_RUN), ("entry", ENTRY_RUN)):
        home = tmp_path / name
        shutil.copytree(seed, home)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
        env.update(CORTEX_HOME=str(home), CORTEX_NOW="2026-02-16T10:00:00Z")
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        shown = [
            same(out.replace(str(home).encode(), b"HOME")) for out in (done.stdout, done.stderr)
        ]
        results.append([*shown, done.returncode])
    imported = set((tmp_path / "-c.modules").read_text().split())
    return results[0], results[1], imported


PLAIN = [
    ("session", "start", "--project", "api", "--session-id", "s3", "--keywords", "deploy region"),
    ("--json", "session", "start", "--project", "api", "--session-id", "s3"),
    ("session", "start", "--project=api", "--session-id=s3", "--explain", "--channel", "cli2"),
    ("session", "start", "--project", "api", "--json", "--session-id", "s3", "--explain"),
    ("session", "start", "--project", "other", "--session-id", "s3", "--workdir", "/tmp"),
    ("session", "start", "--project", "api"),  # a new random id
    ("session", "start", "--project", "api", "--session-id", "s2"),  # the open one, resumed
    ("session", "start", "--project", "api", "--session-id", "../escape"),  # a CortexError
    ("memory", "search", "deploy region", "--project", "api"),
    ("memory", "search", "deploy", "--project", "api", "region"),  # words as arguments
    ("memory", "search", "deploy", "--project", "api", "--no-expand", "--limit", "1"),
    ("--json", "memory", "search", "deploy", "--type", "fact", "--type", "rule", "--limit=5"),
    ("memory", "search", "red banner", "--project", "api"),  # ANSI codes stripped off a pipe
    ("memory", "search", "nothing-matches-this", "--tags", "x", "--layer", "rule"),
    ("--now", "2026-02-17T09:00:00Z", "memory", "search", "deploy", "--user", "u1"),
]
TO_CLICK = [
    ("session", "start", "--bogus"),
    ("session", "start", "--project"),
    ("session", "start", "--project", "a", "--project", "b"),
    ("session", "start", "--help"),
    ("session", "start", "--explain=yes"),
    ("memory", "search"),
    ("memory", "search", "q", "--limit", "x"),
    ("memory", "search", "q", "--limit", "-1"),
    ("memory", "search", "q", "--", "--project"),
    ("--set", "lookback_days=3", "session", "start", "--session-id", "s3"),
    ("--set", "nope=3", "session", "start", "--session-id", "s3"),
    ("--home", "brain-file", "session", "start"),
    ("session", "--json"),
]


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_plain_command_lines_run_without_click_and_print_the_same(
    seed: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    assert plain.parse(list(args), {}) is not None
    through_click, through_entry, imported = run_both(seed, tmp_path, *args)
    assert through_entry == through_click
    assert not {"click", "typing", "ast"} & imported
    logged = b"cortex: " in through_entry[1]  # a warning (a lapsed session recovered)
    # Run as the console script of pip >= 25.2 runs it (nothing imports ``re`` first), the
    # constant patterns come from the code cache's programs: no ``enum``, no ``re`` parser
    # (``logging`` compiles a pattern of its own, with the real ``re``).
    assert bool({"enum", "re._parser"} & imported) == logged
    assert ("logging" in imported) == logged  # imported only to log something
    searched = "search" in args  # a session start ranks nothing: its store's search is idle
    assert ("cortex.core.retrieval" in imported) == searched
    assert ("cortex.core.models" in imported) != searched  # a search reads no session
    assert ("cortex.core.redaction" in imported) != searched  # and writes nothing
    # a start reads and writes sessions: not the memory records, the store's search or the
    # session history (but a lapsed session it recovers is ended, with a checkpoint and the
    # memories it added as its learnings), nor the project identity it is given
    assert ("cortex.core.memory_models" in imported) == (searched or logged)
    assert ("cortex.store.sqlite.search" in imported) == (searched or logged)
    assert ("cortex.core.history_models" in imported) == logged
    assert not {"cortex.services.project", "cortex.store.sqlite.transfer"} & imported


@pytest.mark.parametrize("args", TO_CLICK, ids=" ".join)
def test_other_command_lines_go_to_click(seed: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "brain-file").write_text("")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert plain.parse(list(args), {}) is None
    finally:
        os.chdir(cwd)
    through_click, through_entry, imported = run_both(seed, tmp_path, *args)
    assert through_entry == through_click
    assert "click" in imported


def test_the_output_of_both_paths_is_what_a_person_sees(seed: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(seed, home)
    out = cortex(home, "memory", "search", "red banner", "--project", "api", now=T0)
    assert out.returncode == 0
    assert "The red deploy banner is" in out.stdout and "\x1b" not in out.stdout


def test_the_plain_table_matches_the_click_commands() -> None:
    """Every option the plain path takes is the click command's, with its parameter name and
    default: an option added to click is left to click, and a default changed in one place
    only fails here."""
    import click

    from cortex.adapters.cli.main import cli
    from cortex.adapters.cli.plain import COMMANDS

    ctx = click.Context(cli)
    for (group, name), (_, options, defaults) in COMMANDS.items():
        sub = cli.get_command(ctx, group)  # groups load lazily
        assert isinstance(sub, click.Group)
        command = sub.get_command(ctx, name)
        assert command is not None
        params = {p.name: p for p in command.params}
        for opt, parameter in options.items():
            key = parameter.rstrip("?#<[]")
            param = params[key]
            if opt:
                assert opt in param.opts, (group, name, opt)
            else:
                assert isinstance(param, click.Argument), (group, name, key)
            default = param.to_info_dict()["default"]  # click's unset default reads None
            if parameter.endswith("?"):
                assert isinstance(param, click.Option) and param.is_flag and not default
            elif parameter.endswith("[]"):
                assert isinstance(param, click.Option) and param.multiple
            elif not parameter.endswith("<"):
                assert defaults[key] == default, (group, name, key)


SCRIPT = str(Path(sys.executable).with_name("cortex"))


@pytest.mark.parametrize(
    "args",
    [PLAIN[0], PLAIN[6], PLAIN[7], TO_CLICK[6], ("hook", "claude-code")],
    ids=" ".join,
)
def test_the_console_script_ends_each_path_as_main_returns(
    seed: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """The installed ``cortex`` (``entry.run``) ends a hook or a plain command without the
    interpreter's teardown (``client.finish``): still the same output and exit code as ``main``
    (the streams flushed), here for a plain command, a failing one, a search, a click command
    line and a hook."""
    through_main: list[object] = []
    through_script: list[object] = []
    for name, command, results in (
        ("main", [sys.executable, "-c", MAIN_RUN], through_main),
        ("script", [SCRIPT], through_script),
    ):
        home = tmp_path / name
        shutil.copytree(seed, home)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
        # (no hook server: the hook would start one for its home, left running after the test)
        env.update(CORTEX_HOME=str(home), CORTEX_NOW="2026-02-16T10:00:00Z", CORTEX_HOOK_SERVER="0")
        event = json.dumps({"hook_event_name": "SessionStart", "session_id": "h1", "cwd": "."})
        done = subprocess.run(
            [*command, *args], input=event.encode(), capture_output=True, env=env, cwd=tmp_path,
            timeout=60,
        )  # fmt: skip
        shown = [same(o.replace(str(home).encode(), b"HOME")) for o in (done.stdout, done.stderr)]
        results.extend([*shown, done.returncode])
    assert through_script == through_main


MAIN_RUN = "import sys; from cortex.entry import main; sys.exit(main(sys.argv[1:]))"


THRESHOLD_AT_EXIT = (
    "import atexit, gc, sys; "
    "atexit.register(lambda: sys.stderr.write(f'threshold {gc.get_threshold()[0]}')); "
    "from cortex.entry import run; run()"
)


@pytest.mark.parametrize(
    ("args", "threshold"),
    [
        (("session", "start", "--project", "api", "--session-id", "s9"), 100_000),
        (("memory", "search", "deploy"), 100_000),
        (("session", "list"), None),  # the click command line: the interpreter's thresholds
    ],
    ids=["session start", "memory search", "session list"],
)
def test_a_quick_command_collects_garbage_less_often(
    tmp_path: Path, args: tuple[str, ...], threshold: int | None
) -> None:
    if threshold is None:  # (700 up to Python 3.12, 2,000 from 3.13)
        default = [sys.executable, "-c", "import gc; print(gc.get_threshold()[0])"]
        threshold = int(subprocess.run(default, capture_output=True, check=True).stdout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env["CORTEX_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", THRESHOLD_AT_EXIT, *args],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().endswith(f"threshold {threshold}")
