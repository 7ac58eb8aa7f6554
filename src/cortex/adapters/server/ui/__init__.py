"""The web dashboard: server-rendered pages over the same services as the CLI.

``create_ui(binding)`` builds the Starlette application; ``cortex ui`` serves it on loopback
over the local home, and the team server can mount it per tenant. Jinja2 templates live in
``templates/``, the one stylesheet and script in ``static/`` (package data, no CDN), charts
are inline SVG drawn on the server (``charts``).
"""

from __future__ import annotations

from cortex.adapters.server.ui.app import Binding, create_ui

__all__ = ["Binding", "create_ui"]
