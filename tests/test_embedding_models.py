"""A model directory as the embedder: a sentence-transformers model exported to ONNX, read
with its pooling, prefixes and length (``directory_embedder``). The model runs need the
``[embeddings]`` extra: they are skipped without it, and fail instead where
``CORTEX_TEST_EMBEDDINGS=1`` (CI) says it must be there. They use MiniLM's own files laid out
as such a directory, so that MiniLM's vectors are what to expect."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.errors import ConfigError
from cortex.services.embeddings import (
    MAX_LENGTH,
    MiniLMEmbedder,
    OnnxEmbedder,
    dense_ranking,
    directory_embedder,
    from_blob,
    load_embedder,
)
from cortex.services.memory import MemoryService
from cortex.store import SQLiteStore


def _extra() -> MiniLMEmbedder | None:
    """MiniLM, if the extra is installed (else None)."""
    try:
        import onnxruntime  # type: ignore[import-not-found]  # noqa: F401
        import tokenizers  # type: ignore[import-not-found]  # noqa: F401

        return MiniLMEmbedder()
    except (ImportError, ConfigError):
        return None


MINILM = _extra()
needs_extra = pytest.mark.skipif(
    MINILM is None and os.environ.get("CORTEX_TEST_EMBEDDINGS") != "1",
    reason="the [embeddings] extra is not installed",
)


def model_dir(
    root: Path,
    *,
    pooling: dict[str, Any] | None = None,
    prompts: dict[str, str] | None = None,
    max_seq_length: int | None = None,
    nested: bool = False,
) -> Path:
    """MiniLM's model and tokenizer laid out as a sentence-transformers ONNX directory."""
    assert MINILM is not None, "the [embeddings] extra must be installed (CORTEX_TEST_EMBEDDINGS)"
    folder = root / "minilm-export"
    (folder / "onnx" if nested else folder).mkdir(parents=True)
    shutil.copyfile(MINILM.model_path, folder / ("onnx/model.onnx" if nested else "model.onnx"))
    shutil.copyfile(MINILM.tokenizer_path, folder / "tokenizer.json")
    if pooling is not None:
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    if prompts is not None:
        config = {"prompts": prompts, "default_prompt_name": None}
        (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    if max_seq_length is not None:
        (folder / "sentence_bert_config.json").write_text(
            json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False})
        )
    return folder


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


@needs_extra
def test_a_model_directory_embeds_as_the_model_does(tmp_path: Path) -> None:
    assert MINILM is not None
    folder = model_dir(tmp_path, pooling={"pooling_mode_mean_tokens": True}, nested=True)
    embedder = load_embedder(str(folder))  # a path: a model directory
    assert isinstance(embedder, OnnxEmbedder)
    assert embedder.model.startswith("minilm-export-") and embedder.dim == 384
    assert (embedder.pooling, embedder.max_length) == ("mean", MAX_LENGTH)
    assert embedder.query_prefix == embedder.document_prefix == ""
    texts = ["The cat sits on the mat", "Quarterly tax filing", ""]
    for got, want in zip(embedder.embed(texts), MINILM.embed(texts), strict=True):
        assert cosine(got, want) == pytest.approx(1.0, abs=1e-6)
    # texts of every length, more than a batch: each vector comes back in its text's place
    many = [" ".join(f"word{i}" for i in range(n % 23 * 7)) or "empty" for n in range(70)]
    together = embedder.embed(many)
    for text in (many[0], many[5], many[44], many[69]):
        [alone] = embedder.embed([text])
        assert cosine(together[many.index(text)], alone) == pytest.approx(1.0, abs=1e-3)


