"""``cortex bridge``: one long-lived process speaking JSON lines on stdio, for OpenClaw.

The OpenClaw plugin (``integrations/openclaw/``) spawns it from ``registerService.start`` and
sends one JSON object per line: ``{"id": 1, "method": "session_start", "params": {...}}``. Each
request gets one line back, in order: ``{"id": 1, "result": {...}}`` or
``{"id": 1, "error": {"type": "NotFoundError", "status": 404, "message": "..."}}``. Bad input
(not JSON, not an object, an unknown method, wrong parameter types, a line over
``MAX_LINE_BYTES``) gets an error line; nothing a client sends stops the loop except
``shutdown`` or the end of stdin. Logs go to stderr: stdout carries only the protocol.

OpenClaw names its conversations by ``sessionId`` (passed here as ``session_key``); the bridge
maps each key to a Cortex session it starts. The session started by the service itself (before
OpenClaw reports a conversation) is adopted by the first key that arrives. ``shutdown`` ends
the sessions this bridge opened (the final capture); if the bridge dies instead, its sessions
stay open and the next start recovers them as crashed (their owner process is gone).

SIGTERM or SIGINT also end those sessions before exiting (a supervisor may signal the whole
process group). Standard library and Cortex's own modules only: no click, no SDK.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cortex import __version__
from cortex.config import Config
from cortex.core.models import RestoredSessionContext, SessionState
from cortex.core.preamble import format_pins_block
from cortex.core.transcripts import format_checkpoint
from cortex.errors import CortexError, NotFoundError, ValidationError
from cortex.services.app import Services

if TYPE_CHECKING:
    from cortex.services.compaction import CompactionService
    from cortex.services.events import EventLog
    from cortex.services.sessions.manager import SessionPersistenceManager

log = logging.getLogger("cortex.adapters.openclaw.bridge")

MAX_LINE_BYTES = 8 * 1024 * 1024
"""A request line longer than this is refused (and skipped to its newline)."""
MAX_SIGNAL_TEXT = 20_000
"""Characters of a turn's messages mined for topics."""
PROMPT_WEIGHT = 0.5
"""Design 9.3: prompt keywords count half as much as other text."""

Handler = Callable[["Bridge", Mapping[str, Any]], Any]


def openclaw_config(config: Config, workspace: Path | None) -> Config:
    """Point the working-memory file at OpenClaw's workspace (``memory/working_memory.json``).

    Only when no setting moved it away from its default; ``sessions_dir`` already defaults to
    ``{home}/sessions``, which is ``~/.openclaw/sessions`` under the OpenClaw home.
    """
    if config.working_memory_path != config.home / "working_memory.json":
        return config
    base = workspace if workspace is not None else config.home / "workspace"
    return replace(config, working_memory_path=base / "memory" / "working_memory.json")


# -- parameter checks (validation at the edge) ---------------------------------------------------
def _opt_str(params: Mapping[str, Any], name: str, limit: int = 4096) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, not {type(value).__name__}")
    return value[:limit]


def _str(params: Mapping[str, Any], name: str, limit: int = 4096) -> str:
    value = _opt_str(params, name, limit)
    if value is None:
        raise ValidationError(f"{name} is required")
    return value


def _bool(params: Mapping[str, Any], name: str, default: bool) -> bool:
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be true or false")
    return value


def _number(params: Mapping[str, Any], name: str, default: float) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{name} must be a number")
    return float(value)


def _str_list(params: Mapping[str, Any], name: str, limit: int = 200) -> list[str]:
    value = params.get(name) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValidationError(f"{name} must be a list of strings")
    return [str(item)[:4096] for item in value[:limit] if isinstance(item, str | int | float)]


