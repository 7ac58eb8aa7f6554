"""Credential redaction: every secret-looking span becomes ``[REDACTED]`` before it is stored.

What is recognised:

- ``key=value`` and ``key: value`` for secret-sounding keys (``password``, ``passwd``,
  ``pwd``, ``passphrase``, ``passcode``, secrets, tokens, API keys, private and access keys,
  credentials, ``Authorization`` headers, inside longer names too: ``DB_PASSWORD``,
  ``MYSQL_PWD``, ``client_secret``, ``refresh_token``, ``secretKey``); the key is kept
  (``api_key=[REDACTED]``), the separator must be on the same line, a quoted value is
  replaced inside its quotes. ``pass`` alone is a key only as ``pass=``, a quoted
  ``"pass":`` or the end of a name (``DB_PASS``), never inside a word (``bypass``). Any
  other ``*key``/``*hmac``/``*signature`` name (``SIGNING_KEY``, ``AccountKey``) counts when
  its value looks like key material: 16+ characters of letters, digits and ``+/=_-`` with
  both letters and digits.
- Prose that states a secret: "the password is X", "my token was X", "password for root is:
  X", "changed the password to X", "passwd X", YAML's ``pass: X``. X is redacted only when
  it looks like one (``_looks_secret``): 6+ characters with a digit, a symbol or an inner
  capital (``hunter2!x9``, ``Tr0ub4dor&3``, ``hunterTwo``), and not a reference to one
  (``$DB_PASS``, ``~/.pgpass``, ``settings.PASSWORD``, ``get_password()``, a URL or an
  e-mail address), words joined by punctuation (``auto-generated``, ``wrong!!``) or a name
  (``GitHub``, ``SHA256``). "The password is required", "the token is expired" and "the
  secret is to cache it" are kept; so is a passphrase of plain words.
- ``Cookie:`` and ``Set-Cookie:`` headers: their ``name=value`` pairs, whole.
- Command lines: ``--password VALUE`` (and ``--token``, ``--secret``, ``--api-key``,
  ``--cookie``...),
  ``mysql ... -pVALUE``, ``sshpass -p VALUE``, ``curl -u user:VALUE``.
- Connection strings: the password of ``scheme://user:password@host``, with or without a user.
- Provider formats with a distinctive prefix (about fifty: OpenAI and Anthropic ``sk-``,
  GitHub, GitLab, AWS, Slack, Stripe, Google, Hugging Face, npm, PyPI, SendGrid, Twilio,
  DigitalOcean, Shopify, Vault, Grafana, Databricks, Docker Hub, Sentry...), JWTs, bearer
  tokens, PEM private key blocks.
- Random-looking runs: 32+ characters of base64 that mix upper case, lower case and digits
  (git SHAs, hex digests and UUIDs have no upper case and are kept), and URL-safe runs with
  ``-``/``_`` that also carry the character entropy of random key material (identifiers made
  of words do not).

Disguises: a text beyond ASCII is also read as it shows (``_unveiled``): invisible format
characters (zero-width space, joiners, word joiner, byte order mark, soft hyphen, direction
marks) dropped and every character that NFKC folds to ASCII folded, so ``pass\u200bword=x``,
``ｐａｓｓｗｏｒｄ＝ｘ`` and mathematical or ligature letters are ``password=x``. Every rule
runs on that copy too, and a span found there is mapped back to the characters it came
from: the stored text keeps its own characters everywhere else
(``ｐａｓｓｗｏｒｄ＝[REDACTED]``).

How it stays fast: most text holds no secret, and a text with none of the rules' guard
literals and no long unbroken piece is returned after one scan of each kind (``_quiet``);
otherwise every rule is guarded by a literal that must occur in the text
(``str.__contains__`` at C speed) before its regular expression runs;
patterns are compiled on first use, not at import, and a short text's result is kept. Case-
insensitive rules run on a lowercased copy of the same length, each rule reports the
secret's span, and the spans are merged and replaced once. ``redact`` repeats until nothing
changes (a few passes), so it is idempotent. ASCII text is never folded (``str.isascii`` is
O(1)); other text is folded only when one scan finds a character that shows other than it is
(``_folds``), and only then is ``unicodedata`` imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache, lru_cache

# Not ``from typing import TYPE_CHECKING``: the hook path need not pay for importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

MARKER = "[REDACTED]"
_MAX_PASSES = 4
_WORD = "A-Za-z0-9_"
# Provider tokens: (literal prefix, what follows it). The whole match is the secret; the
# prefix must not follow a word character.
_PREFIXED = (
    ("sk-", r"[A-Za-z0-9_-]{20,}"),  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), OpenRouter
    ("sk.eyJ", r"[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{10,}"),  # Mapbox secret tokens
    ("gh", r"[pousr]_[A-Za-z0-9]{30,}"),  # GitHub ghp_, gho_, ghu_, ghs_, ghr_
    ("github_pat_", r"[A-Za-z0-9_]{22,}"),  # GitHub fine-grained tokens
    ("glpat-", r"[A-Za-z0-9_-]{20,}"),  # GitLab personal access tokens
    ("gldt-", r"[A-Za-z0-9_-]{20,}"),  # GitLab deploy tokens
    ("glsa_", r"[A-Za-z0-9_]{32,}"),  # Grafana service account tokens
    ("AKIA", r"[A-Z0-9]{16}(?![A-Za-z0-9_])"),  # AWS access key ids
    ("ASIA", r"[A-Z0-9]{16}(?![A-Za-z0-9_])"),  # AWS temporary access key ids
    ("LTAI", r"[A-Za-z0-9]{12,30}(?![A-Za-z0-9])"),  # Alibaba Cloud access keys
    ("xox", r"[abprse]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    ("xapp-", r"\d-[A-Za-z0-9-]{10,}"),  # Slack app-level tokens
    ("sk_", r"(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe secret keys
    ("rk_", r"(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe restricted keys
    ("whsec_", r"[A-Za-z0-9]{20,}"),  # Stripe webhook secrets
    ("AIza", r"[0-9A-Za-z_-]{35,}"),  # Google API keys
    ("ya29.", r"[0-9A-Za-z_-]{20,}"),  # Google OAuth access tokens
    ("GOCSPX-", r"[0-9A-Za-z_-]{20,}"),  # Google OAuth client secrets
    ("eyJ", r"[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),  # JWTs
    ("npm_", r"[A-Za-z0-9]{36}(?![A-Za-z0-9])"),  # npm tokens
    ("pypi-", r"[A-Za-z0-9_-]{50,}"),  # PyPI API tokens
    ("hf_", r"[A-Za-z0-9]{30,}"),  # Hugging Face tokens
    ("SG.", r"[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),  # SendGrid keys
    ("SK", r"[0-9a-f]{32}(?![0-9A-Za-z])"),  # Twilio API key SIDs
    ("do", r"[opr]_v1_[a-f0-9]{64}"),  # DigitalOcean dop_v1_, doo_v1_, dor_v1_
    ("shp", r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),  # Shopify access tokens
    ("hvs.", r"[A-Za-z0-9_-]{24,}"),  # HashiCorp Vault service tokens
    ("hvb.", r"[A-Za-z0-9_-]{24,}"),  # HashiCorp Vault batch tokens
    ("dapi", r"[a-f0-9]{32}(?:-\d)?(?![0-9a-f])"),  # Databricks tokens
    ("lin_api_", r"[A-Za-z0-9]{40,}"),  # Linear API keys
    ("PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}"),  # Postman API keys
    ("AGE-SECRET-KEY-1", r"[0-9A-Z]{58}"),  # age secret keys
    ("key-", r"[0-9a-f]{32}(?![0-9a-f])"),  # Mailgun API keys
    ("dp.", r"(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),  # Doppler tokens
    ("secret_", r"[A-Za-z0-9]{43}(?![A-Za-z0-9])"),  # Notion integration secrets
    ("ntn_", r"[A-Za-z0-9]{40,}"),  # Notion tokens
    ("ATATT", r"[A-Za-z0-9_=-]{50,}"),  # Atlassian API tokens
    ("sq0", r"(?:atp|csp)-[0-9A-Za-z_-]{22,}"),  # Square tokens
    ("EAA", r"[0-9A-Za-z]{60,}"),  # Facebook and Square access tokens
    ("gsk_", r"[A-Za-z0-9]{40,}"),  # Groq API keys
    ("r8_", r"[A-Za-z0-9]{37,}"),  # Replicate tokens
    ("xai-", r"[A-Za-z0-9]{40,}"),  # xAI API keys
    ("pplx-", r"[A-Za-z0-9]{40,}"),  # Perplexity API keys
    ("sbp_", r"[a-f0-9]{40}"),  # Supabase access tokens
    ("dckr_pat_", r"[A-Za-z0-9_-]{20,}"),  # Docker Hub access tokens
    ("rubygems_", r"[a-f0-9]{48}"),  # RubyGems API keys
    ("NRAK-", r"[A-Z0-9]{27}"),  # New Relic user keys
    ("pscale_", r"(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}"),  # PlanetScale tokens and passwords
    ("fo1_", r"[A-Za-z0-9_-]{40,}"),  # Fly.io tokens
    ("pul-", r"[a-f0-9]{40}"),  # Pulumi access tokens
    ("sntrys_", r"[A-Za-z0-9+/=_-]{40,}"),  # Sentry org tokens
    ("sntryu_", r"[a-f0-9]{64}"),  # Sentry user tokens
    ("HRKU-", r"[A-Za-z0-9_-]{40,}"),  # Heroku API keys
)
# Formats whose secret is not at a literal's start: (guard literal, pattern). With a group
# ``s``, only that group is the secret.
_GUARDED = (
    ("atlasv1.", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),  # Terraform Cloud tokens
    (":AA", r"(?<!\d)\d{8,10}:AA[0-9A-Za-z_-]{33}"),  # Telegram bot tokens
    (":APA91b", r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,}"),  # Firebase server keys
    ("://", r"://[^\s:/@]*:(?P<s>[^\s/@]+)@"),  # URL passwords, with or without a user
    ("hooks.slack.com", r"https://hooks\.slack\.com/services/(?P<s>[A-Za-z0-9/_-]+)"),
)
# Case-insensitive rules, matched on a lowercased copy: (guard literals, pattern).
_VALUE = r"(?![\"']?\[redacted\])(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;)}\]]+)"
_SEPARATOR = r"[\"']?[ \t]*[:=][ \t]*"
_KEY_SUFFIX = r"(?:[_-](?:access[_-])?key|[_-]token|key)?"
_KEY_STEMS = (
    "pass(?:word|wd|phrase|code)",
    "pwd",
    "secret",
    "api[_-]?key",
    "token",
    "auth",
    "bearer",
    "private[_-]?key",
    "access[_-]?key",
    "credentials?",
)
# ``pass`` alone is a word of prose ("first pass: parse it"), a key only as ``pass=``, a
# quoted ``"pass":``, or the end of a longer name (``DB_PASS``, ``smtp-pass``). (Look-behinds
# after the word, not before it: the pattern's scan for the first letters of its words stays.)
_PASS_KEY = (
    r"pass(?:(?<=[_-]pass)|(?<![a-z0-9]pass)(?=[\"']?[ \t]*=)|(?<=[\"']pass)(?=[\"'][ \t]*:))"
)
_FLAG_NAMES = r"(?:[a-z]+-)*(?:password|passwd|pass|token|secret|api-?key|credentials?|cookie)"
_FLAG_VALUE = r"(?P<s>\"[^\"\n]*\"|'[^'\n]*'|(?![-\[])[^\s\"']+)"
_KEY_MATERIAL = r"(?P<s>(?=[a-z0-9+/_-]*\d)(?=[a-z0-9+/_-]*[a-z])[a-z0-9+/_-]{16,}={0,2})"
_FOLDED = (
    (("pass", "pwd", "secret", "key", "token", "auth", "bearer", "credential"), None),
    (
        ("authorization",),
        r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?:(?:bearer|basic|token|digest)[ \t]+)?+(?!\[redacted\])(?P<s>[^\s\"',;]+)",
    ),
    (
        ("bearer",),
        r"bearer(?<![a-z0-9_]bearer)[ \t]+"
        r"(?P<s>(?=[a-z._~+/-]*\d)[a-z0-9._~+/-]{16,}=*)",
    ),
    (
        ("cookie",),  # a Cookie or Set-Cookie header's name=value pairs: session secrets
        r"(?<![a-z0-9_-])(?:set-)?cookie[\"']?[ \t]*:[ \t]*[\"']?"
        r"(?!\[redacted\])(?P<s>[^\s=;,\"']+=[^\n\"']*)",
    ),
    (("--",), rf"(?<![\w-])--{_FLAG_NAMES}[ \t]+{_FLAG_VALUE}"),
    (
        ("-p",),
        r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n|;&]*?"
        r"[ \t]-p(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-][^\s]*)",
    ),
    (("sshpass",), r"\bsshpass[ \t]+-p[ \t]*(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)"),
    (("-u", "--user"), r"(?:[ \t]-u|--user)[ \t]+[^\s:\"']+:(?P<s>[^\s\"']+)"),
    (
        ("key", "hmac", "signature"),
        r"(?<![a-z0-9])[a-z0-9_.-]*(?:key|hmac|signature)"
        rf"[\"']?[ \t]*[:=][ \t]*[\"']?{_KEY_MATERIAL}",
    ),
)
# Prose that states a secret ("the password for root is: hunter2!x9", "passwd Tr0ub4dor&3",
# YAML's ``pass: ...``): (guard, pattern), the value counting only when it looks like one
# (``_looks_secret``). Each pattern starts with its guard word, which ``re`` then finds by a
# literal search (a look-behind first, or an alternation of words, is tried at every
# position, several times slower); that no letter or digit comes before it is checked after.
_PROSE_VALUE = (
    r"[ \t]*(?![\"'`]?\[redacted\])"
    r"(?P<s>\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`|[^\s\"'`][^\s\"`]*)"
)
_PROSE_IS = (  # "(s) (for root) is (now): ", "was", "are set to"...
    r"s?(?:[ \t]+for[ \t]+[^\s]+)?[ \t]+(?:is|was|are|were)"
    r"(?:[ \t]+(?:now|still|set[ \t]+to|changed[ \t]+to))?[ \t]*:?"
)
_PROSE = (
    (
        "pass",
        rf"pass(?:(?:word|wd|phrase|code)(?:{_PROSE_IS}|[ \t]+(?:to(?=[ \t]))?)|[ \t]*:)"
        + _PROSE_VALUE,
    ),
    ("secret", f"secret{_PROSE_IS}{_PROSE_VALUE}"),
    ("token", f"token{_PROSE_IS}{_PROSE_VALUE}"),
    ("api", rf"api[ _-]?key{_PROSE_IS}{_PROSE_VALUE}"),
)
_NOT_SECRETS = frozenset(
    # words with digits or inner capitals that name things, not secrets
    "base32 base64 sha1 sha256 sha384 sha512 md5 utf8 utf16 oauth2 x509 pkcs1 pkcs8 pkcs12 "
    "aes128 aes256 hs256 hs512 rs256 rs512 es256 ed25519 argon2 argon2id bcrypt2 p256 e2e "
    "v1 v2 v3 v4 2fa oauth github gitlab bitbucket postgresql mysql mongodb javascript typescript "
    "graphql fastapi nodejs openai keepass lastpass 1password iphone macos ios devops "
    "dockerhub youtube linkedin paypal".split()
)
_PEM_TAIL = "PRIVATE KEY-----"
_SHORTEST_TOKEN = 20
"""No provider format above is shorter than this (prefix included)."""


@cache
def _rules() -> tuple[
    tuple[tuple[str, str], ...],
    tuple[tuple[str, str], ...],
    tuple[tuple[tuple[str, ...], str], ...],
    re.Pattern[str],
]:
    """The rules: (guard, pattern source) for the original text, the subset that also applies
    to text without a 20-character piece, (guards, pattern source) for the lowercased copy, and
    one compiled pattern that finds any guard of the lowercased rules (most text has none: one
    scan). A rule's own pattern is compiled (``_compiled``) the first time its guard occurs."""
    original = [
        (prefix, f"{re.escape(prefix)}(?<![{_WORD}]{re.escape(prefix)}){body}")
        for prefix, body in _PREFIXED
    ]
    original += _GUARDED
    stems = "|".join(_KEY_STEMS)
    key_values = rf"(?:{stems}|{_PASS_KEY}){_KEY_SUFFIX}{_SEPARATOR}{_VALUE}"
    folded = [(guards, pattern or key_values) for guards, pattern in _FOLDED]
    short = tuple((guard, pattern) for guard, pattern in original if guard == "://")
    # Longest first (an alternation takes the first that matches), ties by text: the same
    # pattern text in every process, so that its compiled program is found in the cache.
    every = {guard for guards, _ in _FOLDED for guard in guards}  # (and in prose: pass, key...)
    literals = sorted(every, key=lambda guard: (-len(guard), guard))
    any_guard = re.compile("|".join(map(re.escape, literals)))
    return tuple(original), short, tuple(folded), any_guard


