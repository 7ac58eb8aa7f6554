"""The metrics hash chain: it verifies, and every kind of tampering is reported."""

from __future__ import annotations

import hashlib
import hmac
import json
import multiprocessing
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.errors import StorageError, ValidationError
from cortex.services.metrics import (
    EVENT_NAMES,
    ZERO_HASH,
    MetricsWriter,
    canonical,
    load_or_create_key,
    open_writer,
)
from cortex.services.metrics_verify import verify
from cortex.store import SQLiteStore

FORK = multiprocessing.get_context("fork")
AT = "2026-02-18T09:00:00.000000Z"


@pytest.fixture
def store(home: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(home / "brain.db") as store:
        yield store


@pytest.fixture
def key(home: Path) -> bytes:
    return load_or_create_key(home / "metrics.key")


def _emit_five(store: SQLiteStore, key: bytes, head: Path | None) -> None:
    writer = MetricsWriter(store, key, head)
    writer.emit("session_captured", "s1", {"pin_count": 2, "channel": "cli"}, AT)
    writer.emit("session_restored", "s2", {"from_session_ids": ["s1"], "scores": [0.5]}, AT)
    writer.emit("pending_task_surfaced", "s2", {"task_id": "t1", "days_pending": 1.5}, AT)
    writer.emit("confidence_decay_applied", "s2", {"excluded": False}, AT)
    writer.emit("a_later_feature_event", None, {}, AT)


def test_event_names_are_the_spec_five() -> None:
    assert EVENT_NAMES == (
        "session_captured",
        "session_restored",
        "confidence_decay_applied",
        "pending_task_surfaced",
        "session_chain_traversal",
    )


def test_key_file_is_private_and_reused(home: Path) -> None:
    path = home / "metrics.key"
    key = load_or_create_key(path)
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == key.hex() + "\n"
    assert load_or_create_key(path) == key
    assert load_or_create_key(home / "other.key") != key


def test_malformed_key_file(home: Path) -> None:
    path = home / "metrics.key"
    home.mkdir()
    path.write_text("not hex\n")
    with pytest.raises(StorageError, match=r"metrics\.key is malformed; restore it"):
        load_or_create_key(path)


def _key_in_child(path: Path, out: Any) -> None:
    out.put(load_or_create_key(path).hex())


def test_concurrent_first_runs_agree_on_one_key(home: Path) -> None:
    path = home / "metrics.key"
    queue = FORK.Queue()
    children = [FORK.Process(target=_key_in_child, args=(path, queue)) for _ in range(4)]
    for child in children:
        child.start()
    keys = {queue.get(timeout=30) for _ in children}
    for child in children:
        child.join(10)
    assert keys == {path.read_text().strip()}


def test_chain_verifies(store: SQLiteStore, key: bytes, home: Path) -> None:
    head = home / "metrics.head"
    _emit_five(store, key, head)
    report = verify(store, key, head)
    assert (report.ok, report.checked, report.problems) == (True, 5, [])
    assert stat.S_IMODE(head.stat().st_mode) == 0o600
    assert json.loads(head.read_text())["seq"] == 5
    assert verify(store, key).ok


def test_hash_is_keyed_hmac_of_prev_and_canonical_json(store: SQLiteStore, key: bytes) -> None:
    writer = MetricsWriter(store, key)
    first = writer.emit("session_captured", "s1", {"b": 1, "a": [1, 2]}, AT)
    second = writer.emit("session_restored", None, {}, AT)
    assert (first.seq, first.prev_hash, second.prev_hash) == (1, ZERO_HASH, first.hash)
    canonical = (
        '{"created_at":"2026-02-18T09:00:00.000000Z","event":"session_captured",'
        '"payload":{"a":[1,2],"b":1},"session_id":"s1"}'
    )
    expected = hmac.new(key, (ZERO_HASH + canonical).encode(), hashlib.sha256).hexdigest()
    assert first.hash == expected
    assert store.list_metrics() == [first, second]


def test_edited_payload_is_reported(store: SQLiteStore, key: bytes) -> None:
    _emit_five(store, key, None)
    store.connection.execute(
        'UPDATE metrics SET payload = \'{"task_id":"t1","days_pending":0}\' WHERE seq = 3'
    )
    report = verify(store, key)
    assert not report.ok
    assert report.problems == ["event 3: hash mismatch (edited)"]


def test_deleted_middle_events_are_reported(store: SQLiteStore, key: bytes) -> None:
    _emit_five(store, key, None)
    store.connection.execute("DELETE FROM metrics WHERE seq IN (2, 3)")
    report = verify(store, key)
    assert (report.ok, report.checked, report.problems) == (
        False,
        3,
        ["events 2-3 missing (deleted)"],
    )


def test_deleted_single_event_and_renumbering(store: SQLiteStore, key: bytes) -> None:
    _emit_five(store, key, None)
    store.connection.execute("DELETE FROM metrics WHERE seq = 4")
    assert verify(store, key).problems == ["event 4 missing (deleted)"]
    store.connection.execute("UPDATE metrics SET seq = 4 WHERE seq = 5")
    assert verify(store, key).problems == ["event 4: does not follow event 3 (chain broken)"]


def test_deleted_newest_event_is_reported_with_head(
    store: SQLiteStore, key: bytes, home: Path
) -> None:
    head = home / "metrics.head"
    _emit_five(store, key, head)
    store.connection.execute("DELETE FROM metrics WHERE seq = 5")
    assert verify(store, key).ok  # without the head, a shortened chain still links up
    report = verify(store, key, head)
    assert not report.ok
    assert report.problems == [
        "chain head is seq 5 but the newest event is 4 (newest events deleted)"
    ]
    store.connection.execute("DELETE FROM metrics")
    assert verify(store, key, head).problems == [
        "chain head is seq 5 but there are no events (all events deleted)"
    ]


def test_every_event_and_the_head_deleted_is_reported(store: SQLiteStore, home: Path) -> None:
    writer = open_writer(store, home)  # a new chain: key and a head at seq 0
    head = home / "metrics.head"
    assert json.loads(head.read_text())["seq"] == 0
    assert verify(store, writer.key, head, expect_head=True).ok
    writer.emit("session_captured", "s1", {}, AT)
    writer.emit("session_captured", "s2", {}, AT)
    store.connection.execute("DELETE FROM metrics")
    head.unlink()
    report = verify(store, writer.key, head, expect_head=True)
    assert (report.ok, report.checked, report.problems) == (
        False,
        0,
        [
            f"chain head file {head} is missing and there are no events, but the chain "
            "was started (all events and the head deleted?)"
        ],
    )


def test_different_key_is_reported(store: SQLiteStore, key: bytes, home: Path) -> None:
    head = home / "metrics.head"
    _emit_five(store, key, head)
    report = verify(store, b"\x01" * 32, head)
    assert not report.ok
    assert report.problems == [
        "all 5 events fail their hash: wrong metrics key, or every event was edited",
        f"chain head file {head} is not authentic (edited, or another key)",
    ]


def test_tampered_or_missing_head_is_reported(store: SQLiteStore, key: bytes, home: Path) -> None:
    head = home / "metrics.head"
    _emit_five(store, key, head)
    record = json.loads(head.read_text())
    head.write_text(json.dumps({**record, "seq": 4}))
    assert verify(store, key, head).problems == [
        f"chain head file {head} is not authentic (edited, or another key)"
    ]
    head.write_text("{trunc")
    assert verify(store, key, head).problems == [
        f"chain head file {head} is unreadable (edited or truncated)"
    ]
    head.unlink()
    assert verify(store, key, head).problems == [f"chain head file {head} is missing (deleted?)"]


def test_empty_chain_verifies(store: SQLiteStore, key: bytes, home: Path) -> None:
    assert verify(store, key, home / "metrics.head") == verify(store, key)
    assert verify(store, key).ok and verify(store, key).checked == 0


def test_emit_many_is_one_chain_segment(store: SQLiteStore, key: bytes, home: Path) -> None:
    head = home / "metrics.head"
    writer = MetricsWriter(store, key, head)
    events = writer.emit_many(
        [("pending_task_surfaced", "s1", {"task_id": f"t{i}"}) for i in range(3)], AT
    )
    assert [e.seq for e in events] == [1, 2, 3]
    assert json.loads(head.read_text())["seq"] == 3
    assert verify(store, key, head).ok


def test_head_never_moves_back(store: SQLiteStore, key: bytes, home: Path) -> None:
    head = home / "metrics.head"
    MetricsWriter(store, key, head).emit("session_captured", None, {}, AT)
    MetricsWriter(store, key, None).emit("session_captured", None, {}, AT)
    MetricsWriter(store, key, head).emit("session_captured", None, {}, AT)
    assert json.loads(head.read_text())["seq"] == 3


def test_payload_is_normalized_or_refused(store: SQLiteStore, key: bytes) -> None:
    writer = MetricsWriter(store, key)
    event = writer.emit("session_restored", "s1", {"scores": (0.5, 0.25), 7: "x"}, AT)
    assert event.payload == {"scores": [0.5, 0.25], "7": "x"}
    assert verify(store, key).ok
    with pytest.raises(ValidationError, match="not plain JSON"):
        writer.emit("session_restored", "s1", {"when": object()}, AT)
    with pytest.raises(ValidationError, match="not plain JSON"):
        writer.emit("session_restored", "s1", {"score": float("nan")}, AT)
    with pytest.raises(ValidationError, match="not plain JSON"):
        writer.emit("session_restored", "s1", {"deep": [{"score": float("-inf")}]}, AT)
    assert len(store.list_metrics()) == 1


def test_plain_payload_reads_back_as_written(store: SQLiteStore, key: bytes) -> None:
    """Plain JSON payloads skip the round trip; nested tuples and non-string keys do not."""
    writer = MetricsWriter(store, key)
    plain = {"ids": ["a", "b"], "n": 3, "x": 0.1, "ok": True, "none": None, "d": {"k": [1.5]}}
    nested = {"outer": {"scores": (1, 2), 3: [True]}}
    written = writer.emit_many(
        [("session_restored", "s1", plain), ("session_restored", "s1", nested)], AT
    )
    assert [e.payload for e in written] == [plain, {"outer": {"scores": [1, 2], "3": [True]}}]
    assert [e.payload for e in store.list_metrics()] == [e.payload for e in written]
    assert [e.seq for e in written] == [e.seq for e in store.list_metrics()]
    assert verify(store, key).ok


def test_emit_rolled_back_with_its_transaction(store: SQLiteStore, key: bytes) -> None:
    writer = MetricsWriter(store, key)
    with pytest.raises(RuntimeError), store.transaction():
        writer.emit("session_captured", "s1", {}, AT)
        raise RuntimeError("capture failed")
    assert store.last_metric() is None
    writer.emit("session_captured", "s1", {}, AT)
    assert verify(store, key).ok


def _emit_25(db: Path, key: bytes, head: Path, writer_id: int) -> None:
    with SQLiteStore(db) as store:
        writer = MetricsWriter(store, key, head)
        for i in range(25):
            writer.emit("session_captured", f"w{writer_id}", {"i": i}, AT)


def test_concurrent_writers_keep_one_chain(store: SQLiteStore, key: bytes, home: Path) -> None:
    head = home / "metrics.head"
    args = [(home / "brain.db", key, head, w) for w in range(4)]
    children = [FORK.Process(target=_emit_25, args=a) for a in args]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    assert [c.exitcode for c in children] == [0, 0, 0, 0]
    report = verify(store, key, head)
    assert (report.ok, report.checked) == (True, 100)
    assert json.loads(head.read_text())["seq"] == 100


_JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@given(
    st.text(max_size=8),
    st.none() | st.text(max_size=8),
    st.dictionaries(st.text(max_size=6), _JSON, max_size=4),
    st.text(max_size=8),
)
def test_canonical_is_the_four_fields_as_one_sorted_compact_json_object(
    event: str, session_id: str | None, payload: dict[str, Any], created_at: str
) -> None:
    """``canonical`` writes the four fields out key by key; the hashed text must stay exactly
    the sorted-key compact JSON of them as one object (every chain already stored uses it)."""
    whole = {"event": event, "session_id": session_id, "payload": payload, "created_at": created_at}
    expected = json.dumps(whole, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical(event, session_id, payload, created_at) == expected
