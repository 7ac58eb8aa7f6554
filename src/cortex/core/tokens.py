"""Offline token estimates, for context budgets (no tokenizer download, no network).

The estimator counts characters by the length of their UTF-8 form, which sorts scripts the
way BPE tokenizers (cl100k/o200k, Claude) treat them:

- 1 byte, ASCII (English prose, code): 4 characters per token, the usual rule of thumb for
  English; code runs a little denser, so treat the estimate as +/- 25%.
- 2 bytes (accented Latin, Greek, Cyrillic, Hebrew, Arabic): 2 characters per token.
- 3 bytes (CJK ideographs, kana, hangul, Indic and Thai scripts, typographic symbols) and
  4 bytes (emoji, rare ideographs): 1 token each, since vocabularies rarely merge them.

Formula::

    tokens = ceil(ascii / 4 + two_byte / 2 + three_byte + four_byte)

Any non-empty text is at least 1 token; empty text is 0. Counting runs at C speed (one encode
and a few byte deletions), so a 10 MB text costs a few tens of milliseconds.
"""

from __future__ import annotations

CHARS_PER_TOKEN = 4
"""ASCII characters per token."""
TWO_BYTE_CHARS_PER_TOKEN = 2

_NON_ASCII = bytes(range(0x80, 0x100))
_LEAD_2 = bytes(range(0xC0, 0xE0))
_LEAD_3_OR_4 = bytes(range(0xE0, 0x100))


def _count(data: bytes, members: bytes) -> int:
    """How many bytes of ``data`` are in ``members``."""
    return len(data) - len(data.translate(None, members))


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text`` (see the module docstring for the rule and formula).

    Returns:
        0 for empty text, else at least 1.
    """
    if not text:
        return 0
    if text.isascii():
        return _ceil_div(len(text), CHARS_PER_TOKEN)
    data = text.encode("utf-8", "surrogatepass")
    ascii_chars = len(data) - _count(data, _NON_ASCII)
    two_byte = _count(data, _LEAD_2)
    wide = _count(data, _LEAD_3_OR_4)
    # Counted in quarter tokens so that the rounding is exact.
    quarters = ascii_chars + two_byte * (CHARS_PER_TOKEN // TWO_BYTE_CHARS_PER_TOKEN)
    return _ceil_div(quarters + wide * CHARS_PER_TOKEN, CHARS_PER_TOKEN)


def _ceil_div(numerator: int, denominator: int) -> int:
    return max(1, -(-numerator // denominator))