@cache
def _compiled(source: str) -> re.Pattern[str]:
    """A rule's pattern, compiled once per process and only when some text has its guard (a
    start compiles two or three of the seventy rules, not all of them)."""
    return re.compile(source)


@cache
def _runs() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Base64 runs, URL-safe runs, and PEM begin/end lines (compiled on first use)."""
    return (
        re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{32,}={0,2}(?![A-Za-z0-9+/])"),
        re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])"),
        re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----"),
        re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY-----"),
    )


_PEM_BODY = r"(?:\s*+[A-Za-z0-9+/=]{16,}+)*+"
"""A block cut short: whitespace-separated base64 chunks of 16+ characters (not prose)."""


def _pem_spans(text: str) -> Iterator[tuple[int, int]]:
    """Each private-key block, from BEGIN to END (or to the end of its body if cut short)."""
    if _PEM_TAIL not in text:
        return
    _, _, begin_line, end_line = _runs()
    pos = 0
    end_missing = False
    while (begin := begin_line.search(text, pos)) is not None:
        end = None if end_missing else end_line.search(text, begin.end())
        if end is None:
            end_missing = True  # no END after here, so none after any later BEGIN either
            body = _compiled(_PEM_BODY).match(text, begin.end())
            pos = body.end() if body else begin.end()
        else:
            pos = end.end()
        yield begin.start(), pos


def _group_spans(rule: str, source: str) -> Iterator[tuple[int, int]]:
    pattern = _compiled(rule)
    has_group = "s" in pattern.groupindex
    for match in pattern.finditer(source):
        start, end = match.span("s") if has_group else match.span()
        if end - start >= 2 and source[start] in "\"'" and source[end - 1] == source[start]:
            start, end = start + 1, end - 1
        yield start, end


def _entropy(run: str) -> float:
    """Shannon entropy of ``run``'s characters, in bits per character."""
    from math import log2  # (only text with a long unbroken run gets here: a hook seldom)

    counts: dict[str, int] = {}
    for char in run:
        counts[char] = counts.get(char, 0) + 1
    total = len(run)
    return -sum(n / total * log2(n / total) for n in counts.values())


