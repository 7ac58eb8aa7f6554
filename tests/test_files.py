"""``pretty_json``: the mirrors' indented JSON, the same text ``json.dumps`` writes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cortex.files import pretty_json

_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and the infinities included
    st.text(max_size=6),
)
_KEY = st.one_of(st.text(max_size=4), st.integers(), st.booleans(), st.none(), st.floats())
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
        st.dictionaries(_KEY, inner, max_size=2),  # keys json turns into strings
    ),
    max_leaves=12,
)


@given(_VALUE)
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
