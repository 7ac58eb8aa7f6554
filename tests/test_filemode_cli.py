"""``cortex openclaw memory ...`` in a subprocess: the commands end to end, a sync killed
mid-way and run again, and two processes syncing one workspace at once."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import T0, cortex, ok
from cortex.config import load_config
from cortex.core.memory_models import MemoryFilter
from cortex.services.app import Services

DAY = T0[:10]


def run(home: Path, *args: str) -> dict:
    return json.loads(ok(cortex(home, "--json", "openclaw", "memory", *args)))


def live(home: Path) -> list[str]:
    with Services.open(load_config(home, {})) as app:
        found = app.store.list_memories(
            MemoryFilter(all_projects=True), "9999-01-01T00:00:00Z", limit=100_000
        )
        now = app.filemode.now_iso()
        return sorted(m.content for m in found if m.is_live(now))


def stored_rows(home: Path) -> int:
    """Memory rows in the home's database (0 before it exists): a cheap progress probe."""
    path = home / "brain.db"
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
        except sqlite3.OperationalError:  # not migrated yet
            return 0


def spawn(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env.update(CORTEX_HOME=str(home), CORTEX_NOW=T0)
    return subprocess.Popen(
        [sys.executable, "-m", "cortex.entry", "openclaw", "memory", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_commands_end_to_end(home: Path) -> None:
    ws = home / "workspace"
    assert run(home, "remember", "The user prefers tabs")["path"] == "memory.md"
    assert ok(cortex(home, "openclaw", "memory", "remember", "Shipped it", "--episodic")) == (
        f"wrote memory/daily/{DAY}.md (" + live_id(home, "Shipped it") + ")\n"
    )
    (ws / "memory.md").write_text((ws / "memory.md").read_text() + "- added by hand\n")
    out = ok(cortex(home, "openclaw", "memory", "sync"))
    assert out == (
        "memory.md: 2 entries, rewritten; imported 1, edited 0, forgotten 0; daily logs read 1\n"
    )
    session = json.loads(ok(cortex(home, "--json", "session", "start", "--project", "radio")))
    sid = session["session_id"]
    ok(cortex(home, "session", "event", "Refactor the auth module", "--session-id", sid))
    flushed = run(home, "flush", "--session-id", sid, "--summary", "step 3 of 5")
    assert flushed["path"] == f"memory/daily/{DAY}.md" and flushed["written"]
    snap = run(home, "snapshot", "--session-id", sid, "--trigger", "reset")
    assert snap["path"] == f"memory/snapshots/{DAY}/refactor-the-auth-module.md"
    boot = ok(cortex(home, "openclaw", "memory", "bootstrap"))
    for text in ("The user prefers tabs", "added by hand", "Shipped it", "step 3 of 5"):
        assert text in boot
    assert live(home) == ["Shipped it", "The user prefers tabs", "added by hand"]


def live_id(home: Path, content: str) -> str:
    with Services.open(load_config(home, {})) as app:
        found = app.store.list_memories(MemoryFilter(), "2026-02-16T09:00:00Z", limit=100)
        return next(m.id for m in found if m.content == content)


def test_the_openclaw_layout_and_another_workspace(home: Path, tmp_path: Path) -> None:
    ws = tmp_path / "oc"
    run(home, "remember", "fact", "--workspace", str(ws), "--layout", "openclaw")
    assert (ws / "MEMORY.md").is_file()
    result = cortex(home, "openclaw", "memory", "sync", "--layout", "nope")
    assert result.returncode == 2 and "'nope' is not one of 'rfc', 'openclaw'" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("snapshot", "--slug", "../../etc/passwd"),
            "error: invalid snapshot slug '../../etc/passwd': use 1-64 lowercase letters",
        ),
        (("flush",), "error: no active session; start one with `cortex session start`"),
        (("remember", " "), "error: memory content is empty; give the text to store"),
    ],
)
def test_errors_are_one_line_with_the_next_step(
    home: Path, args: tuple[str, ...], message: str
) -> None:
    if args[0] == "snapshot":
        ok(cortex(home, "session", "start"))
    result = cortex(home, "openclaw", "memory", *args)
    assert result.returncode == 1
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (home / "etc").exists()


def test_a_sync_killed_mid_way_and_run_again_neither_duplicates_nor_loses(home: Path) -> None:
    ws = home / "workspace"
    (ws / "memory" / "daily").mkdir(parents=True)
    facts = [f"hand fact number {i}" for i in range(2500)]
    notes = [f"agent note number {i}" for i in range(1500)]
    (ws / "memory.md").write_text("".join(f"- {f}\n" for f in facts))
    (ws / "memory" / "daily" / f"{DAY}.md").write_text("".join(f"- {n}\n" for n in notes))
    total, mid_way = len(facts) + len(notes), 0
    for _ in range(7):
        proc = spawn(home, "sync")
        start = stored_rows(home)
        # Killed once this run has written something of its own (at least one batch), so the
        # kill lands mid-way whatever the machine's speed; a run that finishes first is fine.
        while proc.poll() is None and stored_rows(home) <= start:
            time.sleep(0.02)
        proc.kill()  # SIGKILL: no cleanup of any kind
        proc.wait()
        before = live(home)
        assert len(before) == len(set(before)), "a duplicate after a killed sync"
        mid_way += 0 < len(before) < total
    assert mid_way >= 3  # most kills landed in the middle of an import
    report = run(home, "sync")
    assert live(home) == sorted(facts + notes)
    assert run(home, "sync")["imported"] == 0
    assert report["deferred"] == 0


def test_two_processes_syncing_at_once(home: Path) -> None:
    ws = home / "workspace"
    ws.mkdir(parents=True)
    facts = [f"fact {i}" for i in range(800)]
    (ws / "memory.md").write_text("".join(f"- {f}\n" for f in facts))
    procs = [spawn(home, "sync") for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert live(home) == sorted(facts)
    imported = sorted("imported 800," in out for out, _ in results)
    assert imported == [False, True], results  # one imported everything; the other waited
    assert any("imported 0," in out for out, _ in results)
