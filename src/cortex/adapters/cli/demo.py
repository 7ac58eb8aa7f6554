"""``cortex demo``: a three-day story on a throwaway home, told with a fixed clock.

Everything shown is computed by the real engine on a real SQLite file; only the clock is
moved by hand, so two days pass in a second.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from cortex.adapters.cli.sessions import format_pins, format_session_rows
from cortex.clock import FixedClock
from cortex.config import load_config
from cortex.services.app import Services
from cortex.services.pipeline import set_stage, upsert_task

PROJECT = "lbf-ham-radio"
WORKDIR = "/home/ada/Projects/lbf-ham-radio"


def run_demo(echo: Callable[[str], None], home: str | None = None) -> None:
    """Run the story in ``home`` (default: a temporary directory) and print it."""
    if home is None:
        with tempfile.TemporaryDirectory(prefix="cortex-demo-") as tmp:
            _story(echo, Path(tmp))
    else:
        _story(echo, Path(home))


def _story(echo: Callable[[str], None], home: Path) -> None:
    clock = FixedClock("2026-02-02T09:00:00Z")
    with Services.open(load_config(home, {}), clock) as services:
        _tell(echo, services, clock)


def _tell(echo: Callable[[str], None], services: Services, clock: FixedClock) -> None:
    config, cortex = services.config, services.sessions

    def step(title: str, command: str) -> None:
        echo(f"\n── {clock.now():%a %Y-%m-%d %H:%M} UTC ── {title}\n$ {command}")

    echo(f"Cortex demo: a real brain.db in {config.home}, a clock moved by hand.")
    step("two weeks ago: a session about the antenna", "cortex session start ...")
    old = cortex.on_session_start(project=PROJECT, workdir=WORKDIR, channel="cli")
    cortex.add_pin(
        "antenna tuning", "40m dipole resonates at 7.150 MHz after trimming 4 cm", old.session_id
    )
    cortex.on_session_end(old.session_id)
    echo(f"(session {old.session_id[:8]} ended; it will be too old to restore on its own)")

    clock.advance(hours=14 * 24)
    step(
        "Monday morning, first session: a cold start is silent",
        f"cortex session start --project {PROJECT} --workdir {WORKDIR}",
    )
    clock.advance(hours=0)
    monday = cortex.on_session_start(project=PROJECT, workdir=WORKDIR, keywords=["cat control"])
    echo(monday.preamble or "(no preamble: nothing recent enough to restore)")

    step("pin what must survive, add a task", "cortex pin add ... / cortex task add ...")
    cortex.add_pin("ft991a control", "CAT over USB, 38400 baud, /dev/ttyUSB0", critical=True)
    cortex.add_pin("hamlib rig id", "rigctl -m 1036 (FT-991A)")
    cortex.add_pin("qrz login", "api_key=sk-demo1234567890abcdefghijklmnopqrstuv")
    upsert_task(
        config.pipeline_state_path,
        "task-007-cat-control",
        "FT991A CAT control",
        "build",
        cortex.now_iso(),
    )
    for text in (
        "wire hamlib CAT control for the FT991A",
        "ham radio logging to ADIF",
        "FT991A CAT control timeouts at 38400 baud",
    ):
        clock.advance(hours=1)
        cortex.record(
            text=text, workdir=WORKDIR, tool_name="Bash", tool_input={"command": "rigctl -m 1036 f"}
        )
    echo(format_pins(cortex.list_pins()))
    echo("(note the qrz pin: the credential was redacted before it was stored)")

    clock.advance(hours=4)
    step("Monday evening: the agent is killed mid-work (no session end)", "kill -9 <agent>")
    end = cortex.on_session_end()
    echo(f"(the morning session ended cleanly at {(end.end_time or '')[11:16]})")
    evening = cortex.on_session_start(project=PROJECT, workdir=WORKDIR)
    cortex.record(text="debugging serial timeouts on ttyUSB0", workdir=WORKDIR)
    echo(f"session {evening.session_id[:8]} recorded a turn ... then the process died")

    clock.advance(hours=38)
    step("Wednesday morning, two days later", f"cortex session start --project {PROJECT}")
    wednesday = cortex.on_session_start(
        project=PROJECT, workdir=WORKDIR, keywords=["ft991a"], explain=True
    )
    echo(wednesday.preamble or "(cold start)")
    step("what working memory looks like now", "cortex pin list")
    echo(format_pins(cortex.list_pins()))
    step("why these sessions? (--explain)", "cortex session start --explain")
    echo("\n".join(wednesday.explain))

    step("the task gets done; it will not be surfaced again", "cortex task done task-007...")
    set_stage(config.pipeline_state_path, "task-007-cat-control", "done", cortex.now_iso())
    step(
        "pull in the two-week-old antenna session by hand",
        f"cortex session continue {old.session_id[:8]}",
    )
    forced = cortex.force_inherit_session(old.session_id)
    echo(forced.preamble or "(nothing inherited)")
    cortex.on_session_end()

    step("the chain of sessions", f"cortex session chain {wednesday.session_id[:8]}")
    echo(format_session_rows(cortex.get_session_chain(wednesday.session_id, 5)))
    step("metrics are a keyed hash chain", "cortex metrics verify")
    report = services.metrics.verify()
    echo(f"ok: {report.checked} events verified" if report.ok else str(report.problems))
    echo("\nThat is the whole loop: capture every turn, recover crashes, restore what matters.")
