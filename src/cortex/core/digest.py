"""HMAC-SHA256 on the interpreter's built-in SHA-256, without loading OpenSSL.

``hashlib`` and ``hmac`` load ``_hashlib`` (OpenSSL bindings, about 3.5 MB resident) the first
time either is imported; the hook server chains a metrics event on almost every start and
would carry that for its whole life. CPython always builds its own SHA-256 (``_sha2`` from
3.12, ``_sha256`` before), so the HMAC construction (RFC 2104) is computed on it here: the
same bytes as ``hmac.new(key, message, hashlib.sha256)``, which the tests check.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import lru_cache

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any


def _builtin_sha256() -> Callable[..., Any]:
    """CPython's own SHA-256 constructor; the standard library's on another interpreter."""
    # 3.12 renamed it (only the one this interpreter has is looked for: a failed import
    # scans the whole path)
    for module in ("_sha2",) if sys.version_info >= (3, 12) else ("_sha256",):
        try:
            # (not ``importlib``: it imports ``warnings``; nor ``cortex._import``: core imports
            # nothing above it)
            __import__(module)
            return sys.modules[module].sha256  # type: ignore[no-any-return]
        except (ImportError, AttributeError):
            continue
    from hashlib import sha256

    return sha256


_sha256 = _builtin_sha256()

BLOCK = 64
"""SHA-256's block size in bytes."""

_INNER = bytes(b ^ 0x36 for b in range(256))
_OUTER = bytes(b ^ 0x5C for b in range(256))


def sha256(data: bytes = b"") -> Any:
    """A SHA-256 hash object (``update``, ``digest``, ``hexdigest``)."""
    return _sha256(data)


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message`` under ``key`` (32 bytes)."""
    inner, outer = _padded(key)
    inner = inner.copy()
    inner.update(message)
    outer = outer.copy()
    outer.update(inner.digest())
    return bytes(outer.digest())


@lru_cache(maxsize=8)
def _padded(key: bytes) -> tuple[Any, Any]:
    """The hash states after the inner and outer padded key: a chain hashes every event under
    one key, so each HMAC copies these instead of hashing the key blocks again."""
    if len(key) > BLOCK:
        key = _sha256(key).digest()
    key = key.ljust(BLOCK, b"\0")
    return _sha256(key.translate(_INNER)), _sha256(key.translate(_OUTER))


def hmac_sha256_hex(key: bytes, message: bytes) -> str:
    """``hmac_sha256`` as 64 lower-case hex digits."""
    return hmac_sha256(key, message).hex()