def _mixes_kinds(run: str) -> bool:
    """Upper case, lower case and digits together, as random key material has them."""
    return (
        any(c.isdigit() for c in run)
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
    )


def _random_run_spans(text: str) -> Iterator[tuple[int, int]]:
    base64_run, urlsafe_run, _, _ = _runs()
    for match in base64_run.finditer(text):
        if _mixes_kinds(match.group()):
            yield match.span()
    for match in urlsafe_run.finditer(text):
        run = match.group()
        if ("-" in run or "_" in run) and _mixes_kinds(run) and _entropy(run) >= 4.4:
            yield match.span()


def _prose_spans(text: str, folded: str) -> Iterator[tuple[int, int]]:
    """The values that prose states for a secret (matched on ``folded``), when ``text`` there
    looks like a secret: a word of prose after "the password is" is not one."""
    for guard, rule in _PROSE:
        if guard not in folded:
            continue
        for match in _compiled(rule).finditer(folded):
            if match.start() and folded[match.start() - 1].isalnum():
                continue  # "compass: ...", "bypassword"
            start, end = match.span("s")
            if end - start >= 2 and folded[start] in "\"'`" and folded[end - 1] == folded[start]:
                start, end = start + 1, end - 1
            kept = text[start:end].rstrip(".,;:)]}>")
            if _looks_secret(kept):
                yield start, start + len(kept)


