"""Reading memories: by id, by filter, by query (ranked) and as context within a budget.

Search asks the store for candidates holding any of the query's words (stop words dropped):
full-text matches with a relevance (SQLite: FTS5 BM25), or substring matches when the index
finds nothing (a query of no word, an emoji, finds the memories holding its pieces so). The
reader re-ranks them by confidence, layer and recency, by their fit to the whole question
(share of its terms held; a time named when it asks when; its subject as their first word;
made on a date it names), by their session's other candidates, and adds memories linked one
hop from the best hits. With an embedder, the memories closest to the
question in meaning get a bonus (and join the hits). SQL and the way to candidates are in the
store, the formulas in ``cortex.core.retrieval`` and ``cortex.core.budgets``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import replace

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.memory_models import (
    LONG_TERM,
    MODE_LAYERS,
    RULE,
    WORKING,
    ContextResult,
    Memory,
    MemoryFilter,
    MemoryLink,
    ScoredMemory,
    SessionSummary,
)
from cortex.core.plaintext import plain, storable, storable_value
from cortex.core.retrieval import (
    VOTE_POOL,
    asks_when,
    context_neighbours,
    date_fit,
    matched_terms,
    memory_text,
    neighbour_votes,
    query_dates,
    query_fit,
    query_terms,
    rank_score,
    search_terms,
    session_votes,
)
from cortex.core.tokens import estimate_tokens
from cortex.errors import NotFoundError, ValidationError, command, param, refuse_empty
from cortex.files import check_id
from cortex.services.base import Service
from cortex.services.ids import lookup, resolve_id
from cortex.services.memory_checks import (
    MAX_OFFSET,
    check_filter_tags,
    check_layers,
    check_limit,
    check_mode,
    check_type,
)

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from cortex.core.models import SessionState
    from cortex.core.procedures import ScoredProcedure
    from cortex.services.embeddings import Embedder
    from cortex.store.protocol import Store

RULE_LIMIT = 100
ITEM_OVERHEAD_TOKENS = 4
"""Tokens a context line costs beyond its content (bullet, layer tag, newline)."""
EXPAND_SEEDS = 5
FIRST_PLACES = VOTE_POOL // 2
"""The places a search ranks as a search of that many results does, whatever its limit: a
ten-result search's pool (``VOTE_POOL``), so that a longer list starts with the same ten."""
LINK_DISCOUNT = 0.5
WORDS = "words.db"
"""The file under the home's ``cache`` folder where word vectors outlive a process."""
SUMMARY_SNAPSHOTS = 3
"""Snapshot headers a session summary lists, newest first."""


_Meaning = tuple[builtins.list[tuple[str, float]], builtins.list[Memory], builtins.list[str]]
"""A search's meaning side (``MemoryReader._meaning``): the scope's memories by closeness in
meaning (id, cosine), the closest ones read, and the words widening the question."""


def _voted(hits: builtins.list[ScoredMemory]) -> builtins.list[ScoredMemory]:
    """``hits`` re-ranked with their sessions' votes (``core.retrieval.session_votes``)."""
    sessions = [h.memory.source_session_id for h in hits]
    if len(set(sessions) - {None}) == len([s for s in sessions if s is not None]):
        return hits  # no session holds two candidates: nothing to vote
    scores = session_votes(sessions, [h.score for h in hits])
    voted = [replace(h, score=s) for h, s in zip(hits, scores, strict=True)]
    voted.sort(key=lambda h: -h.score)
    return voted


