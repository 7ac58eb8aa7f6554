"""Optional embeddings: the hashing embedder, hybrid search, and the real MiniLM model when the
``[embeddings]`` extra is installed (skipped otherwise)."""

from __future__ import annotations

import math
import os
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.core.memory_models import ScoredMemory
from cortex.core.retrieval import (
    DATED_MEANING_SHARE,
    DENSE_FULL_WORDS,
    DENSE_JOIN,
    DENSE_POOL,
    DENSE_WEIGHT,
)
from cortex.errors import ConfigError
from cortex.services.embeddings import (
    HashingEmbedder,
    MiniLMEmbedder,
    cosines,
    from_blob,
    load_embedder,
    to_blob,
)
from cortex.services.memory import MemoryService
from cortex.store import SQLiteStore


def test_hashing_embedder_is_deterministic_and_normalized() -> None:
    embedder = HashingEmbedder(64)
    first, again = embedder.embed(["deploy the service"]), embedder.embed(["deploy the service"])
    assert first == again and len(first[0]) == 64
    assert math.isclose(sum(v * v for v in first[0]), 1.0)
    assert embedder.embed([""])[0] == [0.0] * 64


def test_blob_round_trip() -> None:
    assert list(from_blob(to_blob([0.5, -1.0, 2.0]))) == [0.5, -1.0, 2.0]


def test_unknown_embedder_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError,
        match="unknown embedder 'bert'; use minilm, hashing or a model directory's path",
    ):
        load_embedder("bert")


def test_hybrid_search_finds_word_variants_bm25_misses(
    make_config: Callable[..., Config], clock: FixedClock, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "brain.db")
    svc = MemoryService(store, make_config(), clock, embedder=HashingEmbedder())
    svc.add("kubernetes cluster upgrade scheduled")
    svc.add("lunch order for friday")
    hits = svc.search("kubernetes")
    assert hits[0].memory.content == "kubernetes cluster upgrade scheduled"
    assert hits[0].why.startswith("full-text match")  # the lexical reason, and meaning's
    assert "; similar in meaning (cosine " in hits[0].why
    # the typo "kubrnetes" shares trigrams but no FTS token: only the dense side finds it.
    assert svc.search("kubrnetes", expand=False)[0].memory.content.startswith("kubernetes")
    assert len(store.embedding_vectors("hashing-256", svc.scope_filter(), svc.now_iso())) == 2


def _minilm_available() -> bool:
    try:
        import onnxruntime  # type: ignore[import-not-found]  # noqa: F401
        import tokenizers  # type: ignore[import-not-found]  # noqa: F401

        MiniLMEmbedder()
    except (ImportError, ConfigError):
        return False
    return True


@pytest.mark.skipif(
    not _minilm_available() and os.environ.get("CORTEX_TEST_EMBEDDINGS") != "1",
    reason="the [embeddings] extra is not installed",
)
def test_minilm_embeds_offline_and_ranks_paraphrases() -> None:
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(
        ["The cat sits on the mat", "A kitten is resting on a rug", "Quarterly tax filing"]
    )
    assert len(vectors[0]) == 384
    assert math.isclose(sum(v * v for v in vectors[0]), 1.0, rel_tol=1e-4)
    near = sum(a * b for a, b in zip(vectors[0], vectors[1], strict=True))
    far = sum(a * b for a, b in zip(vectors[0], vectors[2], strict=True))
    assert near > far + 0.2


def test_services_built_per_request_share_one_embedder_per_process(
    make_config: Callable[..., Config], clock: FixedClock, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "brain.db")
    config = replace(make_config(), embedder="hashing")
    first, second = MemoryService(store, config, clock), MemoryService(store, config, clock)
    assert isinstance(first.embedder, HashingEmbedder) and first.embedder is second.embedder
    assert MemoryService(store, make_config(), clock).embedder is None  # the setting off


