"""Session-continuity benchmark: what the next session gets, replayed through the real hooks.

    .venv/bin/python bench/continuity/run.py                     # 8 scenarios, seed 1
    .venv/bin/python bench/continuity/run.py --scenarios 2 --seed 3 --json
    .venv/bin/python bench/continuity/run.py --plot continuity.png  # needs the plot extra

Each scenario (``generate.py``) is replayed in a throwaway ``CORTEX_HOME``: every hook event
is one real ``cortex hook claude-code`` process with the event's JSON on stdin and the
scenario's time in ``CORTEX_NOW`` (the hook server off, so each process does the whole
work); every pin and task change is one real ``cortex pin|task`` process, as an agent's tool
call. In a third of the scenarios one project works through OpenClaw instead: each of its
sessions is a real ``cortex bridge`` process (JSON lines; pins through the bridge, killed
when the session crashes). What each new session's start injected (the SessionStart answer
plus the first prompt's, where the start injected nothing; for OpenClaw, the first prompt's
``prepend_context``) is scored (``score.py``), with the whole-process time of each hook
start. The two baselines are computed from the same stream: "last N by recency" (N chosen so
its mean tokens match Cortex's) and "no memory".

Progress goes to stderr; the table (or ``--json``) to stdout; bench/results/continuity.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE.parent))  # bench/: compare.py's floor
sys.path.insert(0, str(HERE))

from generate import Scenario, Step, generate  # noqa: E402
from score import StartScore, Truth, aggregate, bootstrap, recency_text  # noqa: E402

from compare import floor_sample  # noqa: E402 - bench/compare.py, the shared floor

CORTEX = Path(sys.executable).parent / "cortex"
RESULTS = HERE.parents[0] / "results"
SYSTEMS = ("cortex", "recency", "none")


@dataclass
class Start:
    """One measured start: where, when, what was injected and how long the process took."""

    project: int
    at: str
    text: str
    seconds: float
    channel: str = "claude-code"


def _env(home: Path, at: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORTEX_", "CLAUDE_"))}
    env.update({"CORTEX_HOME": str(home), "CORTEX_NOW": at, "CORTEX_HOOK_SERVER": "0"})
    return env


def _context(stdout: bytes) -> str:
    if not stdout.strip():
        return ""
    answer = json.loads(stdout)
    return str(answer.get("hookSpecificOutput", {}).get("additionalContext") or "")


def run_step(step: Step, home: Path, cwd: Path) -> tuple[str, float]:
    """Run one step as its real process; the context it answered and its wall time."""
    at = step.at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if step.kind == "hook":
        argv = [str(CORTEX), "hook", step.channel]
        data = json.dumps({**dict(step.payload), "cwd": str(cwd)}).encode()  # type: ignore[arg-type]
    else:
        argv, data = [str(CORTEX), *step.payload], b""
    began = time.perf_counter()
    done = subprocess.run(argv, input=data, capture_output=True, env=_env(home, at), cwd=cwd)
    seconds = time.perf_counter() - began
    if done.returncode != 0 and step.payload[:2] != ("pin", "remove"):
        # (an unpin of a pin this session never inherited fails, as it would for the agent)
        raise RuntimeError(f"{argv[1:3]} failed at {at}: {done.stderr.decode()[:300]}")
    return (_context(done.stdout) if step.kind == "hook" else ""), seconds


class BridgeSession:
    """One OpenClaw conversation through a real ``cortex bridge`` process (JSON lines).

    The process lives for the session, its clock fixed at the session's start; a session
    that crashes or is left open is killed (SIGKILL) after its last step, as a dying host
    would leave it: the next start recovers it.
    """

    TRANSLATE = {
        "UserPromptSubmit": ("before_prompt_build", "prompt"),
        "PostToolUse": ("after_tool_call", None),
        "Stop": ("agent_end", "last_assistant_message"),
        "PreCompact": ("before_compaction", None),
    }

    def __init__(self, step: Step, home: Path, cwd: Path) -> None:
        from cortex.services.project import project_identity

        at = step.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        self.key = step.session
        self.project = project_identity(str(cwd)).id
        argv = [str(CORTEX), "bridge", "--project", self.project, "--workdir", str(cwd)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_env(home, at), cwd=cwd
        )
        self.calls = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.calls += 1
        request = {"id": self.calls, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline() or b"{}")
        if "result" not in answer and not (method == "unpin" and "error" in answer):
            raise RuntimeError(f"bridge {method} failed: {answer}")
        return dict(answer.get("result") or {})

    def step(self, step: Step) -> str:
        """Run one step of this conversation; the context it answered."""
        if step.kind == "cli":
            args = step.payload
            if args[0] == "pin":  # the agent's pin tools go through the bridge
                label = str(args[2])
                if args[1] == "remove":
                    self.call("unpin", session_key=self.key, label=label)
                else:
                    critical = "--critical" in args
                    self.call("pin", session_key=self.key, label=label, content=str(args[3]),
                              critical=critical)  # fmt: skip
                return ""
            raise LookupError("a task step runs as a CLI process")
        payload = dict(step.payload)  # type: ignore[arg-type]
        name = payload["hook_event_name"]
        if name == "SessionStart":
            if payload.get("source") == "startup":
                self.call("session_start", session_key=self.key, project=self.project)
            return ""
        if name == "SessionEnd":
            self.call("session_end", session_key=self.key)
            self.close()
            return ""
        method, field = self.TRANSLATE.get(name, (None, None))
        if method is None:
            return ""
        params: dict[str, Any] = {"session_key": self.key}
        if field:
            params["prompt" if method == "before_prompt_build" else "text"] = payload.get(field)
        if method == "after_tool_call":
            params |= {"tool_name": payload.get("tool_name"), "params": payload.get("tool_input")}
        answer = self.call(method, **params)
        return str(answer.get("prepend_context") or "")

    def close(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def replay(scenario: Scenario, workdir: Path, floors: list[float] | None = None) -> list[Start]:
    """Every step in order; the measured starts, each with its first prompt's context.
    ``floors`` receives a floor process's wall time in ms (``compare.floor_sample``), timed
    just before each measured hook (the load of a shared machine drifts within a run)."""
    home = workdir / "home"
    dirs = []
    for name in scenario.projects:
        (workdir / "code" / name).mkdir(parents=True)
        dirs.append(workdir / "code" / name)
    last_step = {step.session: index for index, step in enumerate(scenario.steps)}
    bridges: dict[str, BridgeSession] = {}
    starts: dict[str, Start] = {}
    prompted: set[str] = set()
    for index, step in enumerate(scenario.steps):
        if step.channel == "openclaw" and not (step.kind == "cli" and step.payload[0] == "task"):
            began = time.perf_counter()
            if step.session not in bridges:
                bridges[step.session] = BridgeSession(step, home, dirs[step.project])
            bridge = bridges[step.session]
            text = bridge.step(step)
            seconds = time.perf_counter() - began
            if last_step[step.session] == index and bridge.proc.poll() is None:
                bridge.close(kill=True)  # crashed or left open: the host died
        else:
            if step.measure and floors is not None:
                floors.append(floor_sample())
            text, seconds = run_step(step, home, dirs[step.project])
        if step.measure:
            at = step.at.isoformat()
            starts[step.session] = Start(step.project, at, text, seconds, step.channel)
        elif step.kind == "hook" and step.payload.get("hook_event_name") == "UserPromptSubmit":  # type: ignore[union-attr]
            if step.session in starts and step.session not in prompted and text:
                start = starts[step.session]
                start.text = "\n\n".join(t for t in (start.text, text) if t)
            prompted.add(step.session)
    return list(starts.values())


def score_all(
    scenarios: list[Scenario], starts: list[list[Start]], recency_n: int
) -> dict[str, list[StartScore]]:
    """Per system, the score of every measured start of every scenario."""
    scores: dict[str, list[StartScore]] = {name: [] for name in SYSTEMS}
    for scenario, measured in zip(scenarios, starts, strict=True):
        truth = Truth(scenario)
        for start in measured:
            t = datetime.fromisoformat(start.at)
            scores["cortex"].append(truth.score(start.text, start.project, t))
            text = recency_text(scenario, t, recency_n)
            scores["recency"].append(truth.score(text, start.project, t))
            scores["none"].append(truth.score("", start.project, t))
    return scores


def calibrate(scenarios: list[Scenario], starts: list[list[Start]]) -> int:
    """The smallest N whose mean tokens reach Cortex's (the baselines cost the same)."""
    target = statistics.fmean(s.tokens for s in score_all(scenarios, starts, 0)["cortex"])
    for n in range(1, 60):
        mean = statistics.fmean(s.tokens for s in score_all(scenarios, starts, n)["recency"])
        if mean >= target:
            return n
    return 60