def _looks_secret(value: str) -> bool:
    """Whether a value that prose gives for a password or token looks like one: 6+ characters
    with a digit, a symbol or an inner capital (``hunter2!x9``, ``Tr0ub4dor&3``), and not a
    reference to one (``$DB_PASS``, ``~/.pgpass``, ``settings.PASSWORD``, a URL or an address),
    or words joined by punctuation (``auto-generated``, ``base64-encoded``, ``wrong!!``) or a
    name (``GitHub``)."""
    if len(value) < 6 or _is_word(value) or value[0] in "$%/~<{([\\" or value.startswith("./"):
        return False  # (most prose: one word)
    if "://" in value or _compiled(r"[^@\s]+@[\w-]+(?:\.[\w-]+)+").fullmatch(value):
        return False
    if value.endswith(("'s", "’s")):
        value = value[:-2]
    return not all(map(_is_word, _compiled(r"[-_.,;:!?()\[\]{}'\"]+").split(value)))


def _is_word(piece: str) -> bool:
    """A piece of a value that reads as a word or a name: letters in lower case, upper case
    or capitalized, or a known name with digits or inner capitals."""
    if piece.isalpha() and (piece.islower() or piece.isupper() or piece.istitle()):
        return True
    return not piece or piece.lower() in _NOT_SECRETS


