"""Search formulas: turning user text into safe query terms, and ranking the hits.

Pure: plain values in, plain values out (the current time is a parameter).

Query building. The user's text is tokenized here (Unicode words) and stop words are dropped
(natural-language questions otherwise match on "what", "did", "the"); a query of stop words
only keeps them, so it still finds something. The store gets these plain terms, ORed: a memory
needs one of them, and the index ranks those holding more (and rarer) ones first. The SQLite
backend quotes every term for FTS5 (``fts_query``), so ``"``, ``*``, ``-``, ``NEAR``, ``AND``,
``OR`` and ``:`` are literal text and never query syntax; on a large store it takes every
match of the rare terms (``rare_terms``) and scores its candidates with FTS5's own formula
(``bm25``).

Ranking. The store gives each candidate a text relevance in [0, 1] (SQLite: FTS5's
``bm25()``, lower is better, relative to the best candidate: ``relevances``), then::

    score = relevance * (0.8 + 0.2 * confidence) * layer_weight * recency * intent

    recency = 0.9 + 0.1 * 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS)
    intent  = 1.05 for remember_intent=explicit, else 1.0

so relevance dominates; confidence, layer, age and explicit intent break near-ties.

Query fit. Each candidate's score is then multiplied by how well it fits the question as a
whole (``query_fit``)::

    fit      = coverage * time * subject
    coverage = 1 - w + w * (share of the query's terms the memory holds), for 2+ terms
    w        = COVERAGE_WEIGHT * min(1, COVERAGE_FULL_WORDS / words in the memory)
    time     = 1 + TIME_CUE_BOOST when the question asks when (``asks_when``) and the
               memory names a time (``mentions_time``), else 1
    subject  = 1 + SUBJECT_BOOST when the memory's first word is one of the query's terms,
               else 1

BM25 sums its terms' weights, so a short memory holding one rare word of the question can
outrank one holding all of them; coverage favours the memory that answers the question's
every part. A long memory holds most words of any question, so there the share says little
and its weight fades. A question about when something happened is answered by a memory that
says when ("yesterday", "last week", "May 3", "2023"). A memory is usually about its first
word ("Caroline: I went to ...", "Postgres listens on 5432"): when that word is one the
question asks about, the memory is about the question's subject, not one that only mentions
it in passing ("Melanie: Thanks, Caroline!").

Dates. A question that names a day or a month ("on May 7, 2023", "7 May 2023", "2023-05-07",
"in October 2023"; with the search's time also "yesterday", "last Friday", "two weeks ago":
``query_dates``) asks about what was said then: a memory made within that span scores
``1 + DATE_BOOST`` times as much (``date_fit``). The date's own words rarely
appear in the memory that answers ("I went to the parade yesterday").

Session votes. A memory's session is evidence too: when several candidates come from the
session the memory was captured in, that conversation is about the query, and its other turns
vote for each other (``session_votes``)::

    voted = score + SESSION_VOTE_WEIGHT * (sum of the scores of the session's other candidates)

Measured on the LoCoMo and LongMemEval_S dev sets (``bench/retrieval``): it raises turn
recall@10 in every LoCoMo conversation and costs LongMemEval nothing.

Neighbours. The memories captured just before and just after a memory in its session (its
neighbours, in the store's capture order) are evidence as well: a conversation's answer sits
next to its question, and a short turn means what its neighbours say. Each candidate gets a
share of its candidate neighbours' scores, and a short one among the best candidates brings
its neighbours along even when they hold no query term (``neighbour_votes``,
``context_neighbours``)::

    voted     = score + NEIGHBOUR_VOTE_WEIGHT * (sum of its candidate neighbours' scores)
    neighbour = NEIGHBOUR_SHARE * voted score of the seed, for the neighbours of the first
                NEIGHBOUR_SEEDS candidates of at most CONTEXT_WORDS words

A long memory stands on its own, and its neighbours would crowd out the other sessions'
evidence (LongMemEval's user turns: each a request of its own). Only memories of one layer
and type are each other's neighbours (the service's rule: a rule is no turn's context).

Meaning (the optional embeddings extra). Each memory in scope also has a cosine similarity
to the question. The lexical ranking stays in charge: its scores, relative to its best hit,
get a bonus for the ``DENSE_POOL`` memories closest to the question in meaning, and those not
among the hits join them with it when ``closer`` is ``DENSE_JOIN`` or more (``dense_pool``
picks them, ``dense_scores`` adds ``dense_bonus``)::

    bonus  = DENSE_WEIGHT * length * closer ** 2
    closer = (cosine - median cosine of the scope) / (best cosine - median cosine)
    length = min(1, words in the memory / DENSE_FULL_WORDS)

where the median counts ``DENSE_POOL`` unrelated memories (cosine 0) besides the scope's, so
that in a scope of a few memories one close to the question still stands out.

A memory much closer to the question than the scope's typical one gains; one about as close
gains nothing. The bonus grows with the memory's length: the mean-pooled vector of a short
chat line says more about its register than its subject, and scores high against many a
question, while a long memory's says what it is about. What meaning finds that words do not
is the paraphrase ("getting married" for a question about weddings). Reciprocal rank fusion,
which this replaced, let the cosine ranking reorder the short turns of a conversation as
freely as the long ones and cost LoCoMo 19 points of adversarial recall@5
(``docs/benchmarks-history.md``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta

from cortex.clock import hours_between
from cortex.core.memory_models import EXPLICIT, LONG_TERM, RULE, WORKING, Memory

MAX_QUERY_TERMS = 32
"""Terms kept from one query: enough for any question, bounded for the index's sake."""
MAX_TERM_CHARS = 64
RECENCY_HALF_LIFE_DAYS = 30.0
LAYER_WEIGHTS = {RULE: 1.1, WORKING: 1.05, LONG_TERM: 1.0}
FREQUENT_DOCS = 1000
"""A term in more memories than this is "common": on a large store only its newest matches
are candidates, as ranking all of them would cost tens of milliseconds at a million memories
(each candidate is still scored by every query term)."""
RARE_BUDGET_DOCS = 1500
"""Most matches the ORed rare terms may bring as candidates (the rarest term always goes)."""
LARGE_STORE = 50_000
"""Below this many memories the index ranks every match: BM25 over all of them is cheap."""
COMMON_SET_TERMS = 4
"""The heaviest common terms whose every set a large store looks for (4 give 15 sets)."""
BM25_K1 = 1.2
BM25_B = 0.75
"""FTS5's ``bm25()`` constants (term-frequency saturation and length normalisation): a large
store's search scores its candidates with FTS5's formula (``bm25``)."""
DENSE_WEIGHT = 2.0
"""Most score meaning adds (the embeddings extra): twice the best lexical hit's."""
DENSE_POOL = 20
"""Memories, the most similar to the question first, whose meaning adds to their score."""
DENSE_FULL_WORDS = 400
"""Memories of this many words get all of ``DENSE_WEIGHT``; shorter ones their share of it."""
DENSE_JOIN = 0.5
"""A memory no word of the question found joins the hits only when at least this close
(``closer``: halfway from the scope's typical memory to the closest one)."""
COVERAGE_WEIGHT = 0.6
"""How much the share of the query's terms a memory holds counts in its fit (see above)."""
COVERAGE_FULL_WORDS = 100
"""Memories up to this many words get the whole coverage weight; longer ones less."""
TIME_CUE_BOOST = 0.5
"""Extra score for a memory that names a time, when the question asks when."""
SUBJECT_BOOST = 0.3
"""Extra score for a memory whose first word is a query term (its subject, see above)."""
DATE_BOOST = 1.0
"""Extra score for a memory made on the day (or in the month) the question names."""
DATED_MEANING_SHARE = 0.5
"""The share of meaning's bonus (``dense_bonus``) kept by a memory made outside the days a
relative date of the question names ("two weeks ago", "last Friday": ``relative_dates``).
The lexical side weighs a memory made then twice (``date_fit``), but meaning knows nothing of
time: a memory as close in meaning from another week outranked the one made then. A named
date is left alone: it may bound the question rather than date its answer ("as of November
2023"), and there the same share cost an answer made months before."""
SESSION_VOTE_WEIGHT = 0.1
"""Share of a session's other candidates' scores added to each of its candidates."""
NEIGHBOUR_VOTE_WEIGHT = 0.05
"""Share of a candidate's neighbours' scores added to its own, when they are candidates too."""
NEIGHBOUR_SHARE = 0.5
"""A short best candidate's neighbours join the candidates at this share of its score."""
NEIGHBOUR_SEEDS = 5
"""The best candidates whose neighbours may join (when short, see ``CONTEXT_WORDS``)."""
CONTEXT_WORDS = 25
"""A memory of at most this many words ("Where did you go?", "Rome, last week!") is read
with its neighbours; a longer one stands on its own."""
VOTE_POOL = 20
"""Candidates that vote (and are ranked) before a search cuts to its limit (at least twice
the limit). A pool of 50 measured the same on the dev sets and cost a quarter more per query."""
"""Reciprocal-rank-fusion constant (Cormack et al. 2009); 60 is the usual choice."""