@pytest.fixture(params=["numpy", "pure python"])
def numpy_calls(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[int]]:
    """The cosines with numpy (each ``np.frombuffer`` call counted) or without it (the import
    fails, as where the extra is not installed)."""
    calls: list[int] = []
    if request.param == "numpy":
        frombuffer = np.frombuffer

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return frombuffer(*args, **kwargs)

        monkeypatch.setattr(np, "frombuffer", counted)
    else:
        monkeypatch.setitem(sys.modules, "numpy", None)
    yield calls
    assert bool(calls) is (request.param == "numpy")  # the path the parameter names was taken


def test_cosines_are_dot_products_over_the_components_both_have(numpy_calls: list[int]) -> None:
    query = [0.5, -0.25, 2.0]
    assert cosines(query, [to_blob([1.0, 2.0, 4.0]), to_blob([2.0, 0.0, -1.0])]) == [8.0, -1.0]
    # a vector of another dimension pairs what both have (then all take Python's loop)
    assert cosines(query, [to_blob([1.0, 2.0]), to_blob([1.0, 1.0, 1.0, 8.0])]) == [0.0, 2.25]
    assert cosines(query, []) == []
    cosines(query, [to_blob([1.0, 0.0, 0.0])])  # one numpy call for the numpy parameter


CORPUS: list[tuple[str, dict[str, Any]]] = [
    ("kubernetes cluster upgrade scheduled for the weekend", {}),
    ("lunch order for friday: noodles for the team", {}),
    ("the deploy pipeline runs kubernetes manifests through a linter " * 30, {}),
    ("api service: postgres connection pool sized to twenty", {"project": "api"}),
    ("web frontend: the cluster dashboard shows upgrade status", {"project": "web"}),
    ("working note: cluster upgrade blocked on a node drain", {"layer": "working"}),
    ("release schedule: upgrades happen on weekends " * 15, {"upsert_key": "schedule"}),
    ("release schedule: upgrades happen on weekday mornings " * 15, {"upsert_key": "schedule"}),
    ("a forgotten note about the cluster upgrade", {}),
    ("kubernetes upgrade runbook: drain, cordon, upgrade, uncordon " * 8, {}),
    ("the weekend on-call rota for the cluster", {}),
]
QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("kubernetes upgrade", {}),
    ("when do upgrades happen", {"project": "api"}),
    ("kubrnetes", {}),  # no word of it is indexed: meaning alone
    ("cluster upgrade", {"layer": "working"}),
    ("noodles", {"project": "web"}),
]


