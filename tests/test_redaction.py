"""Credential redaction. Fake tokens are built from pieces."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cortex.core.redaction import (
    MARKER,
    _quiet,
    _spans,
    clip,
    contains_secret,
    redact,
    redact_value,
)
from secret_corpus import CORPUS

R = MARKER
ALNUM = "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0zC"  # 32 mixed characters, the shape of key material


def test_api_guide_integration_case():
    assert redact("api_key=sk-abc123") == f"api_key={R}"


PEM_BODY = "MIIEow" + ALNUM * 2 + "\n" + ALNUM * 2
REDACTED_CASES = [
    # key=value forms keep the key (spec pattern, with the key kept)
    ("password=hunter2", f"password={R}"),
    ("passwd: hunter2 and more", f"passwd: {R} and more"),
    ("DB_PASSWORD=x GITHUB_TOKEN=y", f"DB_PASSWORD={R} GITHUB_TOKEN={R}"),
    ("client_secret = abc", f"client_secret = {R}"),
    ("api-key: abc", f"api-key: {R}"),
    ("apikey=abc;next", f"apikey={R};next"),
    ("private_key=abc", f"private_key={R}"),
    ("auth_token: xyz", f"auth_token: {R}"),
    ("aws_secret_access_key = wJalr/XUtn", f"aws_secret_access_key = {R}"),
    ('{"password": "hunter 2", "user": "bob"}', f'{{"password": "{R}", "user": "bob"}}'),
    ("token='a b c'", f"token='{R}'"),
    # provider formats
    ("key sk-" + "a" * 48 + " end", f"key {R} end"),
    ("sk-proj-" + ALNUM, R),
    ("sk-ant-api03-" + ALNUM * 3, R),
    ("ghp_" + "A" * 36, R),
    ("gho_" + "b" * 36 + ".", R + "."),
    ("ghs_" + ALNUM + "abcd", R),
    ("github_pat_" + "11ABCDEFG0" + "_" + "x" * 59, R),
    ("id AKIA" + "IOSFODNN7EXAMPLE", f"id {R}"),
    ("ASIA" + "ABCDEFGHIJKLMNOP", R),
    ("xoxb-" + "1234567890-abcdefghij", R),
    (
        "https://hooks.slack.com/services/" + "T000/B000/XXXX",
        f"https://hooks.slack.com/services/{R}",
    ),
    ("sk_live_" + "a" * 24, R),
    ("rk_test_" + "b" * 24, R),
    ("AIza" + "c" * 35, R),
    ("eyJ" + "hbGciOiJI" + ".eyJ" + "zdWIiOiIx" + ".sig_nat-ure", R),
    ("Authorization: Bearer abc.def", f"Authorization: Bearer {R}"),
    ('"Authorization": "Bearer eyJabc"', f'"Authorization": "Bearer {R}"'),
    ("authorization: Basic dXNlcjpwYXNz", f"authorization: Basic {R}"),
    ("curl -H 'x' bearer " + "abcd1234" * 3, f"curl -H 'x' bearer {R}"),
    ("postgres://bob:s3cret@localhost/db", f"postgres://bob:{R}@localhost/db"),
    ("https://user:p%40ss@example.com", f"https://user:{R}@example.com"),
    # PEM blocks, whole; a block cut short loses its body, not the prose after it
    (
        "before\n-----BEGIN RSA PRIVATE KEY-----\n"
        f"{PEM_BODY}\n-----END RSA PRIVATE KEY-----\nafter",
        f"before\n{R}\nafter",
    ),
    (f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\nThen I ran tests.", f"{R}\nThen I ran tests."),
    # generic base64-looking runs that mix upper, lower and digits
    ("secret material " + ALNUM + "==", f"secret material {R}"),
    ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", R),
    # cookies: a header's name=value pairs (a session cookie logs its holder in), whole
    ("Cookie: session=abc123; theme=dark", f"Cookie: {R}"),
    ('curl -H "Cookie: sid=9f8e7d" https://x', f'curl -H "Cookie: {R}" https://x'),
    ("Set-Cookie: sid=abc; Path=/; HttpOnly", f"Set-Cookie: {R}"),
    ('{"Cookie": "sid=abc"}', f'{{"Cookie": "{R}"}}'),
    ('curl --cookie "sid=abc" https://x', f'curl --cookie "{R}" https://x'),
]


@pytest.mark.parametrize(("text", "expected"), REDACTED_CASES)
def test_redacts(text: str, expected: str):
    assert redact(text) == expected
    assert contains_secret(text)


KEPT_CASES = [
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f",  # git SHA: no upper case
    "sha256 " + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "MixedCaseIdentifierWithoutAnyDigitsAtAllHere",
    "/home/user/Projects/lbf-ham-radio/src/cortex/session_manager.py",
    "task-004-session-persistence is in build",
    "token_count: 512, max_tokens=4000, tokens: 3",
    "author: Jane",
    "secretary: Bob",
    "use a bearer token for auth",
    "the password is stored in the vault",
    "password:\nnext line is not the value",
    f"api_key={R}",
    "",
    "test_the_pure_core_checker_catches_violations_in_module_2",
    "primary_key: user_id, sort_key=created_at_desc, cache key: 2024-01-01T00:00:00Z",
    "pg_dump --password-file ~/.pgpass app",
    "see mysql docs for -p and --host",
    "Ticket ABC-1234: SKU SK-42 shipped",
    "I like a cookie: chocolate chip",
    "cookie: the jar is empty, set-cookie: see the docs",
    "the cookie banner asks for consent",
]


@pytest.mark.parametrize("text", KEPT_CASES)
def test_leaves_ordinary_text_alone(text: str):
    assert redact(text) == text
    assert not contains_secret(text)


def test_redact_value_walks_containers_and_keeps_keys():
    value = {
        "pins": [{"label": "creds", "content": "password=hunter2"}],
        "pair": ("token=abc", 3),
        "api_key": "plain-looking",
        "max_tokens": "4000",
        "count": 7,
        "nested": {"auth": None, "password": ""},
    }
    assert redact_value(value) == {
        "pins": [{"label": "creds", "content": f"password={R}"}],
        "pair": (f"token={R}", 3),
        "api_key": R,
        "max_tokens": "4000",
        "count": 7,
        "nested": {"auth": None, "password": ""},
    }
    assert redact_value(42) == 42
    assert redact_value(None) is None


KEY = "sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3kL5m"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short", 10, "short"),
        ("two words", 3, "two"),  # (cut at a space)
        ("two words", 4, "two "),
        ("two words", 5, "two "),
        (f"use {KEY} now", 20, "use "),  # the key's start is not kept
        (f"use {KEY} now", 4 + len(KEY), f"use {KEY}"),  # a cut at a space keeps it whole
        ("line\nnext", 7, "line\n"),
        ("x" * 50, 20, "x" * 20),  # one word: cut where it is
    ],
)
def test_clip_drops_the_word_the_cut_goes_through(text: str, limit: int, expected: str):
    assert clip(text, limit) == expected


def test_a_key_cut_short_is_not_recognised_which_is_why_clip_drops_it():
    assert redact(KEY[:18]) == KEY[:18]
    assert redact(clip(f"use {KEY} now", 22)) == "use "


def test_huge_input_is_redacted_in_full():
    filler = "The quick brown fox jumps over the lazy dog token auth. " * 90_000
    text = filler + " api_key=sk-" + "a" * 40 + " " + filler
    assert len(text) > 10_000_000
    out = redact(text)
    assert out == filler + f" api_key={R} " + filler


def test_pem_header_without_end_many_times():
    text = "-----BEGIN RSA PRIVATE KEY-----!" * 1000
    assert redact(text) == f"{R}!" * 1000


FRAGMENTS = [
    "api_key",
    "password",
    "token",
    "secret",
    "auth",
    "Bearer ",
    "Authorization: ",
    "=",
    ": ",
    " ",
    "\n",
    '"',
    "'",
    "sk-",
    "ghp_",
    "AKIA",
    "xoxb-",
    "eyJ",
    ".",
    "/",
    "+",
    "==",
    "@",
    "://",
    "user",
    "host",
    R,
    "[REDACTED",
    "A" * 20,
    "0123456789ABCDEF",
    ALNUM,
    "abc",
    "İ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "https://hooks.slack.com/services/",
    "ｐａｓｓｗｏｒｄ＝",
    "pass\u200bword",
    "\u200b",
    "\ufeff",
    "\u00a0",
    "ｇｈｐ＿",
    "ﬁ",
    " is ",
    "hunter2!x9",
]
secretish = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=5)), max_size=30).map(
    "".join
)
any_text = st.text(alphabet=st.characters(blacklist_categories=()), max_size=200)


@given(st.one_of(secretish, any_text))
@example(f"token={R}x")
@example("password=[REDACTED")
@example("://u:" + R + "x@h")
@example("ｐａｓｓ\ud800ｗｏｒｄ=\x00x \udfff")
@example("pass\u200bword=\u200b" + R)
def test_redaction_is_idempotent_and_never_raises(text: str):
    once = redact(text)
    assert isinstance(once, str)
    assert redact(once) == once
    assert not contains_secret(once)


@given(secretish)
def test_redact_value_is_idempotent(text: str):
    value = {"password": text, "list": [text, (text,)], "n": 1}
    once = redact_value(value)
    assert redact_value(once) == once


def test_the_corpus_is_large_and_varied():
    assert len(CORPUS) >= 150
    assert len({kind for kind, _, _ in CORPUS}) >= 25


@pytest.mark.parametrize(
    ("kind", "secret", "text"), CORPUS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(CORPUS)]
)
def test_every_credential_of_the_corpus_is_redacted(kind: str, secret: str, text: str):
    out = redact(text)
    assert MARKER in out
    assert leaked(secret, out) == [], f"{kind}: {out!r}"
    assert redact(out) == out


def leaked(secret: str, out: str) -> list[str]:
    """The 12-character pieces of ``secret`` that ``out`` shows (NFKC-folded, without
    zero-width characters, as a reader or a search would see them)."""
    import unicodedata

    shown = "".join(c for c in unicodedata.normalize("NFKC", out) if c not in INVISIBLES)
    return [secret[i : i + 12] for i in range(len(secret) - 11) if secret[i : i + 12] in shown]


def test_an_error_quoting_a_value_keeps_its_own_words_and_hides_secrets() -> None:
    from cortex.errors import ValidationError

    kept = ValidationError("invalid snapshot slug '../../etc/passwd': use 1-64 letters")
    assert str(kept) == "invalid snapshot slug '../../etc/passwd': use 1-64 letters"
    assert str(ValidationError("invalid session id 'token': use 1-128")).endswith(": use 1-128")
    hidden = ValidationError("no pin 'password=hunter22'; see `cortex pin list`")
    assert "hunter22" not in str(hidden) and str(hidden).endswith("; see `cortex pin list`")
    assert "hunter22" not in str(ValidationError("bad line: password: hunter22"))


def test_a_rule_is_compiled_only_when_its_guard_occurs() -> None:
    code = (
        "from cortex.core import redaction as r\n"
        "r.redact('tune the ft991a cat control, attempt 7')\n"
        "plain = r._compiled.cache_info().currsize\n"
        "out = r.redact('db password=hunter2 and ghp_' + 'a1B2' * 9)\n"
        "print(plain, r._compiled.cache_info().currsize, out)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    plain, secret, out = done.stdout.split(maxsplit=2)
    assert int(plain) == 0  # prose with no guard compiles none of the ~70 rules
    assert 1 <= int(secret) <= 4  # the key=value rule and GitHub's, not all of them
    assert out.strip() == "db password=[REDACTED] and [REDACTED]"


@given(st.one_of(secretish, any_text))
@example("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----")
@example("see ://u:p@h and " + "a1B2" * 5)
@example("x" * 19 + " \u0130" + "y" * 19)
def test_a_quiet_text_is_one_no_rule_matches(text: str):
    # The early return must never skip a rule: a text it calls quiet has no span at all.
    if _quiet(text):
        assert _spans(text) == []


@pytest.mark.parametrize("text", [t for _, _, t in CORPUS])
def test_no_credential_text_is_quiet(text: str):
    assert not _quiet(text)


def test_prose_is_quiet():
    assert _quiet("Decided to use kafka for queues in proj-01 because redis was too slow")
    assert not _quiet("we moved to an infrastructure-as-code setup")  # 20+ characters


def test_a_credential_used_as_a_key_is_redacted_and_no_entry_is_lost() -> None:
    slack = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"
    aws = "AKIAIOSFODNN7EXAMPLE"
    value = {"state": {slack: "keyval", aws: "other", "files": 1}}
    redacted = redact_value(value)
    assert slack not in str(redacted) and aws not in str(redacted)
    assert sorted(redacted["state"].values(), key=str) == [1, "keyval", "other"]
    assert redact_value(redacted) == redacted


# Secret-key spellings: every one redacts its value (the key kept); ``pass`` only as a key.
KEY_SPELLINGS = [
    "passwd",
    "pwd",
    "pass",
    "PASS",
    "passphrase",
    "passcode",
    "secret_key",
    "secretkey",
    "private_key",
    "client_secret",
    "access_token",
    "refresh_token",
    "auth_token",
    "session_token",
    "x-api-key",
    "X-API-Key",
    "DB_PASS",
    "REDIS_PASS",
    "smtp-pass",
    "PGPASSWORD",
    "MYSQL_PWD",
    "AWS_SECRET_ACCESS_KEY",
]


@pytest.mark.parametrize("key", KEY_SPELLINGS)
@pytest.mark.parametrize("separator", ["=", ": ", " = "])
def test_every_secret_key_spelling_is_redacted(key: str, separator: str):
    if key in ("pass", "PASS") and ":" in separator:
        return  # ``pass:`` is prose's too: see the prose cases below
    assert redact(f"{key}{separator}hunter2") == f"{key}{separator}{R}"


@pytest.mark.parametrize(
    "text",
    ['{"pass": "hunter2"}', "https://x.test/login?user=bob&pass=hunter2", "PASS=hunter2 make"],
)
def test_pass_is_a_key_where_it_is_written_as_one(text: str):
    assert "hunter2" not in redact(text)


@pytest.mark.parametrize(
    "text",
    ["bypass=hunter2", "compass=north2", "first pass: parse the file", "sshpass is installed"],
)
def test_pass_inside_a_word_or_in_prose_is_kept(text: str):
    assert redact(text) == text


def test_a_mapping_key_named_pass_holds_a_secret_and_a_longer_word_does_not():
    value = {"pass": "x", "DB_PASS": "y", "bypass": "z", "compass": "n", "secretkey": "k"}
    assert redact_value(value) == {
        "pass": R,
        "DB_PASS": R,
        "bypass": "z",
        "compass": "n",
        "secretkey": R,
    }


# Prose that states a secret: the value is redacted only when it looks like one.
PROSE_SECRETS = [
    ("the password is hunter2!x9", "the password is {R}"),
    ("my password was Tr0ub4dor&3", "my password was {R}"),
    ("password is: Xy7#kk2q", "password is: {R}"),
    ("The password is now S3cure-Pass", "The password is now {R}"),
    ("passwd hunter2!x9", "passwd {R}"),
    ("wifi password Summer2024!", "wifi password {R}"),
    ("the password for admin is S3cr3t!!", "the password for admin is {R}"),
    ("I changed the password to Tr0ub4dor&3", "I changed the password to {R}"),
    ("pass: hunter2x", "pass: {R}"),
    ("the token is abc123def456.", "the token is {R}."),
    ("the api key is 'x9Y8z7w6'", "the api key is '{R}'"),
    ("the API key was `q8Lm2Xz0rT`", "the API key was `{R}`"),
    ("the password is hunterTwo", "the password is {R}"),
    ('password is "hunter 2x"', 'password is "{R}"'),
    ("the token is 12345678", "the token is {R}"),
    ("the client secret is Xk9#mPq2, keep it safe", "the client secret is {R}, keep it safe"),
    ("db password was changed to P@ssw0rd99", "db password was changed to {R}"),
    ("the passphrase is still c0rrect-h0rse", "the passphrase is still {R}"),
    ("Passwords are Admin123 for the staging box", "Passwords are {R} for the staging box"),
    ("the secret was 9f8e7d6c5b", "the secret was {R}"),
    ("the root password is r00t!pw; use it once", "the root password is {R}; use it once"),
]
PROSE_KEPT = [
    "the password is stored in the vault",
    "the password is incorrect",
    "the password is too short",
    "password is required",
    "token is expired",
    "the secret is to cache it",
    "The password is Incorrect",
    "the token is auto-generated",
    "the secret is base64-encoded.",
    "the password is hashed with bcrypt",
    "password is `settings.DB_PASSWORD`",
    "the password is $DB_PASSWORD",
    "the password is ~/.pgpass",
    "the password is os.environ['DB_PASS']",
    "the password is get_password()",
    "the token is GitHub's",
    "the token is sent to bob@example.com",
    "the password is (empty)",
    "passwd root",
    "password reset flow in auth.py",
    "passwords are hashed",
    "the token is valid for 3600 seconds",
    "the API key is read from the environment",
    "first pass: parse the file",
    "the token is SHA256-signed",
    "the password is https://vault.example.com/item",
    "the secret is [REDACTED]",
    "my password was reset yesterday",
    "the access token is short-lived",
    "password hashing uses argon2id",
    "the password is wrong!!",
    "the token is invalid?! retrying",
    "password ;;;;;a",
]


@pytest.mark.parametrize(("text", "expected"), PROSE_SECRETS)
def test_prose_that_states_a_secret_loses_it(text: str, expected: str):
    assert redact(text) == expected.format(R=R)


@pytest.mark.parametrize("text", PROSE_KEPT)
def test_prose_about_a_secret_is_kept(text: str):
    assert redact(text) == text


def test_the_prose_tables_are_large():
    assert len(PROSE_SECRETS) >= 20 and len(PROSE_KEPT) >= 20


INVISIBLES = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


def full_width(text: str) -> str:
    """``text`` in full-width forms, which NFKC folds back (``ｐａｓｓｗｏｒｄ＝ｘ``)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def hide_in(word: str, text: str, char: str) -> str:
    """``text`` with ``char`` inside every ``word`` (after its first two letters)."""
    return text.replace(word, word[:2] + char + word[2:])


