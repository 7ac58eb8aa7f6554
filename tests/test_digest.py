"""HMAC-SHA256 on the built-in SHA-256 gives the standard library's bytes, for any key and
message (keys longer than a block included)."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
import sys
from pathlib import Path

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


def test_the_hook_event_path_loads_neither_openssl_nor_decimal_nor_calendar(tmp_path: Path) -> None:
    # The hook server lives for hours: OpenSSL's bindings (~3.5 MB) or decimal, loaded by one
    # event, stay resident. Two sessions, so the second start restores (and scores) the first.
    code = (
        "import json, sys\n"
        "from cortex.adapters.hooks.dispatch import handle\n"
        "home, cwd = sys.argv[1], sys.argv[2]\n"
        "env = {'CORTEX_HOME': home}\n"
        "for sid in ('s1', 's2'):\n"
        "    for event in ({'hook_event_name': 'SessionStart', 'source': 'startup'},\n"
        "                  {'hook_event_name': 'UserPromptSubmit', 'prompt': 'ft991a'},\n"
        "                  {'hook_event_name': 'SessionEnd'}):\n"
        "        raw = json.dumps({**event, 'session_id': sid, 'cwd': cwd}).encode()\n"
        "        handle('claude-code', raw, env, cwd)\n"
        "print(sorted(m for m in ('_hashlib', 'decimal', 'calendar') if m in sys.modules))\n"
    )
    home, cwd = tmp_path / "home", tmp_path / "work"
    cwd.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", code, str(home), str(cwd)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert (home / "brain.db").exists()
