"""A corpus of realistic credentials (fake, generated from a fixed seed) and the text around them.

``CORPUS`` holds (kind, secret, text) triples: ``secret`` is the part that must never be stored
or printed, ``text`` one way a person or a tool would write it (a pin, a prompt, a shell line,
a config snippet). Shared by the redaction tests and the every-input-path tests.
"""

from __future__ import annotations

import random
import string

_RNG = random.Random(20261123)
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def _r(alphabet: str, n: int) -> str:
    """``n`` random characters of ``alphabet``, holding every kind (digit, lower, upper) the
    alphabet has, as real key material of that length does."""
    kinds = [
        k
        for k in (string.digits, string.ascii_lowercase, string.ascii_uppercase)
        if any(c in k for c in alphabet)
    ]
    while True:
        out = "".join(_RNG.choice(alphabet) for _ in range(n))
        if all(any(c in k for c in out) for k in kinds):
            return out


def _u(n: int) -> str:
    return _r(string.ascii_uppercase + string.digits, n)


# kind -> maker of one secret (the full token as the provider issues it)
MAKERS = {
    "openai": lambda: "sk-proj-" + _r(URLSAFE, 48),
    "anthropic": lambda: "sk-ant-api03-" + _r(URLSAFE, 93),
    "openrouter": lambda: "sk-or-v1-" + _r(HEX, 64),
    "github-classic": lambda: "ghp_" + _r(ALNUM, 36),
    "github-oauth": lambda: "gho_" + _r(ALNUM, 36),
    "github-fine-grained": lambda: "github_pat_" + _r(ALNUM, 22) + "_" + _r(ALNUM, 59),
    "gitlab": lambda: "glpat-" + _r(URLSAFE, 20),
    "aws-access-key-id": lambda: "AKIA" + _u(16),
    "slack-bot": lambda: (
        "xoxb-" + _r(string.digits, 12) + "-" + _r(string.digits, 13) + "-" + _r(ALNUM, 24)
    ),
    "stripe-live": lambda: "sk_live_" + _r(ALNUM, 24),
    "stripe-webhook": lambda: "whsec_" + _r(ALNUM, 32),
    "google-api": lambda: "AIza" + _r(URLSAFE, 35),
    "google-oauth-secret": lambda: "GOCSPX-" + _r(URLSAFE, 28),
    "jwt": lambda: "eyJhbGciOiJIUzI1NiJ9.eyJ" + _r(URLSAFE, 40) + "." + _r(URLSAFE, 43),
    "npm": lambda: "npm_" + _r(ALNUM, 36),
    "pypi": lambda: "pypi-AgEIcHlwaS5vcmc" + _r(URLSAFE, 60),
    "huggingface": lambda: "hf_" + _r(ALNUM, 34),
    "sendgrid": lambda: "SG." + _r(URLSAFE, 22) + "." + _r(URLSAFE, 43),
    "twilio": lambda: "SK" + _r(HEX, 32),
    "digitalocean": lambda: "dop_v1_" + _r(HEX, 64),
    "shopify": lambda: "shpat_" + _r(HEX, 32),
    "vault": lambda: "hvs." + _r(URLSAFE, 90),
    "grafana": lambda: "glsa_" + _r(ALNUM, 32) + "_" + _r(HEX, 8),
    "databricks": lambda: "dapi" + _r(HEX, 32),
    "linear": lambda: "lin_api_" + _r(ALNUM, 40),
    "postman": lambda: "PMAK-" + _r(HEX, 24) + "-" + _r(HEX, 34),
    "mailgun": lambda: "key-" + _r(HEX, 32),
    "doppler": lambda: "dp.pt." + _r(ALNUM, 43),
    "groq": lambda: "gsk_" + _r(ALNUM, 52),
    "docker-hub": lambda: "dckr_pat_" + _r(URLSAFE, 27),
    "sentry": lambda: "sntrys_" + _r(ALNUM, 60),
    "telegram-bot": lambda: _r(string.digits, 9) + ":AA" + _r(URLSAFE, 33),
    "age": lambda: "AGE-SECRET-KEY-1" + _u(58),
    "aws-secret-key": lambda: _r(B64, 40),
    "random-urlsafe": lambda: _r(URLSAFE, 43),
    "hex-signing-key": lambda: _r(HEX, 64),
    "password": lambda: _r(ALNUM + "!#%^*", 14),
}

# kind -> how it is written down ({s} is the secret)
CONTEXTS: dict[str, tuple[str, ...]] = {
    "aws-secret-key": ("aws_secret_access_key = {s}", "AWS_SECRET_ACCESS_KEY={s} aws s3 ls"),
    "random-urlsafe": ("session cookie was {s} before the reset", "ACCESS_TOKEN: {s}"),
    "hex-signing-key": (
        "export SIGNING_KEY={s}",
        '{{"webhook_hmac": "{s}"}}',
        "client_secret: {s}",
    ),
    "password": (
        "mysql -u root -p{s} prod_db",
        "psql postgresql://deploy:{s}@db.internal:5432/app",
        "redis-cli -u redis://:{s}@cache:6379",
        "mytool --password {s} --verbose",
        "sshpass -p '{s}' ssh admin@10.0.0.5",
        "curl -u admin:{s} https://ci.example.com/api",
        "DB_PASSWORD={s}",
        "Server=tcp:sql;Database=app;User Id=sa;Password={s};",
        "the new passphrase: {s}",
        "PGPASSWORD={s} pg_dump app",
    ),
}
DEFAULT_CONTEXTS = (
    "{s}",
    "use {s} for the deploy",
    "export TOKEN_FOR_CI={s}",
    '{{"key": "value", "credential": "{s}"}}',
    "Authorization: Bearer {s}",
)


def build() -> list[tuple[str, str, str]]:
    """(kind, secret, text) triples: every kind in each of its contexts, with fresh secrets."""
    corpus = []
    for kind, make in MAKERS.items():
        for template in CONTEXTS.get(kind, DEFAULT_CONTEXTS):
            secret = make()
            corpus.append((kind, secret, template.format(s=secret)))
    return corpus


CORPUS = build()
