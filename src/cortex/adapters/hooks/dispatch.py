"""One hook event through the session service: what each event records and what it answers.

Events by their Claude Code names (other hosts map onto these in ``events.py``):

- SessionStart ``startup``/``clear``/``fork``: open the session (restoration runs); answer
  the preamble and the pins it inherited. ``resume``: reopen the same id (idempotent) and
  answer the preamble and all its pins. ``compact``: answer ``compaction_context``.
- UserPromptSubmit: record the prompt. The first prompt after a start that injected nothing
  gets a second, prompt-aware restore pass, and a start that never reached us is made up
  for; either answers what it found.
- PostToolUse / PostToolUseFailure: the tool's name, paths, command and cwd as signals.
- CwdChanged: the new working directory. PreCompact: ``checkpoint_before_compaction``.
- PostCompact: the summary, recorded as a turn and kept for ``compaction_context``.
- Stop: the assistant's last message as a half-weight turn. SessionEnd: ``on_session_end``,
  after a session-end checkpoint when the session works on a protocol task (PreCompact's
  checkpoint reaches the task folder through the compaction service).

The project rule, shared with every reader: a session's ``project`` is
``cortex.services.project.project_identity(d).id`` where ``d`` is the host's project directory
(``CLAUDE_PROJECT_DIR``, ``GEMINI_PROJECT_DIR``) when the hook's environment has one, else the
event's ``cwd``. So the MCP server, which gets the same directory, finds the session a hook
opened with ``sessions.resolve(None, project_identity(d).id)``.

An event for a session that was never started, or that crash recovery closed meanwhile (its
lease lapsed while the user was away), opens it first. A session that ended normally is only
reopened by a start or a prompt: hosts deliver async events (a last Stop, a tool) after
SessionEnd, and those are dropped rather than reviving it. In client mode with the server
unreachable, the open session's start is journaled ahead of the event's writes (the reopen
the server may need by the time they arrive; a tool's or a reply's with ``keep_ended``, so
that a session ended normally meanwhile stays ended, as online: ``Hook.ensure_open``).
SessionEnd does only the final capture (milliseconds), well inside Claude Code's 1.5 s
budget for all SessionEnd hooks.

Each event is one unit of work (one transaction, ``hook.py``): its handler reads the
session's row once and passes it along to the capture, which then need not read it again.
"""

from __future__ import annotations

import cortex.codecache  # noqa: F401 - first: json's patterns come compiled from the cache

# isort: split
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path

from cortex.adapters.hooks import OWNER_VAR
from cortex.adapters.hooks import events as ev
from cortex.adapters.hooks.events import HookEvent
from cortex.adapters.hooks.hook import (
    Hook,
    ReadOnlyHome,
    ServicesCache,
    copy_services,
    read_only,
    run_now,
)
from cortex.adapters.hooks.state import (
    log_line,
    prune_session_states,
    record_latency,
    record_status,
    session_state_path,
)
from cortex.clock import Clock, FixedClock, SystemClock
from cortex.config import Config, default_home, load_config
from cortex.core.models import RestoredSessionContext, SessionState
from cortex.core.preamble import format_pins_block
from cortex.core.redaction import clip, redact
from cortex.errors import CortexError, StorageError, UnsafeIdError, ValidationError
from cortex.files import check_id
from cortex.logs import routed
from cortex.services.project import harness_project_dir, project_identity
from cortex.services.sessions.restore import COLD

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.services.app import Services
    from cortex.services.compaction import CompactionService

MAX_CONTEXT_CHARS = 8_000
"""Hosts spill context over 10,000 characters to a file; stay well under."""
PINS_BLOCK_CHARS = 2_000
SUMMARY_CHARS = 3_000
ASSISTANT_WEIGHT = 0.5
"""An assistant message restates the prompt's subject at length, so its words count half."""
END_BUSY_TIMEOUT_MS = 1000
"""How long a SessionEnd handled in its own process waits for another process's write lock:
its host allows it little time (Claude Code 1.5 s for all SessionEnd hooks), and one that
outlives it is killed without a line in hooks.log. The hook server keeps the store's wait:
its client stops waiting for the answer after 1.2 s, and the server still records the event."""


