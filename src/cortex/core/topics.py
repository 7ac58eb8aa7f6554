"""Hot topics of a session: a small accumulator of weighted keywords and projects.

``HotTopicExtractor`` takes signals through ``record_*`` methods and ranks keywords by weighted
frequency ("TF-IDF-style" in the spec; with no corpus at hand, the IDF part is approximated by
dropping stopwords and halving the weight of very generic words). Tokens are lowercased;
hyphenated, underscored and dotted identifiers stay whole (``lbf-ham-radio``, ``brain.db``);
tokens mixing letters and digits stay (``ft991a``); pure numbers and hash-like strings go.
Conversational filler, common verbs and bare quantities (``wow``, ``moved``, ``use``, ``5s``)
are dropped like stopwords. Multi-word labels and start keywords are kept as phrases
(``ham radio``) that stay topics even when said once; an adjacent word pair in free text
counts at half weight the first time and in full when it recurs, so recurring pairs rank.

The state is persisted after every turn, so it stays bounded: at most ``PRUNE_AT`` keywords
(pruned to the ``MAX_KEYWORDS`` heaviest), ``MAX_PROJECTS`` projects, ``MAX_LEARNING_IDS``
learning ids.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable, Iterator, Mapping

from cortex.core.redaction import MARKER
from cortex.core.vocabulary import (
    BROADCAST,
    DEFAULT_STOPWORDS,
    GENERIC_WORDS,
    PROJECT_CONTAINERS,
    SYSTEM_DIRS,
)

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

MAX_KEYWORDS = 400
PRUNE_AT = 500
MAX_PROJECTS = 50
MAX_LEARNING_IDS = 500
MAX_TEXT_CHARS = 4000
"""Only the first 4,000 characters of one text signal count, so a turn's capture stays cheap."""
MAX_TOKEN_CHARS = 64
MAX_PHRASE_WORDS = 4
MAX_NAME_CHARS = 200
DEFAULT_TOPICS = 20

TEXT_WEIGHT = 1.0
RECURRING_PAIR_RATIO = 0.75
"""A word pair is a topic when its weight reaches this share of its lighter word's."""
PAIR_FACTOR = 0.5
LABEL_WEIGHT = 2.0
PHRASE_BOOST = 1.5
CATEGORY_WEIGHT = 1.0
KEYWORD_WEIGHT = 2.0
PROJECT_WEIGHT = 3.0
SYNAPSE_WEIGHT = 1.5
FILE_WEIGHT = 0.5
COMMAND_WEIGHT = 0.3
GENERIC_FACTOR = 0.5
MAX_WEIGHT = 1e12
MAX_PHRASES = 100


_TOKEN = re.compile(r"[^\W_]+(?:[._-][^\W_]+)*")
_MARKER = MARKER.lower()
_HASHLIKE = re.compile(r"[0-9a-f]+(?:-[0-9a-f]+)*")
_QUANTITY = re.compile(
    r"\d+(?:[.,]\d+)*(?:st|nd|rd|th|ms|us|ns|s|sec|secs|m|min|mins|h|hr|hrs|x|k|"
    r"kb|mb|gb|tb|kib|mib|gib|px|pt|em|rem|fps|hz|khz|mhz|ghz|v|ma|kg|g|mm|cm|km|ft|lb|lbs)"
)
"""A number with a unit or ordinal suffix (``5s``, ``10ms``, ``2nd``, ``3x``): no topic."""
_HAS_LETTER = re.compile(r"[^\W\d_]").search
_HAS_DIGIT = re.compile(r"\d").search
_PROVENANCE = re.compile(r"\s*\[inherited from [^\]]*\]", re.IGNORECASE)
_COMMAND_PATH = re.compile(r"(?:^|[\s=])((?:~|/)[^\s;&|'\"]+)")


