"""Errors a Cortex user can cause, each one line that names the next step.

The tree::

    CortexError (500)
    ├── ConfigError (400)            a setting is unknown, malformed or out of range
    ├── ValidationError (400)        bad input: an id, a label, a size, a file's content
    │   └── UnsafeIdError (400)      an id that could escape its directory
    ├── UnauthorizedError (401)      no API key, an unknown or revoked one
    ├── ForbiddenError (403)         the API key's scopes do not allow the operation
    ├── NotFoundError (404)          no such session, pin, task or memory
    ├── ConflictError (409)          the operation does not fit the current state
    ├── StorageError (503)           the database or a file could not be read or written
    │   ├── BusyError (503)          what a request needs is held too long by another one
    │   └── UnavailableError (503)   the Cortex server cannot take a request now
    └── ServerConfigError (503)      the server's settings for a tenant are invalid

Every class carries an HTTP ``status`` so that the server maps errors in one handler.

A message names the next step in the terms of whoever reads it. The same service error reaches
the command line, the HTTP API, the MCP tools and Python callers, so a message never spells a
flag or a command itself: it names the parameter with ``param`` and a command a person runs as
the next step with ``command``, and each adapter renders the error in its own terms with
``CortexError.render`` and its ``Surface`` (``--project NAME`` on the command line,
``"project"`` over HTTP, `` `project` `` to an MCP tool or a Python caller). ``str(error)`` is
the Python caller's rendering. A command only an operator runs (``cortex db migrate``,
``cortex key create``) is written as it is: every reader passes it on to the operator.
"""

from __future__ import annotations


class CortexError(Exception):
    """Base of every error Cortex raises on purpose.

    Its message is redacted: an error may quote what a person typed (a label, an id), and
    every error reaches a terminal, a log or an HTTP body.
    """

    status = 500
    template = ""
    """The message with its references (``param``, ``command``) unrendered."""

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            self.template = _redacted_message(args[0])
            args = (PYTHON.render(self.template), *args[1:])
        super().__init__(*args)

    def render(self, surface: Surface) -> str:
        """The message in ``surface``'s terms."""
        return surface.render(self.template) if self.template else str(self)

    @property
    def params(self) -> tuple[str, ...]:
        """The parameters the message names (``param``), in order: what a form or a client
        may point at."""
        return tuple(p[1:].split(_SEP)[0] for p in _references(self.template) if p[0] == "p")


_MARK, _SEP = "\x1e", "\x1f"
"""A reference inside a message: ``MARK kind name SEP ... MARK``. Control characters never
come from what a person typed: values are quoted with ``!r``, which escapes them."""


def param(name: str, value: object = None, *, metavar: str = "") -> str:
    """The parameter ``name`` (its Python keyword, e.g. ``session_id``) in a message, with an
    example or the given ``value`` (every surface shows it) or a ``metavar`` (the command
    line's placeholder, e.g. ``NAME``; the others name the parameter alone)."""
    shown = "" if value is None else str(value)
    return f"{_MARK}p{name}{_SEP}{shown}{_SEP}{metavar}{_MARK}"


def refuse_empty(value: str | None, named: str, omitted: str, instead: str) -> str | None:
    """``value`` as given, where only an omitted one (None) means its default, ``omitted``: an
    empty or blank one (an unset variable) is refused, never taken for another session, user
    or project. ``named`` is the parameter as the message names it (``param("project")``)."""
    if value is not None and not value.strip():
        raise ValidationError(f"{named} is empty; omit it for {omitted} or give {instead}")
    return value


def command(path: str, tail: str = "") -> str:
    """The command ``cortex <path><tail>`` as a message's next step (``command("session
    list")``); a surface without commands names its own equivalent (an endpoint, a tool)."""
    return f"{_MARK}c{path}{_SEP}{tail}{_MARK}"


def _references(template: str) -> list[str]:
    return template.split(_MARK)[1::2]


def parts(template: str) -> list[str | dict[str, str]]:
    """``template`` as JSON: its text and, for each reference, ``{"param": name, "value",
    "metavar"}`` or ``{"command": path, "args": tail}`` (empty fields left out), so that a
    client renders it in its own terms (``from_parts``)."""
    out: list[str | dict[str, str]] = []
    for i, piece in enumerate(template.split(_MARK)):
        if i % 2 == 0:
            if piece:
                out.append(piece)
            continue
        kind, fields = piece[:1], piece[1:].split(_SEP)
        keys = ("param", "value", "metavar") if kind == "p" else ("command", "args")
        out.append({k: v for k, v in zip(keys, fields, strict=False) if v})
    return out


def from_parts(pieces: object) -> str | None:
    """The template ``parts`` made, from JSON a server sent; None when it is not that shape.
    Control characters are dropped from every piece: only this function writes references."""

    def plain(value: object) -> str:
        text = value if isinstance(value, str) else ""
        return "".join(c for c in text if c >= " ")

    if not isinstance(pieces, list) or not pieces or len(pieces) > 100:
        return None
    out = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(plain(piece))
        elif isinstance(piece, dict) and plain(piece.get("param")):
            out.append(param(plain(piece["param"]), plain(piece.get("value")) or None,
                             metavar=plain(piece.get("metavar"))))  # fmt: skip
        elif isinstance(piece, dict) and plain(piece.get("command")):
            out.append(command(plain(piece["command"]), plain(piece.get("args"))))
        else:
            return None
    return "".join(out)