def _fold(text: str) -> str:
    """``text`` lowercased for the case-insensitive rules, the same length as ``text`` (U+0130
    is the one code point whose lowercase is two characters: it is mapped first), so that
    spans found in it apply to ``text``."""
    return text.replace("\u0130", "i").lower()


_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
"""Format characters that show nothing (zero-width spaces and joiners, word joiner, byte order
mark, soft hyphen, direction marks): one inside ``pass\u200bword`` hides the key from a rule."""
_FOLDS_TO_ASCII = (
    "0xA0 0xA8 0xAA 0xAF 0xB2-0xB4 0xB8-0xBA 0xBC-0xBE 0x132-0x133 0x13F-0x140 0x149 0x17F "
    "0x1C4-0x1CC 0x1F1-0x1F3 0x2B0 0x2B2-0x2B3 0x2B7-0x2B8 0x2D8-0x2DD 0x2E1-0x2E3 0x37A 0x37E "
    "0x384-0x385 0x1D2C 0x1D2E 0x1D30-0x1D31 0x1D33-0x1D3A 0x1D3C 0x1D3E-0x1D43 0x1D47-0x1D49 "
    "0x1D4D 0x1D4F-0x1D50 0x1D52 0x1D56-0x1D58 0x1D5B 0x1D62-0x1D65 0x1D9C 0x1DA0 0x1DBB "
    "0x1E9A 0x1FBD 0x1FBF-0x1FC1 0x1FCD-0x1FCF 0x1FDD-0x1FDF 0x1FED-0x1FEF 0x1FFD-0x1FFE "
    "0x2000-0x200A 0x2017 0x202F 0x203C 0x203E 0x2047-0x2049 0x205F 0x2070-0x2071 "
    "0x2074-0x207A 0x207C-0x208A 0x208C-0x208E 0x2090-0x2093 0x2095-0x209C 0x20A8 "
    "0x2100-0x2103 0x2105-0x2106 0x2109-0x210E 0x2110-0x2113 0x2115-0x2116 0x2119-0x211D "
    "0x2120-0x2122 0x2124 0x2128 0x212A 0x212C-0x212D 0x212F-0x2131 0x2133-0x2134 0x2139 "
    "0x213B 0x2145-0x2149 0x2150-0x217F 0x2189 0x2460-0x24EA 0x2A74-0x2A76 0x2C7C-0x2C7D "
    "0x3000 0x309B-0x309C 0x3200-0x321E 0x3220-0x3243 0x3250-0x325F 0x32B1-0x32CF "
    "0x3358-0x337A 0x3380-0x33FF 0xA7F2-0xA7F4 0xFB00-0xFB06 0xFB29 0xFC5E-0xFC63 "
    "0xFDFA-0xFDFB 0xFE10 0xFE13-0xFE16 0xFE19 0xFE30 0xFE33-0xFE38 0xFE47-0xFE50 0xFE52 "
    "0xFE54-0xFE57 0xFE59-0xFE5C 0xFE5F-0xFE66 0xFE68-0xFE6B 0xFE70 0xFE72 0xFE74 0xFE76 "
    "0xFE78 0xFE7A 0xFE7C 0xFE7E 0xFF01-0xFF5E 0xFFE3 0x107A5 0x1D400-0x1D454 0x1D456-0x1D49C "
    "0x1D49E-0x1D49F 0x1D4A2 0x1D4A5-0x1D4A6 0x1D4A9-0x1D4AC 0x1D4AE-0x1D4B9 0x1D4BB "
    "0x1D4BD-0x1D4C3 0x1D4C5-0x1D505 0x1D507-0x1D50A 0x1D50D-0x1D514 0x1D516-0x1D51C "
    "0x1D51E-0x1D539 0x1D53B-0x1D53E 0x1D540-0x1D544 0x1D546 0x1D54A-0x1D550 0x1D552-0x1D6A3 "
    "0x1D7CE-0x1D7FF 0x1F100-0x1F10A 0x1F110-0x1F12E 0x1F130-0x1F14F 0x1F16A-0x1F16C 0x1F190 "
    "0x1FBF0-0x1FBF9 "
)
"""Every code point whose NFKC form holds an ASCII character (full-width forms, mathematical
and enclosed letters and digits, ligatures, super- and subscripts, compatibility spaces...),
but the one-, two- and three-dot leaders (``…`` is common in prose and only dots): the
characters that can make ASCII a rule reads. Found by running ``unicodedata`` over every code
point (a test does it again), kept here so that the check costs no import."""


