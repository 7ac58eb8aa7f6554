"""Tool arguments taken as the JSON types each tool's ``inputSchema`` names, nothing converted.

The SDK validates a call's arguments in pydantic's lax mode, after reading as JSON every string
given for an argument not annotated plain ``str``: ``true`` or ``"5"`` for an integer ran as 1
or 5, ``"0.5"`` for a number, ``1`` or ``"true"`` for a boolean, ``'["a"]'`` for a list; and a
JSON-looking value of an optional string was taken apart (``"null"`` for a ``session_id``
meant the current session, a ``query`` of ``[1]`` was refused as no string). A client's type
bug ran as a call it did not make.

``StrictArguments`` validates the arguments as the JSON they came as, in strict mode: a value
of another JSON type is the SDK's tool error for a bad argument, which ``errors`` words as one
sentence naming the argument and the type ("argument `limit` should be a valid integer, not a
string; ..."). JSON Schema's own forms stay taken: an integer where a number is asked, and an
integer written ``5.0`` (JSON Schema's ``integer`` includes it; ``5.5`` is refused, never cut).
The advertised schemas are the argument models' own and do not change.
"""

from __future__ import annotations

import json
import math
from typing import Any

from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata


class StrictArguments(FuncMetadata):
    """A tool's ``FuncMetadata`` whose arguments are validated strictly (the module docstring)."""

    @classmethod
    def of(cls, meta: FuncMetadata) -> StrictArguments:
        """``meta`` (the SDK's, for one tool) with strict argument validation."""
        return cls(
            arg_model=meta.arg_model,
            output_schema=meta.output_schema,
            output_model=meta.output_model,
            wrap_output=meta.wrap_output,
        )

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        # Validated as JSON text: strict mode then takes an array for a list or a tuple, as
        # the schema's "array" says, where strict Python validation wants a tuple itself. The
        # text nests no deeper than the request line the SDK parsed (it stops at about 200).
        text = json.dumps(_integral(arguments_to_validate), allow_nan=True)
        valid = self.arg_model.model_validate_json(text, strict=True)
        return valid.model_dump_one_level()


LONGEST_INTEGER_BITS = 14_000
"""Past this (about 4200 digits) an integer is read as infinite, as ``wire`` reads one from a
request line: Python writes no integer of more than 4300 digits as text."""


def _integral(value: Any) -> Any:
    """``value`` with each number without a fractional part (``5.0``) written as the integer
    JSON Schema counts it, an integer too long to write as an infinite number, and a fraction,
    an infinity and everything else as they came."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and value.bit_length() > LONGEST_INTEGER_BITS:
        return -math.inf if value < 0 else math.inf
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_integral(item) for item in value]
    return value
