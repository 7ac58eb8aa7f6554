"""HMAC-SHA256 on the built-in SHA-256 gives the standard library's bytes, for any key and
message (keys longer than a block included)."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from cortex.core.digest import hmac_sha256, hmac_sha256_hex, sha256


@given(st.binary(max_size=200), st.binary(max_size=2000))
def test_hmac_matches_the_standard_library(key: bytes, message: bytes) -> None:
    expected = hmac.new(key, message, hashlib.sha256)
    assert hmac_sha256(key, message) == expected.digest()
    assert hmac_sha256_hex(key, message) == expected.hexdigest()


def test_known_answer() -> None:
    # RFC 4231, test case 2.
    mac = hmac_sha256_hex(b"Jefe", b"what do ya want for nothing?")
    assert mac == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert sha256(b"abc").hexdigest() == hashlib.sha256(b"abc").hexdigest()


def test_chaining_a_metrics_event_never_loads_openssl() -> None:
    code = (
        "import sys\n"
        "from cortex.services.metrics import chain_hash\n"
        "chain_hash(b'k' * 32, '0' * 64, 'session_restored', 's1', {'a': 1}, 't')\n"
        "print('_hashlib' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
