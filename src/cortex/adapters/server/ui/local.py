"""The dashboard over one person's home: ``cortex ui`` on 127.0.0.1.

The per-install form token (``ui.token`` in the home, 64 hex characters, mode 0600) is made
once and kept, so a page left open across restarts still posts. Requests whose ``Host`` is
not a loopback name are refused (a web page cannot reach the dashboard by rebinding a DNS
name to 127.0.0.1).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware

from cortex.adapters.server.ui.app import Binding, create_ui
from cortex.clock import Clock
from cortex.config import Config
from cortex.errors import StorageError
from cortex.files import atomic_write_text, file_lock
from cortex.services.app import Services

TOKEN_FILE = "ui.token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


def install_token(home: Path) -> str:
    """The home's form token, made on first use."""
    path = home / TOKEN_FILE
    with file_lock(path):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            raise StorageError(f"cannot read {path} ({exc}); check its permissions") from exc
        if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
            text = secrets.token_hex(32)
            atomic_write_text(path, text + "\n")
    return text


def local_app(
    config: Config,
    clock: Clock | None = None,
    doctor: Callable[[], dict[str, Any]] | None = None,
) -> Starlette:
    """The dashboard over ``config``'s home: migrated once here, then a store per request;
    ``doctor`` (``cortex doctor``'s report) joins the health page's check."""
    Services.open(config, clock).close()
    token = install_token(config.home)

    def services(_request: object) -> Services:
        # A page reads: opening a database that vanished would make an empty one in its place.
        if not config.db_path.exists():
            raise StorageError(
                f"no database at {config.db_path} (it was moved or deleted while the dashboard "
                "ran); put it back, or restart `cortex ui` to start an empty one"
            )
        return Services.open(config, clock, migrate=False)

    binding = Binding(
        services=services,
        token=lambda _request: token,
        label=lambda _request: str(config.home),
        doctor=doctor,
    )
    app = create_ui(binding)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))
    return app