_WORD = re.compile(r"\w+", re.UNICODE)

STOPWORDS = frozenset(
    """
    a about above after again against ago all also am an and any are aren as at be because
    been before being below between both but by can cannot could couldn did didn do does
    doesn doing don down during each else ever few for from further get got had hadn has
    hasn have haven having he her here hers herself him himself his how i if in into is isn
    it its itself just kind let like ll me mention mentioned mentions might more most much must
    mustn my myself no nor
    not now of off on once only or other ought our ours ourselves out over own please re
    recently same say said shan she should shouldn so some such tell than that the their
    theirs them themselves then there these they this those through to too under until up
    us ve very was wasn way we were weren what whatever when where whether which while who
    whom whose why will with won would wouldn yet you your yours yourself yourselves
    anything something thing things
    """.split()
)


def _words(lowered: str) -> list[str]:
    """The words of a lowercased text, each cut to ``MAX_TERM_CHARS``; no bare underscores."""
    return [cut for w in _WORD.findall(lowered) if (cut := w[:MAX_TERM_CHARS]).strip("_")]


def text_terms(text: str) -> list[str]:
    """The distinct search terms of ``text``: lowercased words, stop words dropped.

    A text of stop words only keeps them (so it still matches); at most ``MAX_QUERY_TERMS``.
    """
    words = _words(text.lower())
    kept = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(kept))[:MAX_QUERY_TERMS]


