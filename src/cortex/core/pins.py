"""Working-memory pin rules, as pure functions over tuples of pins.

- Working memory holds at most ``WORKING_MEMORY_CAP`` (10) pins.
- An inherited pin's label carries its provenance: ``{label} [inherited from {id} @ {time}]``.
- Labels compare without that suffix and case-insensitively: the current session's pin wins
  on a collision, and inheriting the same pin twice adds it once (idempotent).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cortex.core.digest import sha256
from cortex.core.jsontext import compact_encoder
from cortex.core.models import CRITICAL, NORMAL, Pin, evolve
from cortex.errors import ConflictError, ValidationError, command

WORKING_MEMORY_CAP = 10
MAX_LABEL_CHARS = 200
MAX_PIN_CHARS = 4000

_EXAMPLE = " build-cmd 'make test'"
"""The command line's example of ``pin add`` in a message (each surface names its own)."""
_PROVENANCE = re.compile(r"\s*\[inherited from [^\]]*\]\s*$")


def base_label(label: str) -> str:
    """The label without any provenance suffix, for collision checks."""
    previous = None
    while previous != label:
        previous, label = label, _PROVENANCE.sub("", label)
    return label.strip()


def label_key(label: str) -> str:
    return base_label(label).casefold()


def provenance_label(label: str, session_id: str, at: str) -> str:
    """``{label} [inherited from {session_id} @ {at}]`` ."""
    return f"{base_label(label)} [inherited from {session_id} @ {at}]"


def make_pin(
    label: str, content: str, pinned_at: str, *, critical: bool = False, confidence: float = 1.0
) -> Pin:
    """A new pin, validated: non-empty label and content within the size limits."""
    label, content = label.strip(), content.strip()
    if not label:
        raise ValidationError(
            f"a pin needs a label; give it one, as in {command('pin add', _EXAMPLE)}"
        )
    control = next((c for c in label if ord(c) < 32 or ord(c) == 127), None)
    if control is not None:
        # A label is typed back to edit or remove its pin; no shell or form can send these.
        raise ValidationError(
            f"a pin label cannot hold control characters (U+{ord(control):04X}); "
            f"use plain text, as in {command('pin add', _EXAMPLE)}"
        )
    if len(label) > MAX_LABEL_CHARS:
        raise ValidationError(
            f"pin label is {len(label)} characters; keep it under {MAX_LABEL_CHARS}"
        )
    if not content:
        raise ValidationError(
            f"a pin needs content; give it some, as in {command('pin add', _EXAMPLE)}"
        )
    if len(content) > MAX_PIN_CHARS:
        raise ValidationError(
            f"pin content is {len(content):,} characters; pins hold at most {MAX_PIN_CHARS:,}: "
            "store long text as a memory or a file and pin a pointer to it"
        )
    if not 0.0 <= confidence <= 1.0:
        raise ValidationError(f"confidence {confidence} is outside 0-1; use e.g. 0.8")
    return Pin(
        label=label,
        content=content,
        pinned_at=pinned_at,
        importance=CRITICAL if critical else NORMAL,
        confidence=confidence,
    )


def upsert_pin(pins: Sequence[Pin], pin: Pin, cap: int = WORKING_MEMORY_CAP) -> tuple[Pin, ...]:
    """Add ``pin``, replacing a pin with the same label; refuse a new one past the cap."""
    key = label_key(pin.label)
    kept = [p for p in pins if label_key(p.label) != key]
    if len(kept) == len(pins) and len(pins) >= cap:
        raise ConflictError(
            f"working memory is full ({cap} pins); "
            f"remove one first with {command('pin remove', ' LABEL')}"
        )
    return (*kept, pin)


def remove_pin(pins: Sequence[Pin], label: str) -> tuple[tuple[Pin, ...], Pin | None]:
    """Remove the pin whose label (without provenance) matches; return (pins, removed)."""
    key = label_key(label)
    for index, pin in enumerate(pins):
        if label_key(pin.label) == key:
            return (*pins[:index], *pins[index + 1 :]), pin
    return tuple(pins), None


def pin_digest(pin: Pin) -> str:
    """A short fingerprint of everything a pin holds: tells an edited copy from the original."""
    text = _DIGEST_JSON(pin.to_dict())
    return str(sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16])


# Every start digests each pin it mirrors. The same text as
# ``json.dumps(..., sort_keys=True, ensure_ascii=False)``.
_DIGEST_JSON = compact_encoder(sort_keys=True, separators=(", ", ": "))


def apply_copy_edits(
    pins: Sequence[Pin],
    copy: Sequence[Pin],
    baseline: Mapping[str, str] | None,
    cap: int = WORKING_MEMORY_CAP,
) -> tuple[Pin, ...]:
    """``pins`` (the stored truth) with the edits someone made to a copy of them.

    ``baseline`` maps each label key of the copy as it was written to its ``pin_digest``. A pin
    of the copy whose digest differs (or is new) was added or changed there; a baselined label
    missing from the copy was removed there; everything else in the copy is only a possibly
    stale copy, and the stored pins win. Without a baseline (a copy rewritten by a tool that
    drops it) nothing is removed: the copy's pins are upserted, so nothing is lost. A new pin
    past the cap is left out.
    """
    out = list(pins)
    if baseline is not None:
        kept = {label_key(p.label) for p in copy}
        out = [p for p in out if label_key(p.label) in kept or label_key(p.label) not in baseline]
    for pin in copy:
        key = label_key(pin.label)
        if baseline is not None and baseline.get(key) == pin_digest(pin):
            continue
        index = next((i for i, p in enumerate(out) if label_key(p.label) == key), None)
        if index is not None:
            out[index] = pin
        elif len(out) < cap:
            out.append(pin)
    return tuple(out)


@dataclass(frozen=True)
class InheritDecision:
    """What happened to one candidate pin, for ``--explain`` and debug output."""

    label: str
    source_session_id: str
    outcome: str  # "added", "collision", "cap", "below_floor", "duplicate"
    confidence: float


def merge_inherited(
    current: Sequence[Pin],
    candidates: Iterable[Pin],
    *,
    max_inherited: int,
    cap: int = WORKING_MEMORY_CAP,
) -> tuple[tuple[Pin, ...], list[InheritDecision]]:
    """Append inherited candidates to ``current``: at most 5 inherited, 10 in all.

    Candidates arrive already decayed and provenance-labelled, best first. A candidate is
    skipped when its label collides with a pin already present (current wins; this also makes
    repeated inheritance idempotent), when the working memory holds ``max_inherited``
    inherited pins (those ``current`` already inherited count: continuing again, or from
    another session, never goes past the cap), or when the working memory is full.
    """
    pins = list(current)
    seen = {label_key(p.label) for p in pins}
    decisions: list[InheritDecision] = []
    added = sum(1 for p in pins if p.source_session_id is not None)
    for pin in candidates:
        key = label_key(pin.label)
        source = pin.source_session_id or ""
        if key in seen:
            outcome = "collision"
        elif added >= max_inherited or len(pins) >= cap:
            outcome = "cap"
        else:
            pins.append(pin)
            seen.add(key)
            added += 1
            outcome = "added"
        decisions.append(InheritDecision(base_label(pin.label), source, outcome, pin.confidence))
    return tuple(pins), decisions


def inherited_copy(pin: Pin, session_id: str, at: str, confidence: float) -> Pin:
    """The copy of ``pin`` a new session receives: provenance label, decayed confidence."""
    return evolve(
        pin,
        label=provenance_label(pin.label, session_id, at),
        confidence=round(confidence, 4),
        source_session_id=session_id,
        inherited_at=at,
    )