def restored_context(restored: RestoredSessionContext) -> str | None:
    """The preamble and the pins it inherited (the agent sees them without asking)."""
    if restored.preamble is None:
        return None
    return _join(restored.preamble, format_pins_block(restored.inherited_pins, PINS_BLOCK_CHARS))


def handle(
    host: str,
    raw: bytes,
    env: Mapping[str, str],
    fallback_cwd: str,
    cache: ServicesCache | None = None,
    later: list[Callable[[], None]] | None = None,
) -> str:
    """Handle one event; return the stdout text. Never raises (but see CORTEX_RAISE_ERRORS).

    ``cache`` keeps the database open between events (the hook server passes one). ``later``
    (the hook server's) collects the bookkeeping the answer does not depend on, for the
    caller to run once the answer is sent (each step logs its own failure to hooks.log): the
    host's status and latency files, the session's hook state, the pruning of old states and
    the metrics chain's head file. The event's changes to the database are committed before
    this returns either way. Without ``later`` every step runs before returning.
    """
    started = time.perf_counter()
    home = default_home(env)
    defer = _deferrer(home, later)
    event = HookEvent(host, "", "")
    try:
        event = ev.normalize(host, parse_input(raw))
        # The engine's warnings (a failed restore, a mirror not written) go to hooks.log.
        with routed(partial(_engine_line, home)):
            context = _dispatch(
                event, env, home, fallback_cwd, cache or _one_event_cache(event), defer
            )
    except Exception as exc:  # noqa: BLE001 - a hook never fails its host (fail open)
        if cache is not None:
            cache.close()  # a failed event may have left its connection in a bad state
        if env.get("CORTEX_RAISE_ERRORS") == "1" and not isinstance(exc, CortexError):
            raise  # a bug, not bad input: show it where errors are asked for (tests)
        message = _one_line(exc)
        name = _logged_name(event)
        sid = _safe_id(event.session_id)
        log_line(home, f"{host} {name} {repr(sid[:40]) if sid else '-'}: {message}")
        defer(partial(record_status, home, host, name, sid, message))
        answer = exc.answer if isinstance(exc, ReadOnlyHome) else None
        return ev.render(event, _cap(answer))
    answer = ev.render(event, _cap(context))
    elapsed = round((time.perf_counter() - started) * 1000, 2)
    defer(partial(record_status, home, host, event.name, event.session_id, None))
    defer(partial(record_latency, home, host, event.name, elapsed))
    return answer


def _one_event_cache(event: HookEvent) -> ServicesCache:
    """The services of a hook that handles its one event itself (no hook server)."""
    return ServicesCache(
        keep=False, busy_timeout_ms=END_BUSY_TIMEOUT_MS if event.kind == ev.END else None
    )


def _deferrer(
    home: Path, later: list[Callable[[], None]] | None
) -> Callable[[Callable[[], object]], None]:
    """How ``handle`` runs a bookkeeping step: at once, or queued on ``later``, where it runs
    with the engine's warnings still routed to hooks.log and its failure logged there."""
    if later is None:
        return run_now

    def defer(step: Callable[[], object]) -> None:
        later.append(partial(_run_later, home, step))

    return defer


def _run_later(home: Path, step: Callable[[], object]) -> None:
    try:
        with routed(partial(_engine_line, home)):
            step()
    except Exception as exc:  # noqa: BLE001 - bookkeeping after the answer never stops a server
        log_line(home, f"after the answer: {_one_line(exc)}")


def parse_input(raw: bytes) -> dict[str, Any]:
    """The one JSON object on stdin (after a UTF-8 byte order mark, which some Windows
    shells write first); ValidationError for anything else."""
    text = raw.decode("utf-8-sig", "replace").strip()
    if not text:
        raise ValidationError("empty input; a hook expects one JSON object on stdin")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"input is not JSON ({exc})") from exc
    except RecursionError as exc:
        raise ValidationError("input JSON is nested too deeply") from exc
    if not isinstance(data, dict):
        raise ValidationError(f"input is a JSON {type(data).__name__}, not an object")
    return data


