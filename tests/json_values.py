"""A hypothesis strategy for what ``json`` accepts (and some of what it turns into strings)."""

from __future__ import annotations

from hypothesis import strategies as st

_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and the infinities included
    st.text(max_size=6),
)
_KEY = st.one_of(st.text(max_size=4), st.integers(), st.booleans(), st.none(), st.floats())
JSON_VALUES = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
        st.dictionaries(_KEY, inner, max_size=2),  # keys json turns into strings
    ),
    max_leaves=12,
)
"""Nested lists, tuples and dicts of JSON scalars, some keys not strings."""
