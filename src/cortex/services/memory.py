"""MemoryService: layered memories with upsert, search and context assembly.

Layers: ``rule`` (always injected), ``working`` (expires after ``working_memory_ttl_hours``)
and ``long_term``. A memory with an ``upsert_key`` replaces the live memory with the same
scope, project, user, type and key: one current truth, the old one kept as history
(``superseded_by``), linked and audited. Content is redacted before it is stored.

The service owns transactions and validation (``cortex.services.memory_checks``); reading,
search and context assembly are ``cortex.services.search``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from cortex.clock import parse_time, to_iso
from cortex.core.memory_models import (
    EXPLICIT,
    GLOBAL,
    IMPLICIT,
    LONG_TERM,
    PROJECT,
    RULE,
    SCOPES,
    WORKING,
    Memory,
)
from cortex.core.plaintext import storable
from cortex.errors import ConfigError, ConflictError, NotFoundError, ValidationError, command, param
from cortex.services.ids import batch_ids
from cortex.services.memory_checks import (
    MAX_CONTENT_BYTES,
    MAX_KEY_CHARS,
    check_confidence,
    check_content,
    check_intent,
    check_key,
    check_layer,
    check_new_type,
    check_tags,
    check_user,
)
from cortex.services.search import MemoryReader

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_KEY_CHARS",
    "AddBatch",
    "AddResult",
    "ItemError",
    "MemoryService",
    "NewMemory",
]


@dataclass(frozen=True)
class NewMemory:
    """What ``add``/``add_many`` accept; unset fields take the documented defaults."""

    content: str
    layer: str | None = None
    type: str | None = None
    scope: str | None = None
    project: str | None = None
    user_id: str | None = None
    tags: str | Sequence[str] | None = None
    upsert_key: str | None = None
    session_id: str | None = None
    remember_intent: str | None = None
    confidence: float = 1.0
    expires_at: str | None = None


@dataclass(frozen=True)
class AddResult:
    """The stored memory and the id of the memory it superseded, if any."""

    memory: Memory
    superseded_id: str | None = None

    def to_dict(self) -> dict[str, object]:
        return self.memory.to_dict() | {"superseded_id": self.superseded_id}


@dataclass(frozen=True)
class ItemError:
    """An item of a batch that was not stored: its position in the input and why."""

    index: int
    error: str
    cause: ValidationError | None = field(default=None, compare=False, repr=False)
    """The refusal itself, so that ``add`` raises it for its caller to render
    (``CortexError.render``)."""

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "error": self.error}


@dataclass(frozen=True)
class AddBatch:
    """What ``add_many`` did: the stored items in input order, and the refused ones.

    Iterating, indexing and ``len`` see the stored items (``AddResult``); ``errors`` lists
    the items that were refused, each with its index in the input.
    """

    added: tuple[AddResult, ...]
    errors: tuple[ItemError, ...] = ()

    def __iter__(self) -> Iterator[AddResult]:
        return iter(self.added)

    def __len__(self) -> int:
        return len(self.added)

    def __getitem__(self, index: int) -> AddResult:
        return self.added[index]


class MemoryService(MemoryReader):
    """Add, edit and forget memories; reading them (list, search, context) is ``MemoryReader``'s."""

    # -- writes --------------------------------------------------------------------------------
    def add(
        self,
        content: str,
        *,
        layer: str | None = None,
        type: str | None = None,
        scope: str | None = None,
        project: str | None = None,
        user_id: str | None = None,
        tags: str | Sequence[str] | None = None,
        upsert_key: str | None = None,
        session_id: str | None = None,
        remember_intent: str | None = None,
        confidence: float = 1.0,
        expires_at: str | None = None,
        actor: str = "api",
    ) -> AddResult:
        """Add one memory (see ``NewMemory`` for the fields and their defaults)."""
        item = NewMemory(
            content, layer, type, scope, project, user_id, tags, upsert_key, session_id,
            remember_intent, confidence, expires_at,
        )  # fmt: skip
        batch = self.add_many([item], actor=actor)
        if batch.errors:
            refused = batch.errors[0]
            raise refused.cause or ValidationError(refused.error)
        return batch[0]

    def add_many(self, items: Iterable[NewMemory], *, actor: str = "api") -> AddBatch:
        """Add memories in one transaction (upserts apply in order).

        An item that fails validation is left out and reported in ``AddBatch.errors`` with
        its index; the others are stored. Text over the size limit is stored truncated with
        a visible marker (``memory_checks.truncate_content``), never refused.
        """
        now = self.clock.now()
        at = to_iso(now)
        projects: dict[str, tuple[str, str | None]] = {}
        memories: list[Memory] = []
        errors: list[ItemError] = []
        ids = batch_ids()  # a batch's ids share their first byte: its index inserts stay close
        for index, item in enumerate(items):
            try:
                memories.append(self._build(item, next(ids), now, at, projects))
            except ValidationError as exc:
                errors.append(ItemError(index, str(exc), exc))
        if not memories:
            return AddBatch((), tuple(errors))
        with self.store.transaction():
            superseded = self.store.add_memories(memories)
            entries = [
                ("memory.supersede", actor, m.id, {"superseded": old, "upsert_key": m.upsert_key})
                for m, old in zip(memories, superseded, strict=True)
                if old is not None
            ]
            if entries:
                self.store.append_audits(entries, at)
        if self.embedder is not None:
            from cortex.services.embeddings import embed_and_store

            embed_and_store(self.store, self.embedder, memories)
        added = tuple(AddResult(m, old) for m, old in zip(memories, superseded, strict=True))
        return AddBatch(added, tuple(errors))

    def embed_missing(
        self, *, batch: int = 256, progress: Callable[[int], None] | None = None
    ) -> int:
        """Embed the memories that have no vector of the embedder's model yet (added before
        the ``embedder`` setting was on), ``batch`` at a time, calling ``progress`` with the
        count so far after each; return how many were embedded."""
        if self.embedder is None:
            raise ConfigError(
                "no embedder is set; set embedder=minilm (CORTEX_EMBEDDER=minilm, with the "
                "embeddings extra installed) and run this again"
            )
        from cortex.services.embeddings import embed_and_store

        done, seen = 0, set[str]()
        while True:
            pending = self.store.memories_without_embedding(self.embedder.model, limit=batch)
            if not pending or all(m.id in seen for m in pending):  # (none stored: no loop)
                return done
            embed_and_store(self.store, self.embedder, pending)
            seen.update(m.id for m in pending)
            done += len(pending)
            if progress is not None:
                progress(done)

    def build(self, item: NewMemory) -> Memory:
        """The memory ``add`` would store for ``item`` (validated, redacted), not stored."""
        now = self.clock.now()
        return self._build(item, next(batch_ids()), now, to_iso(now), {})

    def _build(
        self,
        item: NewMemory,
        memory_id: str,
        now_dt: datetime,
        now: str,
        projects: dict[str, tuple[str, str | None]],
    ) -> Memory:
        """Validate one ``NewMemory`` and apply the defaults, as memory ``memory_id``
        (``now`` is ``now_dt`` as stored); raises ``ValidationError``."""
        content = check_content(item.content)
        intent = check_intent(item.remember_intent or IMPLICIT)
        kind = check_new_type(item.type) if item.type else None
        layer = check_layer(item.layer) if item.layer else (RULE if kind == RULE else LONG_TERM)
        kind = kind or (RULE if layer == RULE else "note")
        from cortex.core.redaction import redact  # (a search needs none)

        session_id, project = None, redact(storable(item.project)) if item.project else None
        if item.session_id:
            session_id, session_project = self._source_session(item.session_id, projects)
            project = project or session_project
        scope = item.scope or (PROJECT if project else GLOBAL)
        if scope not in SCOPES:
            raise ValidationError(f"unknown scope {scope!r}; use global or project")
        if scope == PROJECT and not project:
            raise ValidationError(
                f"scope project needs a project; pass {param('project', metavar='NAME')}"
            )
        confidence = check_confidence(item.confidence)
        key = check_key(item.upsert_key)
        return Memory.quick(
            id=memory_id,
            content=content,
            layer=layer,
            type=kind,
            scope=scope,
            project=project if scope == PROJECT else None,
            user_id=check_user(item.user_id),
            tags=check_tags(item.tags),
            upsert_key=key,
            source_session_id=session_id,
            remember_intent=intent,
            confidence=confidence,
            expires_at=self._expiry(layer, item.expires_at, now_dt),
            last_confirmed_at=now if intent == EXPLICIT else None,
            created_at=now,
            updated_at=now,
        )

    def _expiry(self, layer: str, expires_at: str | None, now_dt: datetime) -> str | None:
        """An explicit expiry (validated: a later time than now), else now + TTL for the working
        layer. A memory that would be expired as it is stored is refused, not stored unseen."""
        if expires_at:
            expiry = parse_time(expires_at)
            if expiry <= now_dt:
                raise ValidationError(
                    f"expires_at {expires_at!r} is not in the future; give a later time, "
                    "or leave it out"
                )
            return to_iso(expiry)
        if layer != WORKING:
            return None
        ttl = timedelta(hours=self.config.working_memory_ttl_hours)
        return to_iso(now_dt + ttl)

    def edit(
        self,
        memory_id: str,
        *,
        actor: str = "api",
        content: str | None = None,
        layer: str | None = None,
        type: str | None = None,
        tags: str | Sequence[str] | None = None,
        confidence: float | None = None,
        remember_intent: str | None = None,
        upsert_key: str | None = None,
    ) -> Memory:
        """Change a live memory in place (audited); the FTS index follows."""
        now = self.now_iso()
        with self.store.transaction():
            old = self.live(memory_id)
            memory_id = old.id
            new = replace(
                old,
                content=check_content(content) if content is not None else old.content,
                layer=check_layer(layer) if layer else old.layer,
                type=check_new_type(type) if type else old.type,
                tags=check_tags(tags) if tags is not None else old.tags,
                confidence=old.confidence if confidence is None else float(confidence),
                remember_intent=remember_intent or old.remember_intent,
                upsert_key=check_key(upsert_key) if upsert_key is not None else old.upsert_key,
                updated_at=now,
            )
            new = self._checked_edit(old, new, now)
            try:
                self.store.update_memory(new)
            except ConflictError:
                if new.upsert_key is None or new.upsert_key == old.upsert_key:
                    raise
                raise ConflictError(  # the store names its index; say which key is taken
                    f"upsert key {new.upsert_key!r} is held by another live {new.type} memory "
                    f"of this scope; edit that one (see {command('memory list')}) or choose "
                    "another key"
                ) from None
            before = old.to_dict()
            changed = sorted(k for k, v in new.to_dict().items() if before[k] != v)
            self.store.append_audit("memory.edit", actor, memory_id, {"changed": changed}, now)
        return new

    def live(self, memory_id: str) -> Memory:
        """A memory that is neither forgotten, expired nor superseded, or a one-line error."""
        memory = self.get(memory_id)
        if memory.deleted_at is not None:
            raise NotFoundError(f"memory {memory.id} was forgotten; add a new one")
        if memory.expires_at is not None and memory.expires_at <= self.now_iso():
            raise NotFoundError(f"memory {memory.id} expired at {memory.expires_at}; add a new one")
        if memory.superseded_by is not None:
            raise ValidationError(
                f"memory {memory.id} was superseded by {memory.superseded_by}; edit that one"
            )
        return memory

    def _checked_edit(self, old: Memory, new: Memory, now: str) -> Memory:
        check_confidence(new.confidence)
        check_intent(new.remember_intent)
        if new.layer != old.layer:
            # Only the working layer sets an expiry by default (its TTL), and a working
            # memory's own expiry cannot be told from that default: it goes with the layer.
            # Any other layer's expiry was given explicitly, and every layer allows one.
            kept = old.expires_at if old.layer != WORKING else None
            expiry = kept or self._expiry(new.layer, None, self.clock.now())
            new = replace(new, expires_at=expiry)
        if new.remember_intent == EXPLICIT:
            new = replace(new, last_confirmed_at=now)
        return new

    def supersede(self, old: Memory, new: Memory, at: str) -> bool:
        """Mark ``old`` superseded by ``new`` at ``at``, in the caller's transaction; False
        (nothing changed) when ``old`` is no longer live. ``new`` takes ``old``'s upsert key
        when it has none and is of its type, scope, project and user, so that the key still
        names the current truth (the next upsert with it replaces ``new``, not a second live
        memory)."""
        if not self.store.supersede_memory(old.id, new.id, at):
            return False
        same = (new.type, new.scope, new.project, new.user_id) == (
            old.type, old.scope, old.project, old.user_id
        )  # fmt: skip
        if old.upsert_key and new.upsert_key is None and same:
            self.store.update_memory(replace(new, upsert_key=old.upsert_key, updated_at=at))
        return True

    def forget(self, memory_id: str, *, actor: str = "api") -> Memory:
        """Soft-delete a memory: it is never returned again, and the row is kept (audited)."""
        now = self.now_iso()
        with self.store.transaction():
            memory = self.get(memory_id)
            memory_id = memory.id
            if memory.deleted_at is not None or not self.store.delete_memory(memory_id, now):
                raise NotFoundError(
                    f"memory {memory_id} is already forgotten; nothing to do (see "
                    f"{command('memory list')} for the live ones)"
                )
            self.store.append_audit("memory.forget", actor, memory_id, {"layer": memory.layer}, now)
        return replace(memory, deleted_at=now, updated_at=now)