@cache
def _folding() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """One character that shows other than it is: (an invisible one or one of
    ``_FOLDS_TO_ASCII`` below U+10000, one of those above). Two regular expressions' classes:
    ``re`` scans the first at C speed (a bitmap), while the second is a list of ranges that
    each character would be held against, so it is only asked about characters above U+FFFF
    (``_folds``)."""
    low: list[str] = []
    high: list[str] = []
    for item in _FOLDS_TO_ASCII.split():
        first, _, last = item.partition("-")
        (low if int(first, 16) < 0x10000 else high).append(
            chr(int(first, 16)) + (f"-{chr(int(last, 16))}" if last else "")
        )
    return _compiled(f"[{_INVISIBLE}{''.join(low)}]"), _compiled(f"[{''.join(high)}]")


def _folds(text: str) -> bool:
    """Whether ``text`` holds a character that shows other than it is (``_folding``)."""
    low, high = _folding()
    if low.search(text) is not None:
        return True
    astral = "".join(_compiled("[\U00010000-\U0010ffff]").findall(text))  # emoji, mostly
    return bool(astral) and high.search(astral) is not None


@cache
def _shown() -> dict[int, str]:
    """What the rules see for each character, by code point (``str.translate``'s table): every
    ASCII character itself, then each other one as texts bring it (``_shown_for``)."""
    return {code: chr(code) for code in range(128)}