def _dispatch(
    event: HookEvent,
    env: Mapping[str, str],
    home: Path,
    fallback: str,
    cache: ServicesCache,
    defer: Callable[[Callable[[], object]], None],
) -> str | None:
    if not event.kind:
        what = "not an event Cortex handles" if event.name else "no event name in the input"
        raise ValidationError(f"{what}; ignored")
    if event.session_id is None:
        raise ValidationError("no session id in the input; nothing recorded")
    session_id = _checked_id(event.session_id)
    make = partial(_hook, event, session_id, env, home, fallback)
    config, clock = _hook_config(env), _clock(env)
    unwritable = None if config.server_url else read_only(config)
    if unwritable is not None:  # (asked first: SQLite would make its log files there)
        raise _read_only(event, make, config, clock, unwritable)
    services = cache.open(config, clock)
    hook = make(services, home / "cache", defer)
    try:
        with services.sessions.transaction(defer):
            return HANDLERS[event.kind](hook)
    finally:
        cache.release()


def _hook(
    event: HookEvent,
    session_id: str,
    env: Mapping[str, str],
    home: Path,
    fallback: str,
    services: Services,
    cache_dir: Path | None,
    defer: Callable[[Callable[[], object]], None],
) -> Hook:
    """The event's unit of work over ``services``; its project's git lookups cached in
    ``cache_dir`` (None: not cached)."""
    project_dir = _directory(harness_project_dir(env), fallback)
    cwd = _directory(event.cwd, fallback) or project_dir or fallback
    # The host's project directory, when it says, is what the MCP server resolves too; the
    # event's cwd follows `cd` (into a sibling repository, say) and is only a signal.
    identity = project_identity(project_dir or cwd, cache_dir, env)
    return Hook(
        event, session_id, identity, cwd, home, services, owner_pid=_owner(env), defer=defer
    )


def _read_only(
    event: HookEvent,
    make: Callable[[Services, Path | None, Callable[[Callable[[], object]], None]], Hook],
    config: Config,
    clock: Clock,
    unwritable: str,
) -> ReadOnlyHome:
    """What an event comes to in a home this process cannot write (``unwritable``: what
    ``read_only`` says it cannot write). A start answers what it would from a copy of the
    database, run as any start and then dropped with what it wrote (``copy_services``), as
    are the hooks' own files and the engine's lines about what it could not write; any other
    event is refused. Either way nothing is stored, and the one line the caller logs says
    why."""
    said = f"{unwritable} is read-only to this process"
    fix = "make it writable, or point CORTEX_HOME at a writable home"
    if event.kind != ev.START:
        return ReadOnlyHome(f"{said}: nothing recorded; {fix}")
    try:
        services = copy_services(config, clock)
    except StorageError as exc:
        return ReadOnlyHome(f"{said}: nothing restored or recorded ({exc}); {fix}")
    failed: list[str] = []  # of the engine's lines only a failed restore's: the rest say
    # that a mirror or file aimed where nothing can be created was not written, as expected
    keep = partial(_keep_cold_start, failed)
    try:
        with routed(keep), services.sessions.transaction(_dropped):
            answer = on_start(make(services, None, _dropped))
    finally:
        services.close()
    said += ": answered from a copy of its database, stored nothing"
    if failed:
        said += f", and {failed[0][:MAX_FAILURE_CHARS]}"
    return ReadOnlyHome(f"{said}; {fix}", answer)


MAX_FAILURE_CHARS = 400
"""Of a failed restore's line, what the read-only home's one line quotes."""


def _keep_cold_start(failed: list[str], message: str) -> None:
    if message.startswith(COLD):
        failed.append(" ".join(message.split()))


def _dropped(_: object) -> None:
    """Where a read-only home's bookkeeping steps go: nowhere."""