UNICODE_CASES = (
    [
        ("ｐａｓｓｗｏｒｄ＝ｘ", f"ｐａｓｓｗｏｒｄ＝{R}"),
        ("ｐａｓｓｗｏｒｄ=hunter2 and more", f"ｐａｓｓｗｏｒｄ={R} and more"),
        ("the ＡＰＩ＿ＫＥＹ: abc123, then", f"the ＡＰＩ＿ＫＥＹ: {R}, then"),
        ("𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝=abc", f"𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝={R}"),  # mathematical bold
        ("conﬁg: secret=ﬁve5", f"conﬁg: secret={R}"),  # a ligature in the value
        ("password\u00a0is hunter2!x9", f"password\u00a0is {R}"),  # no-break space
        ("café — “quoted” … token=abc", f"café — “quoted” … token={R}"),
        ("ｇｈｐ＿" + full_width("AbC1" * 9), R),
        ("ghp_" + "AbC1\u200b" * 9 + " end", f"{R}\u200b end"),
    ]
    + [(hide_in("password", "db password=hunter2 ok", char), None) for char in INVISIBLES]
    + [(hide_in("password", "the password is Tr0ub4dor&3", char), None) for char in INVISIBLES]
)


@pytest.mark.parametrize(("text", "expected"), UNICODE_CASES)
def test_a_key_or_token_in_disguise_is_redacted(text: str, expected: str | None):
    out = redact(text)
    if expected is not None:
        assert out == expected
    assert "hunter2" not in out and "Tr0ub4dor" not in out and MARKER in out
    assert redact(out) == out and contains_secret(text)


