"""FTS5's ``bm25()`` of chosen memories, for every query term, without ranking every match.

FTS5 computes a term's weight (its IDF) by reading every match of the term: for a term in
80,000 of a million memories that is ~3 ms per query, before a single row is scored. This
module scores a bounded candidate pool with the same formula (``core.retrieval.bm25``) from
the index's own statistics instead:

- the row count and the total token count, from the index's "averages" record;
- how many memories hold each term: counted by the caller up to a cap, and counted fully
  (then cached, see ``DOC_COUNT_DRIFT``) for a term past it;
- each candidate's term frequencies per column and its size in tokens: the candidates are
  indexed in a temporary contentless FTS5 table with the index's tokenizer, whose ``fts5vocab``
  instance table gives every (term, memory, column, offset), so stems, diacritics and
  multi-token terms ("foo_bar") match exactly as in the index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cortex.store.sqlite.db import Database
from cortex.store.sqlite.memories import marks

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

TOKENIZER = "porter unicode61 remove_diacritics 2"
"""The tokenizer the memory index was made with (migration m006)."""
COLUMN_WEIGHTS = {"content": 1.0, "tags": 0.5}
"""The index's ``bm25`` column weights (its ``rank`` option, migration m006)."""
DOC_COUNT_DRIFT = 1 / 64
"""A full count of a term's memories is reused until the index's row count moves by more
than this share: an IDF off by that much moves a term's weight by well under 1 %."""


def varints(blob: bytes) -> list[int]:
    """The SQLite varints packed in ``blob`` (FTS5's records): big-endian groups of 7 bits, a
    set high bit continuing the number, the ninth byte giving all 8 of its bits."""
    out: list[int] = []
    index = 0
    while index < len(blob):
        value = 0
        for position in range(9):
            if index >= len(blob):
                break
            byte = blob[index]
            index += 1
            if position == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