def _directory(path: str | None, base: str) -> str | None:
    """``path`` made absolute against ``base``, the hook process's directory (the hook
    server's own is ``/``); None when it is no usable path (empty, a NUL in it)."""
    if path is None or not path.strip() or "\0" in path:
        return None
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def _hook_config(env: Mapping[str, str]) -> Config:
    """The home's settings, but no embedder: a hook never loads a model (a second or more);
    what it adds to memory (a task's checkpoints) ``cortex memory embed`` embeds later."""
    config = load_config(None, env)
    return replace(config, embedder="") if config.embedder else config


def _owner(env: Mapping[str, str]) -> int | None:
    """The harness pid the hook process passed on (``OWNER_VAR``), if any."""
    raw = env.get(OWNER_VAR, "")
    return int(raw) if raw.isdigit() and 1 < int(raw) < 2**31 else None


def _clock(env: Mapping[str, str]) -> Clock:
    now = env.get("CORTEX_NOW")
    return FixedClock(now) if now else SystemClock()


# -- handlers ------------------------------------------------------------------------------------
def on_start(hook: Hook) -> str | None:
    if hook.event.source == "compact":
        hook.ensure_open(reopen_ended=True)
        state = hook.session()
        return compaction_context(hook, state) if state else None
    resumed = hook.event.source == "resume" and hook.session() is not None
    restored = hook.start()
    text = restored_context(restored)
    if resumed:
        # A resumed conversation gets all of the session's pins, not only newly inherited ones.
        state = hook.session()
        pins = format_pins_block(state.working_memory, PINS_BLOCK_CHARS) if state else None
        text = _join(restored.preamble, pins)
    hook.save_hook_state(primed=text is not None, prompted=False)
    hook.defer(partial(prune_session_states, hook.home))  # of sessions that sent no SessionEnd
    return text


def on_prompt(hook: Hook) -> str | None:
    text = None
    prompt = hook.event.text or ""
    if hook.session() is None or not hook.hook_state:
        # The start never reached us (a known host gap): make up for it on this first prompt.
        text = restored_context(hook.start(_prompt_keywords(prompt)))
        hook.save_hook_state(primed=text is not None)
    elif not (hook.hook_state.get("primed") or hook.hook_state.get("prompted")):
        if hook.event.host in ev.PROMPT_CONTEXT_HOSTS and not hook.offline:
            # The start injected nothing: a second pass, with the prompt's words as context.
            text = restored_context(hook.start(_prompt_keywords(prompt)))
    hook.ensure_open(reopen_ended=True)  # a prompt means the conversation goes on
    hook.record(text=prompt or None)
    hook.save_hook_state(prompted=True)
    return text


def on_tool(hook: Hook) -> None:
    if hook.ensure_open():
        # ``record`` redacts the input (a command line can carry a token) before topics see it.
        hook.record(tool_name=hook.event.tool_name, tool_input=hook.event.tool_input)


def on_cwd(hook: Hook) -> None:
    if hook.ensure_open():
        hook.record(workdir=hook.cwd)


def on_pre_compact(hook: Hook) -> None:
    if hook.ensure_open(reopen_ended=True):
        checkpoint_before_compaction(hook)


def on_post_compact(hook: Hook) -> None:
    if not hook.ensure_open(reopen_ended=True):
        return
    summary = hook.event.text
    if summary:
        at = hook.sessions.now_iso()
        hook.save_hook_state(compact_summary=redact(summary), compact_at=at)
        record_compaction_summary(hook, summary)
    hook.record(text=summary)


def on_stop(hook: Hook) -> None:
    if hook.ensure_open():
        hook.record(text=hook.event.text, weight=ASSISTANT_WEIGHT)


def on_end(hook: Hook) -> None:
    state = hook.session()
    if state is not None and state.is_open:
        if state.task_slug:
            task_session_end(hook, state)
        hook.sessions.on_session_end(hook.session_id)
    try:
        os.unlink(session_state_path(hook.home, hook.session_id))
    except OSError:
        pass


HANDLERS: dict[str, Callable[[Hook], str | None]] = {
    ev.START: on_start,
    ev.PROMPT: on_prompt,
    ev.TOOL: on_tool,
    ev.TOOL_FAILURE: on_tool,
    ev.CWD: on_cwd,
    ev.PRE_COMPACT: on_pre_compact,
    ev.POST_COMPACT: on_post_compact,
    ev.STOP: on_stop,
    ev.END: on_end,
}


