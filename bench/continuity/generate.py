"""Seeded scenarios of multi-day agent work, as a timed stream of steps plus what each holds.

A scenario is several projects worked on over weeks: sessions that end, crash mid-turn or
run alongside a session of another project; compactions; pins (some CRITICAL) that are later
changed (the old value is then superseded) or removed; pending tasks that finish, get
abandoned or stay open; credentials pasted into prompts and pins; idle gaps of days and weeks.

Every item an agent could be shown (a pin version, a task, a prompt, an assistant reply)
carries a unique reference word (``ref`` + 6 letters), and every project has its own made-up
vocabulary, so that what a start injected can be attributed exactly: found references say
which items were injected, another project's reference or vocabulary word is a leak.

The same seed gives the same scenarios (``random.Random(seed)``; no clock, no I/O).
"""

from __future__ import annotations

import random
import string
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from secret_corpus import CORPUS  # noqa: E402  (realistic fake credentials, shared with tests)

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
_SYLLABLES = [a + b for a in "bdfgklmnprstvz" for b in "aeiou"]
_TASK_VERBS = ("wire", "migrate", "fix", "benchmark", "document", "refactor", "port", "retry")
_FACTS = ("host", "port", "region", "branch", "owner", "budget", "schema", "queue")


@dataclass(frozen=True)
class Item:
    """Something an agent could be shown later, identified by its ``ref`` word."""

    ref: str
    project: int
    kind: str  # pin | task | prompt | reply
    text: str
    at: datetime
    label: str = ""
    critical: bool = False


@dataclass(frozen=True)
class Step:
    """One thing that happens at ``at``: a hook event, or an agent's tool call (CLI)."""

    at: datetime
    project: int
    session: str
    kind: str  # hook | cli
    payload: dict[str, Any] | tuple[str, ...]
    measure: bool = False  # a session start whose injected context is scored
    channel: str = "claude-code"  # claude-code | openclaw


@dataclass
class Lifecycle:
    """When each item stopped being current: a task done/abandoned, a pin changed/removed."""

    closed: dict[str, datetime] = field(default_factory=dict)  # task ref -> done/abandoned
    superseded: dict[str, datetime] = field(default_factory=dict)  # pin ref -> replaced
    removed: dict[str, datetime] = field(default_factory=dict)  # pin ref -> unpinned


@dataclass
class Scenario:
    seed: int
    projects: list[str]
    vocab: list[list[str]]
    steps: list[Step]
    items: list[Item]
    life: Lifecycle
    secrets: list[tuple[datetime, str]]
    bridged: int | None = None
    """The project whose sessions run through the OpenClaw bridge (a third of scenarios)."""