def query_terms(text: str) -> list[str]:
    """The search terms of a question: its ``text_terms`` without the words of its frame and
    of the time it asks about (``_NOT_TERMS``); a question of nothing else keeps all its
    words."""
    lowered = text.lower()
    kept = [w for w in _words(_NOT_TERMS.sub(" ", lowered)) if w not in STOPWORDS]
    return list(dict.fromkeys(kept or _words(lowered)))[:MAX_QUERY_TERMS]


def search_terms(text: str) -> list[str]:
    """What a search looks for: the ``query_terms`` of ``text``; a query with no word (an
    emoji, symbols) keeps its whitespace-separated pieces instead, lowercased, each cut to
    ``MAX_TERM_CHARS``. The index holds no such piece, so the store's substring fallback
    (bounded) finds the memories containing them; a query with a word is never one of these."""
    terms = query_terms(text)
    if terms:
        return terms
    pieces = (piece[:MAX_TERM_CHARS] for piece in text.lower().split())
    return list(dict.fromkeys(pieces))[:MAX_QUERY_TERMS]


_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_TIME_WORDS = (
    "yesterday today tonight tomorrow ago weekend weekends week weeks month months year years "
    "day days morning evening afternoon night nights recently lately summer winter spring "
    "autumn fall christmas birthday since monday tuesday wednesday thursday friday saturday "
    "sunday"
)
_TIME_REFERENCE = re.compile(
    r"\b(?:" + "|".join((_TIME_WORDS + " " + _MONTHS).split())
    + r"|(?:19|20)\d\d|\d{1,2}(?:st|nd|rd|th)|\d{1,2}[/.-]\d{1,2}(?:[/.-]\d{2,4})?)\b",
    re.IGNORECASE,
)  # fmt: skip
_WHEN_QUESTION = re.compile(
    r"^\W*when\b|\bwhen (?:did|do|does|was|were|is|are|will|has|have|had)\b|\bhow long\b"
    r"|\b(?:what|which) (?:year|month|date|day|time|week)\b"
    r"|\bhow many (?:days|weeks|months|years)\b",
    re.IGNORECASE,
)


