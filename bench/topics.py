"""Hot-topic precision on LoCoMo conversations: do the top topics carry signal?

Run: ``.venv/bin/python bench/topics.py [--data PATH] [--top 10] [--show 3]``.

Each LoCoMo session is fed turn by turn (``record_text``) into a fresh ``HotTopicExtractor``;
its top topics are then judged with rules that do not use Cortex's own stop-word lists:

- **recurring**: the topic (a word, or a phrase as consecutive words) occurs in at least 2
  turns of the session;
- **specific**: the topic's words are not common across the corpus, i.e. each occurs in
  fewer than ``--df`` (default 20 %) of all sessions (an IDF criterion: "really", "time",
  "going" occur everywhere and say nothing about one session).

Precision is the share of returned topics that are both, over all sessions (micro-average).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from compare import DATA  # bench/compare.py, next to this file
from cortex.core.topics import HotTopicExtractor

DEFAULT_DATA = DATA / "locomo-dev.json"
"""The LoCoMo conversations beside the checkout (``--data`` names another file)."""
_WORD = re.compile(r"[^\W_]+(?:[._-][^\W_]+)*")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def sessions(data: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(name, turn texts) of every session of every conversation."""
    found = []
    for sample in data:
        conversation = sample["conversation"]
        for key, turns in conversation.items():
            if key.startswith("session_") and isinstance(turns, list):
                texts = [str(t.get("text", "")) for t in turns]
                found.append((f"{sample['sample_id']}/{key}", texts))
    return found


def occurs(topic: str, turn_words: list[str]) -> bool:
    parts = topic.split(" ")
    n = len(parts)
    return any(turn_words[i : i + n] == parts for i in range(len(turn_words) - n + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--df", type=float, default=0.20, help="max share of sessions")
    parser.add_argument("--show", type=int, default=0, help="print topics of N sessions")
    args = parser.parse_args()
    all_sessions = sessions(json.loads(args.data.read_text()))
    doc_freq: Counter[str] = Counter()
    for _, texts in all_sessions:
        doc_freq.update({w for text in texts for w in words(text)})
    common = {w for w, n in doc_freq.items() if n >= args.df * len(all_sessions)}
    returned = good = 0
    for index, (name, texts) in enumerate(all_sessions):
        extractor = HotTopicExtractor()
        for text in texts:
            extractor.record_text(text)
        topics = extractor.get_current_topics(args.top)
        turn_words = [words(text) for text in texts]
        judged = []
        for topic in topics:
            recurring = sum(occurs(topic, tw) for tw in turn_words) >= 2
            specific = not any(part in common for part in topic.split(" "))
            judged.append((topic, recurring and specific))
        returned += len(topics)
        good += sum(ok for _, ok in judged)
        if index < args.show:
            print(name, " ".join(t if ok else f"({t})" for t, ok in judged))
    print(
        f"LoCoMo sessions: {len(all_sessions)}; top-{args.top} topics returned: {returned}; "
        f"recurring and specific: {good}; precision: {good / max(returned, 1):.1%}"
    )


if __name__ == "__main__":
    main()
