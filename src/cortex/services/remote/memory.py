"""Long-term memory over a Cortex server: add, edit, forget, list, search and context.

The same ``MemoryService`` methods adapters call (the CLI's ``memory`` commands, the MCP memory
tools, the OpenClaw bridge), answered by the server's ``/v1/memories/*`` and
``/v1/context/get`` endpoints with the same model objects. A write the server cannot take now
waits in the journal like every client write; the caller then gets the memory as asked for,
with no id yet (the server gives it when the journal is delivered). Batch imports and
embeddings need the local store and say so.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.memory_models import (
    ContextResult,
    Memory,
    MemoryLink,
    ScoredMemory,
    SessionBlock,
)
from cortex.errors import ValidationError, param
from cortex.services.memory import AddBatch, AddResult, ItemError, MemoryService, NewMemory
from cortex.services.remote.client import RemoteClient
from cortex.services.remote.local_only import LocalOnly
from cortex.services.remote.transport import segment


def _fields(**values: Any) -> dict[str, Any]:
    """The fields that carry something (the server applies its defaults to the others)."""
    return {k: v for k, v in values.items() if v is not None}


def _words(value: str | Sequence[str] | None) -> list[str]:
    """Tags or types as the list the server takes (a comma-separated string is split)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return [str(part) for part in value]


def _scope(scope: dict[str, object]) -> dict[str, Any]:
    """The ``scope_filter`` arguments as the server's ``MemoryScopeIn`` body."""
    body: dict[str, Any] = dict(scope)
    for name in ("types", "tags"):
        if name in body:
            body[name] = _words(body[name])
    layer = body.get("layer")
    if isinstance(layer, list | tuple):
        if len(layer) != 1:
            raise ValidationError(
                f"a server filters on one layer at a time; give one {param('layer')}"
            )
        body["layer"] = layer[0]
    return _fields(**body)


class RemoteMemory(MemoryService):
    """``MemoryService`` whose reads and writes go to the server of ``client``."""

    def __init__(self, client: RemoteClient, config: Config, clock: Clock | None = None) -> None:
        super().__init__(LocalOnly.store(client.transport.url), config, clock)
        self.client = client

    # -- writes --------------------------------------------------------------------------------
    def add_many(self, items: Iterable[NewMemory], *, actor: str = "api") -> AddBatch:
        """``POST /v1/memories/add`` per item, in order (the server redacts, validates and
        supersedes; it has no batch endpoint, so a batch is not atomic here). An item the server
        refuses is reported in ``errors`` and the others are still sent. ``add`` is one."""
        added: list[AddResult] = []
        errors: list[ItemError] = []
        for index, item in enumerate(items):
            try:
                added.append(self._add(item))
            except ValidationError as exc:
                errors.append(ItemError(index, str(exc), exc))
        return AddBatch(tuple(added), tuple(errors))

    def _add(self, item: NewMemory) -> AddResult:
        body = _fields(**asdict(item))
        body["tags"] = _words(item.tags)
        answer = self.client.write("POST", "/v1/memories/add", body)
        if answer is None or "id" not in answer:  # waiting in the journal: no id yet
            now = self.now_iso()
            pending = Memory(
                id="", content=item.content, layer=item.layer or "long_term",
                type=item.type or "note", project=item.project, user_id=item.user_id,
                tags=tuple(body["tags"]), upsert_key=item.upsert_key,
                source_session_id=item.session_id, confidence=item.confidence,
                expires_at=item.expires_at, created_at=now, updated_at=now,
            )  # fmt: skip
            return AddResult(pending)
        return AddResult(Memory.from_dict(answer), answer.get("superseded_id"))

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
        """``POST /v1/memories/edit``; while the server is unavailable, the edit waits in the
        journal and this returns the memory as it will read."""
        if upsert_key is not None:
            raise ValidationError(
                "a server memory keeps its upsert key; add a new memory with the new key instead"
            )
        changes = _fields(
            content=content, layer=layer, type=type,
            tags=None if tags is None else _words(tags),
            confidence=confidence, remember_intent=remember_intent,
        )  # fmt: skip
        if not changes:
            raise ValidationError("nothing to change; give new content, tags, type or confidence")
        answer = self.client.write("POST", "/v1/memories/edit", {"id": memory_id, **changes})
        if answer is None or "id" not in answer:
            return Memory(id=memory_id, content=content or "", updated_at=self.now_iso())
        return Memory.from_dict(answer)

    def forget(self, memory_id: str, *, actor: str = "api") -> Memory:
        """``DELETE /v1/memories/{id}``: never returned again; the row stays on the server."""
        answer = self.client.write("DELETE", _memory(memory_id), {})
        if answer is None or "id" not in answer:
            return Memory(id=memory_id, content="", deleted_at=self.now_iso())
        return Memory.from_dict(answer)

    # -- reads ---------------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory:
        return Memory.from_dict(self.client.read("GET", _memory(memory_id)))

    def links(self, memory_id: str) -> builtins.list[MemoryLink]:
        data = self.client.read("GET", _memory(memory_id))
        return [MemoryLink(**link) for link in data.get("links") or ()]

    def list(self, *, limit: int = 50, offset: int = 0, **scope: object) -> builtins.list[Memory]:
        body = {"limit": limit, "offset": offset, **_scope(scope)}
        data = self.client.read("POST", "/v1/memories/list", body)
        return [Memory.from_dict(m) for m in data.get("memories") or ()]

    def search(
        self, query: str, *, limit: int = 10, expand: bool = True, **scope: object
    ) -> builtins.list[ScoredMemory]:
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("search query is empty; give words to look for")
        body = {"query": query, "limit": limit, "expand": expand, **_scope(scope)}
        data = self.client.read("POST", "/v1/memories/search", body)
        return [ScoredMemory.from_dict(hit) for hit in data.get("results") or ()]

    def get_context(self, query: str | None = None, **options: Any) -> ContextResult:
        """``POST /v1/context/get`` (``options``: mode, budget_tokens, session_id, project,
        user_id, limit, as the local service takes them)."""
        body = _fields(query=query, **options)
        data = self.client.read("POST", "/v1/context/get", body)
        block = data.get("session")
        return ContextResult(
            mode=str(data.get("mode") or body.get("mode") or "all"),
            query=query,
            rules=tuple(_scored(r) for r in data.get("rules") or ()),
            memories=tuple(_scored(m) for m in data.get("memories") or ()),
            budget_tokens=body.get("budget_tokens"),
            used_tokens=int(data.get("used_tokens") or 0),
            dropped=int(data.get("dropped") or 0),
            session=SessionBlock.from_dict(block) if block else None,
        )


def _scored(found: dict[str, Any]) -> ScoredMemory:
    """The context endpoint's ``{"memory", "score", "why"}`` item."""
    return ScoredMemory(Memory.from_dict(found["memory"]), float(found["score"]), found["why"])


def _memory(memory_id: str) -> str:
    return f"/v1/memories/{segment(memory_id)}"
