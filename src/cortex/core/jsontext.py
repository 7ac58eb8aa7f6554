"""Compact JSON text from encoders built once.

``json.JSONEncoder.encode`` builds a new C encoder at every call (two Python frames, a float
closure and the encoder's nine settings); a restore encodes about forty small values (the
new row's JSON columns, two texts of each metrics event). ``compact_encoder`` builds the C
encoder once and calls it directly: the same text as ``JSONEncoder.encode`` with those
settings. It skips the encoder's cycle check, so it is only for values that cannot hold a
cycle (records' ``to_dict`` output, payloads checked plain); a cycle ends in ``RecursionError``
instead of ``ValueError``.
"""

from __future__ import annotations

import json
import json.encoder

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def compact_encoder(
    *,
    sort_keys: bool = False,
    separators: tuple[str, str] = (",", ":"),
    allow_nan: bool = True,
    ensure_ascii: bool = False,
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=separators, ensure_ascii=ensure_ascii,
    sort_keys=sort_keys, allow_nan=allow_nan, default=default).encode``, for acyclic values,
    without the per-call setup."""
    settings = json.JSONEncoder(
        separators=separators,
        ensure_ascii=ensure_ascii,
        sort_keys=sort_keys,
        allow_nan=allow_nan,
        default=default,
    )
    make = getattr(json.encoder, "c_make_encoder", None)  # (not in the typeshed stubs)
    if make is None:  # an interpreter without json's C speedups
        return settings.encode
    item_separator, key_separator = separators
    encode = make(
        None,  # no cycle check: see the module docstring
        settings.default,
        # what the encoder uses with each ensure_ascii
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring,
        None,
        key_separator,
        item_separator,
        sort_keys,
        False,  # skipkeys
        allow_nan,  # False: NaN and infinities raise ValueError, as json.dumps does
    )

    def text(value: Any) -> str:
        return "".join(encode(value, 0))

    return text
