"""``cortex sync``: deliver the client journal (writes the team server missed) now."""

from __future__ import annotations

import click

from cortex.adapters.cli.runtime import CONTEXT, Runtime, pass_rt
from cortex.errors import ConfigError, UnavailableError


@click.command("sync", context_settings=CONTEXT)
@pass_rt
def sync(rt: Runtime) -> None:
    """Send the writes waiting in $CORTEX_HOME/spool/journal.jsonl to the server, in order.

    Hooks and commands keep a write in the journal when the server is unreachable, slow or
    overloaded; the next call that reaches the server sends them first, and this sends them
    now. Counts: sent, still left, rejected (moved to spool/rejected.jsonl), held (written
    for another server or API key: kept in spool/held.jsonl, never sent with this key; a sync
    with that server and key delivers them). Exits 1 while the server is still unreachable.

    \b
    Example:
      CORTEX_SERVER=https://cortex.example.com cortex sync
    """
    from cortex.services.remote.app import RemoteServices

    services = rt.services
    if not isinstance(services, RemoteServices):
        raise ConfigError(
            "cortex sync needs a server; set CORTEX_SERVER (server_url) and CORTEX_API_KEY"
        )
    report = services.sync()
    data = {**report.to_dict(), "server": services.client.transport.url}
    text = f"sent {report.sent}, left {report.left}, rejected {report.rejected}"
    rt.emit(data, text + (f", held {report.held}" if report.held else ""))
    if report.error is not None and report.left:
        raise UnavailableError(f"{report.left} write(s) still waiting: {report.error}")


def register(group: click.Group) -> None:
    group.add_command(sync)
