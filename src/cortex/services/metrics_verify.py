"""Checking the metrics chain (``cortex.services.metrics``): every stored event's numbering,
link and hash, and the head file against the newest events.

Apart from the writer, which every session start and hook imports: verifying is a command's
work (``cortex metrics verify``, the dashboard, the server's check), never a start's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cortex.services.metrics import ZERO_HASH, chain_hash, head_mac, load_head

TYPE_CHECKING = False  # mypy treats this name as true
if TYPE_CHECKING:
    from typing import Any

    from cortex.store.protocol import Store

_MAX_PROBLEMS = 50


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of ``verify``: ``ok`` when ``problems`` is empty."""

    ok: bool
    checked: int
    problems: list[str] = field(default_factory=list)


@dataclass
class _Walk:
    """What one pass over the chain found."""

    checked: int = 0
    mismatched: int = 0
    newest_seq: int = 0
    hash_at_head: str | None = None
    problems: list[str] = field(default_factory=list)


def _gap(first: int, last: int) -> str:
    span = f"event {first}" if first == last else f"events {first}-{last}"
    return f"{span} missing (deleted)"


def _walk_chain(store: Store, key: bytes, head_seq: int | None) -> _Walk:
    """Check numbering, links and hashes of every stored event, in ``seq`` order."""
    walk = _Walk()
    prev_hash = ZERO_HASH
    for ev in store.iter_metrics():
        walk.checked += 1
        expected = walk.newest_seq + 1
        if ev.seq != expected:
            walk.problems.append(_gap(expected, ev.seq - 1))
        elif ev.prev_hash != prev_hash:
            walk.problems.append(
                f"event {ev.seq}: does not follow event {walk.newest_seq} (chain broken)"
            )
        digest = chain_hash(key, ev.prev_hash, ev.event, ev.session_id, ev.payload, ev.created_at)
        if digest != ev.hash:
            walk.mismatched += 1
            walk.problems.append(f"event {ev.seq}: hash mismatch (edited)")
        if ev.seq == head_seq:
            walk.hash_at_head = ev.hash
        walk.newest_seq, prev_hash = ev.seq, ev.hash
    if walk.checked >= 2 and walk.mismatched == walk.checked:
        # Every link failing means a different key far more likely than a total rewrite.
        walk.problems = [p for p in walk.problems if not p.endswith("(edited)")]
        walk.problems.append(
            f"all {walk.checked} events fail their hash: wrong metrics key, or every "
            "event was edited"
        )
    return walk


def _head_problems(
    head: dict[str, Any] | str | None, path: Path, key: bytes, walk: _Walk, expect_head: bool
) -> list[str]:
    """What the head file says about the newest events."""
    if head is None and not walk.checked and expect_head:
        return [
            f"chain head file {path} is missing and there are no events, but the chain "
            "was started (all events and the head deleted?)"
        ]
    if head is None:
        return [f"chain head file {path} is missing (deleted?)"] if walk.checked else []
    if isinstance(head, str):
        return [head]
    seq, hash_ = int(head["seq"]), str(head["hash"])
    from hmac import compare_digest  # verify only: the hook path never loads OpenSSL

    if not compare_digest(str(head["mac"]), head_mac(key, seq, hash_)):
        return [f"chain head file {path} is not authentic (edited, or another key)"]
    if seq > walk.newest_seq and not walk.checked:
        return [f"chain head is seq {seq} but there are no events (all events deleted)"]
    if seq > walk.newest_seq:
        return [
            f"chain head is seq {seq} but the newest event is {walk.newest_seq} "
            "(newest events deleted)"
        ]
    if walk.hash_at_head is not None and walk.hash_at_head != hash_:
        return [f"chain head does not match event {seq} (edited or replaced)"]
    return []


def verify(
    store: Store, key: bytes, head_path: Path | None = None, *, expect_head: bool = False
) -> VerifyReport:
    """Walk the whole chain and report every edited, deleted or out-of-chain event.

    Args:
        store: the store holding the events.
        key: the chain key (``load_or_create_key``).
        head_path: the head file the writers kept, to detect deleted newest events.
        expect_head: the chain was started (its key existed), so a missing head file is
            deleted even when there are no events left.

    Returns:
        ``VerifyReport(ok, checked, problems)``; problems read like
        ``"event 12: hash mismatch (edited)"`` or ``"events 5-7 missing (deleted)"``.
    """
    head = load_head(head_path) if head_path is not None else None
    head_seq = int(head["seq"]) if isinstance(head, dict) else None
    walk = _walk_chain(store, key, head_seq)
    problems = walk.problems
    if head_path is not None:
        problems += _head_problems(head, head_path, key, walk, expect_head)
    if len(problems) > _MAX_PROBLEMS:
        extra = len(problems) - _MAX_PROBLEMS
        problems = [*problems[:_MAX_PROBLEMS], f"... and {extra} more problems"]
    return VerifyReport(ok=not problems, checked=walk.checked, problems=problems)
