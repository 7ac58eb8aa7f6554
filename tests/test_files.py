"""``pretty_json``: the mirrors' indented JSON, the same text ``json.dumps`` writes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given

from cortex.files import pretty_json
from json_values import JSON_VALUES


@given(JSON_VALUES)
def test_pretty_json_is_json_dumps_with_an_indent_of_two(value: Any) -> None:
    assert pretty_json(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_pretty_json_leaves_other_values_and_cycles_to_json() -> None:
    class Text(str):
        pass

    assert pretty_json({"a": Text("b"), "c": [1.5, True]}) == json.dumps(
        {"a": "b", "c": [1.5, True]}, indent=2
    )
    looped: list[Any] = []
    looped.append(looped)
    for bad in ({"when": object()}, looped):
        try:
            json.dumps(bad, indent=2)
        except (TypeError, ValueError) as exc:
            expected: type[Exception] = type(exc)
        try:
            pretty_json(bad)
        except (TypeError, ValueError) as exc:
            assert type(exc) is expected
        else:
            raise AssertionError("pretty_json accepted what json refuses")
