"""Working-memory pins of a session: add (same label replaces, 10 at most), remove, list.

Every change is mirrored to the OpenClaw-compatible working-memory file.
"""

from __future__ import annotations

from dataclasses import replace

from cortex.core.models import Pin
from cortex.core.pins import make_pin, remove_pin, upsert_pin
from cortex.core.plaintext import plain, storable
from cortex.core.redaction import redact
from cortex.core.topics import HotTopicExtractor
from cortex.errors import NotFoundError, command
from cortex.services.sessions.context import SessionContext, with_topics


class SessionPins:
    """Pin, unpin and list the notes a session keeps in view."""

    def __init__(self, context: SessionContext) -> None:
        self.context = context

    def add_pin(
        self,
        label: str,
        content: str,
        session_id: str | None = None,
        *,
        critical: bool = False,
        confidence: float = 1.0,
    ) -> Pin:
        """Pin a note in the session's working memory (same label replaces; 10 at most)."""
        ctx = self.context
        at = ctx.now_iso()
        pin = make_pin(redact(label), redact(storable(content)), at, critical=critical,
                       confidence=confidence)  # fmt: skip
        plain(label, "label")  # (a NUL is a control character, which make_pin refuses)
        with ctx.tx():
            state = ctx.resolve_open(session_id)
            extractor = HotTopicExtractor.from_dict(state.topic_state)
            extractor.record_working_memory_label(pin.label)
            state = ctx.save(
                with_topics(
                    state,
                    extractor,
                    working_memory=upsert_pin(state.working_memory, pin),
                    last_activity=at,
                    updated_at=at,
                )
            )
            ctx.mirror_pins(state)
        return pin

    def remove_pin(self, label: str, session_id: str | None = None) -> Pin:
        """Remove the pin labelled ``label`` (provenance suffix and case ignored)."""
        ctx = self.context
        label = redact(
            plain(label, "label")
        )  # as it was stored: a pin is unpinned by the label it was given
        with ctx.tx():
            state = ctx.resolve_open(session_id)
            pins, removed = remove_pin(state.working_memory, label)
            if removed is None:
                raise NotFoundError(
                    f"no pin labelled {label!r} in session "
                    f"{state.session_id}; see {command('pin list')}"
                )
            state = ctx.save(replace(state, working_memory=pins, updated_at=ctx.now_iso()))
            ctx.mirror_pins(state)
        return removed

    def list_pins(self, session_id: str | None = None) -> tuple[Pin, ...]:
        """The pins of the named session, or of the current active one."""
        return self.context.resolve(session_id).working_memory
