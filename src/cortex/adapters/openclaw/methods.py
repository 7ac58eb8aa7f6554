"""The bridge's methods: one function per request ``method``, each over the ``Bridge``'s
services, answering a JSON-ready dict (``METHODS`` is the table ``Bridge.handle`` uses)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cortex import __version__
from cortex.adapters.openclaw.params import (
    MAX_LINE_BYTES,
    MAX_SIGNAL_TEXT,
    choice,
    flag,
    last_reply,
    message_list,
    message_text,
    number,
    obj,
    opt_str,
    req_str,
    str_list,
)
from cortex.core.models import Pin, RestoredSessionContext, SessionState
from cortex.errors import ValidationError
from cortex.services.filemode.service import KINDS
from cortex.services.filemode.service import SNAPSHOT_TRIGGERS as FILE_SNAPSHOT_TRIGGERS

if TYPE_CHECKING:
    from cortex.adapters.openclaw.bridge import Bridge

PROMPT_WEIGHT = 0.5
"""Design 9.3: prompt keywords count half as much as other text."""

MAX_CHAIN_DEPTH = 100
"""As the MCP tool's ``session_chain``."""

Handler = Callable[["Bridge", Mapping[str, Any]], Any]


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


def _ping(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"pong": True, "version": __version__, "pid": os.getpid()}