def _fmt(value: tuple[float, float, float], unit: str = "") -> str:
    v, lo, hi = value
    if math.isnan(v):
        return "n/a"
    if math.isnan(lo):
        return f"{v:,.0f}{unit}"
    return f"{v:,.1f}{unit} [{lo:,.1f}-{hi:,.1f}]"


ROWS = (
    ("pending-task recall %", "pending_task_recall"),
    ("CRITICAL-pin recall %", "critical_pin_recall"),
    ("pin precision %", "pin_precision"),
    ("starts with a cross-project leak %", "starts_with_leak"),
    ("superseded facts injected (total)", "superseded_injected"),
    ("secrets injected (total)", "secrets_injected"),
    ("injected tokens per start (mean)", "tokens_mean"),
    ("injected tokens per start (max)", "tokens_max"),
)


def table(report: dict[str, Any]) -> str:
    n = report["recency_n"]
    head = f"| metric | Cortex | last {n} by recency | no memory |"
    lines = [head, "| --- | --- | --- | --- |"]
    for label, key in ROWS:
        cells = [_fmt(tuple(report["systems"][s][key])) for s in SYSTEMS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lat = report["latency"]
    lines.append(
        f"| start hook process, p50 / p95 ms | {lat['p50_ms']:.0f} / {lat['p95_ms']:.0f} "
        f"({lat['p50_ratio']:.1f}x / {lat['p95_ratio']:.1f}x floor) | - | - |"
    )
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    """Recall against injected tokens per system (needs matplotlib: the plot extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for system, marker in zip(SYSTEMS, "o^s", strict=True):
        row = report["systems"][system]
        tokens = row["tokens_mean"][0]
        for key, colour, size in (
            ("pending_task_recall", "C0", 30),
            ("critical_pin_recall", "C3", 120),
        ):
            label = f"{system}: {key.split('_')[0]}"
            face = colour if size < 100 else "none"  # a ring, so a point under it still shows
            ax.scatter(tokens, row[key][0], marker=marker, s=size, edgecolors=colour,
                       facecolors=face, label=label)  # fmt: skip
    for n, (tokens, pending, critical) in sorted(report["recency_curve"].items()):
        ax.annotate(str(n), (tokens, pending), fontsize=6, color="grey")
        ax.plot(tokens, pending, ".", color="C0", alpha=0.3)
        ax.plot(tokens, critical, ".", color="C3", alpha=0.3)
    ax.set_xlabel("injected tokens per start (mean)")
    ax.set_ylabel("recall %")
    ax.set_title("Continuity: recall vs injected tokens")
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(count: int, seed: int, progress: bool = True) -> dict[str, Any]:
    """Generate, replay, score; the JSON-ready report."""
    scenarios = generate(count, seed)
    starts: list[list[Start]] = []
    floors: list[float] = []
    began = time.perf_counter()
    for index, scenario in enumerate(scenarios, 1):
        with tempfile.TemporaryDirectory(prefix="cortex-continuity-") as tmp:
            starts.append(replay(scenario, Path(tmp), floors))
        if progress:
            print(
                f"scenario {index}/{count}: {len(scenario.steps)} steps, "
                f"{len(starts[-1])} starts ({time.perf_counter() - began:.0f} s)",
                file=sys.stderr,
            )
    n = calibrate(scenarios, starts)
    scores = score_all(scenarios, starts, n)
    seconds = [s.seconds for measured in starts for s in measured if s.channel == "claude-code"]
    bridged = sum(s.channel == "openclaw" for measured in starts for s in measured)
    p50, p95 = bootstrap(seconds, "p50")[0], bootstrap(seconds, "p95")[0]
    floor = statistics.median(floors) / 1000
    curve = {}
    for k in (1, 2, 5, 10, 20, 40):
        rows = aggregate(score_all(scenarios, starts, k)["recency"])
        curve[k] = (
            rows["tokens_mean"][0],
            rows["pending_task_recall"][0],
            rows["critical_pin_recall"][0],
        )
    return {
        "scenarios": count,
        "seed": seed,
        "starts": sum(len(measured) for measured in starts),
        "bridge_starts": bridged,
        "recency_n": n,
        "systems": {name: aggregate(rows) for name, rows in scores.items()},
        "latency": {
            "p50_ms": 1000 * p50,
            "p95_ms": 1000 * p95,
            "floor_ms": 1000 * floor,
            "p50_ratio": p50 / floor,
            "p95_ratio": p95 / floor,
            "load": os.getloadavg(),
        },
        "recency_curve": curve,
        "per_start": [
            asdict(score) | {"text": start.text, "seconds": start.seconds}
            for score, start in zip(
                scores["cortex"], [s for measured in starts for s in measured], strict=True
            )
        ],
    }


def _json_safe(value: Any) -> Any:
    """``value`` with NaN (a share of nothing) as null, so that the output is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", type=int, default=8, help="how many scenarios (8)")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed (1)")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.add_argument("--plot", type=Path, help="write recall vs tokens to this PNG")
    args = parser.parse_args(argv)
    report = run(args.scenarios, args.seed)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "continuity.json").write_text(json.dumps(_json_safe(report), indent=2) + "\n")
    if args.plot:
        try:
            plot(report, args.plot)
        except ImportError:
            print("no plot: install the plot extra (pip install 'cortex[plot]')", file=sys.stderr)
    if args.json:
        summary = {k: v for k, v in report.items() if k != "per_start"}
        print(json.dumps(_json_safe(summary), indent=2, allow_nan=False))
    else:
        print(table(report))
        floor = report["latency"]["floor_ms"]
        load = ", ".join(f"{x:.2f}" for x in report["latency"]["load"])
        print(
            f"\n{report['starts']} starts ({report['bridge_starts']} through the OpenClaw bridge), "
            f"hook floor {floor:.0f} ms, load average {load}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
