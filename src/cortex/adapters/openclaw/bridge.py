"""``cortex bridge``: one long-lived process speaking JSON lines on stdio, for OpenClaw.

The OpenClaw plugin (``integrations/openclaw/``) spawns it from ``registerService.start`` and
sends one JSON object per line: ``{"id": 1, "method": "session_start", "params": {...}}``. Each
request gets one line back, in order: ``{"id": 1, "result": {...}}`` (with a ``queued`` field
when the request's writes wait in the journal for an unreachable server, client mode) or
``{"id": 1, "error": {"type": "NotFoundError", "status": 404, "message": "..."}}``. Bad input
(not JSON, not an object, an unknown method, wrong parameter types, a line over
``MAX_LINE_BYTES``, a lone surrogate anywhere) gets an error line or is answered; nothing a
client sends stops the loop except ``shutdown`` or the end of stdin. Logs go to stderr:
stdout carries only the protocol.

OpenClaw names its conversations by ``sessionId`` (passed here as ``session_key``); the bridge
maps each key to a Cortex session it starts. The session started by the service itself (before
OpenClaw reports a conversation) is adopted by the first key that arrives. ``shutdown`` ends
the sessions this bridge opened (the final capture), and so does the end of stdin (a host
that exits without ``shutdown``, ``echo ... | cortex bridge``: every turn is captured as it
happens, so there is nothing to recover); if the bridge dies instead, its sessions stay open
and the next start recovers them as crashed (their owner process is gone).

SIGTERM or SIGINT also end those sessions before exiting (a supervisor may signal the whole
process group). Standard library and Cortex's own modules only: no click, no SDK. The
methods are in ``methods.py``, their parameter checks in ``params.py``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cortex.adapters.openclaw.methods import METHODS
from cortex.adapters.openclaw.params import (
    MAX_LINE_BYTES,
    given_str,
    obj,
    opt_str,
    parse_request,
    str_list,
)
from cortex.config import Config
from cortex.core.models import RestoredSessionContext, SessionState
from cortex.core.preamble import format_pins_block
from cortex.core.transcripts import format_checkpoint
from cortex.errors import CortexError, NotFoundError, ValidationError
from cortex.logs import getLogger
from cortex.services.app import Services

if TYPE_CHECKING:
    from cortex.services.compaction import CompactionService
    from cortex.services.events import EventLog
    from cortex.services.filemode import FileModeService
    from cortex.services.sessions.manager import SessionPersistenceManager

log = getLogger("cortex.adapters.openclaw.bridge")

__all__ = ["MAX_LINE_BYTES", "Bridge", "openclaw_config", "run", "serve"]


def openclaw_config(config: Config, workspace: Path | None) -> Config:
    """Point the working-memory file (``memory/working_memory.json``) and file mode's
    workspace at OpenClaw's workspace.

    Only where no setting moved them away from their defaults; ``sessions_dir`` already
    defaults to ``{home}/sessions``, which is ``~/.openclaw/sessions`` under the OpenClaw home.
    """
    base = workspace if workspace is not None else config.home / "workspace"
    if config.file_mode_workspace == config.home / "workspace":
        config = replace(config, file_mode_workspace=base)
    if config.working_memory_path != config.home / "working_memory.json":
        return config
    return replace(config, working_memory_path=base / "memory" / "working_memory.json")


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
    pending_files: dict[str, str] = field(default_factory=dict)
    """File mode: the workspace's memory files, for a session's first prompt."""
    reinject: set[str] = field(default_factory=set)
    """Sessions compacted since their last prompt: that prompt gets the checkpoint back."""
    stopping: bool = False
    since: int = 0
    """The writes the journal held for a server before this request (client mode)."""

    def __post_init__(self) -> None:
        self.services.answers_queued()  # each answer says what it queued (``queued``)

    @property
    def sessions(self) -> SessionPersistenceManager:
        return self.services.sessions

    @property
    def compaction(self) -> CompactionService:
        return self.services.compaction

    @property
    def events(self) -> EventLog:
        return self.services.events

    @property
    def filemode(self) -> FileModeService:
        return self.services.filemode

    @property
    def file_mode(self) -> bool:
        """Whether the file-mode triggers run on their own (``file_mode_enabled``)."""
        return self.services.config.file_mode_enabled

    def queued(self) -> dict[str, Any] | None:
        """This request's writes that wait in the journal for the server (client mode, the
        server unreachable): the answer says so in its ``queued`` field; None when none."""
        return self.services.queued(self.since)

    def offline(self) -> bool:
        """Whether a write of this request went to the journal (``queued`` without counting
        what waits there, a read of the journal file that the answer makes once)."""
        return self.services.spooled() > self.since

    def file_trigger(self, action: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a file-mode trigger for a hook: fail open (log, go on) when it cannot."""
        try:
            return call(*args, **kwargs)
        except CortexError as exc:
            log.warning("file mode %s skipped: %s", action, exc)
            return None

    # -- sessions ------------------------------------------------------------------------------
    def start_options(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The options of a session start a request gives, checked (``session_start`` checks
        them for a key already bound too, which starts nothing)."""
        return {
            "project": self.project_in(params),
            "keywords": str_list(params, "keywords"),
            "workdir": given_str(params, "workdir", 4096, "the bridge's own", "a directory")
            or self.workdir,
            "agent_id": given_str(params, "agent_id", 200, "the bridge's own", "an agent id")
            or self.agent_id,
        }

    def start(self, params: Mapping[str, Any]) -> RestoredSessionContext:
        """Open a Cortex session and remember its preamble for the first prompt."""
        options = self.start_options(params)
        project = options["project"]
        restored = self.sessions.on_session_start(
            None, self.channel, owner_pid=os.getpid(), **options
        )
        self.opened.append(restored.session_id)
        if restored.preamble:
            self.pending_preamble[restored.session_id] = restored.preamble
        if self.file_mode:
            boot = self.file_trigger("bootstrap", self.filemode.bootstrap, project)
            if boot is not None and boot.text:
                self.pending_files[restored.session_id] = boot.text
        return restored

    def project_in(self, params: Mapping[str, Any]) -> str | None:
        """The project a request names, else the bridge's (an empty one is refused)."""
        named = given_str(params, "project", 200, "the bridge's project", "a project id")
        return named or self.project

    def lookup(self, params: Mapping[str, Any]) -> str | None:
        """The session a request names (``session_id``, a bound key, or the current one)."""
        explicit = given_str(params, "session_id", 200, "the current session", "a session id")
        if explicit is not None:
            return explicit
        key = opt_str(params, "session_key", 500)
        if key is not None:
            return self.bindings.get(key)
        return self.unbound or (self.opened[-1] if self.opened else None)

    def session_for(self, params: Mapping[str, Any]) -> str:
        """Like ``lookup``, but a new key adopts the service's session or starts one."""
        found = self.lookup(params)
        if found is not None:
            return found
        key = opt_str(params, "session_key", 500)
        if key is None:
            raise NotFoundError("no session yet; call session_start first")
        if self.unbound is not None:
            self.bindings[key], self.unbound = self.unbound, None
        else:
            self.bindings[key] = self.start(params).session_id
        return self.bindings[key]

    def end(self, session_id: str) -> SessionState:
        """Final capture of one session (after a session-end checkpoint when it works on a
        protocol task); forget its key."""
        current = self.sessions.get_session(session_id)
        if current is not None and current.is_open and current.task_slug:
            from cortex.services.protocol.rituals import harness_session_end

            harness_session_end(self.services.protocol, current)
        state = self.sessions.on_session_end(session_id)
        self.bindings = {k: v for k, v in self.bindings.items() if v != session_id}
        if self.unbound == session_id:
            self.unbound = None
        self.pending_preamble.pop(session_id, None)
        self.pending_files.pop(session_id, None)
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
        """What to prepend to a prompt: the preamble and the workspace's memory files (a
        session's first prompt only), then the checkpoint (the first prompt after a
        compaction; it carries the pins) or, unless ``with_pins`` is false, the pins."""
        preamble = self.pending_preamble.pop(session_id, None)
        files = self.pending_files.pop(session_id, None)
        offline = self.offline()  # the server has not taken this prompt: no pins
        pins = "" if offline else format_pins_block(self.sessions.list_pins(session_id))
        checkpoint = None
        if session_id in self.reinject and not offline:
            self.reinject.discard(session_id)
            latest = self.compaction.latest_checkpoint(session_id)
            checkpoint = format_checkpoint(latest).rstrip() if latest else None
        wrapped = preamble and (
            f'<session-continuity hint="inherited from prior sessions">\n{preamble}\n'
            "</session-continuity>"
        )
        parts = [p for p in (wrapped, files, checkpoint or (pins if with_pins else None)) if p]
        return {
            "session_id": session_id,
            "preamble": preamble,
            "memory_files": files,
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
            params = obj(request, "params")
            self.since = self.services.spooled()
            result = handler(self, params)
            queued = self.queued()
            if queued is not None and isinstance(result, dict):
                result = {**result, "queued": queued}
            return {"id": rid, "result": result}
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
    """Answer requests line by line until ``shutdown`` or EOF, which ends the sessions this
    bridge opened as ``shutdown`` does; return the exit code."""
    while not bridge.stopping:
        try:
            line = read_line(stdin)
        except ValueError as exc:
            _write(stdout, {"id": None, "error": _error(ValidationError(str(exc)))})
            continue
        if line is None:
            ended = bridge.end_all()
            log.info("end of input: ended %d session(s)", len(ended))
            break
        if not line.strip():
            continue
        try:
            request = parse_request(line)
        except ValidationError as exc:
            response = {"id": None, "error": _error(exc)}
        else:
            response = bridge.handle(request)
        _write(stdout, response)
    return 0


def _write(stdout: IO[bytes], response: dict[str, Any]) -> None:
    """One answer line; what cannot be UTF-8 (a lone surrogate) is written as ``?``, and an
    answer holding NaN or Infinity (no method makes one) as an error: neither is JSON."""
    try:
        text = json.dumps(response, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError as exc:
        text = json.dumps({"id": None, "error": _error(exc)})
    stdout.write(text.encode("utf-8", "replace") + b"\n")
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