@pytest.mark.parametrize(
    "text",
    [
        "café — “quoted” … résumé naïve",
        "日本語のテキスト、ｔｏｋｅｎ数を数える",  # full-width, but no key=value
        "ｐａｓｓ　ｔｈｅ　ｓａｌｔ",  # full-width prose
        "the ｐａｓｓｗｏｒｄ is ｉｎｃｏｒｒｅｃｔ",
        "zero\u200bwidth\u200dtext\ufeff",
        "emoji 🎉 and e\u0301 combining",
    ],
)
def test_text_beyond_ascii_without_a_secret_is_kept(text: str):
    assert redact(text) == text and not contains_secret(text)


def test_a_key_in_disguise_names_a_secret_in_a_mapping():
    value = {"ｐａｓｓｗｏｒｄ": "x", "pass\u200bword": "y", "café": "z"}
    assert redact_value(value) == {"ｐａｓｓｗｏｒｄ": R, "pass\u200bword": R, "café": "z"}


@pytest.mark.parametrize(
    ("kind", "secret", "text"), CORPUS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(CORPUS)]
)
def test_every_credential_of_the_corpus_is_redacted_in_full_width(
    kind: str, secret: str, text: str
):
    out = redact(full_width(text))
    assert leaked(secret, out) == [], f"{kind}: {out!r}"
    assert redact(out) == out


