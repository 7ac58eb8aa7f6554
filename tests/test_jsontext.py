"""``compact_encoder``: the text ``json.JSONEncoder.encode`` gives, from an encoder built once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from cortex.core.jsontext import compact_encoder
from json_values import JSON_VALUES

SETTINGS = [
    (False, (",", ":"), False),
    (True, (",", ":"), False),
    (True, (", ", ": "), False),
    (False, (",", ":"), True),
]


@pytest.mark.parametrize(("sort_keys", "separators", "ensure_ascii"), SETTINGS)
@given(value=JSON_VALUES)
def test_compact_encoder_writes_what_json_writes(
    sort_keys: bool, separators: tuple[str, str], ensure_ascii: bool, value: Any
) -> None:
    reference = json.JSONEncoder(
        separators=separators, ensure_ascii=ensure_ascii, sort_keys=sort_keys
    )
    made = compact_encoder(sort_keys=sort_keys, separators=separators, ensure_ascii=ensure_ascii)
    assert _outcome(made, value) == _outcome(reference.encode, value)


def _outcome(encode: Any, value: Any) -> tuple[str, object]:
    """The text, or the kind of error (sorting keys of mixed types fails in both)."""
    try:
        return "text", encode(value)
    except TypeError as exc:
        return "refused", type(exc)


def test_compact_encoder_refuses_what_json_refuses() -> None:
    encode = compact_encoder()
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode({"when": object()})
    assert encode({"after": "a refusal"}) == '{"after":"a refusal"}'  # no state left behind


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
def test_without_nan_it_refuses_what_an_http_answer_refuses(number: float) -> None:
    """``allow_nan=False``: the text Starlette's ``JSONResponse`` writes, and its refusal of a
    number JSON has no form for."""
    strict = compact_encoder(allow_nan=False)
    with pytest.raises(ValueError, match="not JSON compliant"):
        json.dumps([number], allow_nan=False)
    with pytest.raises(ValueError, match="not JSON compliant"):
        strict({"score": number})
    assert compact_encoder()([number]) == json.dumps([number])
    assert strict({"a": [1.5, "é"]}) == json.dumps(
        {"a": [1.5, "é"]}, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    )


def test_a_default_writes_what_json_writes_for_values_it_cannot_encode() -> None:
    """``default=str``, as a record's size is measured: a date or a set is written as its
    text, as ``json.dumps(..., default=str)`` writes it."""
    import datetime

    value = {"when": datetime.date(2026, 1, 2), "tags": {"x"}, "n": [1.5, "é"]}
    made = compact_encoder(default=str)
    assert made(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