def _shown_for(text: str) -> dict[int, str]:
    """A table (``_shown``) that holds every character of ``text``: an invisible character maps
    to nothing, one that folds to ASCII (``_folding``) to its NFKC form, any other to itself.
    Each is looked at once per process; the shared table keeps at most 65,536 (text made of
    every code point gets a table of its own), so that input cannot grow it without bound."""
    from unicodedata import normalize

    table = _shown()
    new = [char for char in set(text) if ord(char) not in table]
    if len(table) + len(new) > 65536:
        table = dict(table)
    invisible = _compiled(f"[{_INVISIBLE}]")
    for char in new:
        if invisible.match(char):
            table[ord(char)] = ""
        else:
            table[ord(char)] = normalize("NFKC", char) if _folds(char) else char
    return table


def _unveiled(text: str) -> tuple[str, list[int] | None] | None:
    """``text`` as the rules should see it when it hides something from them, else ``None``:
    invisible format characters dropped and those that fold to ASCII NFKC-folded (full-width
    ``ｐａｓｓｗｏｒｄ`` is ``password``), with the index in ``text`` of each character of the
    result (``None`` when it is the same place: every character folded to one), so that a
    span found there maps back. ASCII text returns at once (``isascii`` is O(1)), other text
    after one scan (``_folds``); ``unicodedata`` is imported only for text that folds."""
    if text.isascii() or not _folds(text):
        return None
    table = _shown_for(text)
    plain = text.translate(table)
    if all(len(table[ord(char)]) == 1 for char in set(text)):
        return plain, None
    index: list[int] = []
    pos = 0
    for run in _compiled(r"[^\x00-\x7f]+").finditer(text):
        start, end = run.span()
        index.extend(range(pos, start))
        for at in range(start, end):
            index.extend([at] * len(table[ord(text[at])]))
        pos = end
    index.extend(range(pos, len(text)))
    return plain, index


def _spans(text: str) -> list[tuple[int, int]]:
    """Every secret's span in ``text``, found in ``text`` as it is and, when it hides something
    from the rules (``_unveiled``), in what it shows."""
    spans = _rule_spans(text)
    unveiled = _unveiled(text)
    if unveiled is not None and not _no_rule_matches(unveiled[0]):
        plain, index = unveiled
        found = _rule_spans(plain)
        if index is not None:
            found = [(index[start], index[end - 1] + 1) for start, end in found if end > start]
        spans.extend(found)
    return spans


def _rule_spans(text: str) -> list[tuple[int, int]]:
    original, short, folded_rules, any_guard = _rules()
    spans = list(_pem_spans(text))
    # Every provider token and random run is 20+ characters without white space: text with
    # no such piece (most prose) skips those rules. URL passwords can be shorter.
    longest = max(map(len, text.split()), default=0)
    for guard, pattern in original if longest >= _SHORTEST_TOKEN else short:
        if guard in text:
            spans.extend(_group_spans(pattern, text))
    folded = _fold(text)
    if any_guard.search(folded) is not None:
        for guards, pattern in folded_rules:
            if any(guard in folded for guard in guards):
                spans.extend(_group_spans(pattern, folded))
        spans.extend(_prose_spans(text, folded))
    if longest >= 32:
        spans.extend(_random_run_spans(text))
    return spans