class MemoryReader(Service):
    """Get, list, search and assemble context over one ``Store`` (with an optional embedder:
    ``embedder``, else the one the ``embedder`` setting names, loaded here)."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        super().__init__(store, config, clock)
        if embedder is None and config.embedder:
            from cortex.services.embeddings import shared_embedder  # the extra's: only when set

            embedder = shared_embedder(config.embedder)
        self.embedder = embedder

    # -- reads ---------------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory:
        """Any memory by id or unique id prefix (also deleted or superseded ones, for history)."""
        memory = lookup(self.store, "memory", memory_id, self.store.get_memory)
        if memory is None:
            raise NotFoundError(f"no memory {memory_id!r}; see {command('memory list')}")
        return memory

    def links(self, memory_id: str) -> list[MemoryLink]:
        """The memory's links (supersedes, conflicts, relates), either direction."""
        return self.store.memory_links(resolve_id(self.store, "memory", memory_id) or memory_id)

    def _session(self, session_id: str) -> SessionState:
        """The session ``session_id`` names (the whole id or a unique prefix), or NotFound."""
        state = lookup(self.store, "session", check_id(session_id), self.store.get_session)
        if state is None:  # refused like every command refuses an unknown session
            raise NotFoundError(f"no session {session_id!r}; see {command('session list')}")
        return state

    def _source_session(
        self, session_id: str, cache: dict[str, tuple[str, str | None]]
    ) -> tuple[str, str | None]:
        """The whole id and project of a memory's source session (memories made in a session
        belong to its project)."""
        if session_id not in cache:
            state = self._session(session_id)
            cache[session_id] = (state.session_id, state.project)
        return cache[session_id]

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
        """A validated ``MemoryFilter``; a session's memories are seen with its project.
        An empty ``session_id`` or ``user_id`` (an unset variable) is refused, never taken
        for none (which would widen the filter to every session's or every user's)."""
        for name, given, whole in (
            ("session_id", session_id, "session"),
            ("user_id", user_id, "user"),
        ):
            refuse_empty(given, param(name), f"the memories of every {whole}", f"a {whole} id")
            plain(given, name)
        # A memory's project and tags were stored storable: a filter finds them the same way.
        project = storable(project) if project else project
        tags = storable_value(tags) if tags else tags
        if session_id:
            session = self._session(session_id)
            session_id, project = session.session_id, project or session.project
        return MemoryFilter(
            layers=check_layers(layer),
            project=project or None,
            user_id=user_id or None,
            types=tuple(check_type(t) for t in types),
            tags=check_filter_tags(tags),
            session_id=check_id(session_id) if session_id else None,
            all_projects=all_projects,
            include_history=include_history,
        )

    def list(self, *, limit: int = 50, offset: int = 0, **scope: object) -> builtins.list[Memory]:
        """Live memories (``scope``: the ``scope_filter`` arguments), newest first."""
        check_limit(limit)
        if not 0 <= offset <= MAX_OFFSET:
            raise ValidationError(f"offset {offset} is out of range; use 0-{MAX_OFFSET:,}")
        flt = self.scope_filter(**scope)  # type: ignore[arg-type]
        return self.store.list_memories(flt, self.now_iso(), limit=limit, offset=offset)

    def search(
        self, query: str, *, limit: int = 10, expand: bool = True, **scope: object
    ) -> builtins.list[ScoredMemory]:
        """Best memories for ``query`` (see the module docstring), best first.

        The first ``FIRST_PLACES`` are those of a search of that limit, whatever ``limit``:
        a longer list goes on with the best of a ranking of a larger pool (``VOTE_POOL`` or
        twice the limit) that are not among them, each with its own ranking's score (so a
        score after the first places may exceed the last of them). A larger pool ranks
        differently, and the first results of a question do not change with how many follow.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("search query is empty; give words to look for")
        check_limit(limit)
        flt = self.scope_filter(**scope)  # type: ignore[arg-type]
        meaning = self._meaning(query, flt) if self.embedder is not None else None
        first = self._ranked(query, flt, min(limit, FIRST_PLACES), expand, meaning)
        if limit <= FIRST_PLACES:
            return first
        placed = {h.memory.id for h in first}
        rest = self._ranked(query, flt, limit, expand, meaning)
        return first + [h for h in rest if h.memory.id not in placed][: limit - len(first)]

    def _meaning(self, query: str, flt: MemoryFilter) -> _Meaning:
        """What the meaning side knows of ``query`` whatever the pool, read once a search:
        the scope's ``dense_ranking``, and with ``search_widening`` the closest memories and
        the words they widen the question with (``core.expansion``)."""
        from cortex.core.expansion import EXPANSION_MEMORIES
        from cortex.services.embeddings import dense_ranking, widening_words, word_file

        assert self.embedder is not None
        now = self.now_iso()
        similar = dense_ranking(self.store, self.embedder, query, flt, now)
        if not self.config.search_widening:
            return similar, [], []
        closest = self.store.memories_by_id([m for m, _ in similar[:EXPANSION_MEMORIES]], flt, now)
        texts, file = [m.content for m in closest], word_file(self.config.home / "cache" / WORDS)
        return similar, closest, widening_words(self.embedder, query, texts, file)

    def _ranked(
        self, query: str, flt: MemoryFilter, limit: int, expand: bool, meaning: _Meaning | None
    ) -> builtins.list[ScoredMemory]:
        """The best ``limit`` memories for ``query`` from a pool of twice the limit (at least
        ``VOTE_POOL``); ``meaning``: the search's ``_meaning`` with an embedder, else None."""
        pool = max(limit * 2, VOTE_POOL)
        lexical = self._lexical(query, flt, pool)
        if self.embedder is None or meaning is None:
            hits = self._neighboured(_voted(lexical), flt)
        else:
            from cortex.services.embeddings import hybrid_rerank

            similar, closest, words = meaning
            hits = self._neighboured(_voted(self._widened(query, flt, pool, lexical, words)), flt)
            now = self.now_iso()
            hits = hybrid_rerank(self.store, self.embedder, query, flt, now, hits, similar, closest)
        hits = hits[:limit]
        if expand and hits:
            hits = self._expand(hits, flt, limit)
        return hits

    def _lexical(self, query: str, flt: MemoryFilter, pool: int) -> builtins.list[ScoredMemory]:
        """The store's candidates re-ranked: full-text ones by relevance and their fit to the
        whole query (``core.retrieval.query_fit``), the unranked ones (substring or newest
        matches) by the share of query terms they hold."""
        now_dt, now = self.clock.now(), self.now_iso()
        terms, when, span = search_terms(query), asks_when(query), query_dates(query, now_dt)
        if flt.layers == (WORKING,):  # a few short-lived rows: rank them all, no index needed
            return self._overlap_ranked(terms, self.store.list_memories(flt, now, limit=pool))
        found = self.store.search_memories(terms, flt, now, limit=pool)
        ranked = [
            ScoredMemory(
                m,
                rank_score(r, m, now_dt)
                * query_fit(terms, when, memory_text(m))
                * date_fit(span, m.created_at),
                f"full-text match (relevance {r:.3g})",
            )
            for m, r in found
            if r > 0
        ]
        unranked = [m for m, r in found if r <= 0]
        ranked += self._overlap_ranked(terms, unranked, "text contains ")
        ranked.sort(key=lambda s: -s.score)
        return ranked[:pool]

    def _widened(
        self,
        query: str,
        flt: MemoryFilter,
        pool: int,
        ranked: builtins.list[ScoredMemory],
        words: Sequence[str],
    ) -> builtins.list[ScoredMemory]:
        """``ranked`` with the memories that ``words`` (those widening ``query``: ``_meaning``)
        find and that hold one of its own terms."""
        if not words:
            return ranked
        from cortex.core.expansion import EXPANSION_WEIGHT

        terms, held = query_terms(query), {h.memory.id for h in ranked}
        best = ranked[0].score if ranked else 1.0
        why = "close in meaning to the question: " + ", ".join(words[:3])
        joining = [
            ScoredMemory(m, EXPANSION_WEIGHT * best * r, why)
            for m, r in self.store.search_memories(list(words), flt, self.now_iso(), limit=pool)
            if r > 0 and m.id not in held and matched_terms(terms, memory_text(m))
        ]
        if not joining:
            return ranked
        return sorted(ranked + joining, key=lambda h: -h.score)[:pool]

    def _neighboured(
        self, hits: builtins.list[ScoredMemory], flt: MemoryFilter
    ) -> builtins.list[ScoredMemory]:
        """``hits`` with their neighbours' votes, and the neighbours of the best short ones
        added (``core.retrieval.neighbour_votes``, ``context_neighbours``); a neighbour of
        another layer or type than the memory's is none of its."""
        seeds = [h.memory.id for h in hits[:VOTE_POOL] if h.memory.source_session_id is not None]
        if not seeds:
            return hits
        found = self.store.adjacent_memories(seeds, flt, self.now_iso())
        kinds = {h.memory.id: (h.memory.layer, h.memory.type) for h in hits}
        pairs = [  # a rule or a working note is no context of a turn, nor the other way round
            (memory_id, other.id)
            for memory_id, other in found
            if kinds[memory_id] == (other.layer, other.type)
        ]
        if not pairs:
            return hits
        scores = neighbour_votes({h.memory.id: h.score for h in hits}, pairs)
        voted = [
            h if scores[h.memory.id] == h.score else replace(h, score=scores[h.memory.id])
            for h in hits
        ]
        voted.sort(key=lambda h: -h.score)
        best = [(h.memory.id, h.score, h.memory.content) for h in voted]
        memories = {other.id: other for _, other in found}
        voted += [
            ScoredMemory(memories[other], score, f"captured next to {seed}")
            for other, (seed, score) in context_neighbours(best, pairs).items()
        ]
        voted.sort(key=lambda h: -h.score)
        return voted

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
        include_session_summary: bool = False,
    ) -> ContextResult:
        """Rules, then working, then long-term memories, within budget.

        Args:
            query: what the agent is working on; without one, memories come by confidence
                and recency.
            mode: ``rules_only`` | ``working`` | ``long_term`` | ``all``.
            budget_tokens: most tokens of content to return (None: no limit); items are taken
                in rank order and one too large for what is left is skipped.
            session_id: adds the ``session`` block (compaction hints, latest checkpoint) and
                defaults ``project``/``user_id`` to the session's.
            limit: most memories per layer before the budget applies.
            include_session_summary: with ``session_id``, add the headers of the session's
                latest snapshots and its latest checkpoint summary.

        With ``memory_session_enabled`` false the session block and summary are left out
        (``session_id`` still sets the project and user).
        """
        check_mode(mode)
        check_limit(limit)
        if budget_tokens is not None and budget_tokens < 0:
            raise ValidationError(
                f"{param('budget_tokens', budget_tokens)} is negative; give 0 or more, e.g. 4000"
            )
        block = summary = None
        project, user_id = storable(project) if project else project, plain(user_id, "user_id")
        plain(session_id, "session_id")
        if session_id is not None:
            from cortex.services.compaction import session_block

            state = self._session(session_id)
            project, user_id = project or state.project, user_id or state.user_id
            if self.config.memory_session_enabled:
                block = session_block(self.store, self.config, self.clock, state)
                if include_session_summary:
                    summary = self._summary(state.session_id)
        ranked, left_out = self._context_candidates(query, mode, project, user_id, limit)
        procedures = [] if mode == "rules_only" else self._procedures(query, project, user_id)
        costs = [estimate_tokens(s.memory.content) + ITEM_OVERHEAD_TOKENS for s in ranked]
        proc_costs = [estimate_tokens(p.procedure.text()) + ITEM_OVERHEAD_TOKENS
                      for p in procedures]  # fmt: skip
        # Rules, then the procedures that fit the task, then the memories (procedural first).
        rules = sum(s.memory.layer == RULE for s in ranked)
        order = [("m", i) for i in range(rules)] + [("p", i) for i in range(len(procedures))]
        order += [("m", i) for i in range(rules, len(ranked))]
        cost_of = {"m": costs, "p": proc_costs}
        from cortex.core.budgets import fill_budget  # (a search fills no budget)

        chosen, used, skipped = fill_budget(order, [cost_of[k][i] for k, i in order],
                                            budget_tokens)  # fmt: skip
        sized = [replace(ranked[i], tokens=costs[i]) for k, i in chosen if k == "m"]
        return ContextResult(
            mode=mode,
            query=query,
            procedures=tuple(
                replace(procedures[i], tokens=proc_costs[i]) for k, i in chosen if k == "p"
            ),  # fmt: skip
            rules=tuple(s for s in sized if s.memory.layer == RULE),
            memories=tuple(s for s in sized if s.memory.layer != RULE),
            budget_tokens=budget_tokens,
            used_tokens=used,
            dropped=skipped + left_out,
            session=block,
            summary=summary,
        )

    def _procedures(
        self, query: str | None, project: str | None, user_id: str | None
    ) -> builtins.list[ScoredProcedure]:
        from cortex.services.procedural import rank_procedures

        return rank_procedures(self.store, self.config, query, project, user_id)

    def _summary(self, session_id: str) -> SessionSummary:
        """The latest snapshot headers and checkpoint of a session."""
        snapshots = self.store.list_snapshots(session_id, limit=SUMMARY_SNAPSHOTS)
        checkpoints = self.store.list_checkpoints(session_id, limit=1)
        latest = checkpoints[0] if checkpoints else None
        return SessionSummary(
            session_id=session_id,
            snapshots=tuple(replace(s, transcript_md="") for s in snapshots),
            checkpoint_id=latest.checkpoint_id if latest else None,
            checkpoint_summary=latest.summary if latest else None,
        )

    def _context_candidates(
        self, query: str | None, mode: str, project: str | None, user_id: str | None, limit: int
    ) -> tuple[builtins.list[ScoredMemory], int]:
        """Every candidate in rank order: rules, then each layer the mode includes; and how
        many rules of the scope were left out (``compaction.context_rules``)."""
        from cortex.services.compaction import context_rules

        now = self.now_iso()
        terms = search_terms(query) if query and query.strip() else []
        scope = self.scope_filter(project=project, user_id=user_id)
        rules, left_out = context_rules(self.store, scope, now, RULE_LIMIT)
        own = [m for m in rules if m.project is not None]
        ranked = self._by_match(terms, own, "rule: always included")
        ranked += self._by_match(terms, rules[len(own) :], "rule: always included")
        for layer in MODE_LAYERS[mode]:
            if layer == LONG_TERM and terms:
                # One ranking of a pool of twice the limit: a context fills a token budget
                # from these in order, and a search's second ranking for its first ten
                # (``search``) would double the cost of every context.
                assert query is not None
                flt = self.scope_filter(layer=layer, project=project, user_id=user_id)
                meaning = self._meaning(query, flt) if self.embedder is not None else None
                ranked += self._ranked(query, flt, limit, True, meaning)
                continue
            # The working scratchpad always: query matches first, then by confidence and
            # recency.
            flt = self.scope_filter(layer=layer, project=project, user_id=user_id)
            ranked += self._by_match(terms, self.store.list_memories(flt, now, limit=limit))
        return ranked, left_out

    def _by_match(
        self, terms: Sequence[str], rows: builtins.list[Memory], why: str = "recent"
    ) -> builtins.list[ScoredMemory]:
        """``rows`` with the query's matches first, then the others by confidence and
        recency (``why`` says why those are there)."""
        now_dt = self.clock.now()
        matched = {s.memory.id: s for s in self._overlap_ranked(terms, rows)}
        rest = [ScoredMemory(m, rank_score(0.5, m, now_dt), why) for m in rows]
        rest = [s for s in rest if s.memory.id not in matched]
        rest.sort(key=lambda s: -s.score)
        return [*matched.values(), *rest]
