"""Optional embeddings: the hashing embedder, hybrid search, and the real MiniLM model when the
``[embeddings]`` extra is installed (skipped otherwise)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.errors import ConfigError
from cortex.services.embeddings import (
    HashingEmbedder,
    MiniLMEmbedder,
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
    with pytest.raises(ConfigError, match="unknown embedder 'bert'; use minilm or hashing"):
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
    # "kubernete" shares trigrams but no FTS token: only the dense side finds it.
    assert svc.search("kubernete", expand=False)[0].memory.content.startswith("kubernetes")
    assert len(store.load_embeddings("hashing-256", svc.scope_filter(), svc.now_iso())) == 2


def _minilm_available() -> bool:
    try:
        import onnxruntime  # type: ignore[import-not-found]  # noqa: F401
        import tokenizers  # type: ignore[import-not-found]  # noqa: F401

        MiniLMEmbedder()
    except (ImportError, ConfigError):
        return False
    return True


@pytest.mark.skipif(not _minilm_available(), reason="the [embeddings] extra is not installed")
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