@needs_extra
def test_a_directory_s_prompts_go_before_questions_and_memories(
    make_config: Callable[..., Config], clock: FixedClock, tmp_path: Path
) -> None:
    assert MINILM is not None
    prompts = {"query": "query: ", "passage": "passage: ", "clustering": "cluster: "}
    folder = model_dir(tmp_path, prompts=prompts)
    embedder = directory_embedder(str(folder))
    assert (embedder.query_prefix, embedder.document_prefix) == ("query: ", "passage: ")
    store = SQLiteStore(tmp_path / "brain.db")
    service = MemoryService(store, make_config(), clock, embedder=embedder)
    content = "kubernetes cluster upgrade scheduled"
    service.add(content)
    [(_, blob)] = store.embedding_vectors(embedder.model, service.scope_filter(), service.now_iso())
    stored = list(from_blob(blob))
    with_prefix, plain = MINILM.embed(["passage: " + content, content])
    assert cosine(stored, with_prefix) == pytest.approx(1.0, abs=1e-6)
    assert cosine(stored, plain) < 0.999  # the prefix made a difference
    flt, now = service.scope_filter(), service.now_iso()
    [(_, found)] = dense_ranking(store, embedder, "kubernetes", flt, now)
    asked = MINILM.embed(["query: kubernetes"])[0]
    assert found == pytest.approx(cosine(asked, stored), abs=1e-5)
    assert abs(found - cosine(MINILM.embed(["kubernetes"])[0], stored)) > 1e-4
    assert service.search("kubernetes")[0].memory.content == content


@needs_extra
def test_cls_pooling_and_the_directory_s_length_limit(tmp_path: Path) -> None:
    import onnxruntime as ort  # type: ignore[import-not-found, import-untyped, unused-ignore]
    from tokenizers import Tokenizer  # type: ignore[import-not-found, unused-ignore]

    folder = model_dir(tmp_path, pooling={"pooling_mode_cls_token": True}, max_seq_length=8)
    embedder = directory_embedder(str(folder))
    assert (embedder.pooling, embedder.max_length) == ("cls", 8)
    text = "one two three four five six seven eight nine ten eleven twelve"
    # what to expect, from the model itself: its first token's vector, of the first 8 tokens
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    ids = tokenizer.encode(text).ids[:7] + [tokenizer.token_to_id("[SEP]")]
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds = {
        "input_ids": np.array([ids], dtype=np.int64),
        "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
        "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64),
    }
    first = session.run(None, feeds)[0][0, 0]
    [got] = embedder.embed([text])
    assert cosine(got, list(first / np.linalg.norm(first))) == pytest.approx(1.0, abs=1e-6)
    assert math.isclose(sum(v * v for v in got), 1.0, rel_tol=1e-5)


def fake_dir(root: Path, name: str = "model", body: bytes = b"onnx") -> Path:
    """A directory laid out as a model's, its model file not a model (nothing loads it)."""
    folder = root / name
    folder.mkdir()
    (folder / "model.onnx").write_bytes(body)
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_another_model_in_the_same_place_is_another_model(tmp_path: Path) -> None:
    folder = fake_dir(tmp_path, body=b"one model")
    before = directory_embedder(str(folder)).model
    (folder / "model.onnx").write_bytes(b"another model")
    after = directory_embedder(str(folder)).model
    assert before.startswith("model-") and after.startswith("model-") and before != after
    assert directory_embedder(str(folder)).model == after  # the same file: the same name


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("missing", "is no directory; give minilm, hashing, or the directory of a"),
        ("empty", "has no model.onnx (or onnx/model.onnx); export the model"),
        ("no tokenizer", "has no tokenizer.json; export the model with its tokenizer"),
        ("max pooling", "asks for a pooling Cortex does not do; use a model pooled by mean or cls"),
        ("bad json", "is not readable JSON"),
        ("json list", "holds no JSON object"),
    ],
)
def test_a_bad_model_directory_is_a_config_error(tmp_path: Path, layout: str, message: str) -> None:
    folder = tmp_path / "missing"
    if layout == "empty":
        folder.mkdir()
    elif layout == "no tokenizer":
        folder = fake_dir(tmp_path)
        (folder / "tokenizer.json").unlink()
    elif layout != "missing":
        folder = fake_dir(tmp_path)
        (folder / "1_Pooling").mkdir()
        text = {
            "max pooling": json.dumps({"pooling_mode_max_tokens": True}),
            "bad json": "{not json",
            "json list": "[]",
        }[layout]
        (folder / "1_Pooling" / "config.json").write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_embedder(str(folder))


def test_the_command_line_names_a_bad_model_directory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cortex")), "--set", f"embedder={tmp_path}/nowhere"]
        + ["memory", "search", "anything"],
        env={**os.environ, "CORTEX_HOME": str(home)},
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"error: embedder '{tmp_path}/nowhere' is no directory; give minilm, hashing, or the "
        "directory of a sentence-transformers model exported to ONNX (model.onnx and "
        "tokenizer.json)"
    ]
