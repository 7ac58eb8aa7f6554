"""Replay recorded sessions through compaction and consolidation; report what was kept and lost.

    .venv/bin/python bench/replay.py                         # the golden set, bench/replay/
    .venv/bin/python bench/replay.py --sessions my.jsonl --turn-budget 10
    .venv/bin/python bench/replay.py --db ~/.cortex/brain.db # a home's recorded sessions

Each record (one JSON object a line) is a session: ``session_id``, ``project``, ``task_slug``,
``events`` in order and, for the golden set, ``critical`` (facts that must survive every
compaction) and ``memories`` with ``expected_live`` (what consolidation must leave). An event
is a message (``role``, ``content``), a ``pin`` (``label``, ``content``, ``critical``), a
``rule`` or a ``task`` (a pending task, pinned as ``TODO``). With ``--db`` the sessions and their
events come from a Cortex database (no critical facts or expectations: the report is what the
checkpoints kept).

Replay: a fresh home, the compaction trigger at ``--turn-budget`` turns (so long sessions
compact several times), ``CompactionService.run`` after every event (it compacts when due) and a
forced compaction at the end. After each compaction the re-injection text is what the agent
would see; a critical fact is kept when that text holds it. Then the memories are added and
consolidation runs in shadow mode and applied. Reports, per session and in total: compactions,
tokens before, checkpoint tokens and the share kept, decisions seen / kept / lost, critical
facts kept / lost (the Phase-3 gate: none lost), and consolidation's counts and whether the live
memories match ``expected_live`` (the Phase-5 gate). Timing is reported as a ratio to a floor
timed in the same run. Writes ``bench/results/replay.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cortex.clock import FixedClock  # noqa: E402
from cortex.config import load_config  # noqa: E402
from cortex.core.memory_models import MemoryFilter  # noqa: E402
from cortex.core.transcripts import format_checkpoint  # noqa: E402
from cortex.services.app import Services  # noqa: E402
from cortex.services.consolidation import RECORD_TYPES  # noqa: E402

RESULTS = ROOT / "bench" / "results"
GOLDEN = ROOT / "bench" / "replay" / "sessions.jsonl"
START = "2026-03-02T09:00:00Z"


def load_records(path: Path) -> list[dict[str, Any]]:
    """The session records of a JSON lines file (blank lines skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def records_from_db(db: Path, limit: int = 200) -> list[dict[str, Any]]:
    """Sessions and their events, as records, from a Cortex database (read, never changed)."""
    from cortex.store import open_store

    store = open_store(db, migrate=False)
    try:
        records = []
        for state in store.list_sessions(limit=limit):
            events = store.list_session_events(state.session_id, limit=100_000)
            records.append(
                {
                    "session_id": state.session_id,
                    "project": state.project,
                    "task_slug": state.task_slug,
                    "events": [
                        {"role": e.role, "content": e.content}
                        for e in events
                        if e.kind == "message"
                    ],  # fmt: skip
                }
            )
        return records
    finally:
        store.close()


def _apply_event(app: Services, sid: str, event: dict[str, Any], n: int) -> None:
    kind = event.get("kind", "message")
    if kind == "pin":
        app.sessions.add_pin(event["label"], event["content"], sid,
                             critical=bool(event.get("critical")))  # fmt: skip
    elif kind == "task":
        app.sessions.add_pin(f"task-{n}", f"TODO: {event['content']}", sid)
    elif kind == "rule":
        app.memory.add(event["content"], layer="rule", session_id=sid)
    else:
        app.events.append(sid, event["content"], role=event.get("role", "user"))


def replay_session(app: Services, clock: FixedClock, record: dict[str, Any]) -> dict[str, Any]:
    """One session through compaction: what each checkpoint kept, which critical facts were
    lost from the re-injection text."""
    sid = app.sessions.on_session_start(
        record["session_id"], project=record.get("project"), task_slug=record.get("task_slug")
    ).session_id
    critical = record.get("critical", [])
    stated: set[str] = set()
    lost: list[str] = []
    compactions = 0

    def check(text: str) -> None:
        # Every re-injection after a critical fact was stated must still hold it.
        lost.extend(f for f in sorted(stated) if f not in text and f not in lost)

    for n, event in enumerate(record["events"]):
        clock.advance(seconds=30)
        _apply_event(app, sid, event, n)
        stated.update(f for f in critical if f in event.get("content", ""))
        run = app.compaction.run(sid)
        if run.checkpoint is not None:
            compactions += 1
            check(format_checkpoint(run.checkpoint))
    clock.advance(seconds=30)
    final = app.compaction.run(sid, force=True)
    assert final.checkpoint is not None
    check(format_checkpoint(final.checkpoint))
    app.sessions.on_session_end(sid)
    loss = [e.payload for e in app.metrics.list(event="compaction_loss", limit=100_000)
            if e.session_id == sid]  # fmt: skip
    return {
        "session_id": sid,
        "events": len(record["events"]),
        "compactions": compactions + 1,
        "tokens_before": sum(p["tokens_before"] for p in loss),
        "checkpoint_tokens": sum(p["checkpoint_tokens"] for p in loss),
        "decisions_seen": max((p["decisions_seen"] for p in loss), default=0),
        "decisions_kept": loss[-1]["decisions_kept"] if loss else 0,
        "decisions_lost": loss[-1]["decisions_lost"] if loss else 0,
        "critical": len(critical),
        "critical_kept": len(critical) - len(lost),
        "critical_lost": lost,
    }


def replay_memories(app: Services, clock: FixedClock, record: dict[str, Any]) -> dict[str, Any]:
    """The record's memories through consolidation: shadow first, then applied."""
    for memory in record.get("memories", []):
        clock.advance(seconds=60)
        app.memory.add(memory["content"], project=record.get("project"),
                       remember_intent=memory.get("intent", "implicit"))  # fmt: skip
    shadow = app.consolidation.run(dry_run=True, project=record.get("project"), extract=False)
    applied = app.consolidation.run(project=record.get("project"), extract=False)
    live = app.store.list_memories(
        MemoryFilter(project=record.get("project"), layers=("long_term",)), app.now_iso(),
        limit=1000,
    )  # fmt: skip
    contents = sorted(m.content for m in live if m.type not in RECORD_TYPES)
    expected = record.get("expected_live")
    return {
        "memories": len(record.get("memories", [])),
        "shadow_matches_applied": [a.to_dict() for a in shadow.actions]
        == [a.to_dict() for a in applied.actions],
        **{k: v for k, v in applied.run.to_dict().items() if k.endswith("_count")},
        "live": contents,
        "expected_live_ok": None if expected is None else contents == sorted(expected),
    }


def replay(records: Sequence[dict[str, Any]], home: Path, turn_budget: int) -> dict[str, Any]:
    """Replay every record in a fresh home; the report."""
    clock = FixedClock(START)
    config = load_config(home, {}, {"compaction_turn_budget": turn_budget})
    sessions, memories = [], []
    with Services.open(config, clock) as app:
        for record in records:
            sessions.append(replay_session(app, clock, record))
            if record.get("memories"):
                memories.append(replay_memories(app, clock, record) | {
                    "session_id": record["session_id"]})  # fmt: skip
        verified = app.metrics.verify().ok
    totals = _totals(sessions)
    return {"turn_budget": turn_budget, "sessions": sessions, "memories": memories,
            "totals": totals, "metrics_chain_ok": verified}  # fmt: skip


def _totals(sessions: Iterable[dict[str, Any]]) -> dict[str, Any]:
    rows = list(sessions)
    keys = ("events", "compactions", "tokens_before", "checkpoint_tokens", "decisions_seen",
            "decisions_kept", "decisions_lost", "critical", "critical_kept")  # fmt: skip
    totals: dict[str, Any] = {k: sum(r[k] for r in rows) for k in keys}
    before = totals["tokens_before"]
    totals["kept_ratio"] = round(totals["checkpoint_tokens"] / before, 4) if before else 1.0
    totals["critical_lost"] = [f for r in rows for f in r["critical_lost"]]
    return totals


def _floor_ms(runs: int = 5) -> float:
    from compare import floor_ms  # bench/compare.py, the shared floor

    return floor_ms(runs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=Path, default=GOLDEN, help="JSON lines records")
    parser.add_argument("--db", type=Path, help="replay the sessions of this Cortex database")
    parser.add_argument("--turn-budget", type=int, default=20, help="compaction every N turns")
    args = parser.parse_args(argv)
    records = records_from_db(args.db) if args.db else load_records(args.sessions)
    floor = _floor_ms()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        report = replay(records, Path(tmp), args.turn_budget)
        elapsed_ms = (time.perf_counter() - started) * 1000
    report["timing"] = {"replay_ms": round(elapsed_ms, 1), "floor_ms": round(floor, 2),
                        "ratio_to_floor": round(elapsed_ms / floor, 1)}  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "replay.json").write_text(json.dumps(report, indent=2) + "\n")
    t = report["totals"]
    print(f"{len(report['sessions'])} sessions, {t['events']} events, {t['compactions']} "
          f"compactions; checkpoints kept {t['kept_ratio']:.1%} of {t['tokens_before']:,} "
          f"tokens; decisions lost {t['decisions_lost']} of {t['decisions_seen']}; critical "
          f"facts kept {t['critical_kept']}/{t['critical']}")  # fmt: skip
    for m in report["memories"]:
        print(f"{m['session_id']}: {m['memories']} memories -> merged {m['merged_count']}, "
              f"superseded {m['superseded_count']}, conflicts {m['conflicted_count']}; "
              f"expected live: {m['expected_live_ok']}")  # fmt: skip
    print(
        f"replay {report['timing']['replay_ms']} ms = {report['timing']['ratio_to_floor']}x "
        f"the floor ({report['timing']['floor_ms']} ms per `python -c 'import sqlite3'`)"
    )
    return 0 if not t["critical_lost"] else 1


if __name__ == "__main__":
    sys.exit(main())