def reference_rerank(
    lexical: list[ScoredMemory], stored: dict[str, tuple[str, list[float]]], query: list[float]
) -> list[tuple[str, float]]:
    """The hybrid ranking from its definition ("Meaning" in ``cortex.core.retrieval``), with
    none of the code under test: (memory id, score) best first. ``stored``: the (content,
    vector) of each memory in scope that has a vector, in insertion order."""
    similar = sorted(
        (
            (mid, math.fsum(a * b for a, b in zip(query, v, strict=True)))
            for mid, (_, v) in stored.items()
        ),
        key=lambda pair: -pair[1],
    )
    padded = sorted([c for _, c in similar] + [0.0] * DENSE_POOL, reverse=True)
    median, best = padded[(len(similar) + DENSE_POOL) // 2], similar[0][1]
    top = max(h.score for h in lexical) if lexical else 1.0
    scores = {h.memory.id: h.score / top for h in lexical}
    for mid, cosine in similar[:DENSE_POOL]:
        closer = (cosine - median) / (best - median) if best > median else 0.0
        if closer > 0 and (mid in scores or closer >= DENSE_JOIN):
            words = len(stored[mid][0].split())
            bonus = DENSE_WEIGHT * min(1.0, words / DENSE_FULL_WORDS) * closer**2
            scores[mid] = scores.get(mid, 0.0) + bonus
    ranked = sorted(scores.items(), key=lambda pair: -pair[1])
    return [(mid, score / ranked[0][1]) for mid, score in ranked]


def test_hybrid_search_ranks_as_its_definition(
    make_config: Callable[..., Config],
    clock: FixedClock,
    tmp_path: Path,
    numpy_calls: list[int],
) -> None:
    store = SQLiteStore(tmp_path / "brain.db")
    embedder = HashingEmbedder()
    hybrid = MemoryService(store, make_config(), clock, embedder=embedder)
    lexical = MemoryService(store, make_config(), clock)
    ids = [hybrid.add(text, **fields).memory.id for text, fields in CORPUS]
    plain = lexical.add("cluster upgrade notes from before the embedder").memory.id  # no vector
    api, web, working, superseded, forgotten = ids[3], ids[4], ids[5], ids[6], ids[8]
    hybrid.forget(forgotten)
    stored = {  # as the store keeps them: float32
        mid: (text, list(array("f", embedder.embed([text])[0])))
        for mid, (text, _) in zip(ids, CORPUS, strict=True)
    }
    for text, scope in QUERIES:
        seen = {ids[0], ids[1], ids[2], ids[7], ids[9], ids[10], working}
        seen |= {api} if scope.get("project") == "api" else {web} if "project" in scope else set()
        if scope.get("layer") == "working":
            seen = {working}
        expected = reference_rerank(
            lexical.search(text, limit=50, expand=False, **scope),
            {mid: stored[mid] for mid in ids if mid in seen},  # insertion order
            embedder.embed([text])[0],
        )
        found = hybrid.search(text, limit=50, expand=False, **scope)
        assert [h.memory.id for h in found] == [mid for mid, _ in expected], text
        assert [h.score for h in found] == pytest.approx([s for _, s in expected], rel=1e-12)
        assert not {h.memory.id for h in found} & {superseded, forgotten}
        assert {h.memory.id for h in found} <= seen | {plain}
        assert all("similar in meaning" not in h.why for h in found if h.memory.id == plain)
    assert hybrid.search("kubrnetes", expand=False)[0].why.startswith("similar in meaning")


def test_meaning_weighs_less_outside_the_days_a_relative_date_names(
    make_config: Callable[..., Config], clock: FixedClock, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "brain.db")
    svc = MemoryService(store, make_config(), clock, embedder=HashingEmbedder())
    for text in ("lunch order for friday", "dentist on tuesday", "renew the passport"):
        svc.add(text)
    then = svc.add("kubernetes cluster upgrade").memory.id  # two weeks before the questions
    clock.advance(hours=14 * 24)
    now = svc.add("kubernetes cluster upgrade").memory.id  # the same words, today
    for text in ("water the plants", "book the flights", "call the bank"):
        svc.add(text)
    # no word of either question finds them: meaning alone ranks them
    dated = svc.search("kubrnetes two weeks ago", expand=False)
    assert [h.memory.id for h in dated[:2]] == [then, now]
    assert dated[1].score == pytest.approx(dated[0].score * DATED_MEANING_SHARE)
    undated = {h.memory.id: h.score for h in svc.search("kubrnetes lately", expand=False)}
    assert undated[now] == pytest.approx(undated[then])


def test_without_any_vector_the_hybrid_is_the_lexical_search(
    make_config: Callable[..., Config], clock: FixedClock, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "brain.db")
    lexical = MemoryService(store, make_config(), clock)
    for text, fields in CORPUS:
        lexical.add(text, **fields)
    hybrid = MemoryService(store, make_config(), clock, embedder=HashingEmbedder())
    for text, scope in QUERIES:
        assert hybrid.search(text, **scope) == lexical.search(text, **scope)


def test_a_memory_forgotten_after_its_vector_was_read_does_not_join(
    make_config: Callable[..., Config],
    clock: FixedClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = SQLiteStore(tmp_path / "brain.db")
    svc = MemoryService(store, make_config(), clock, embedder=HashingEmbedder())
    upgrade = svc.add("kubernetes cluster upgrade scheduled").memory.id
    svc.add("lunch order for friday")
    assert svc.search("kubrnetes", expand=False)  # meaning alone finds it
    vectors = store.embedding_vectors

    def then_forgotten(*args: Any) -> list[tuple[str, bytes]]:
        read = vectors(*args)  # the vectors are read; another process forgets the memory
        svc.forget(upgrade)
        return read

    monkeypatch.setattr(store, "embedding_vectors", then_forgotten)
    assert svc.search("kubrnetes", expand=False) == []