class PoolScorer:
    """Scores candidate memories by FTS5's ``bm25()`` over all query terms (see the module
    docstring). One per store connection: the temporary tables live on it."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._ready = False
        self._counted: dict[str, tuple[int, int]] = {}  # term -> (memories, rows then)

    def totals(self) -> tuple[int, int]:
        """(rows, tokens over all columns) of the memory index."""
        rows = self._db.rows("SELECT block FROM memories_fts_data WHERE id = 1")
        numbers = varints(bytes(rows[0][0])) if rows and rows[0][0] else []
        return (numbers[0], sum(numbers[1:])) if numbers else (0, 0)

    def doc_counts(
        self, terms: Sequence[str], capped: Mapping[str, int], cap: int, rows: int
    ) -> dict[str, int]:
        """How many memories hold each term: ``capped`` (counts up to ``cap + 1``) where it is
        exact, else a full count, cached while the row count stays within ``DOC_COUNT_DRIFT``."""
        from cortex.core.retrieval import fts_query

        out: dict[str, int] = {}
        for term in terms:
            count = capped.get(term, 0)
            if count <= cap:
                out[term] = count
                continue
            known = self.counted(term, rows)
            if known is None:
                sql = "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?"
                known = int(self._db.rows(sql, (fts_query([term]),))[0][0])
                self._counted[term] = (known, rows)
            out[term] = known
        return out

    def counted(self, term: str, rows: int) -> int | None:
        """The full count of the memories holding ``term`` (one past the cap: a common
        term), if one was made while the row count was within ``DOC_COUNT_DRIFT`` of
        ``rows``; else None."""
        cached = self._counted.get(term)
        if cached is None or abs(rows - cached[1]) > cached[1] * DOC_COUNT_DRIFT:
            return None
        return cached[0]

    def scores(
        self, seqs: Sequence[int], docs: Mapping[str, int], rows: int, tokens: int
    ) -> dict[int, float]:
        """FTS5's ``bm25()`` (negative, lower is better) of the memories ``seqs`` for a query
        of the terms of ``docs`` (term -> memories holding it), in an index of ``rows``
        memories holding ``tokens`` tokens."""
        from cortex.core.retrieval import bm25, bm25_idf

        if not seqs:
            return {}
        terms = list(docs)
        phrases, instances, sizes = self._tokens(terms, seqs)
        at: dict[tuple[int, str], dict[str, set[int]]] = {}
        for token, seq, column, offset in instances:
            at.setdefault((seq, column), {}).setdefault(token, set()).add(offset)
        freqs: dict[int, dict[str, float]] = {}
        for (seq, column), positions in at.items():
            weight = COLUMN_WEIGHTS.get(column, 1.0)
            per_term = freqs.setdefault(seq, {})
            for term, phrase in zip(terms, phrases, strict=True):
                hits = phrase_hits(phrase, positions)
                if hits:
                    per_term[term] = per_term.get(term, 0.0) + weight * hits
        idf = {term: bm25_idf(rows, docs[term]) for term in terms}
        average = tokens / rows if rows else 0.0
        return {
            seq: bm25(
                ((idf[t], f) for t, f in freqs.get(seq, {}).items()), sizes.get(seq, 0), average
            )
            for seq in seqs
        }

    def _tokens(
        self, terms: Sequence[str], seqs: Sequence[int]
    ) -> tuple[list[list[str]], list[tuple[Any, ...]], dict[int, int]]:
        """Each term's tokens, the query tokens' instances in the memories ``seqs`` as
        (token, seq, column, offset), and each memory's size in tokens."""
        conn = self._db.connection
        with self._db.translated():
            if not self._ready:
                conn.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_pool USING "
                    f"fts5(content, tags, content='', tokenize='{TOKENIZER}')"
                )
                conn.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_pool_terms "
                    "USING fts5vocab(temp, memories_pool, instance)"
                )
                self._ready = True
            conn.execute("INSERT INTO temp.memories_pool(memories_pool) VALUES ('delete-all')")
            conn.executemany(  # each term as a row of its own, below every memory's rowid
                "INSERT INTO temp.memories_pool(rowid, content, tags) VALUES (?, ?, '')",
                [(-1 - index, term) for index, term in enumerate(terms)],
            )
            phrases: list[list[tuple[int, str]]] = [[] for _ in terms]
            for token, doc, offset in conn.execute(
                "SELECT term, doc, offset FROM temp.memories_pool_terms"
            ):
                phrases[-1 - int(doc)].append((int(offset), str(token)))
            conn.execute(
                "INSERT INTO temp.memories_pool(rowid, content, tags) "
                f"SELECT seq, content, tags FROM memories WHERE seq IN ({marks(seqs)})",
                tuple(seqs),
            )
            tokens = sorted({token for phrase in phrases for _, token in phrase})
            instances = conn.execute(
                "SELECT term, doc, col, offset FROM temp.memories_pool_terms "
                f"WHERE term IN ({marks(tokens)}) AND doc > 0",
                tokens,
            ).fetchall()
            sizes = {
                int(seq): sum(varints(bytes(blob)))
                for seq, blob in conn.execute(
                    "SELECT id, sz FROM temp.memories_pool_docsize WHERE id > 0"
                )
            }
        return [[t for _, t in sorted(p)] for p in phrases], instances, sizes


def phrase_hits(phrase: Sequence[str], positions: Mapping[str, set[int]]) -> int:
    """How often ``phrase`` (its tokens, in order) occurs in one column whose tokens are at
    ``positions`` (token -> offsets): a one-token phrase at each of its offsets, a longer one
    where its tokens follow each other."""
    if not phrase or phrase[0] not in positions:
        return 0
    rest = list(enumerate(phrase[1:], start=1))
    return sum(
        1
        for start in positions[phrase[0]]
        if all(start + step in positions.get(token, ()) for step, token in rest)
    )