def _one_pass(text: str) -> str:
    # A span that is already masked (the marker, or ``***`` as URLs are shown) stays as it is.
    spans = sorted(
        s for s in _spans(text) if text[s[0] : s[1]] != MARKER and text[s[0] : s[1]].strip("*")
    )
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


SHORT_TEXT = 256
"""Texts up to this long (labels, names, ids, metric fields) are redacted once per process."""


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``[REDACTED]`` (keys of ``key=value`` kept)."""
    if not isinstance(text, str) or not text:
        return text
    if len(text) <= SHORT_TEXT:
        return _redact_short(text)
    return _redact(text)


@lru_cache(maxsize=4096)
def _redact_short(text: str) -> str:
    # A restore redacts the same pin labels, task titles and metric fields at every start.
    return _redact(text)


def _quiet(text: str) -> bool:
    """Whether no rule can match ``text``, as it is or as it shows (``_unveiled``: ASCII text
    is not looked at twice)."""
    if not _no_rule_matches(text):
        return False
    unveiled = _unveiled(text)
    return unveiled is None or _no_rule_matches(unveiled[0])


def _no_rule_matches(text: str) -> bool:
    """Whether no rule can match ``text`` as it is: no ``://``, no guard of the case-insensitive
    rules (the PEM tail holds one, ``key``) and no piece of 20+ characters without white space
    (every provider token, and random runs, are longer). Most text is quiet, and this one scan
    of each kind costs about half of running ``_spans`` to find nothing."""
    if "://" in text:
        return False
    *_, any_guard = _rules()
    if any_guard.search(_fold(text)) is not None:
        return False
    return max(map(len, text.split()), default=0) < _SHORTEST_TOKEN


def _redact(text: str) -> str:
    if _quiet(text):
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


def refuse_secret(value: str | None, what: str) -> str | None:
    """``value`` as it is, or a ``ValidationError`` when it holds a credential. For ids (a
    user, an agent, a task): redacted, two different ones could become one."""
    if value and contains_secret(value):
        from cortex.errors import ValidationError

        raise ValidationError(f"that {what} looks like a credential; pick another")
    return value


_LAST_WORD = re.compile(r"\s\S*\Z")


def clip(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, less the word the cut goes through: a
    credential cut short is no longer recognised as one, and its start would be kept (redact
    after clipping). Text of one single word is cut where it is (what is left of a key
    there is a run long enough to be recognised)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    if text[limit].isspace():
        return head
    word = _LAST_WORD.search(head)
    return head[: word.start() + 1] if word is not None else head


def redact_value(value: Any) -> Any:
    """Redact every string inside ``value`` (dicts, lists, tuples), keys too, keeping shape.

    A string stored under a secret-looking key (``password``, ``api_key``, ``token``...) is
    replaced whole, since the value alone may not look like a credential. A key that holds a
    credential is redacted like any text; two keys that redact alike are both kept, the
    second with `` #2`` (and so on) after it.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[_redacted_key(key, out)] = _redact_item(key, item)
        return out
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, tuple):
        return tuple(redact_value(item) for item in value)
    return value


def _redacted_key(key: Any, taken: dict[Any, Any]) -> Any:
    """``key`` redacted, made unique among ``taken`` when redaction changed it."""
    if not isinstance(key, str):
        return key
    clean = redact(key)
    if clean == key:
        return key
    unique, n = clean, 1
    while unique in taken:
        n += 1
        unique = f"{clean} #{n}"
    return unique


def _redact_item(key: Any, item: Any) -> Any:
    if isinstance(key, str) and isinstance(item, str) and item and _secret_key_name(key):
        return MARKER
    return redact_value(item)


@cache
def _secret_key_pattern() -> re.Pattern[str]:
    stems = "|".join(_KEY_STEMS)
    return re.compile(rf"(?:(?:{stems}){_KEY_SUFFIX}|(?<![a-z0-9])pass)\Z", re.IGNORECASE)


@lru_cache(maxsize=512)
def _secret_key_name(key: str) -> bool:
    """Whether a mapping key names a secret (``password``, ``api_key``, ``GITHUB_TOKEN``...).

    Kept per key: payloads repeat a few names (a restore's metrics events, every start). A
    key that hides its name (``ｐａｓｓｗｏｒｄ``, ``pass\u200bword``) is read as it shows."""
    unveiled = _unveiled(key)
    return _secret_key_pattern().search(key if unveiled is None else unveiled[0]) is not None