def asks_when(query: str) -> bool:
    """Whether ``query`` asks for a time: "when did ...", "how long ...", "what year ..."."""
    return _WHEN_QUESTION.search(query) is not None


def mentions_time(text: str) -> bool:
    """Whether ``text`` names a time: a relative one ("yesterday", "last week", "ago"), a
    weekday, a month, a year (1900-2099), an ordinal day ("3rd") or a numeric date. Words that
    are also months or seasons ("may", "march", "fall") count wherever they appear."""
    return _TIME_REFERENCE.search(text) is not None


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_NUMBERS = {  # the full names, their three letters, and "sept"
    short: number
    for number, name in enumerate(_MONTHS.split()[:12], start=1)
    for short in (name, name[:3], "sept" if number == 9 else name)
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r",?\s+(?P<year>(?:19|20)\d\d)\b"
# The date patterns are texts, compiled (and cached by ``re``) by the first question that may
# name a date: most processes never search, and compiled they are memory a hook server holds.
_NAMED_DATES = (
    r"\b" + _MONTH + r"\s+" + _DAY + _YEAR,  # May 7th, 2023
    r"\b" + _DAY + r"\s+(?:of\s+)?" + _MONTH + _YEAR,  # 7 May 2023
    r"\b" + _MONTH + _YEAR,  # May 2023
)
_ISO_DATE = r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"


_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "a couple of": 2, "couple of": 2, "a few": 3, "few": 3}  # fmt: skip
_COUNT = r"\d{1,2}|" + "|".join(sorted(_COUNTS, key=len, reverse=True))
_AGO = r"\b(?P<count>" + _COUNT + r")\s+(?P<unit>day|week|month)s?\s+ago\b"
_NOT_TERMS = re.compile(
    r"\bhow many(?: times)?\b"  # the question's frame, not its subject
    r"|"
    + _AGO  # placed in time by ``relative_dates``
    + r"|\b(?:this|next|(?:last|past) (?:"
    + _COUNT
    + r"))\s+(?:day|week|weekend|month|year)s?\b"
)  # fmt: skip  (the last: "this year", "the past few months"; matched in lowercased text)
"""What ``query_terms`` leaves out of a question besides stop words. "How many weddings have
I attended in the last two months?" searches for weddings and attended: "many", "two" and
"months" are no words its answer shares (the span is the question's time, not the memory's);
"last weekend" alone stays, as memories tell of it in those words."""
_LAST_DAY = r"\b(?:last|this past) (?P<weekday>" + "|".join(_WEEKDAYS) + r")\b"
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30}
_DATE_HINT = re.compile(r"(?:19|20)\d\d|\bago\b|yesterday|\b(?:last|past) ", re.IGNORECASE)
"""What every date ``query_dates`` places holds: a year, "ago", "yesterday", "last"/"past"."""


