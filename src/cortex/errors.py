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
    └── StorageError (503)           the database or a file could not be read or written
        └── UnavailableError (503)   the Cortex server cannot take a request now

Every class carries an HTTP ``status`` so that the server maps errors in one handler.
"""

from __future__ import annotations


class CortexError(Exception):
    """Base of every error Cortex raises on purpose.

    Its message is redacted: an error may quote what a person typed (a label, an id), and
    every error reaches a terminal, a log or an HTTP body.
    """

    status = 500

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            args = (_redacted_message(args[0]), *args[1:])
        super().__init__(*args)


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


class UnavailableError(StorageError):
    """The Cortex server cannot take a request now: unreachable, too slow, or overloaded.

    A client keeps the writes that meet it in its journal and delivers them later.
    """

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