# -- compaction ----------------------------------------------------------------------------------
def _compaction(hook: Hook) -> CompactionService:
    return hook.services.compaction  # built (imported) only when a compaction event needs it


def _trigger(hook: Hook) -> str:
    return "manual" if hook.event.trigger == "manual" else "auto"


def checkpoint_before_compaction(hook: Hook) -> None:
    """The write-ahead checkpoint a host's compaction waits for (never blocks it).

    An incremental capture first (lease, pending tasks, the user's compaction instructions as
    a turn), then the protocol checkpoint: pins, pending tasks, rules and the latest decisions,
    a snapshot of the meaningful events and the compaction event.
    """
    hook.record(text=hook.event.text)
    _compaction(hook).pre_compact(hook.session_id, _trigger(hook), hook.event.text or "")


def task_session_end(hook: Hook, state: SessionState) -> None:
    """A session working on a task keeps a session-end checkpoint (file, index, store and
    memory) when the host ends it, whether or not the agent ran ``cortex task end``."""
    from cortex.services.protocol.rituals import harness_session_end

    harness_session_end(hook.services.protocol, state)


def record_compaction_summary(hook: Hook, summary: str) -> None:
    """The host's summary completes the compaction event and joins the event log."""
    _compaction(hook).post_compact(hook.session_id, summary, _trigger(hook))


def compaction_context(hook: Hook, state: SessionState) -> str | None:
    """What an agent gets back right after compaction: the write-ahead checkpoint (rules, pins,
    pending tasks, decisions), else its pins, and the host's summary."""
    service = _compaction(hook)
    latest = service.latest_checkpoint(state.session_id)
    kept = (
        service.format_checkpoint(latest).rstrip()
        if latest
        else format_pins_block(state.working_memory, PINS_BLOCK_CHARS)
    )
    summary = hook.hook_state.get("compact_summary")
    if not isinstance(summary, str) or not summary.strip():
        return kept
    at = str(hook.hook_state.get("compact_at") or "")[:16].replace("T", " ")
    block = f"LAST COMPACTION SUMMARY ({at} UTC):\n{summary.strip()[:SUMMARY_CHARS]}"
    return _join(kept, block)


# -- helpers -------------------------------------------------------------------------------------
def _prompt_keywords(prompt: str) -> tuple[str, ...]:
    return (clip(prompt, ev.MAX_SIGNAL_CHARS),) if prompt else ()


def _join(*parts: str | None) -> str | None:
    text = "\n\n".join(p for p in parts if p)
    return text or None


def _cap(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_CONTEXT_CHARS:
        return text
    return text[: MAX_CONTEXT_CHARS - 1] + "…"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    said = isinstance(exc, (ValidationError, ReadOnlyHome))
    return text if said else f"{type(exc).__name__}: {text}"


def _logged_name(event: HookEvent) -> str:
    """What the log writes of the event's name: only what was checked (a name or an id that
    failed may have anything glued on, a credential too, which redaction could miss). A name
    this host handles as sent; any other as ``ev.shown_name`` gives it; none as ``-``."""
    if event.kind:
        return event.name
    return ev.shown_name(event.name) if event.name else "-"


def _checked_id(session_id: str) -> str:
    """``session_id`` when it is safe as a file name; else a ValidationError that says so
    without quoting it (``check_id``'s own quotes it)."""
    try:
        return check_id(session_id)
    except UnsafeIdError:
        raise ValidationError(
            f"invalid session id ({len(session_id)} characters, not shown): use 1-128 letters, "
            "digits or . _ : @ + - (no '/', no '..'); nothing recorded"
        ) from None


def _safe_id(session_id: str | None) -> str | None:
    try:
        return check_id(session_id) if session_id is not None else None
    except ValidationError:
        return None


def _engine_line(home: Path, message: str) -> None:
    log_line(home, f"engine: {message}")