def _session_start(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """Service start (no key): a new session. A conversation's start (a key): bind or start."""
    key = opt_str(params, "session_key", 500)
    bridge.start_options(params)
    if key is None:
        restored = bridge.start(params)
        bridge.unbound = restored.session_id
        return _restored(restored) | {"preamble_pending": restored.preamble is not None}
    adopted = key not in bridge.bindings and bridge.unbound is not None
    sid = bridge.session_for(params)
    # (a session whose start waits in the journal is open: client mode, the server down)
    state = bridge.sessions.get_session(sid) or bridge.sessions.resolve(sid)
    return {
        "session_id": sid,
        "adopted": adopted,
        "preamble_pending": sid in bridge.pending_preamble,
        "pins": [p.to_dict() for p in state.working_memory],
    }


# Each method reads its parameters before it finds (or starts) the session and writes: a
# refused parameter leaves nothing done, so the request can be sent again as it should be.
def _before_prompt_build(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    prompt = opt_str(params, "prompt", MAX_SIGNAL_TEXT)
    with_pins = flag(params, "with_pins", True)
    sid = bridge.session_for(params)
    if prompt and prompt.strip():
        bridge.sessions.record(sid, text=prompt, weight=PROMPT_WEIGHT)
        bridge.events.append(sid, prompt, role="user")  # for snapshots and checkpoints
    return bridge.prompt_context(sid, with_pins)


def _after_tool_call(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    tool_name = opt_str(params, "tool_name", 200)
    tool_input = obj(params, "params")  # record() redacts it before it feeds topics
    files = str_list(params, "derived_paths")
    sid = bridge.session_for(params)
    state = bridge.sessions.record(sid, tool_name=tool_name, tool_input=tool_input, files=files)
    return {"session_id": sid, "hot_topics": list(state.hot_topics[:10])}


def _agent_end(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's incremental ``agent_end`` capture: this turn's text goes to the store now."""
    messages = message_list(params)
    text = message_text(messages) or opt_str(params, "text", MAX_SIGNAL_TEXT)
    categories = str_list(params, "categories")
    sid = bridge.session_for(params)
    state = bridge.sessions.record(sid, text=text or None, categories=categories)
    reply = last_reply(messages)
    if reply:
        bridge.events.append(sid, reply, role="assistant")
    return {"session_id": sid, "hot_topics": list(state.hot_topics[:10])}


def _before_compaction(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """Write-ahead before OpenClaw compacts: capture the turn, then a checkpoint (with a
    snapshot and a compaction event) whose text the next prompt gets back."""
    text = message_text(message_list(params))
    sid = bridge.session_for(params)
    bridge.sessions.record(sid, text=text or None)
    checkpoint = bridge.compaction.pre_compact(sid, "auto")
    bridge.reinject.add(sid)
    flushed = None
    if bridge.file_mode:  # file mode: the checkpoint goes to today's daily log as well
        written = bridge.file_trigger("flush", bridge.filemode.append_checkpoint, checkpoint)
        flushed = written.path if written is not None else None
    return {
        "session_id": sid,
        "captured": True,
        "checkpoint_id": checkpoint.checkpoint_id,
        "daily_log": flushed,
    }


RESET_REASONS = {"new": "new_session", "reset": "reset"}
"""OpenClaw's session-end reasons for /new and /reset, and the snapshot trigger of each."""


def _session_end(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """End a conversation's session; a key the bridge never saw ends nothing. File mode: on
    ``/new`` or ``/reset`` (``reason``) the session's snapshot file is written first, and the
    workspace is synced after."""
    trigger = RESET_REASONS.get(opt_str(params, "reason", 40) or "")
    sid = bridge.lookup(params)
    if sid is None:
        return {"session_id": None, "ended": False}
    snapshot = None
    if trigger is not None and bridge.file_mode:
        written = bridge.file_trigger("snapshot", bridge.filemode.snapshot, sid, trigger)
        snapshot = written.path if written is not None else None
    summary = _summary(bridge.end(sid))
    if bridge.file_mode:  # the session's memories reach memory.md, hand edits the database
        bridge.file_trigger("sync", bridge.filemode.sync, bridge.project)
    return summary | {"ended": True, "snapshot_file": snapshot}


# -- file mode, asked for explicitly (whatever file_mode_enabled says) --------------------------
def _memory_bootstrap(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    sync = flag(params, "sync", True)
    return bridge.filemode.bootstrap(bridge.project_in(params), sync=sync).to_dict()


def _memory_sync(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    return bridge.filemode.sync(bridge.project_in(params)).to_dict()


def _memory_flush(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    checkpoint_id = opt_str(params, "checkpoint_id", 200)
    summary = opt_str(params, "summary", MAX_SIGNAL_TEXT) or ""
    sid = bridge.session_for(params)
    written = bridge.filemode.flush(sid, checkpoint_id=checkpoint_id, summary=summary)
    return {"session_id": sid} | written.to_dict()


def _memory_snapshot(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    trigger = choice(params, "trigger", FILE_SNAPSHOT_TRIGGERS, "manual")
    slug = opt_str(params, "slug", 200)
    sid = bridge.session_for(params)
    written = bridge.filemode.snapshot(sid, trigger, slug=slug)
    return {"session_id": sid} | written.to_dict()


def _memory_remember(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    content = req_str(params, "content", MAX_LINE_BYTES)
    kind = choice(params, "kind", KINDS, "semantic")
    project = opt_str(params, "project", 200)
    sid = bridge.session_for(params)
    written = bridge.filemode.remember(content, kind=kind, session_id=sid, project=project)
    return {"session_id": sid} | written.to_dict()


def _pin(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    label = req_str(params, "label", 1000)
    content = req_str(params, "content", MAX_LINE_BYTES)
    critical = flag(params, "critical", False)
    confidence = number(params, "confidence", 1.0)
    sid = bridge.session_for(params)
    pin = bridge.sessions.add_pin(label, content, sid, critical=critical, confidence=confidence)
    return _pinned(bridge, sid, pin)


def _unpin(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    label = req_str(params, "label", 1000)
    sid = bridge.session_for(params)
    return _pinned(bridge, sid, bridge.sessions.remove_pin(label, sid))


def _pinned(bridge: Bridge, session_id: str, pin: Pin) -> dict[str, Any]:
    """A pin method's answer: the count is the server's (null while the write waits)."""
    count = None if bridge.offline() else len(bridge.sessions.list_pins(session_id))
    return {"session_id": session_id, "pin": pin.to_dict(), "count": count}


def _view(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    sid = bridge.session_for(params)
    pins = bridge.sessions.list_pins(sid)
    return {"session_id": sid, "pins": [p.to_dict() for p in pins], "count": len(pins)}


def _session_continue(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    target = req_str(params, "target_session_id", 200)
    sid = bridge.session_for(params)
    restored = bridge.sessions.force_inherit_session(target, sid, actor="openclaw")
    return _restored(restored) | {"continued_from": target}


def _chain(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    depth = number(params, "depth", 5)
    if depth != int(depth) or not 1 <= depth <= MAX_CHAIN_DEPTH:
        raise ValidationError(f"depth must be a whole number from 1 to {MAX_CHAIN_DEPTH}, e.g. 5")
    sid = bridge.session_for(params)
    chain = bridge.sessions.get_session_chain(sid, int(depth))
    return {"session_id": sid, "sessions": [_summary(s) for s in chain]}


def _shutdown(bridge: Bridge, params: Mapping[str, Any]) -> dict[str, Any]:
    """Stop the loop after replying; by default end (capture) every session opened here."""
    ended = bridge.end_all() if flag(params, "end_sessions", True) else []
    bridge.stopping = True
    return {"ended": ended}


METHODS: dict[str, Handler] = {
    "after_tool_call": _after_tool_call,
    "agent_end": _agent_end,
    "before_compaction": _before_compaction,
    "before_prompt_build": _before_prompt_build,
    "chain": _chain,
    "memory_bootstrap": _memory_bootstrap,
    "memory_flush": _memory_flush,
    "memory_remember": _memory_remember,
    "memory_snapshot": _memory_snapshot,
    "memory_sync": _memory_sync,
    "pin": _pin,
    "ping": _ping,
    "session_continue": _session_continue,
    "session_end": _session_end,
    "session_start": _session_start,
    "shutdown": _shutdown,
    "unpin": _unpin,
    "view": _view,
}
