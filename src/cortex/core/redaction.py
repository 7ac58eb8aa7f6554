"""Credential redaction: every secret-looking span becomes ``[REDACTED]`` before it is stored.

The patterns are the spec's list (API guide 13.3) plus the common real formats: PEM private
key blocks, URL passwords, ``Authorization`` headers, OpenAI/Anthropic ``sk-`` keys, GitHub
``ghp_/gho_/ghu_/ghs_/ghr_/github_pat_``, AWS access key ids, Slack tokens and webhooks,
Stripe keys, Google ``AIza`` keys, JWTs and bearer tokens.

Deviations from the spec's patterns:

- ``key=value`` and ``key: value`` keep the key (``api_key=[REDACTED]``, as API guide 14.2
  expects); the key may carry a prefix (``DB_PASSWORD``) and the separator must be on the
  same line; a quoted value is replaced inside its quotes.
- The generic base64 rule ``[A-Za-z0-9+/]{32,}`` would also wipe git SHAs, hex digests and
  long identifiers. Here such a run is redacted only when it mixes upper case, lower case
  and digits, as random key material does.

How it stays fast and safe: every pattern but the base64 run starts with a literal (so the
regex engine skips
ahead at C speed), case-insensitive ones run on a lowercased copy of the same length, each
pattern makes one pass and reports the secret's span, and the spans are merged and replaced
once. ``redact`` repeats until nothing changes (at most a few passes), so it is idempotent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

MARKER = "[REDACTED]"
_MAX_PASSES = 4

# ``(?<!...prefix)`` placed after a literal prefix keeps the literal first (fast scanning)
# while still requiring that no word character comes right before the token.
_WORD = "A-Za-z0-9_"


def _token(prefix: str, body: str) -> re.Pattern[str]:
    literal = re.escape(prefix)
    return re.compile(f"{literal}(?<![{_WORD}]{literal}){body}")


# Formats matched on the original text; the whole match is the secret.
_TOKENS = (
    _token("sk-", r"[A-Za-z0-9_-]{20,}"),  # OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-)
    _token("gh", r"[pousr]_[A-Za-z0-9]{30,}"),  # GitHub ghp_, gho_, ghu_, ghs_, ghr_
    _token("github_pat_", r"[A-Za-z0-9_]{22,}"),  # GitHub fine-grained tokens
    _token("AKIA", r"[A-Z0-9]{16}(?![A-Za-z0-9_])"),  # AWS access key ids
    _token("ASIA", r"[A-Z0-9]{16}(?![A-Za-z0-9_])"),  # AWS temporary access key ids
    _token("xox", r"[abprs]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    _token("sk_", r"(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe secret keys
    _token("rk_", r"(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe restricted keys
    _token("whsec_", r"[A-Za-z0-9]{20,}"),  # Stripe webhook secrets
    _token("AIza", r"[0-9A-Za-z_-]{35,}"),  # Google API keys
    _token("eyJ", r"[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),  # JWTs
)

# Patterns whose named group ``s`` is the secret; the rest of the match is kept.
_URL_PASSWORD = re.compile(r"://[^\s:/@]+:(?P<s>[^\s/@]+)@")
_SLACK_WEBHOOK = re.compile(r"https://hooks\.slack\.com/services/(?P<s>[A-Za-z0-9/_-]+)")

# Case-insensitive patterns, matched on the lowercased copy (so written in lower case).
_VALUE = r"(?![\"']?\[redacted\])(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;)}\]]+)"
_SEPARATOR = r"[\"']?[ \t]*[:=][ \t]*"
_KEY_SUFFIX = r"(?:[_-](?:access[_-])?key|[_-]token)?"
_KEY_STEMS = (
    "pass(?:word|wd|phrase)",
    "secret",
    "api[_-]?key",
    "token",
    "auth",
    "bearer",
    "private[_-]?key",
    "access[_-]?key",
)
_KEY_VALUES = tuple(re.compile(stem + _KEY_SUFFIX + _SEPARATOR + _VALUE) for stem in _KEY_STEMS)
_AUTH_HEADER = re.compile(
    r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:bearer|basic|token|digest)[ \t]+)?+"
    r"(?!\[redacted\])(?P<s>[^\s\"',;]+)"
)
_BEARER = re.compile(
    r"bearer(?<![a-z0-9_]bearer)[ \t]+(?P<s>(?=[a-z._~+/-]*\d)[a-z0-9._~+/-]{16,}=*)"
)
_FOLDED = (*_KEY_VALUES, _AUTH_HEADER, _BEARER)
_ORIGINAL = (*_TOKENS, _URL_PASSWORD, _SLACK_WEBHOOK)

_SECRET_KEY_NAME = re.compile(
    "(?:" + "|".join(_KEY_STEMS) + ")" + _KEY_SUFFIX + r"\Z", re.IGNORECASE
)
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{32,}={0,2}(?![A-Za-z0-9+/])")
_CHAR_KINDS = (re.compile("[0-9]"), re.compile("[A-Z]"), re.compile("[a-z]"))

_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY-----")
# A block cut short: whitespace-separated base64 chunks of 16+ characters (not prose words).
_PEM_BODY = re.compile(r"(?:\s*+[A-Za-z0-9+/=]{16,}+)*+")


def _pem_spans(text: str) -> Iterator[tuple[int, int]]:
    """Each private-key block, from BEGIN to END (or to the end of its body if cut short)."""
    if "PRIVATE KEY-----" not in text:
        return
    pos = 0
    end_missing = False
    while (begin := _PEM_BEGIN.search(text, pos)) is not None:
        end = None if end_missing else _PEM_END.search(text, begin.end())
        if end is None:
            end_missing = True  # no END after here, so none after any later BEGIN either
            body = _PEM_BODY.match(text, begin.end())
            pos = body.end() if body else begin.end()
        else:
            pos = end.end()
        yield begin.start(), pos


def _group_spans(pattern: re.Pattern[str], source: str) -> Iterator[tuple[int, int]]:
    has_group = "s" in pattern.groupindex
    for match in pattern.finditer(source):
        start, end = match.span("s") if has_group else match.span()
        if end - start >= 2 and source[start] in "\"'" and source[end - 1] == source[start]:
            start, end = start + 1, end - 1
        yield start, end


def _base64_spans(text: str) -> Iterator[tuple[int, int]]:
    for match in _BASE64_RUN.finditer(text):
        start, end = match.span()
        if all(kind.search(text, start, end) for kind in _CHAR_KINDS):
            yield start, end


def _spans(text: str) -> list[tuple[int, int]]:
    # U+0130 is the one code point whose lowercase is two characters; mapping it first keeps
    # ``folded`` the same length as ``text``, so spans found in it apply to ``text``.
    folded = text.replace("\u0130", "i").lower()
    spans = list(_pem_spans(text))
    for pattern in _ORIGINAL:
        spans.extend(_group_spans(pattern, text))
    for pattern in _FOLDED:
        spans.extend(_group_spans(pattern, folded))
    spans.extend(_base64_spans(text))
    return spans


def _one_pass(text: str) -> str:
    spans = sorted(s for s in _spans(text) if s[1] > s[0] and text[s[0] : s[1]] != MARKER)
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in spans:
        if end <= pos:
            continue
        if start < pos:  # overlaps the span just replaced: extend it
            pos = end
            continue
        out.append(text[pos:start])
        out.append(MARKER)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``[REDACTED]`` (keys of ``key=value`` kept)."""
    if not isinstance(text, str) or not text:
        return text
    for _ in range(_MAX_PASSES):
        redacted = _one_pass(text)
        if redacted == text:
            break
        text = redacted
    return text


def contains_secret(text: str) -> bool:
    """Whether ``redact`` would change ``text``."""
    return isinstance(text, str) and bool(text) and _one_pass(text) != text


def redact_value(value: Any) -> Any:
    """Redact every string inside ``value`` (dicts, lists, tuples), keeping keys and shape.

    A string stored under a secret-looking key (``password``, ``api_key``, ``token``...) is
    replaced whole, since the value alone may not look like a credential.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redact_item(key, item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_value(item) for item in value)
    return value


def _redact_item(key: Any, item: Any) -> Any:
    if isinstance(key, str) and isinstance(item, str) and item and _SECRET_KEY_NAME.search(key):
        return MARKER
    return redact_value(item)
