"""MemoryService: layered memories with upsert, search and context assembly (RFC phase 1).

Layers: ``rule`` (always injected), ``working`` (expires after ``working_memory_ttl_hours``)
and ``long_term``. A memory with an ``upsert_key`` replaces the live memory with the same
scope, project, user, type and key: one current truth, the old one kept as history
(``superseded_by``), linked and audited. Content is redacted before it is stored.

Search asks the store for candidates holding any of the query's words (stop words dropped):
full-text matches with a relevance (SQLite: FTS5 BM25), or substring matches when the index
finds nothing. The service re-ranks them by confidence, layer and recency, and adds memories
linked one hop from the best hits. With an embedder it is hybrid (BM25 + cosine, fused by
reciprocal rank). The service owns transactions and validation; SQL and the way to candidates
are in the store, the formulas in ``cortex.core.retrieval`` and ``cortex.core.budgets``.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from cortex.clock import Clock, parse_time, to_iso
from cortex.config import Config
from cortex.core.budgets import fill_budget
from cortex.core.memory_models import (
    EXPLICIT,
    GLOBAL,
    IMPLICIT,
    INTENTS,
    LAYERS,
    LONG_TERM,
    MODE_LAYERS,
    MODES,
    PROJECT,
    RULE,
    SCOPES,
    WORKING,
    ContextResult,
    Memory,
    MemoryFilter,
    MemoryLink,
    ScoredMemory,
)
from cortex.core.redaction import redact
from cortex.core.retrieval import (
    matched_terms,
    memory_text,
    normalize_tags,
    query_terms,
    rank_score,
)
from cortex.core.tokens import estimate_tokens
from cortex.errors import NotFoundError, ValidationError
from cortex.files import check_id
from cortex.services.base import Service
from cortex.store.protocol import Store

if TYPE_CHECKING:
    from cortex.services.embeddings import Embedder

MAX_CONTENT_BYTES = 65_536
"""Largest memory (UTF-8 bytes, before redaction): a memory is a fact, not a document."""
MAX_KEY_CHARS = 200
MAX_TYPE_CHARS = 64
MAX_LIMIT = 1000
RULE_LIMIT = 100
ITEM_OVERHEAD_TOKENS = 4
"""Tokens a context line costs beyond its content (bullet, layer tag, newline)."""
EXPAND_SEEDS = 5
LINK_DISCOUNT = 0.5


@dataclass(frozen=True)
class NewMemory:
    """What ``add``/``add_many`` accept; unset fields take the RFC's defaults."""

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


def check_layer(layer: str) -> str:
    if layer not in LAYERS:
        raise ValidationError(f"unknown layer {layer!r}; use one of {', '.join(LAYERS)}")
    return layer


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValidationError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    return mode


def check_limit(limit: int, what: str = "limit") -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"{what} {limit} is out of range; use 1-{MAX_LIMIT}")
    return limit


def check_content(content: object, what: str = "memory content") -> str:
    """Non-empty text of at most ``MAX_CONTENT_BYTES``, redacted."""
    if not isinstance(content, str) or not content.strip():
        raise ValidationError(f"{what} is empty; give the text to store")
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > MAX_CONTENT_BYTES:
        raise ValidationError(
            f"{what} is {size:,} bytes; the limit is {MAX_CONTENT_BYTES:,} bytes (64 KB): "
            "store a summary or split it"
        )
    return redact(content.strip())


def _layers(layer: str | Sequence[str] | None) -> tuple[str, ...]:
    if layer is None:
        return LAYERS
    items = (layer,) if isinstance(layer, str) else tuple(layer)
    return tuple(check_layer(item) for item in items) or LAYERS


def _check_confidence(confidence: float) -> float:
    if not 0.0 <= confidence <= 1.0:
        raise ValidationError(f"confidence {confidence} is out of range; use 0-1")
    return float(confidence)


def _check_intent(intent: str) -> str:
    if intent not in INTENTS:
        raise ValidationError(f"unknown remember_intent {intent!r}; use explicit or implicit")
    return intent


def _check_type(value: str) -> str:
    text = value.strip().lower()
    if not text or len(text) > MAX_TYPE_CHARS or not all(c.isalnum() or c in "_-" for c in text):
        raise ValidationError(
            f"invalid memory type {value!r}; use 1-{MAX_TYPE_CHARS} letters, digits, - or _"
        )
    return text