def relative_dates(query: str, now: datetime) -> tuple[str, str] | None:
    """The span a question names relative to ``now``: "yesterday", "last Friday", "two weeks
    ago" (the day two weeks back, give or take half a week; "N days ago": that day, give or
    take one), or None."""
    today = now.date()
    if re.search(r"\byesterday\b", query, re.IGNORECASE):
        day = (today - timedelta(days=1)).isoformat()
        return day, day
    found = re.search(_LAST_DAY, query, re.IGNORECASE)
    if found is not None:
        back = (today.weekday() - _WEEKDAYS.index(found["weekday"].lower())) % 7 or 7
        day = (today - timedelta(days=back)).isoformat()
        return day, day
    found = re.search(_AGO, query, re.IGNORECASE)
    if found is None:
        return None
    count = found["count"].lower()
    unit = _UNIT_DAYS[found["unit"].lower()]
    center = today - timedelta(days=(int(count) if count.isdigit() else _COUNTS[count]) * unit)
    spread = timedelta(days=max(1, unit // 2))
    return (center - spread).isoformat(), (center + spread).isoformat()


def query_dates(query: str, now: datetime | None = None) -> tuple[str, str] | None:
    """The calendar span a question names, as ISO dates (first and last day, inclusive):
    a day ("May 7th, 2023", "7 May 2023", "2023-05-07") or a month ("May 2023"), or with
    ``now`` one relative to it (``relative_dates``); None when it names none (a year alone,
    or a day without its year, is too vague to place)."""
    if _DATE_HINT.search(query) is None:  # most questions name no date: one quick look
        return None
    found = re.search(_ISO_DATE, query)
    for pattern in _NAMED_DATES:
        found = found or re.search(pattern, query, re.IGNORECASE)
    if found is None:
        return relative_dates(query, now) if now is not None else None
    parts = found.groupdict()
    month = parts["month"].lower()
    year, number = int(parts["year"]), int(month) if month.isdigit() else _MONTH_NUMBERS[month]
    try:
        if parts.get("day"):
            day = date(year, number, int(parts["day"])).isoformat()
            return day, day
        after = date(year + number // 12, number % 12 + 1, 1)  # the next month's first day
        return date(year, number, 1).isoformat(), (after - timedelta(days=1)).isoformat()
    except ValueError:  # no such day or month ("February 30, 2023", "2023-13-01")
        return None


def made_within(span: tuple[str, str], created_at: str) -> bool:
    """Whether a memory made at ``created_at`` (ISO 8601) was made within ``span`` (first and
    last day, ISO dates, as ``query_dates`` gives it)."""
    return span[0] <= created_at[:10] <= span[1]


def date_fit(span: tuple[str, str] | None, created_at: str) -> float:
    """``1 + DATE_BOOST`` for a memory made within the question's ``span`` (``query_dates``),
    else 1."""
    return 1 + DATE_BOOST if span is not None and made_within(span, created_at) else 1.0


def query_fit(terms: Sequence[str], when: bool, text: str) -> float:
    """The module docstring's fit of a memory's ``text`` to a query of ``terms`` (``when``:
    the query asks when, see ``asks_when``). Coverage needs two terms or more: every full-text
    candidate of a one-term query holds that term, also where the index matched it by its stem
    and ``matched_terms``'s prefix test does not ("studies", "study")."""
    fit = 1.0
    if len(terms) > 1:
        weight = COVERAGE_WEIGHT * min(1.0, COVERAGE_FULL_WORDS / max(1, len(text.split())))
        fit = 1 - weight + weight * len(matched_terms(terms, text)) / len(terms)
    if when and mentions_time(text):
        fit *= 1 + TIME_CUE_BOOST
    first = _WORD.search(text)
    if first is not None and first.group().lower() in terms:
        fit *= 1 + SUBJECT_BOOST
    return fit


def fts_query(terms: Sequence[str], operator: str = "OR") -> str:
    """An FTS5 MATCH expression joining ``terms`` with ``operator`` (OR, or AND), each term
    quoted so nothing is syntax."""
    return f" {operator} ".join('"' + term.replace('"', '""') + '"' for term in terms)


def rare_terms(terms: Sequence[str], doc_counts: Mapping[str, int]) -> list[str]:
    """The terms a large store may take every match of: rarest first, each in at most
    ``FREQUENT_DOCS`` memories, while their matches add up to ``RARE_BUDGET_DOCS`` (the
    rarest such term always goes). Terms no memory holds are left out."""
    present = sorted((t for t in terms if doc_counts.get(t, 0) > 0), key=lambda t: doc_counts[t])
    kept: list[str] = []
    total = 0
    for term in present:
        count = doc_counts[term]
        if count > FREQUENT_DOCS or (kept and total + count > RARE_BUDGET_DOCS):
            break
        kept.append(term)
        total += count
    return kept


def common_sets(terms: Sequence[str], idf: Mapping[str, float]) -> list[tuple[str, ...]]:
    """The sets of ``terms`` (every set of the ``COMMON_SET_TERMS`` heaviest, then the others
    alone) a large store looks for memories holding, heaviest first: by summed ``idf``, then
    larger first.

    A memory holding a set scores about its summed IDF (more for a short memory, less for a
    long one): the heaviest sets hold the best candidates among the common terms' matches."""
    by_weight = sorted(terms, key=lambda t: -idf[t])
    heaviest = by_weight[:COMMON_SET_TERMS]
    sets = [
        chosen
        for size in range(len(heaviest), 0, -1)
        for chosen in itertools.combinations(heaviest, size)
    ]
    sets += [(term,) for term in by_weight[COMMON_SET_TERMS:]]
    return sorted(sets, key=lambda s: (-sum(idf[t] for t in s), -len(s)))


def bm25_idf(rows: int, docs: int) -> float:
    """A term's BM25 weight in an index of ``rows`` documents, ``docs`` of them holding it,
    as FTS5 computes it: ``log((rows - docs + 0.5) / (docs + 0.5))``, at least 1e-6 (a term
    in more than half the documents still counts a little)."""
    return max(math.log((rows - docs + 0.5) / (docs + 0.5)), 1e-6)


def bm25(freqs: Iterable[tuple[float, float]], length: int, avg_length: float) -> float:
    """FTS5's ``bm25()`` of one document: ``freqs`` holds (idf, weighted frequency) per query
    term (the frequency sums the term's instances, each counted by its column's weight);
    ``length`` is the document's size in tokens over all columns. Negative, lower is better,
    as FTS5 gives it::

        -sum(idf * f * (k1 + 1) / (f + k1 * (1 - b + b * length / avg_length)))

    with ``k1 = BM25_K1`` and ``b = BM25_B``."""
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / avg_length) if avg_length > 0 else BM25_K1
    return -sum(idf * f * (BM25_K1 + 1) / (f + norm) for idf, f in freqs if f > 0)


def matched_terms(terms: Sequence[str], text: str) -> list[str]:
    """The ``terms`` found in ``text``: a term's stem-like prefix (all but its last two
    characters, at least four) counts, so "deploys" matches "Deploying"."""
    lowered = text.lower()
    return [t for t in terms if t[: max(4, len(t) - 2)] in lowered]


def term_overlap(terms: Sequence[str], text: str) -> float:
    """Share of ``terms`` found in ``text`` (see ``matched_terms``), in [0, 1]."""
    return len(matched_terms(terms, text)) / len(terms) if terms else 0.0


def memory_text(memory: Memory) -> str:
    """The text a memory's terms are looked for in: its content, then its tags."""
    return f"{memory.content} {' '.join(memory.tags)}"


def like_patterns(terms: Sequence[str]) -> list[str]:
    """``LIKE`` patterns for the fallback search, with ``%``, ``_`` and ``\\`` escaped."""
    out = []
    for term in terms:
        escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        out.append(f"%{escaped}%")
    return out


def normalize_tags(tags: str | Iterable[str] | None) -> tuple[str, ...]:
    """Tags as a tuple of distinct lowercase words; accepts a list or a comma-separated string."""
    if tags is None:
        return ()
    items = tags.split(",") if isinstance(tags, str) else list(tags)
    cleaned = (" ".join(str(t).strip().lower().split()) for t in items)
    return tuple(dict.fromkeys(t.replace(",", " ") for t in cleaned if t))


def recency_factor(created_at: str, now: datetime) -> float:
    """0.9 + 0.1 * 0.5 ** (age_days / half-life): 1.0 for a new memory, 0.9 for an old one."""
    days = hours_between(created_at, now) / 24.0 if created_at else 0.0
    return 0.9 + 0.1 * math.pow(0.5, days / RECENCY_HALF_LIFE_DAYS)


def rank_score(relevance: float, memory: Memory, now: datetime) -> float:
    """The module docstring's ranking formula; ``relevance`` in [0, 1]."""
    intent = 1.05 if memory.remember_intent == EXPLICIT else 1.0
    confidence = min(max(memory.confidence, 0.0), 1.0)
    return (
        relevance
        * (0.8 + 0.2 * confidence)
        * LAYER_WEIGHTS.get(memory.layer, 1.0)
        * recency_factor(memory.created_at, now)
        * intent
    )


def session_votes(
    sessions: Sequence[str | None], scores: Sequence[float], weight: float = SESSION_VOTE_WEIGHT
) -> list[float]:
    """Each score plus ``weight`` times the scores of the other candidates of its session
    (the module docstring's formula); a candidate with no session gets no votes."""
    totals: dict[str, float] = {}
    for session, score in zip(sessions, scores, strict=True):
        if session is not None:
            totals[session] = totals.get(session, 0.0) + score
    return [
        score + weight * (totals[session] - score) if session is not None else score
        for session, score in zip(sessions, scores, strict=True)
    ]


def neighbour_votes(
    scores: Mapping[str, float],
    adjacent: Iterable[tuple[str, str]],
    weight: float = NEIGHBOUR_VOTE_WEIGHT,
) -> dict[str, float]:
    """Each candidate's score (``scores``: id -> score) plus ``weight`` times the scores of
    its neighbours that are candidates too (``adjacent``: (memory id, neighbour id) pairs,
    one per neighbour of a memory, as the store gives them)."""
    voted = dict(scores)
    for memory_id, other in adjacent:
        if memory_id in scores and other in scores:
            voted[memory_id] += weight * scores[other]
    return voted


def context_neighbours(
    best: Sequence[tuple[str, float, str]], adjacent: Iterable[tuple[str, str]]
) -> dict[str, tuple[str, float]]:
    """The neighbours to add to the candidates: of the first ``NEIGHBOUR_SEEDS`` of ``best``
    ((id, score, text), best first; every candidate) that are short (``CONTEXT_WORDS``), each
    neighbour that is not a candidate, at ``NEIGHBOUR_SHARE`` of the seed's score (the best
    seed's when two share it): neighbour id -> (seed id, score)."""
    present = {memory_id for memory_id, _, _ in best}
    seeds = {
        memory_id: score
        for memory_id, score, text in best[:NEIGHBOUR_SEEDS]
        if len(text.split()) <= CONTEXT_WORDS
    }
    added: dict[str, tuple[str, float]] = {}
    for seed, other in adjacent:
        if seed not in seeds or other in present:
            continue
        score = NEIGHBOUR_SHARE * seeds[seed]
        if other not in added or added[other][1] < score:
            added[other] = (seed, score)
    return added


def relevances(bm25_scores: Sequence[float]) -> list[float]:
    """FTS5 ``bm25()`` values (negative, lower is better) as relevances relative to the best."""
    if not bm25_scores:
        return []
    best = max(-s for s in bm25_scores)
    if best <= 0:
        return [1.0 for _ in bm25_scores]
    return [max(-s, 0.0) / best for s in bm25_scores]


def dense_closeness(cosines: Sequence[float], pool: int = DENSE_POOL) -> list[float]:
    """How much closer to the question than the scope's typical memory each of the first
    ``pool`` memories is, in [0, 1] (``closer`` in "Meaning" above): ``cosines`` are those of
    every memory in scope, most similar first."""
    if not cosines:
        return []
    # The scope's typical memory: the median cosine, with ``pool`` unrelated ones (cosine 0)
    # counted besides, so that a scope of a few memories has something to be closer than.
    middle = (len(cosines) + pool) // 2
    above = sum(1 for c in cosines if c > 0.0)  # (best first: the zeros would follow these)
    if middle < above:
        background = cosines[middle]
    elif middle < above + pool:
        background = 0.0
    else:
        background = cosines[middle - pool]
    span = cosines[0] - background
    closest = cosines[:pool]
    if span <= 0:
        return [0.0] * len(closest)
    return [max(0.0, (cosine - background) / span) for cosine in closest]


def dense_bonus(
    closer: float,
    words: int,
    weight: float = DENSE_WEIGHT,
    full_words: int = DENSE_FULL_WORDS,
    power: float = 2.0,
) -> float:
    """What meaning adds to the score of a memory of ``words`` words that is ``closer``
    (``dense_closeness``) to the question (see "Meaning" above; the defaults are its
    constants)."""
    return weight * min(1.0, words / full_words) * math.pow(closer, power)


def dense_pool(
    similar: Sequence[tuple[str, float]],
    hits: Container[str],
    pool: int = DENSE_POOL,
    join: float = DENSE_JOIN,
) -> list[tuple[str, float, float]]:
    """The memories meaning adds to: (id, cosine, closer) of the first ``pool`` of
    ``similar`` ((id, cosine) of every memory in scope, most similar first) that are closer
    than the scope's typical memory and either among the lexical ``hits`` or ``join`` close."""
    closeness = dense_closeness([cosine for _, cosine in similar], pool)
    return [
        (memory_id, cosine, closer)
        for (memory_id, cosine), closer in zip(similar, closeness, strict=False)
        if closer > 0.0 and (memory_id in hits or closer >= join)
    ]


def dense_scores(
    lexical: Sequence[tuple[str, float]],
    pool: Sequence[tuple[str, float, float]],
    words: Mapping[str, int],
    bonus: Callable[[float, int], float] = dense_bonus,
    shares: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The hybrid scores, not yet sorted: each lexical hit's score ((id, score), best first)
    relative to the best, plus ``bonus`` for the members of ``pool`` (``dense_pool``) whose
    word count ``words`` holds (one it lacks is gone from the store), times their share in
    ``shares`` (``meaning_share``; 1 for one it lacks); joiners after the hits, in the
    pool's order."""
    top = max((score for _, score in lexical), default=0.0) or 1.0
    scores = {memory_id: score / top for memory_id, score in lexical}
    shares = shares or {}
    for memory_id, _, closer in pool:
        if memory_id in words:
            added = bonus(closer, words[memory_id]) * shares.get(memory_id, 1.0)
            scores[memory_id] = scores.get(memory_id, 0.0) + added
    return scores


def meaning_share(span: tuple[str, str] | None, created_at: str) -> float:
    """The share of meaning's bonus a memory made at ``created_at`` keeps for a question whose
    relative date names ``span`` (``relative_dates``; None: it names none), see
    ``DATED_MEANING_SHARE``."""
    return DATED_MEANING_SHARE if span is not None and not made_within(span, created_at) else 1.0
