"""Offline token estimates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.core.tokens import estimate_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("The quick brown fox jumps over the lazy dog.", 11),  # 44 ASCII chars / 4
        ("你好世界", 4),  # CJK: one token per character
        ("こんにちは", 5),  # kana
        ("안녕하세요", 5),  # hangul
        ("héllo", 2),  # 4 ASCII + 1 two-byte = (4 + 2) / 4 -> 2
        ("привет мир", 5),  # 9 Cyrillic (2 per token) + 1 space: (18 + 1) / 4 -> 5
        ("😀", 1),
        ("hello 世界", 4),  # 6 ASCII + 2 CJK: (6 + 8) / 4 -> 4
        ("\ud800", 1),  # a lone surrogate is counted, not an error
    ],
)
def test_estimates(text: str, expected: int):
    assert estimate_tokens(text) == expected


def test_ten_megabytes_of_ascii():
    assert estimate_tokens("x" * 10_000_000) == 2_500_000


@given(st.text(alphabet=st.characters(blacklist_categories=()), min_size=1))
def test_non_empty_text_is_at_least_one_token_and_at_most_one_per_char(text: str):
    assert 1 <= estimate_tokens(text) <= len(text)


@given(st.text(), st.text())
def test_estimate_grows_with_text(a: str, b: str):
    assert estimate_tokens(a + b) >= max(estimate_tokens(a), estimate_tokens(b))