class _Builder:
    """Writes one scenario: sessions per project, in time order, with their items."""

    def __init__(self, seed: int, days: tuple[int, int]) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.days = days
        count = self.rng.randint(3, 4)
        self.projects = [self._word(3) for _ in range(count)]
        self.vocab = [[self._word(3) for _ in range(10)] for _ in range(count)]
        self.steps: list[Step] = []
        self.items: list[Item] = []
        self.life = Lifecycle()
        self.secrets: list[tuple[datetime, str]] = []
        self.open_tasks: list[list[tuple[str, str, str]]] = [[] for _ in range(count)]
        self.pins: list[dict[str, Item]] = [{} for _ in range(count)]  # label -> current
        self.sessions = 0
        self.task_no = 0
        self.bridged = 0 if seed % 3 == 2 else None  # a third of the scenarios

    # -- words --------------------------------------------------------------------------------
    def _word(self, syllables: int) -> str:
        return "".join(self.rng.choice(_SYLLABLES) for _ in range(syllables))

    def _ref(self) -> str:
        return "ref" + "".join(self.rng.choice(string.ascii_lowercase) for _ in range(6))

    def _topic(self, p: int, n: int = 2) -> str:
        return " ".join(self.rng.sample(self.vocab[p], n))

    def _item(self, p: int, kind: str, text: str, at: datetime, **kw: Any) -> Item:
        item = Item(self._ref(), p, kind, text, at, **kw)
        self.items.append(item)
        return item

    # -- steps --------------------------------------------------------------------------------
    def _hook(self, at: datetime, p: int, sid: str, name: str, **fields: Any) -> None:
        payload = {"session_id": sid, "hook_event_name": name, **fields}
        measure = name == "SessionStart" and fields.get("source") == "startup"
        self.steps.append(Step(at, p, sid, "hook", payload, measure, self._channel(p)))

    def _cli(self, at: datetime, p: int, sid: str, *args: str) -> None:
        self.steps.append(Step(at, p, sid, "cli", args, channel=self._channel(p)))

    def _channel(self, p: int) -> str:
        return "openclaw" if p == self.bridged else "claude-code"

    # -- one session ----------------------------------------------------------------------------
    def session(self, p: int, start: datetime, ending: str) -> datetime:
        """The steps of one session of project ``p``; returns when its last step happens."""
        self.sessions += 1
        sid = f"s{self.seed}-{self.sessions:03d}-{self._word(2)}"
        at = start
        self._hook(at, p, sid, "SessionStart", source="startup")
        turns = self.rng.randint(1, 3)
        for turn in range(turns):
            at += timedelta(minutes=self.rng.randint(2, 9))
            self._prompt(at, p, sid)
            at += timedelta(minutes=1)
            self._work(at, p, sid)
            at += timedelta(minutes=1)
            if self.rng.random() < 0.5 and not (ending == "crash" and turn == turns - 1):
                continue  # no tool call this turn
            self._hook(
                at,
                p,
                sid,
                "PostToolUse",
                tool_name="Edit",
                tool_input={"file_path": f"src/{self.rng.choice(self.vocab[p])}.py"},
                tool_response={"success": True},
            )
            if ending == "crash" and turn == turns - 1:
                return at  # killed mid-turn: no reply, no SessionEnd
            if self.rng.random() < 0.12:
                at = self._compaction(at, p, sid)
            at += timedelta(minutes=1)
            reply = self._item(p, "reply", f"Done with the {self._topic(p)} change.", at)
            self._hook(at, p, sid, "Stop", last_assistant_message=f"{reply.text} ({reply.ref})")
        if ending == "end":
            at += timedelta(minutes=1)
            self._hook(at, p, sid, "SessionEnd", reason="prompt_input_exit")
        return at

    def _prompt(self, at: datetime, p: int, sid: str) -> None:
        text = f"Let's look at the {self._topic(p, 3)} next."
        if self.rng.random() < 0.15:
            _, secret, pasted = self.rng.choice(CORPUS)
            text += f" Use this: {pasted}"
            self.secrets.append((at, secret))
        item = self._item(p, "prompt", text, at)
        self._hook(at, p, sid, "UserPromptSubmit", prompt=f"{text} ({item.ref})")

    def _compaction(self, at: datetime, p: int, sid: str) -> datetime:
        at += timedelta(minutes=1)
        self._hook(at, p, sid, "PreCompact", trigger="auto", custom_instructions="")
        summary = self._item(p, "reply", f"Summary: worked on {self._topic(p)}.", at)
        self._hook(at, p, sid, "PostCompact", trigger="auto", summary=summary.text)
        self._hook(at, p, sid, "SessionStart", source="compact")
        return at

    def _work(self, at: datetime, p: int, sid: str) -> None:
        """The agent's tool calls of a turn: pins and tasks, through the CLI."""
        roll = self.rng.random()
        if roll < 0.30:
            self._pin(at, p, sid)
        elif roll < 0.45 and self.pins[p]:
            self._change_pin(at, p, sid)
        elif roll < 0.50 and self.pins[p]:
            self._unpin(at, p, sid)
        elif roll < 0.70:
            self._add_task(at, p, sid)
        elif roll < 0.85 and self.open_tasks[p]:
            self._close_task(at, p, sid)

    def _pin(self, at: datetime, p: int, sid: str, label: str | None = None) -> None:
        label = label or f"{self.rng.choice(_FACTS)} {self.rng.choice(self.vocab[p])}"
        critical = (
            self.pins[p][label].critical if label in self.pins[p] else self.rng.random() < 0.35
        )
        content = f"{self._topic(p)} {self.rng.choice(_FACTS)} is {self._word(2)}"
        if self.rng.random() < 0.08:
            _, secret, pasted = self.rng.choice(CORPUS)
            content += f"; {pasted}"
            self.secrets.append((at, secret))
        item = self._item(p, "pin", content, at, label=label, critical=critical)
        old = self.pins[p].get(label)
        if old is not None:
            self.life.superseded[old.ref] = at
        self.pins[p][label] = item
        flag = ("--critical",) if critical else ()
        self._cli(
            at, p, sid, "pin", "add", label, f"{content} ({item.ref})", *flag, "--session-id", sid
        )

    def _change_pin(self, at: datetime, p: int, sid: str) -> None:
        self._pin(at, p, sid, self.rng.choice(sorted(self.pins[p])))

    def _unpin(self, at: datetime, p: int, sid: str) -> None:
        label = self.rng.choice(sorted(self.pins[p]))
        self.life.removed[self.pins[p].pop(label).ref] = at
        self._cli(at, p, sid, "pin", "remove", label, "--session-id", sid)

    def _add_task(self, at: datetime, p: int, sid: str) -> None:
        self.task_no += 1
        title = f"{self.rng.choice(_TASK_VERBS)} the {self._topic(p)}"
        item = self._item(p, "task", title, at)
        task_id = f"task-{self.task_no:03d}-{self.projects[p]}"
        self.open_tasks[p].append((task_id, title, item.ref))
        self._cli(at, p, sid, "task", "add", task_id, f"{title} ({item.ref})", "--stage", "build")

    def _close_task(self, at: datetime, p: int, sid: str) -> None:
        task_id, title, ref = self.open_tasks[p].pop(self.rng.randrange(len(self.open_tasks[p])))
        self.life.closed[ref] = at
        if self.rng.random() < 0.7:
            self._cli(at, p, sid, "task", "done", task_id)
        else:  # abandoned: the stage says so
            self._cli(
                at, p, sid, "task", "add", task_id, f"{title} ({ref})", "--stage", "abandoned"
            )

    # -- the weeks ------------------------------------------------------------------------------
    def build(self) -> Scenario:
        day = T0
        last_end = [T0 - timedelta(days=30)] * len(self.projects)
        for _ in range(self.rng.randint(*self.days)):
            gap = self.rng.choices([1, 2, 4, 9, 17], weights=[5, 3, 2, 1, 1])[0]
            day += timedelta(days=gap)
            today = self.rng.sample(range(len(self.projects)), self.rng.randint(1, 2))
            start = day + timedelta(hours=self.rng.randint(0, 3))
            previous_end = start
            for offset, p in enumerate(today):
                # the second project's session starts while the first one runs (concurrent),
                # except next to a bridge session: a bridge process's clock stays at its
                # session's start, so a neighbour would see its lease as lapsed
                begin = max(start + timedelta(minutes=7 * offset), last_end[p] + timedelta(hours=1))
                if offset and self.bridged in today:
                    begin = max(begin, previous_end + timedelta(minutes=10))
                ending = self.rng.choices(["end", "crash", "open"], weights=[7, 2, 1])[0]
                last_end[p] = previous_end = self.session(p, begin, ending)
        self.steps.sort(key=lambda s: s.at)  # stable: a session's steps keep their order
        return Scenario(
            self.seed,
            self.projects,
            self.vocab,
            self.steps,
            self.items,
            self.life,
            self.secrets,
            self.bridged,
        )


def generate(count: int, seed: int, days: tuple[int, int] = (7, 9)) -> list[Scenario]:
    """``count`` scenarios, the i-th seeded with ``seed * 1000 + i``, each over a number of
    working days drawn from ``days`` (inclusive)."""
    return [_Builder(seed * 1000 + i, days).build() for i in range(count)]