@functools.lru_cache(maxsize=8192)
def _shaped_like_a_keyword(token: str) -> bool:
    """Has a letter; 3+ characters unless it mixes in a digit; not too long or hash-like."""
    if len(token) > MAX_TOKEN_CHARS or not _HAS_LETTER(token):
        return False
    has_digit = _HAS_DIGIT(token) is not None
    if len(token) < 3 and not has_digit:
        return False
    if has_digit and _QUANTITY.fullmatch(token):
        return False
    return not (has_digit and len(token) >= 12 and _HASHLIKE.fullmatch(token))


@functools.cache
def _assigned_secret() -> re.Pattern[str]:
    """A name given a redacted value (``openai_api_key=[redacted]``, ``"token": "[redacted]"``):
    compiled at the first text that holds the marker."""
    return re.compile(r"[\w.-]+[\"']?\s*[:=]\s*[\"']?" + re.escape(_MARKER))


def _runs(text: str, stopwords: frozenset[str]) -> list[list[str]]:
    """Keyword tokens of ``text`` in runs of adjacent words (no punctuation or dropped word)."""
    runs: list[list[str]] = []
    current: list[str] = []
    lowered = text[:MAX_TEXT_CHARS].lower()
    if _MARKER in lowered:  # where a secret was: no topic, nor the name it was given
        lowered = _assigned_secret().sub("\n", lowered).replace(_MARKER, "\n")
    prev_end = -1
    for match in _TOKEN.finditer(lowered):
        gap = lowered[prev_end : match.start()] if prev_end >= 0 else "\n"
        prev_end = match.end()
        token = match.group()
        keep = token not in stopwords and _shaped_like_a_keyword(token)
        if current and not (keep and gap.isspace() and "\n" not in gap):
            runs.append(current)
            current = []
        if keep:
            current.append(token)
    if current:
        runs.append(current)
    return runs


def _usable_weight(weight: float) -> bool:
    """A positive weight that is a finite float or converts to one (not NaN, not infinite, not
    an integer past the largest float)."""
    return isinstance(weight, int | float) and 0 < weight <= sys.float_info.max


def _path_parts(path: str) -> list[str]:
    parts = [p for p in path.strip().replace("\\", "/").split("/") if p not in ("", ".", "..")]
    if parts and len(parts[0]) == 2 and parts[0][1] == ":":
        parts = parts[1:]
    return parts


def _project_under_container(parts: list[str]) -> str | None:
    """The directory right under the first container directory from the left."""
    for i, part in enumerate(parts[:-1]):
        if part.lower() in PROJECT_CONTAINERS and parts[i + 1].lower() not in PROJECT_CONTAINERS:
            return parts[i + 1]
    return None


def extract_project_name(workdir: str) -> str | None:
    """The project a working directory belongs to, or None.

    ``/home/user/Projects/lbf-ham-radio/src`` gives ``lbf-ham-radio``: the directory right under
    the first container directory from the left (``Projects``, ``repos``, ``src``, ``code``,
    ``dev``, ``work``, ``workspace``, ``git``, any case). Otherwise the last directory that is
    not a container, unless the path is a home directory, the root or a temp directory.
    """
    if not workdir or not workdir.strip():
        return None
    parts = _path_parts(workdir)
    found = _project_under_container(parts)
    if found:
        return found
    while parts and parts[-1].lower() in PROJECT_CONTAINERS:
        parts = parts[:-1]
    lowered = [p.lower() for p in parts]
    if not parts or lowered[-1] in ("tmp", "temp"):
        return None
    if (len(parts) == 1 and lowered[0] in SYSTEM_DIRS) or (
        len(parts) == 2 and lowered[0] in ("home", "users")
    ):
        return None
    return parts[-1]


def display_name(project: str | None) -> str | None:
    """How a project reads in topics: the last part of an id or a path, else the text itself.

    ``git:github.com/org/radio#1a2b3c`` and ``path:/home/u/radio`` and ``/home/u/radio`` all
    read ``radio``; a plain name such as ``radio`` is kept.
    """
    if not project:
        return None
    body = project.removeprefix("path:")
    if body.startswith("git:"):
        body = body.removeprefix("git:").split("#", 1)[0]
    return body.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or project


_ALNUM = re.compile(r"[a-z0-9]+")
"""The words of a project name (``lbf-ham-radio``: lbf, ham, radio)."""


