"""Tamper-evident metrics: every event is a link of a keyed hash chain.

The chain::

    hash_n = HMAC-SHA256(key, prev_hash_n || canonical_json(event, session_id, payload,
                                                            created_at))
    prev_hash_n = hash_(n-1), or 64 zeros for the first event

``canonical_json`` is sorted-key compact JSON of those four fields (``seq`` is not hashed: it is
checked by numbering). The key (``metrics.key``: 32 random bytes as hex, mode 0600) lives in
the Cortex home, outside the database, so whoever can edit ``brain.db`` cannot re-forge the
chain: an edited event fails its hash, a deleted one leaves a gap, and the head file
(``metrics.head``: the newest ``seq`` and hash, itself keyed) reveals deleted newest events.

Payloads are stored as given: callers redact them first (``cortex.core.redaction``), so no secret
is ever written here.
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.digest import hmac_sha256, hmac_sha256_hex
from cortex.core.jsontext import compact_encoder
from cortex.core.models import MetricEvent
from cortex.errors import StorageError, ValidationError
from cortex.files import BRIEF_LOCK_SECONDS, atomic_write_text, file_lock, read_regular
from cortex.services.base import Service

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.services.metrics_verify import VerifyReport
    from cortex.store.protocol import MetricRow, Store

EVENT_NAMES = (
    "session_captured",
    "session_restored",
    "confidence_decay_applied",
    "pending_task_surfaced",
    "session_chain_traversal",
)
"""The five standard events; ``emit`` accepts other names too."""

ZERO_HASH = "0" * 64
KEY_FILE = "metrics.key"
HEAD_FILE = "metrics.head"


def load_or_create_key(path: Path) -> bytes:
    """The chain key in ``path``; created (32 random bytes, hex, mode 0600) if missing."""
    text = _read_text(path)
    if text is None:
        # Under the lock and re-checked, so concurrent first runs agree on one key.
        with file_lock(path, wait=BRIEF_LOCK_SECONDS):
            text = _read_text(path)
            if text is None:
                key = os.urandom(32)
                atomic_write_text(path, key.hex() + "\n")
                return key
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        key = b""
    if len(key) != 32:
        raise StorageError(
            f"metrics key {path} is malformed; restore it from a backup "
            "(a new key cannot verify the events already stored)"
        )
    return key


def _read_text(path: Path) -> str | None:
    try:
        return read_regular(path).decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"cannot read {path} ({exc}); check its permissions") from exc


def canonical(event: str, session_id: str | None, payload: dict[str, Any], created_at: str) -> str:
    """The hashed form of an event: sorted-key compact JSON of its four seq-free fields.

    Written out key by key (in sorted order, each value by the same encoder): the same text as
    encoding the four as one dict, without building and sorting that dict for every event.
    """
    return (
        f'{{"created_at":{_text(created_at)},"event":{_text(event)},'
        f'"payload":{_CANONICAL(payload)},"session_id":{_text(session_id)}}}'
    )


def _text(value: str | None) -> str:
    """``value`` as the canonical encoder writes it (a string the common case)."""
    return _encode_string(value) if type(value) is str else _CANONICAL(value)


_CANONICAL = compact_encoder(sort_keys=True)  # payloads are checked plain: no cycle
_encode_string = json.encoder.encode_basestring  # what the encoder uses with ensure_ascii=False


def chain_hash(
    key: bytes,
    prev_hash: str,
    event: str,
    session_id: str | None,
    payload: dict[str, Any],
    created_at: str,
) -> str:
    """HMAC-SHA256(key, prev_hash || canonical JSON), as 64 hex digits."""
    message = (prev_hash + canonical(event, session_id, payload, created_at)).encode("utf-8")
    return hmac_sha256_hex(key, message)


def head_mac(key: bytes, seq: int, hash_: str) -> str:
    return hmac_sha256_hex(key, f"head:{seq}:{hash_}".encode())


def _normalized(event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` as it will read back from the store, so the stored hash stays valid.

    A payload of plain JSON values already reads back as itself; anything else (tuples,
    non-string keys, other types) goes through a JSON round trip.
    """
    try:
        if _plain(payload):
            return payload
    except RecursionError:
        pass  # a cycle: JSON reports it below
    try:
        value = json.loads(json.dumps(payload, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"metrics payload of {event!r} is not plain JSON ({exc}); pass str, numbers, "
            "bools, lists and dicts"
        ) from exc
    if not isinstance(value, dict):
        raise ValidationError(f"metrics payload of {event!r} must be a dict; pass one")
    return value


def _plain(value: Any) -> bool:
    """Whether ``value`` is made only of dicts with string keys, lists, strings, ints, bools,
    finite floats and None: exactly what a JSON round trip gives back unchanged."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return bool(value - value == 0.0)  # not inf or nan
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(item) for item in value)
    return False


class MetricsWriter:
    """Appends events to the chain; one transaction per call, so writers never fork it."""

    def __init__(self, store: Store, key: bytes, head_path: Path | None = None) -> None:
        self.store = store
        self.key = key
        self.head_path = head_path

    def emit(
        self, event: str, session_id: str | None, payload: dict[str, Any], at: str
    ) -> MetricEvent:
        """Append one event (``payload`` already redacted by the caller) and return it.

        Call it outside any store transaction when ``head_path`` is set: the head is written
        after the commit, and a rolled-back outer transaction would leave it ahead.
        """
        return self.emit_many([(event, session_id, payload)], at)[0]

    def emit_many(
        self, events: Iterable[tuple[str, str | None, dict[str, Any]]], at: str
    ) -> list[MetricEvent]:
        """Append (event, session_id, payload) items in one transaction, one head write."""
        written = self.append(events, at)
        if written:
            self.advance_head(written[-1])
        return written

    def append(
        self, events: Iterable[tuple[str, str | None, dict[str, Any]]], at: str
    ) -> list[MetricEvent]:
        """Append items to the chain inside the caller's transaction (or one of its own).

        The head file is not touched: call ``advance_head`` with the newest event once the
        transaction has committed.
        """
        items = [(name, sid, _normalized(name, payload)) for name, sid, payload in events]
        rows: list[MetricRow] = []
        with self.store.transaction():
            last = self.store.last_metric()
            prev = last.hash if last is not None else ZERO_HASH
            for name, sid, payload in items:
                digest = chain_hash(self.key, prev, name, sid, payload, at)
                rows.append((name, sid, payload, at, prev, digest))
                prev = digest
            seqs = self.store.append_metrics(rows) if rows else []
        return [MetricEvent(seq, *row) for seq, row in zip(seqs, rows, strict=True)]

    def advance_head(self, newest: MetricEvent) -> None:
        """Record ``newest`` as the chain head (after its transaction committed)."""
        if self.head_path is not None:
            self._advance_head(newest)

    def _advance_head(self, newest: MetricEvent) -> None:
        """Record ``newest`` as the chain head unless a concurrent writer recorded a later one."""
        assert self.head_path is not None
        with file_lock(self.head_path, wait=BRIEF_LOCK_SECONDS):
            current = load_head(self.head_path)
            if isinstance(current, dict) and int(current.get("seq", 0)) >= newest.seq:
                return
            head = {
                "seq": newest.seq,
                "hash": newest.hash,
                "mac": head_mac(self.key, newest.seq, newest.hash),
            }
            # Not fsynced, like the database's own commits (WAL, synchronous=NORMAL): after a
            # power loss the head is never ahead of the chain it vouches for.
            atomic_write_text(self.head_path, json.dumps(head) + "\n", durable=False)


def open_writer(store: Store, home: Path) -> MetricsWriter:
    """The writer of the chain kept in ``home``: its key (created if missing) and head file.

    A new key comes with a head at seq 0, so that from then on a missing head file means it
    was deleted (``verify`` reports it even when every event was deleted too).
    """
    new_chain = not (home / KEY_FILE).exists()
    key, head_path = load_or_create_key(home / KEY_FILE), home / HEAD_FILE
    if new_chain:
        with file_lock(head_path, wait=BRIEF_LOCK_SECONDS):
            if load_head(head_path) is None:
                head = {"seq": 0, "hash": ZERO_HASH, "mac": head_mac(key, 0, ZERO_HASH)}
                atomic_write_text(head_path, json.dumps(head) + "\n", durable=False)
    return MetricsWriter(store, key, head_path)


def load_head(path: Path) -> dict[str, Any] | str | None:
    """The head record; None if there is no file, an error text if it cannot be used."""
    text = _read_text(path)
    if text is None:
        return None
    try:
        head = json.loads(text)
        seq, hash_, mac = int(head["seq"]), str(head["hash"]), str(head["mac"])
    except (ValueError, TypeError, KeyError):
        return f"chain head file {path} is unreadable (edited or truncated)"
    return {"seq": seq, "hash": hash_, "mac": mac}


def tenant_key(secret: str, tenant: str) -> bytes:
    """A server tenant's chain key: HMAC-SHA256(secret, "metrics:" + tenant).

    Every server process given the same secret derives the same key, and the key is never
    stored, in the database or anywhere else.
    """
    if not secret:
        raise ValidationError("the server secret is empty; set CORTEX_SERVER_SECRET")
    return hmac_sha256(secret.encode(), f"metrics:{tenant}".encode())


class MetricsService(Service):
    """The metrics chain of one home: list its events, verify it, append to it.

    With ``key`` (a server tenant's, ``tenant_key``) the chain has no head file: the newest
    stored event is its head, whichever process wrote it.
    """

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        *,
        key: bytes | None = None,
    ) -> None:
        super().__init__(store, config, clock)
        self.key = key

    @cached_property
    def writer(self) -> MetricsWriter:
        """The chain's writer (its key is loaded, or created, on first use)."""
        if self.key is not None:
            return MetricsWriter(self.store, self.key)
        return open_writer(self.store, self.config.home)

    def list(self, *, event: str | None = None, limit: int = 50) -> builtins.list[MetricEvent]:
        """Stored events, oldest first; only ``event`` ones when it is given."""
        return self.store.list_metrics(event=event, limit=limit)

    def lifecycle(self, *, days: int = 14) -> dict[str, Any]:
        """Lifecycle metrics of the last ``days`` days (``cortex.core.lifecycle_metrics``), plus the
        conflicts between live memories open now."""
        from datetime import timedelta

        from cortex.clock import to_iso
        from cortex.core.lifecycle_metrics import LIFECYCLE_EVENTS, lifecycle_report
        from cortex.core.memory_models import MemoryFilter

        if not 1 <= days <= 3660:
            raise ValidationError(f"days {days} is out of range; use 1-3660")
        start = self.clock.now() - timedelta(days=days)
        since = to_iso(start.replace(hour=0, minute=0, second=0, microsecond=0))
        events = [e for name in LIFECYCLE_EVENTS for e in self.store.list_metrics(event=name)]
        report = lifecycle_report(sorted(events, key=lambda e: e.seq), since)
        everything = MemoryFilter(all_projects=True)
        open_conflicts = self.store.memory_conflicts(everything, self.now_iso(), limit=10_000)
        return report | {"open_conflicts": len(open_conflicts)}

    def verify(self) -> VerifyReport:
        """Walk the chain with the home's key and head file (see
        ``cortex.services.metrics_verify.verify``)."""
        from cortex.services.metrics_verify import VerifyReport, verify  # (not at a start)

        if self.key is not None:
            return verify(self.store, self.key)
        home = self.config.home
        started = (home / KEY_FILE).exists()
        if not started and self.store.last_metric() is None:
            return VerifyReport(ok=True, checked=0)  # no chain yet: nothing to create
        key = load_or_create_key(home / KEY_FILE)
        return verify(self.store, key, home / HEAD_FILE, expect_head=started)