class Surface:
    """How one way into Cortex names a parameter and a command in a message.

    Args:
        bare, valued: a parameter's form without and with a value (``{name}``, ``{value}``).
        names: a parameter's name on this surface where it is not its Python keyword.
        commands: a command's equivalent on this surface (an endpoint, a tool, a phrase);
            a command missing here is shown as the command line's.
        flags: parameters are flags: ``session_id`` is ``--session-id`` unless ``names``
            says otherwise, and a metavar follows it.
    """

    def __init__(
        self,
        bare: str = "`{name}`",
        valued: str = "`{name}={value}`",
        names: dict[str, str] | None = None,
        commands: dict[str, str] | None = None,
        *,
        flags: bool = False,
    ) -> None:
        self.bare, self.valued, self.flags = bare, valued, flags
        self.names, self.commands = names or {}, commands or {}

    def name(self, param: str) -> str:
        default = "--" + param.replace("_", "-") if self.flags else param
        return self.names.get(param, default)

    def param(self, name: str, value: str, metavar: str) -> str:
        if not value and self.flags and metavar:
            value = metavar
        form = self.valued if value else self.bare
        return form.format(name=self.name(name), value=value)

    def command(self, path: str, tail: str) -> str:
        return self.commands.get(path) or f"`cortex {path}{tail}`"

    def render(self, template: str) -> str:
        """``template`` with each reference in this surface's terms."""
        if _MARK not in template:
            return template
        parts = template.split(_MARK)
        for i in range(1, len(parts), 2):
            kind, fields = parts[i][:1], parts[i][1:].split(_SEP)
            if kind == "p" and len(fields) == 3:
                parts[i] = self.param(*fields)
            elif kind == "c" and len(fields) == 2:
                parts[i] = self.command(*fields)
        return "".join(parts)


PYTHON = Surface()
"""A Python caller's terms: keyword arguments; commands as the command line's (the same
home)."""


def _redacted_message(message: str) -> str:
    """``message`` redacted without mangling its own words: each quoted value (what a person
    typed, interpolated with ``!r``) is redacted on its own, then the rest with the values held
    out, so a value like ``'../etc/passwd'`` never turns the ``: use ...`` after it into a
    secret's value."""
    import re  # only when an error is raised

    from cortex.core.redaction import redact

    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        held.append(redact(match.group()))
        return f"\x00{len(held) - 1}\x00"

    skeleton = redact(re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", hold, message))
    return re.sub(r"\x00(\d+)\x00", lambda m: held[int(m.group(1))], skeleton)


class ConfigError(CortexError):
    """A setting is unknown, malformed or out of range."""

    status = 400


class ValidationError(CortexError):
    """Input that Cortex refuses: an id, a label, a size, a file's content."""

    status = 400


class UnsafeIdError(ValidationError):
    """An id that could escape the directory it names a file in."""

    status = 400


class UnauthorizedError(CortexError):
    """No API key, or one that is malformed, unknown or revoked (or its tenant's is)."""

    status = 401


class ForbiddenError(CortexError):
    """The API key is valid but its scopes do not allow the operation."""

    status = 403


class NotFoundError(CortexError):
    """No such session, pin, task or memory."""

    status = 404


class ConflictError(CortexError):
    """The operation does not fit the current state (e.g. the session already ended)."""

    status = 409


class StorageError(CortexError):
    """The database or a file could not be read or written."""

    status = 503


class MigrationDeferredError(StorageError):
    """Migrations are pending on a database too large for the caller to migrate in its time
    (a hook, which its host kills after a few seconds): ``cortex db migrate`` applies them."""

    status = 503


class ContentionError(StorageError):
    """The database rolled a transaction back to settle a conflict with another one (a
    deadlock, a serialization failure): nothing of it was written, and running it again
    usually succeeds (the team server does so before it answers)."""

    status = 503


class BusyError(StorageError):
    """What a request needs (a session's row) is held by another transaction for longer than
    the server waits for a lock (a stuck request, an operator's open transaction). Not a
    conflict to run again at once: the holder is slow, so the client retries after
    ``retry_after`` seconds. Its message names no database host, port, role or name."""

    status = 503
    retry_after = 1


class UnavailableError(StorageError):
    """The Cortex server cannot take a request now: unreachable, too slow, or overloaded.

    A client keeps the writes that meet it in its journal and delivers them later.
    """

    status = 503


class ServerConfigError(CortexError):
    """The server's settings for a tenant (its ``config.toml``) are invalid: no request of
    that tenant can be served until the operator fixes them. The server's fault, not the
    client's: a 503, never a 4xx."""

    status = 503


class RequestReplayed(Exception):  # noqa: N818 (a signal, not an error anyone sees)
    """A request id was already claimed: the change it guards must not run, and its
    transaction is rolled back. Not a ``CortexError``: ``apply_once`` turns it into the
    replay's answer, so no handler that reports Cortex errors may catch it on the way."""


class RefusedAhead(Exception):  # noqa: N818 (a carrier, not an error of its own)
    """``error`` refused a request in a check made with a later statement (its API key's,
    see ``KeyCheck``). Not a ``CortexError``, so that no code that logs and tolerates those
    (an unreadable task list, say) swallows the refusal on its way out; ``apply_once``
    raises ``error`` itself."""

    def __init__(self, error: CortexError) -> None:
        super().__init__(str(error))
        self.error = error
