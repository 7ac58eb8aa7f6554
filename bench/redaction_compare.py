"""Redaction before and after, interleaved in one run: the CPU time of ``redact`` on six kinds
of text, with an older commit's ``cortex.core.redaction`` and with this checkout's.

    .venv/bin/python bench/redaction_compare.py --rev HEAD~3 --rounds 7

Each round runs one process per tree (the older one first in even rounds, this one first in
odd ones); each process redacts every text ``--calls`` times and reports the CPU time per call
(``time.process_time``) of each, and of a floor: ``str.lower`` of the same text, a C-speed pass
over it. The texts are 2-3 KB (longer than the short-text cache's limit, so every call
redacts): transcript prose with no rule's guard, prose that names passwords and tokens without
stating one, a configuration file holding secrets, prose beyond ASCII that shows as it is
(accents, dashes, curly quotes, ellipses, emoji), the same kind of prose (naming a token) with
a no-break space (NFKC makes it a space, so the text is read twice), and a full-width
``ｐａｓｓｗｏｒｄ＝...`` among prose (read twice, and redacted). Medians of the rounds, as
microseconds and as ratios to the floor.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from compare import compare_parser, extract

ROOT = Path(__file__).resolve().parents[1]

TEXTS = {
    "ascii prose, no guard": (
        "Ran the suite again after moving the retry loop into the client; two cases still "
        "time out on the slow runner, so I raised the limit and split the fixture. "
    ),
    "ascii prose naming secrets": (
        "The password is required and the token is expired, so the login fails; the secret is "
        "to cache the session and refresh it before the key rotates. "
    ),
    "ascii config with secrets": (
        "DB_HOST=db.internal\nDB_PASS=hunter2hunter2\napi_key: abc123\nthe password is "
        "Tr0ub4dor&3\nLOG_LEVEL=info\n"
    ),
    "beyond ascii, NFKC-normal": (
        "Café résumé — the “quick” fix didn’t hold; naïve retries 🎉 made it worse, so we "
        "moved the back-off into the client and re-ran the suite. "
    ),
    "beyond ascii, folded (no-break space)": (
        "Checked the logs… the token is expired,\u00a0so the client signs in again… then the "
        "upload resumes where it stopped. "
    ),
    "full-width key": "Notes from the call: ｐａｓｓｗｏｒｄ＝ｈｕｎｔｅｒ２ was pasted. ",
}
SAMPLE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from cortex.core import redaction
texts, calls = json.loads(sys.argv[2]), int(sys.argv[3])
out = {}
for name, text in texts.items():
    redaction.redact(text)  # rules compiled, modules imported
    start = time.process_time()
    for _ in range(calls):
        redaction.redact(text)
    spent = (time.process_time() - start) / calls
    start = time.process_time()
    for _ in range(calls):
        text.lower()
    floor = (time.process_time() - start) / calls
    out[name] = [spent * 1e6, floor * 1e6]
print(json.dumps(out))
"""


def sample(src: Path, texts: dict[str, str], calls: int) -> dict[str, list[float]]:
    done = subprocess.run(
        [sys.executable, "-c", SAMPLE, str(src), json.dumps(texts), str(calls)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    args = compare_parser(__doc__, rounds=7)
    args.add_argument("--calls", type=int, default=400, help="redactions of each text a sample")
    opts = args.parse_args()
    texts = {name: piece * (2500 // len(piece) + 1) for name, piece in TEXTS.items()}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": extract(opts.rev, Path(tmp)) / "src", "after": ROOT / "src"}
        runs: dict[str, list[dict[str, list[float]]]] = {"before": [], "after": []}
        for round_ in range(opts.rounds):
            order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
            for which in order:
                runs[which].append(sample(trees[which], texts, opts.calls))
    print(f"rev {opts.rev}, {opts.rounds} rounds of {opts.calls} calls a text")
    print("| text | chars | before µs | x floor | after µs | x floor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, text in texts.items():
        cells = [name, f"{len(text):,}"]
        for which in ("before", "after"):
            spent = statistics.median(run[name][0] for run in runs[which])
            floor = statistics.median(run[name][1] for run in runs[which])
            cells += [f"{spent:.1f}", f"{spent / floor:.1f}"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