def _weight_pairs(value: Any) -> Iterator[tuple[str, float]]:
    """``[[name, weight], ...]`` (or ``{name: weight}``) entries that are well formed."""
    items = value.items() if isinstance(value, Mapping) else value
    if not isinstance(items, Iterable) or isinstance(items, str | bytes):
        return
    for item in items:
        if type(item) is list and len(item) == 2:  # as ``to_dict`` writes it: checked at once
            name, weight = item
            if type(name) is str and name and type(weight) is float and 0 < weight <= MAX_WEIGHT:
                yield name, weight
                continue
        if not isinstance(item, list | tuple) or len(item) != 2:
            continue
        name, weight = item
        if isinstance(name, str) and name and not isinstance(weight, bool):
            if isinstance(weight, int | float) and _usable_weight(weight):
                yield name, min(float(weight), MAX_WEIGHT)


class HotTopicExtractor:
    """Accumulates a session's topic signals; ranks keywords, projects and learning ids."""

    def __init__(self, stopwords: Iterable[str] | None = None) -> None:
        self._stopwords = (
            DEFAULT_STOPWORDS
            if stopwords is None
            else frozenset(w.strip().lower() for w in stopwords if isinstance(w, str))
        )
        self._weights: dict[str, float] = {}
        self._projects: dict[str, tuple[str, float]] = {}
        self._learning_ids: dict[str, None] = {}
        self._phrases: dict[str, None] = {}  # said as a label or a start keyword

    # -- recording -------------------------------------------------------------------------

    def record_text(self, text: str, weight: float = TEXT_WEIGHT) -> None:
        """Count the keywords of free text; an adjacent pair counts half the first time."""
        if not isinstance(text, str) or not _usable_weight(weight):
            return
        for run in _runs(text, self._stopwords):
            for token in run:
                self._add(token, weight)
            for first, second in zip(run, run[1:], strict=False):
                pair = f"{first} {second}"
                self._add(pair, weight if pair in self._weights else weight * PAIR_FACTOR)
        self._prune_keywords()

    def record_working_memory_label(self, label: str) -> None:
        """Count a pin label; a 2-4 word label also counts as one boosted phrase."""
        self._record_label(label, LABEL_WEIGHT)

    def record_keywords(self, keywords: Iterable[str]) -> None:
        """Count the keywords given at session start: a short one (up to 4 words) counts like a
        label, its phrase a topic from the start; a longer one (a first prompt) as text."""
        if isinstance(keywords, str):
            keywords = [keywords]
        for keyword in keywords:
            if not isinstance(keyword, str):
                continue
            if len(_TOKEN.findall(keyword[:MAX_TEXT_CHARS])) > MAX_PHRASE_WORDS:
                self.record_text(keyword)
            else:
                self._record_label(keyword, KEYWORD_WEIGHT)

    def record_memory_access(self, categories: Iterable[str]) -> None:
        """Count memory categories accessed (e.g. ``["coding", "meta"]``)."""
        if isinstance(categories, str):
            categories = [categories]
        for category in categories:
            self._record_label(category, CATEGORY_WEIGHT)

    def record_exec_workdir(self, workdir: str) -> None:
        """Count the project of a command's working directory."""
        if isinstance(workdir, str):
            name = extract_project_name(workdir)
            if name:
                self.record_project(name)

    def record_file_path(self, path: str) -> None:
        """Count the project a file lives in (if under a container dir) and the file's stem."""
        if not isinstance(path, str) or not path.strip():
            return
        parts = _path_parts(path)
        project = _project_under_container(parts)
        if project and project != parts[-1]:
            self.record_project(project)
        if parts:
            self.record_text(parts[-1].rsplit(".", 1)[0], FILE_WEIGHT)

    def record_project(self, name: str) -> None:
        """Count an active project by name (case-insensitive identity, first spelling kept)."""
        if not isinstance(name, str):
            return
        name = name.strip()
        if not name or len(name) > MAX_NAME_CHARS or name == MARKER:
            return
        self._bump_project(name, 1.0)
        keyword = " ".join(_TOKEN.findall(name.lower().replace(_MARKER, " ")))
        if keyword:
            self._add(keyword, PROJECT_WEIGHT)
            self._prune_keywords()

    def record_synapse_signal(self, subject: str, recipient: str) -> None:
        """Count a Synapse message's subject and recipient; projects it names count again."""
        if isinstance(subject, str) and subject:
            self.record_text(subject, SYNAPSE_WEIGHT)
            for token in _TOKEN.findall(subject[:MAX_TEXT_CHARS].lower()):
                if token in self._projects:
                    self._bump_project(self._projects[token][0], 1.0)
        if isinstance(recipient, str) and recipient.strip().lower() not in BROADCAST:
            self._record_label(recipient, SYNAPSE_WEIGHT)

    def record_learning_id(self, memory_id: str) -> None:
        """Remember a memory id created this session (the most recent ones are kept)."""
        memory_id = str(memory_id).strip()
        if not memory_id or len(memory_id) > MAX_NAME_CHARS or memory_id in self._learning_ids:
            return
        self._learning_ids[memory_id] = None
        while len(self._learning_ids) > MAX_LEARNING_IDS:
            del self._learning_ids[next(iter(self._learning_ids))]

    def record_tool_call(self, tool_name: str, params: Mapping[str, Any]) -> None:
        """Take the signals in a tool call's params: workdir/cwd, file paths and the command.

        The tool name itself is harness vocabulary, not a topic, so it is not counted.
        """
        if not isinstance(params, Mapping):
            return
        for key in ("workdir", "cwd"):
            value = params.get(key)
            if isinstance(value, str):
                self.record_exec_workdir(value)
        for key in ("file_path", "path", "notebook_path"):
            value = params.get(key)
            if isinstance(value, str):
                self.record_file_path(value)
        command = params.get("command")
        if isinstance(command, str):
            self.record_text(command, COMMAND_WEIGHT)
            for path in _COMMAND_PATH.findall(command[:MAX_TEXT_CHARS]):
                project = _project_under_container(_path_parts(path))
                if project:
                    self.record_project(project)

    # -- outputs ---------------------------------------------------------------------------

    def get_current_topics(self, n: int = DEFAULT_TOPICS) -> list[str]:
        """The ``n`` heaviest keywords, heaviest first; ties keep first-seen order."""
        if n <= 0:
            return []
        ranked = sorted(self._weights.items(), key=lambda item: -item[1])
        named = {w for name, _ in self._projects.values() for w in _ALNUM.findall(name.lower())}
        return [k for k, weight in ranked if self._is_topic(k, weight, named)][:n]

    def _is_topic(self, keyword: str, weight: float, named: set[str]) -> bool:
        """A word, or a phrase that recurred, was a label or names the project (``named``:
        the words of the active projects' names, so "ham radio" said once while working on
        lbf-ham-radio is a topic); any other pair seen once in running text is weaker than
        its own words and is not a topic on its own."""
        words = keyword.split(" ")
        if len(words) < 2 or keyword in self._phrases or named.issuperset(words):
            return True
        lightest = min(self._weights.get(w, 0.0) for w in words)
        return lightest == 0.0 or weight >= RECURRING_PAIR_RATIO * lightest

    def get_top_n(self, n: int) -> list[str]:
        """Same as ``get_current_topics(n)`` (the design doc's name)."""
        return self.get_current_topics(n)

    def get_active_projects(self) -> list[str]:
        """Project names, most frequent first; ties keep first-seen order."""
        ranked = sorted(self._projects.values(), key=lambda item: -item[1])
        return [name for name, _ in ranked]

    def get_recent_learning_ids(self) -> list[str]:
        """Memory ids recorded this session, oldest first."""
        return list(self._learning_ids)

    def get_frequency_map(self) -> dict[str, float]:
        """Keyword -> accumulated weight, in first-seen order (for debugging)."""
        return dict(self._weights)

    # -- persistence -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state; pairs in lists so the order survives a JSONB column."""
        return {
            "version": 1,
            "keywords": [[k, w] for k, w in self._weights.items()],
            "projects": [[name, w] for name, w in self._projects.values()],
            "learning_ids": list(self._learning_ids),
            "phrases": list(self._phrases),
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any] | Any, stopwords: Iterable[str] | None = None
    ) -> HotTopicExtractor:
        """Rebuild from ``to_dict()`` output; malformed parts are skipped, ``{}`` starts empty."""
        extractor = cls(stopwords)
        if not isinstance(data, Mapping):
            return extractor
        for keyword, weight in _weight_pairs(data.get("keywords")):
            extractor._weights.setdefault(keyword, weight)
        extractor._prune_keywords()
        for name, weight in _weight_pairs(data.get("projects")):
            if len(name) <= MAX_NAME_CHARS:
                extractor._projects.setdefault(name.casefold(), (name, weight))
        extractor._prune_projects()
        ids = data.get("learning_ids")
        if isinstance(ids, list):
            for memory_id in ids:
                if isinstance(memory_id, str):
                    extractor.record_learning_id(memory_id)
        phrases = data.get("phrases")
        if isinstance(phrases, list):
            for phrase in phrases:
                if isinstance(phrase, str) and phrase:
                    extractor._anchor(phrase)
        return extractor

    # -- internals -------------------------------------------------------------------------

    def _record_label(self, label: str, weight: float) -> None:
        if not isinstance(label, str):
            return
        for run in _runs(_PROVENANCE.sub("", label), self._stopwords):
            for token in run:
                self._add(token, weight)
            if 2 <= len(run) <= MAX_PHRASE_WORDS:
                phrase = " ".join(run)
                self._add(phrase, weight * PHRASE_BOOST)
                self._anchor(phrase)
                continue
            for first, second in zip(run, run[1:], strict=False):
                self._add(f"{first} {second}", weight * PAIR_FACTOR)
        self._prune_keywords()

    def _add(self, keyword: str, weight: float) -> None:
        if keyword in GENERIC_WORDS:
            weight *= GENERIC_FACTOR
        self._weights[keyword] = min(MAX_WEIGHT, self._weights.get(keyword, 0.0) + weight)

    def _anchor(self, phrase: str) -> None:
        """Remember a phrase said as a label or keyword (the most recent ones are kept)."""
        if len(phrase) > MAX_NAME_CHARS:
            return
        self._phrases.pop(phrase, None)
        self._phrases[phrase] = None
        while len(self._phrases) > MAX_PHRASES:
            del self._phrases[next(iter(self._phrases))]

    def _bump_project(self, name: str, weight: float) -> None:
        key = name.casefold()
        first_name, total = self._projects.get(key, (name, 0.0))
        self._projects[key] = (first_name, min(MAX_WEIGHT, total + weight))
        self._prune_projects()

    def _prune_keywords(self) -> None:
        """Past ``PRUNE_AT``, keep the ``MAX_KEYWORDS`` heaviest (on a tie, the more recent).

        Called once per signal, not per keyword, so a long text costs one sort.
        """
        if len(self._weights) <= PRUNE_AT:
            return
        ranked = sorted(enumerate(self._weights.values()), key=lambda e: (e[1], e[0]))
        drop = {index for index, _ in ranked[: len(ranked) - MAX_KEYWORDS]}
        self._weights = {
            k: w for index, (k, w) in enumerate(self._weights.items()) if index not in drop
        }

    def _prune_projects(self) -> None:
        while len(self._projects) > MAX_PROJECTS:
            lightest = min(self._projects, key=lambda key: self._projects[key][1])
            del self._projects[lightest]


def keywords_from_text(text: str, limit: int = DEFAULT_TOPICS) -> list[str]:
    """The top keywords (and recurring word pairs) of ``text``, by the extractor's rules.

    Used to build the "current context keywords" at session start (project name, working
    directory, branch, first prompt), so they match stored hot topics token for token.
    """
    extractor = HotTopicExtractor()
    extractor.record_text(text)
    return extractor.get_current_topics(limit)