class MemoryService(Service):
    """Add, edit, forget, list, search and assemble context over one ``Store``."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        super().__init__(store, config, clock)
        self.embedder = embedder

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
        return self.add_many([item], actor=actor)[0]

    def add_many(
        self, items: Iterable[NewMemory], *, actor: str = "api"
    ) -> builtins.list[AddResult]:
        """Add memories in one transaction (upserts apply in order); all or nothing."""
        now = self.clock.now()
        projects: dict[str, str | None] = {}
        memories = [self._build(item, now, projects) for item in items]
        with self.store.transaction():
            superseded = self.store.add_memories(memories)
            at = to_iso(now)
            for memory, old_id in zip(memories, superseded, strict=True):
                if old_id is not None:
                    detail = {"superseded": old_id, "upsert_key": memory.upsert_key}
                    self.store.append_audit("memory.supersede", actor, memory.id, detail, at)
        if self.embedder is not None:
            from cortex.services.embeddings import embed_and_store

            embed_and_store(self.store, self.embedder, memories)
        return [AddResult(m, old) for m, old in zip(memories, superseded, strict=True)]

    def _build(self, item: NewMemory, now_dt: datetime, projects: dict[str, str | None]) -> Memory:
        """Validate one ``NewMemory`` and apply the defaults; raises ``ValidationError``."""
        now = to_iso(now_dt)
        content = check_content(item.content)
        intent = _check_intent(item.remember_intent or IMPLICIT)
        kind = _check_type(item.type) if item.type else None
        layer = check_layer(item.layer) if item.layer else (RULE if kind == RULE else LONG_TERM)
        kind = kind or (RULE if layer == RULE else "note")
        session_id = check_id(item.session_id) if item.session_id else None
        project = item.project or self._session_project(session_id, projects)
        scope = item.scope or (PROJECT if project else GLOBAL)
        if scope not in SCOPES:
            raise ValidationError(f"unknown scope {scope!r}; use global or project")
        if scope == PROJECT and not project:
            raise ValidationError("scope project needs a project; pass --project NAME")
        confidence = _check_confidence(item.confidence)
        key = (item.upsert_key or "").strip() or None
        if key is not None and len(key) > MAX_KEY_CHARS:
            raise ValidationError(f"upsert_key is longer than {MAX_KEY_CHARS} characters")
        return Memory(
            id=str(uuid.uuid4()),
            content=content,
            layer=layer,
            type=kind,
            scope=scope,
            project=project if scope == PROJECT else None,
            user_id=item.user_id or None,
            tags=normalize_tags(item.tags),
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
        """An explicit expiry (validated), else now + TTL for the working layer."""
        if expires_at:
            return to_iso(parse_time(expires_at))
        if layer != WORKING:
            return None
        ttl = timedelta(hours=self.config.working_memory_ttl_hours)
        return to_iso(now_dt + ttl)

    def _session_project(self, session_id: str | None, cache: dict[str, str | None]) -> str | None:
        """The project of the source session (memories made in a session belong to its
        project)."""
        if session_id is None:
            return None
        if session_id not in cache:
            state = self.store.get_session(session_id)
            if state is None:  # refused like every command refuses an unknown session
                raise NotFoundError(f"no session {session_id!r}; see `cortex session list`")
            cache[session_id] = state.project
        return cache[session_id]

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
            old = self._live(memory_id)
            new = replace(
                old,
                content=check_content(content) if content is not None else old.content,
                layer=check_layer(layer) if layer else old.layer,
                type=_check_type(type) if type else old.type,
                tags=normalize_tags(tags) if tags is not None else old.tags,
                confidence=old.confidence if confidence is None else float(confidence),
                remember_intent=remember_intent or old.remember_intent,
                upsert_key=(upsert_key.strip() or None)
                if upsert_key is not None
                else old.upsert_key,
                updated_at=now,
            )
            new = self._checked_edit(old, new, now)
            self.store.update_memory(new)
            before = old.to_dict()
            changed = sorted(k for k, v in new.to_dict().items() if before[k] != v)
            self.store.append_audit("memory.edit", actor, memory_id, {"changed": changed}, now)
        return new

    def _checked_edit(self, old: Memory, new: Memory, now: str) -> Memory:
        _check_confidence(new.confidence)
        _check_intent(new.remember_intent)
        if new.layer != old.layer:
            expiry = self._expiry(new.layer, None, self.clock.now())
            new = replace(new, expires_at=expiry)
        if new.remember_intent == EXPLICIT:
            new = replace(new, last_confirmed_at=now)
        return new

    def forget(self, memory_id: str, *, actor: str = "api") -> Memory:
        """Soft-delete a memory: it is never returned again, and the row is kept (audited)."""
        now = self.now_iso()
        with self.store.transaction():
            memory = self.get(memory_id)
            if memory.deleted_at is not None or not self.store.delete_memory(memory_id, now):
                raise NotFoundError(f"memory {memory_id} is already forgotten")
            self.store.append_audit("memory.forget", actor, memory_id, {"layer": memory.layer}, now)
        return replace(memory, deleted_at=now, updated_at=now)

    # -- reads ---------------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory:
        """Any memory by id (also deleted or superseded ones, for history)."""
        memory = self.store.get_memory(memory_id)
        if memory is None:
            raise NotFoundError(f"no memory {memory_id!r}; see `cortex memory list`")
        return memory

    def links(self, memory_id: str) -> list[MemoryLink]:
        """The memory's links (supersedes, conflicts, relates), either direction."""
        return self.store.memory_links(memory_id)

    def _live(self, memory_id: str) -> Memory:
        memory = self.get(memory_id)
        if memory.deleted_at is not None:
            raise NotFoundError(f"memory {memory_id} was forgotten; add a new one")
        if memory.superseded_by is not None:
            raise ValidationError(
                f"memory {memory_id} was superseded by {memory.superseded_by}; edit that one"
            )
        return memory

    def scope_filter(
        self,
        *,
        layer: str | Sequence[str] | None = None,
        project: str | None = None,
        user_id: str | None = None,
        types: Sequence[str] = (),
        tags: str | Sequence[str] | None = None,
        session_id: str | None = None,
        all_projects: bool = False,
        include_history: bool = False,
    ) -> MemoryFilter:
        """A validated ``MemoryFilter``; a session's memories are seen with its project."""
        if session_id and not project:
            project = self._session_project(check_id(session_id), {})
        return MemoryFilter(
            layers=_layers(layer),
            project=project or None,
            user_id=user_id or None,
            types=tuple(_check_type(t) for t in types),
            tags=normalize_tags(tags),
            session_id=check_id(session_id) if session_id else None,
            all_projects=all_projects,
            include_history=include_history,
        )

    def list(self, *, limit: int = 50, offset: int = 0, **scope: object) -> builtins.list[Memory]:
        """Live memories (``scope``: the ``scope_filter`` arguments), newest first."""
        check_limit(limit)
        if offset < 0:
            raise ValidationError(f"offset {offset} is negative; use 0 or more")
        flt = self.scope_filter(**scope)  # type: ignore[arg-type]
        return self.store.list_memories(flt, self.now_iso(), limit=limit, offset=offset)

    def search(
        self, query: str, *, limit: int = 10, expand: bool = True, **scope: object
    ) -> builtins.list[ScoredMemory]:
        """Best memories for ``query`` (see the module docstring), best first."""
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("search query is empty; give words to look for")
        check_limit(limit)
        flt = self.scope_filter(**scope)  # type: ignore[arg-type]
        hits = self._lexical(query, flt, max(limit * 2, 20))
        if self.embedder is not None:
            from cortex.services.embeddings import hybrid_rerank

            hits = hybrid_rerank(self.store, self.embedder, query, flt, self.now_iso(), hits)
        hits = hits[:limit]
        if expand and hits:
            hits = self._expand(hits, flt, limit)
        return hits

    def _lexical(self, query: str, flt: MemoryFilter, pool: int) -> builtins.list[ScoredMemory]:
        """The store's candidates re-ranked: full-text ones by relevance, the unranked ones
        (substring or newest matches) by the share of query terms they hold."""
        now_dt, now = self.clock.now(), self.now_iso()
        terms = query_terms(query)
        if flt.layers == (WORKING,):  # a few short-lived rows: rank them all, no index needed
            return self._overlap_ranked(terms, self.store.list_memories(flt, now, limit=pool))
        found = self.store.search_memories(terms, flt, now, limit=pool)
        ranked = [
            ScoredMemory(m, rank_score(r, m, now_dt), f"full-text match (relevance {r:.3g})")
            for m, r in found
            if r > 0
        ]
        unranked = [m for m, r in found if r <= 0]
        ranked += self._overlap_ranked(terms, unranked, "text contains ")
        ranked.sort(key=lambda s: -s.score)
        return ranked[:pool]

    def _overlap_ranked(
        self, terms: Sequence[str], memories: Iterable[Memory], why: str = "shares terms: "
    ) -> builtins.list[ScoredMemory]:
        """Memories that share query terms, ranked by the share of terms they hold."""
        now_dt, out = self.clock.now(), []
        for m in memories:
            matched = matched_terms(terms, memory_text(m))
            if matched:
                reason = why + ", ".join(repr(t) for t in matched[:3])
                overlap = len(matched) / len(terms)
                out.append(ScoredMemory(m, rank_score(overlap, m, now_dt), reason))
        out.sort(key=lambda s: -s.score)
        return out

    def _expand(
        self, hits: builtins.list[ScoredMemory], flt: MemoryFilter, limit: int
    ) -> builtins.list[ScoredMemory]:
        """Add live memories linked one hop from the best hits, at half their seed's score."""
        seeds = {h.memory.id: h for h in hits[:EXPAND_SEEDS]}
        present = {h.memory.id for h in hits}
        extra: dict[str, ScoredMemory] = {}
        for seed, kind, other in self.store.linked_memories(list(seeds), flt, self.now_iso()):
            if other.id in present or other.id in extra:
                continue
            why = f"{kind} link from {seed}"
            extra[other.id] = ScoredMemory(other, seeds[seed].score * LINK_DISCOUNT, why)
        merged = hits + list(extra.values())
        merged.sort(key=lambda s: -s.score)
        return merged[:limit]

    # -- context -------------------------------------------------------------------------------
    def get_context(
        self,
        query: str | None = None,
        *,
        mode: str = "all",
        budget_tokens: int | None = None,
        session_id: str | None = None,
        project: str | None = None,
        user_id: str | None = None,
        limit: int = 20,
    ) -> ContextResult:
        """Rules, then working, then long-term memories (RFC parity matrix), within budget.

        Args:
            query: what the agent is working on; without one, memories come by confidence
                and recency.
            mode: ``rules_only`` | ``working`` | ``long_term`` | ``all``.
            budget_tokens: most tokens of content to return (None: no limit); items are taken
                in rank order and one too large for what is left is skipped.
            session_id: adds the ``session`` block (compaction hints, latest checkpoint) and
                defaults ``project``/``user_id`` to the session's.
            limit: most memories per layer before the budget applies.
        """
        check_mode(mode)
        check_limit(limit)
        if budget_tokens is not None and budget_tokens < 0:
            raise ValidationError(
                f"budget_tokens {budget_tokens} is negative; give 0 or more, e.g. 4000"
            )
        block = None
        if session_id is not None:
            from cortex.services.compaction import session_block

            state = self.store.get_session(check_id(session_id))
            if state is None:
                raise NotFoundError(f"no session {session_id!r}; see `cortex session list`")
            project, user_id = project or state.project, user_id or state.user_id
            block = session_block(self.store, self.config, self.clock, state)
        ranked = self._context_candidates(query, mode, project, user_id, limit)
        costs = [estimate_tokens(s.memory.content) + ITEM_OVERHEAD_TOKENS for s in ranked]
        chosen, used, skipped = fill_budget(list(range(len(ranked))), costs, budget_tokens)
        sized = [replace(ranked[i], tokens=costs[i]) for i in chosen]
        return ContextResult(
            mode=mode,
            query=query,
            rules=tuple(s for s in sized if s.memory.layer == RULE),
            memories=tuple(s for s in sized if s.memory.layer != RULE),
            budget_tokens=budget_tokens,
            used_tokens=used,
            dropped=skipped,
            session=block,
        )

    def _context_candidates(
        self, query: str | None, mode: str, project: str | None, user_id: str | None, limit: int
    ) -> builtins.list[ScoredMemory]:
        """Every candidate in rank order: rules, then each layer the mode includes."""
        now_dt, now = self.clock.now(), self.now_iso()
        terms = query_terms(query) if query and query.strip() else []
        ranked: builtins.list[ScoredMemory] = []
        for layer in (RULE, *MODE_LAYERS[mode]):
            if layer == LONG_TERM and terms:
                assert query is not None
                ranked += self.search(query, limit=limit, layer=layer, project=project,
                                      user_id=user_id)  # fmt: skip
                continue
            # Rules always, and the working scratchpad always: query matches first, then by
            # confidence and recency.
            flt = self.scope_filter(layer=layer, project=project, user_id=user_id)
            rows = self.store.list_memories(flt, now, limit=RULE_LIMIT if layer == RULE else limit)
            matched = {s.memory.id: s for s in self._overlap_ranked(terms, rows)}
            why = "rule: always included" if layer == RULE else "recent"
            rest = [ScoredMemory(m, rank_score(0.5, m, now_dt), why) for m in rows]
            rest = [s for s in rest if s.memory.id not in matched]
            rest.sort(key=lambda s: -s.score)
            ranked += [*matched.values(), *rest]
        return ranked