def test_ascii_text_never_imports_unicodedata() -> None:
    code = (
        "import sys\n"
        "from cortex.core import redaction as r\n"
        "r.redact('db password=hunter2, the token is abc123def456 ' + 'x' * 300)\n"
        "before = 'unicodedata' in sys.modules\n"
        "r.redact('ｐａｓｓｗｏｒｄ＝ｘ')\n"
        "print(before, 'unicodedata' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


# Fuzz: the invariants, on text built from the pieces secrets are made of, disguised or not.
DISGUISES = st.sampled_from(
    [full_width, lambda t: t, *(lambda t, c=c: c.join(t) for c in "\u200b\ufeff")]
)
WORDS = (
    "the a password passwd pass token secret api key is was to for now set stored required "
    "expired incorrect cache vault in it hashed short auto generated".split()
)


@given(st.lists(st.sampled_from(WORDS), max_size=12), st.sampled_from([" ", ", ", ". ", "; "]))
def test_prose_without_digits_or_symbols_is_never_changed(words: list[str], glue: str):
    text = glue.join(words)
    assert redact(text) == text


@given(
    st.lists(
        st.one_of(st.sampled_from(WORDS), st.text(alphabet="abcdefghijklmnopqrstuvwxyz .,;!?\n")),
        max_size=20,
    ).map(" ".join)
)
@example("the password is stored in the vault; pass the token to the secret api key reader")
def test_lowercase_prose_is_never_changed(text: str):
    # Words and sentence punctuation, no digit, capital, symbol, ":" or "=": nothing a secret
    # is made of or stated with ("password: x" is a key and its value), so never a span.
    assert redact(text) == text and _spans(text) == []


@given(st.sampled_from(CORPUS), DISGUISES, st.text(max_size=20), st.text(max_size=20))
def test_a_corpus_secret_in_any_disguise_and_any_company_is_redacted(
    item: tuple[str, str, str], disguise, before: str, after: str
):
    kind, secret, text = item
    out = redact(f"{before} {disguise(text)} {after}")
    assert leaked(secret, out) == [], f"{kind}: {out!r}"
    assert redact(out) == out


def test_the_table_of_folded_characters_stays_bounded():
    from cortex.core.redaction import _shown

    every = "".join(chr(code) for code in range(0x4E00, 0x4E00 + 70_000))
    assert redact("token=" + every) == "token=" + R
    assert redact("ｔｏｋｅｎ " + every) == "ｔｏｋｅｎ " + every
    assert 128 < len(_shown()) <= 65_536


def test_the_folding_class_is_every_character_nfkc_turns_to_ascii():
    """``_FOLDS_TO_ASCII`` is data taken from ``unicodedata``; this recomputes it (a newer
    Unicode may add characters: the failure lists them)."""
    import unicodedata

    from cortex.core.redaction import _folds

    leaders = {"\u2024", "\u2025", "\u2026"}  # one, two and three dots: prose's, left alone
    missing, extra = [], []
    for code in range(0x80, 0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or char in leaders:
            continue
        shown = unicodedata.normalize("NFKC", char)
        folds = shown != char and any(c.isascii() for c in shown)
        if folds and not _folds(char):
            missing.append(f"0x{code:X}")
        elif not folds and code not in INVISIBLE_CODES and _folds(char):
            extra.append(f"0x{code:X}")
    assert (missing, extra) == ([], [])


INVISIBLE_CODES = {0xAD, 0x180E, *range(0x200B, 0x2010), *range(0x202A, 0x202F)} | {
    *range(0x2060, 0x2065),
    *range(0x2066, 0x206A),
    0xFEFF,
}


@pytest.mark.parametrize(
    ("text", "imported"), [("café — “quoted” … résumé 🎉", False), ("naïve, ½ not: 中文", True)]
)
def test_text_that_shows_as_it_is_costs_no_import(text: str, imported: bool) -> None:
    code = (
        "import sys\n"
        "from cortex.core import redaction as r\n"
        f"out = r.redact({text!r} + ' token is expired' + 'x' * 300)\n"
        "print('unicodedata' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [str(imported)]  # ½ folds to 1⁄2: it is looked at