def _object(params: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = params.get(name) or {}
    if not isinstance(value, dict):
        raise ValidationError(f"{name} must be an object")
    return value


def _content_text(message: Any) -> str:
    """The text of one message, as OpenClaw or an LLM API shapes it (a string or blocks)."""
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""


def message_text(messages: Any, limit: int = MAX_SIGNAL_TEXT) -> str:
    """The text of a turn's messages (newest last), at most ``limit`` characters."""
    if not isinstance(messages, list):
        return ""
    return "\n".join(t for t in map(_content_text, messages[-20:]) if t)[-limit:]


def last_reply(messages: Any, limit: int = MAX_SIGNAL_TEXT) -> str:
    """The text of the last assistant message, or "" when there is none."""
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            text = _content_text(message).strip()
            if text:
                return text[:limit]
    return ""


def _restored(ctx: RestoredSessionContext) -> dict[str, Any]:
    return ctx.to_dict() | {"cold_start": ctx.preamble is None}


def _summary(state: SessionState) -> dict[str, Any]:
    return {
        "session_id": state.session_id,
        "state": state.state,
        "start_time": state.start_time,
        "end_time": state.end_time,
        "project": state.project,
        "previous_session_id": state.previous_session_id,
        "pins": [p.to_dict() for p in state.working_memory],
        "pending_tasks": [t.to_dict() for t in state.pending_tasks],
        "hot_topics": list(state.hot_topics),
    }


@dataclass
class Bridge:
    """Maps OpenClaw's hook events and tool calls onto Cortex's services."""

    services: Services
    project: str | None = None
    workdir: str | None = None
    agent_id: str | None = None
    channel: str = "openclaw"
    bindings: dict[str, str] = field(default_factory=dict)
    """OpenClaw session key -> Cortex session id."""
    unbound: str | None = None
    """The session the service started, until a key adopts it."""
    opened: list[str] = field(default_factory=list)
    pending_preamble: dict[str, str] = field(default_factory=dict)
    reinject: set[str] = field(default_factory=set)
    """Sessions compacted since their last prompt: that prompt gets the checkpoint back."""
    stopping: bool = False

    @property
    def sessions(self) -> SessionPersistenceManager:
        return self.services.sessions

    @property
    def compaction(self) -> CompactionService:
        return self.services.compaction

    @property
    def events(self) -> EventLog:
        return self.services.events

    # -- sessions ------------------------------------------------------------------------------
    def start(self, params: Mapping[str, Any]) -> RestoredSessionContext:
        """Open a Cortex session and remember its preamble for the first prompt."""
        project = _opt_str(params, "project", 200) or self.project
        restored = self.sessions.on_session_start(
            None,
            self.channel,
            project=project,
            keywords=_str_list(params, "keywords"),
            workdir=_opt_str(params, "workdir") or self.workdir,
            agent_id=_opt_str(params, "agent_id", 200) or self.agent_id,
            owner_pid=os.getpid(),
        )
        self.opened.append(restored.session_id)
        if restored.preamble:
            self.pending_preamble[restored.session_id] = restored.preamble
        return restored

    def lookup(self, params: Mapping[str, Any]) -> str | None:
        """The session a request names (``session_id``, a bound key, or the current one)."""
        explicit = _opt_str(params, "session_id", 200)
        if explicit:
            return explicit
        key = _opt_str(params, "session_key", 500)
        if key is not None:
            return self.bindings.get(key)
        return self.unbound or (self.opened[-1] if self.opened else None)

    def session_for(self, params: Mapping[str, Any]) -> str:
        """Like ``lookup``, but a new key adopts the service's session or starts one."""
        found = self.lookup(params)
        if found is not None:
            return found
        key = _opt_str(params, "session_key", 500)
        if key is None:
            raise NotFoundError("no session yet; call session_start first")
        if self.unbound is not None:
            self.bindings[key], self.unbound = self.unbound, None
        else:
            self.bindings[key] = self.start(params).session_id
        return self.bindings[key]

    def end(self, session_id: str) -> SessionState:
        """Final capture of one session; forget its key."""
        state = self.sessions.on_session_end(session_id)
        self.bindings = {k: v for k, v in self.bindings.items() if v != session_id}
        if self.unbound == session_id:
            self.unbound = None
        self.pending_preamble.pop(session_id, None)
        return state

    def end_all(self) -> list[str]:
        """End every session this bridge opened that is still open."""
        ended = []
        for sid in self.opened:  # each start opens a new id: no duplicates
            state = self.sessions.get_session(sid)
            if state is not None and state.is_open:
                self.end(sid)
                ended.append(sid)
        return ended

    def prompt_context(self, session_id: str, with_pins: bool = True) -> dict[str, Any]:
        """What to prepend to a prompt: the preamble (a session's first prompt only), then the
        checkpoint (the first prompt after a compaction; it carries the pins) or, unless
        ``with_pins`` is false, the pins."""
        preamble = self.pending_preamble.pop(session_id, None)
        pins = format_pins_block(self.sessions.list_pins(session_id))
        checkpoint = None
        if session_id in self.reinject:
            self.reinject.discard(session_id)
            latest = self.compaction.latest_checkpoint(session_id)
            checkpoint = format_checkpoint(latest).rstrip() if latest else None
        wrapped = preamble and (
            f'<session-continuity hint="inherited from prior sessions">\n{preamble}\n'
            "</session-continuity>"
        )
        parts = [p for p in (wrapped, checkpoint or (pins if with_pins else None)) if p]
        return {
            "session_id": session_id,
            "preamble": preamble,
            "checkpoint": checkpoint,
            "pins": pins,
            "prepend_context": "\n\n".join(parts) or None,
        }

    # -- the loop ------------------------------------------------------------------------------
    def handle(self, request: Any) -> dict[str, Any]:
        """One request object -> one response object; never raises."""
        rid = request.get("id") if isinstance(request, dict) else None
        try:
            if not isinstance(request, dict):
                raise ValidationError('a request is an object: {"id", "method", "params"}')
            method = request.get("method")
            handler = METHODS.get(method) if isinstance(method, str) else None
            if handler is None:
                named = (
                    f"unknown method {method[:60]!r}" if isinstance(method, str) else "no method"
                )
                raise ValidationError(f"{named}; use one of: {', '.join(sorted(METHODS))}")
            params = request.get("params") or {}
            if not isinstance(params, dict):
                raise ValidationError("params must be an object")
            return {"id": rid, "result": handler(self, params)}
        except CortexError as exc:
            return {"id": rid, "error": _error(exc)}
        except Exception as exc:  # noqa: BLE001 - one bad request must not stop the bridge
            if self.services.config.raise_errors:
                raise
            log.exception("bridge request failed")
            return {"id": rid, "error": _error(exc)}


def _error(exc: Exception) -> dict[str, Any]:
    """The error body: a CortexError's own status and message, else 500 "unexpected ..."."""
    name = type(exc).__name__
    if isinstance(exc, CortexError):
        return {"type": name, "status": exc.status, "message": str(exc)}
    return {"type": name, "status": 500, "message": f"unexpected {name}: {exc}"}


# -- methods -------------------------------------------------------------------------------------
def _ping(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"pong": True, "version": __version__, "pid": os.getpid()}


def _session_start(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """Service start (no key): a new session. A conversation's start (a key): bind or start."""
    key = _opt_str(params, "session_key", 500)
    if key is None:
        restored = bridge.start(params)
        bridge.unbound = restored.session_id
        return _restored(restored) | {"preamble_pending": restored.preamble is not None}
    adopted = key not in bridge.bindings and bridge.unbound is not None
    sid = bridge.session_for(params)
    state = bridge.sessions.resolve(sid)
    return {
        "session_id": sid,
        "adopted": adopted,
        "preamble_pending": sid in bridge.pending_preamble,
        "pins": [p.to_dict() for p in state.working_memory],
    }


def _before_prompt_build(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    sid = bridge.session_for(params)
    prompt = _opt_str(params, "prompt", MAX_SIGNAL_TEXT)
    if prompt and prompt.strip():
        bridge.sessions.record(sid, text=prompt, weight=PROMPT_WEIGHT)
        bridge.events.append(sid, prompt, role="user")  # for snapshots and checkpoints
    return bridge.prompt_context(sid, _bool(params, "with_pins", True))


def _after_tool_call(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    sid = bridge.session_for(params)
    state = bridge.sessions.record(
        sid,
        tool_name=_opt_str(params, "tool_name", 200),
        tool_input=_object(params, "params"),  # record() redacts it before it feeds topics
        files=_str_list(params, "derived_paths"),
    )
    return {"session_id": sid, "hot_topics": list(state.hot_topics[:10])}


def _agent_end(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's incremental ``agent_end`` capture: this turn's text goes to the store now."""
    sid = bridge.session_for(params)
    text = message_text(params.get("messages")) or _opt_str(params, "text", MAX_SIGNAL_TEXT)
    categories = _str_list(params, "categories")
    state = bridge.sessions.record(sid, text=text or None, categories=categories)
    reply = last_reply(params.get("messages"))
    if reply:
        bridge.events.append(sid, reply, role="assistant")
    return {"session_id": sid, "hot_topics": list(state.hot_topics[:10])}


def _before_compaction(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """Write-ahead before OpenClaw compacts: capture the turn, then a checkpoint (with a
    snapshot and a compaction event) whose text the next prompt gets back."""
    sid = bridge.session_for(params)
    text = message_text(params.get("messages"))
    bridge.sessions.record(sid, text=text or None)
    checkpoint = bridge.compaction.pre_compact(sid, "auto")
    bridge.reinject.add(sid)
    return {"session_id": sid, "captured": True, "checkpoint_id": checkpoint.checkpoint_id}


def _session_end(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """End a conversation's session; a key the bridge never saw ends nothing."""
    sid = bridge.lookup(params)
    if sid is None:
        return {"session_id": None, "ended": False}
    return _summary(bridge.end(sid)) | {"ended": True}


def _pin(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    sid = bridge.session_for(params)
    pin = bridge.sessions.add_pin(
        _str(params, "label", 1000),
        _str(params, "content", MAX_LINE_BYTES),
        sid,
        critical=_bool(params, "critical", False),
        confidence=_number(params, "confidence", 1.0),
    )
    return {"session_id": sid, "pin": pin.to_dict(), "count": len(bridge.sessions.list_pins(sid))}


def _unpin(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    sid = bridge.session_for(params)
    pin = bridge.sessions.remove_pin(_str(params, "label", 1000), sid)
    return {"session_id": sid, "pin": pin.to_dict(), "count": len(bridge.sessions.list_pins(sid))}


def _view(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    sid = bridge.session_for(params)
    pins = bridge.sessions.list_pins(sid)
    return {"session_id": sid, "pins": [p.to_dict() for p in pins], "count": len(pins)}


def _session_continue(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    target = _str(params, "target_session_id", 200)
    sid = bridge.session_for(params)
    restored = bridge.sessions.force_inherit_session(target, sid, actor="openclaw")
    return _restored(restored) | {"continued_from": target}


def _chain(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    sid = bridge.session_for(params)
    depth = _number(params, "depth", 5)
    if depth != int(depth):
        raise ValidationError("depth must be a whole number, e.g. 5")
    chain = bridge.sessions.get_session_chain(sid, int(depth))
    return {"session_id": sid, "sessions": [_summary(s) for s in chain]}


def _shutdown(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """Stop the loop after replying; by default end (capture) every session opened here."""
    ended = bridge.end_all() if _bool(params, "end_sessions", True) else []
    bridge.stopping = True
    return {"ended": ended}


METHODS: dict[str, Handler] = {
    "after_tool_call": _after_tool_call,
    "agent_end": _agent_end,
    "before_compaction": _before_compaction,
    "before_prompt_build": _before_prompt_build,
    "chain": _chain,
    "pin": _pin,
    "ping": _ping,
    "session_continue": _session_continue,
    "session_end": _session_end,
    "session_start": _session_start,
    "shutdown": _shutdown,
    "unpin": _unpin,
    "view": _view,
}


# -- stdio -------------------------------------------------------------------------------------
def read_line(stream: IO[bytes]) -> bytes | None:
    """The next line without its newline; None at EOF. A line too long raises ValueError."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:  # skip the rest of the oversized line
            rest = stream.readline(MAX_LINE_BYTES)
            if not rest or rest.endswith(b"\n"):
                break
        raise ValueError(f"request line over {MAX_LINE_BYTES} bytes")
    return line.rstrip(b"\r\n")


def serve(bridge: Bridge, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Answer requests line by line until ``shutdown`` or EOF; return the exit code."""
    while not bridge.stopping:
        try:
            line = read_line(stdin)
        except ValueError as exc:
            _write(stdout, {"id": None, "error": _error(ValidationError(str(exc)))})
            continue
        if line is None:
            break
        if not line.strip():
            continue
        try:
            request = json.loads(line.decode("utf-8", "replace"))
        except ValueError as exc:
            response = {"id": None, "error": _error(ValidationError(f"not JSON: {exc}"))}
        else:
            response = bridge.handle(request)
        _write(stdout, response)
    return 0


def _write(stdout: IO[bytes], response: dict[str, Any]) -> None:
    data = json.dumps(response, ensure_ascii=False, default=str).encode("utf-8") + b"\n"
    stdout.write(data)
    stdout.flush()


class Terminated(Exception):
    """SIGTERM or SIGINT: end the sessions this bridge opened, then exit."""


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


def run(
    services: Services,
    *,
    project: str | None = None,
    workdir: str | None = None,
    agent_id: str | None = None,
) -> int:
    """Serve on this process's stdin/stdout; a termination signal is a graceful shutdown."""
    bridge = Bridge(services, project=project, workdir=workdir, agent_id=agent_id)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    try:
        return serve(bridge, sys.stdin.buffer, sys.stdout.buffer)
    except Terminated as exc:
        ended = bridge.end_all()
        log.info("%s: ended %d session(s)", exc, len(ended))
        return 0
    finally:
        services.close()
