"""Two runs of ``run.py`` compared question by question: what a change gained and lost.

    cp bench/results/retrieval.json /tmp/before.json          # before the change
    .venv/bin/python bench/retrieval/run.py --systems cortex   # after it
    .venv/bin/python bench/retrieval/diff.py /tmp/before.json bench/results/retrieval.json
    .venv/bin/python bench/retrieval/diff.py R.json R.json --system cortex --against cortex+minilm

For each system both reports hold (or the one ``--system`` names, compared with the after
report's ``--against``): the headline figures (``metrics.COLUMNS``) and each LoCoMo
conversation's R@10, before and after, with the figures that fall marked; then, per set, how
many questions each recall metric gained and lost, and the questions that changed with the
ranks of their gold units before and after (``--questions N`` of them a set; 0: the counts
only); last, whether the change keeps every split: no figure and no conversation lower than
before, the benchmark's rule for keeping a change to the ranking (``docs/benchmarks.md``).
``--json`` prints the same as one object. The two reports must come from the same data and
the same ``--quick`` (their questions are paired in order).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics import figures, keeps_every_split  # noqa: E402 - next to this file

SETS = {"locomo": "LoCoMo", "lme_session": "LongMemEval sessions", "lme_turn": "LongMemEval turns"}
EPSILON = 1e-9


class DiffError(Exception):
    """A report that cannot be compared; the message names the next step."""


def load(path: Path) -> dict[str, Any]:
    """A ``run.py`` report (``bench/results/retrieval.json``) read from ``path``."""
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        raise DiffError(f"no report at {path}; run bench/retrieval/run.py first") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DiffError(f"{path} is not a run.py report ({exc}); run it again") from None
    if not isinstance(report, dict) or not any(s in report for s in SETS):
        raise DiffError(f"{path} holds none of {', '.join(SETS)}; is it run.py's report?")
    return report


def system_report(report: dict[str, Any], system: str, path: Path) -> dict[str, Any]:
    """Per set, what ``report`` (read from ``path``) holds of ``system``; DiffError when it
    holds nothing of it."""
    found = {s: report[s][system] for s in SETS if system in report.get(s, {})}
    if not found:
        known = ", ".join(systems_of(report))
        raise DiffError(f"{path} has no system {system!r}; it has {known}")
    return found


def systems_of(report: dict[str, Any]) -> list[str]:
    """The systems of ``report``, in its order."""
    return list(dict.fromkeys(name for s in SETS for name in report.get(s, {})))


def compare(before: dict[str, Any], after: dict[str, Any], questions: int) -> dict[str, Any]:
    """One system's reports compared (``system_report`` of each): its ``figures`` with the
    change and whether each falls, per set the questions that gained and lost each recall
    metric (``questions`` of them listed), and whether the change keeps every split."""
    old, new = figures(before), figures(after)
    shared = [k for k in old if k in new]
    rows = [
        {"figure": k, "before": old[k], "after": new[k], "change": new[k] - old[k],
         "falls": new[k] < old[k] - EPSILON}
        for k in shared
    ]  # fmt: skip
    sets = {}
    for name in SETS:
        if name in before and name in after:
            sets[name] = _questions(name, before[name], after[name], questions)
    return {
        "figures": rows,
        "sets": sets,
        "keeps_every_split": keeps_every_split({k: new[k] for k in shared},
                                               {k: old[k] for k in shared}),
    }  # fmt: skip


def _questions(
    name: str, before: dict[str, Any], after: dict[str, Any], shown: int
) -> dict[str, Any]:
    """The questions of one set whose recall metrics changed: counts and the first
    ``shown``."""
    old, new = before.get("answers"), after.get("answers")
    if old is None or new is None:
        raise DiffError(f"a report of {name} has no answers; run bench/retrieval/run.py again")
    if [(a["corpus"], a["question"]) for a in old] != [(a["corpus"], a["question"]) for a in new]:
        raise DiffError(
            f"the two reports ask other questions of {name}; compare runs over the same data "
            "and the same --quick"
        )
    metrics = [m for m in old[0]["scores"] if not m.startswith("nDCG")] if old else []
    counts = {m: {"gained": 0, "lost": 0} for m in metrics}
    changed = []
    for was, now in zip(old, new, strict=True):
        moved = {}
        for metric in metrics:
            delta = now["scores"][metric] - was["scores"][metric]
            if abs(delta) > EPSILON:
                counts[metric]["gained" if delta > 0 else "lost"] += 1
                moved[metric] = delta
        if moved:
            changed.append({
                "corpus": was["corpus"], "category": was["category"],
                "question": was["question"], "changes": moved,
                "gold_ranks_before": was["gold_ranks"], "gold_ranks_after": now["gold_ranks"],
            })  # fmt: skip
    return {"counts": counts, "changed": len(changed), "questions": changed[:shown]}


def markdown(title: str, result: dict[str, Any]) -> str:
    """``compare``'s result as markdown under ``title``."""
    lines = [
        f"## {title}",
        "",
        "| figure | before | after | change |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in result["figures"]:
        mark = " **falls**" if row["falls"] else ""
        lines.append(f"| {row['figure']} | {row['before']:.1f} | {row['after']:.1f} | "
                     f"{row['change']:+.1f}{mark} |")  # fmt: skip
    for name, part in result["sets"].items():
        counts = ", ".join(f"{m} +{c['gained']}/-{c['lost']}" for m, c in part["counts"].items())
        number = f"{part['changed']} question{'' if part['changed'] == 1 else 's'}"
        lines += ["", f"{SETS[name]}: {number} changed ({counts or 'no recall metric'})"]
        for q in part["questions"]:
            moved = ", ".join(f"{m} {'+' if d > 0 else '-'}" for m, d in q["changes"].items())
            ranks = f"{_ranks(q['gold_ranks_before'])} -> {_ranks(q['gold_ranks_after'])}"
            lines.append(f"- {moved} | {q['corpus']} {q['category']}: {q['question']} | {ranks}")
    falls = [row["figure"] for row in result["figures"] if row["falls"]]
    verdict = "yes" if result["keeps_every_split"] else "no (falls: " + ", ".join(falls) + ")"
    lines += ["", f"keeps every split: {verdict}"]
    return "\n".join(lines)


def _ranks(ranks: dict[str, int | None]) -> str:
    """Gold units' ranks, best first, as ``unit@rank``; ``unit@-`` for one outside the
    ranking."""
    shown = sorted(ranks.items(), key=lambda kv: (kv[1] is None, kv[1] or 0, kv[0]))
    return " ".join(f"{unit}@{rank if rank is not None else '-'}" for unit, rank in shown)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Example: diff.py /tmp/before.json bench/results/retrieval.json --questions 10",
    )
    parser.add_argument("before", type=Path, help="run.py's report before the change")
    parser.add_argument("after", type=Path, help="run.py's report after it")
    parser.add_argument("--system", help="the system to compare (default: every one in both)")
    parser.add_argument(
        "--against", help="the after report's system to compare --system with (default: the same)"
    )
    parser.add_argument(
        "--questions", type=int, default=20, help="changed questions listed a set (default 20)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.questions < 0:
        parser.error("--questions must be 0 or more")
    try:
        before, after = load(args.before), load(args.after)
        if args.system is None and args.against is not None:
            raise DiffError("--against needs --system: name the before report's system too")
        if args.system is not None:
            pairs = [(args.system, args.against or args.system)]
        else:
            pairs = [(s, s) for s in systems_of(before) if s in systems_of(after)]
            if not pairs:
                raise DiffError("the two reports share no system; name them with --system and "
                                "--against")  # fmt: skip
        results = {}
        for old, new in pairs:
            old_part = system_report(before, old, args.before)
            new_part = system_report(after, new, args.after)
            results[f"{old} -> {new}"] = compare(old_part, new_part, args.questions)
    except DiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(results, indent=2) if args.json else "\n\n".join(
        markdown(title, result) for title, result in results.items()
    )  # fmt: skip
    try:
        print(text)
    except BrokenPipeError:  # (``| head``): the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
