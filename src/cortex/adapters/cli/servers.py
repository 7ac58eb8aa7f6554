"""``cortex mcp`` (the MCP server on stdio), ``cortex bridge`` (JSON lines for OpenClaw) and
``cortex ui`` (the web dashboard on 127.0.0.1).

All three are long-lived processes. The MCP SDK is imported only inside ``cortex mcp`` and the
web stack only inside ``cortex ui``, so the rest of the CLI runs without those extras.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from cortex.adapters.cli.runtime import (
    CONTEXT,
    Runtime,
    check_listen,
    clean,
    pass_rt,
    project_option,
)
from cortex.config import load_config
from cortex.errors import ConfigError
from cortex.services.app import Services


@click.command("mcp", context_settings=CONTEXT)
@click.option(
    "--project-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Project whose current session the tools act on. Default: $CLAUDE_PROJECT_DIR "
    "(or the Gemini/Cursor equivalent), else the client's first root, else the working "
    "directory.",
)
@pass_rt
def mcp_command(rt: Runtime, project_dir: Path | None) -> None:
    """Run the MCP server on stdio (tools: working memory, sessions, continue, chain).

    \b
    Examples:
      cortex mcp
      claude mcp add cortex -- /path/to/.venv/bin/cortex mcp
      npx @modelcontextprotocol/inspector --cli cortex mcp --method tools/list
    """
    try:
        from cortex.adapters.mcp.server import ProjectScope, build_server
    except ImportError as exc:
        raise ConfigError(
            f"the MCP server needs the mcp extra ({exc}); pip install 'cortex-continuity[mcp]'"
        ) from exc
    from cortex.services.project import harness_project_dir  # the hooks' rule, so both agree

    directory = project_dir or harness_project_dir(rt.env)
    config, clock = rt.config, rt.clock
    server = build_server(
        lambda: Services.open(config, clock),
        ProjectScope(project_dir=str(directory) if directory else None, env=rt.env),
    )
    server.run("stdio")


@click.command("bridge", context_settings=CONTEXT)
@click.option(
    "--profile",
    type=click.Choice(["default", "openclaw"]),
    default="default",
    show_default=True,
    help="openclaw: home ~/.openclaw (unless --home or CORTEX_HOME), working memory in "
    "<workspace>/memory/working_memory.json, JSON mirrors in <home>/sessions.",
)
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, path_type=Path),
    help="OpenClaw workspace directory: file mode's memory.md, daily logs and snapshots (and "
    "with --profile openclaw the working memory). Default: the file_mode_workspace setting, "
    "<home>/workspace.",
)
@project_option(
    "Project id of the sessions this bridge starts (a name, a path or a git: id; "
    "topics show its last part).",
    "this directory's project",
)
@click.option("--workdir", help="Working directory of those sessions (a topic signal).")
@click.option("--agent-id", help="Agent id recorded on those sessions.")
@pass_rt
def bridge_command(
    rt: Runtime,
    profile: str,
    workspace: Path | None,
    project: str | None,
    workdir: str | None,
    agent_id: str | None,
) -> None:
    """Serve JSON lines on stdio for the OpenClaw plugin (one request, one response per line).

    \b
    Examples:
      cortex bridge --profile openclaw
      echo '{"id":1,"method":"ping"}' | cortex bridge
    """
    from cortex.adapters.openclaw import bridge

    home = rt.home
    if home is None and profile == "openclaw":
        home = Path.home() / ".openclaw"
    config = load_config(home, rt.env, rt.overrides)
    if workspace is not None:  # with either profile: what the plugin passes
        workspace = workspace.expanduser().absolute()
        config = replace(config, file_mode_workspace=workspace)
    if profile == "openclaw":
        config = bridge.openclaw_config(config, workspace)
    services = Services.open(config, rt.clock)
    bridge.run(services, project=clean(project), workdir=clean(workdir), agent_id=clean(agent_id))


@click.command("ui", context_settings=CONTEXT)
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="Port on 127.0.0.1 (the dashboard never listens on another interface).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the dashboard in a browser.")
@pass_rt
def ui_command(rt: Runtime, port: int, open_browser: bool) -> None:
    """Serve the web dashboard of this home on 127.0.0.1 until Ctrl-C.

    Sessions over time, the next start explained, memory search and edits, health; pages
    update live as turns are captured. The address it prints carries the per-install
    token in <home>/ui.token, which every request needs (127.0.0.1 is open to every user
    of the machine); the pages carry it for changes.

    \b
    Examples:
      cortex ui
      cortex ui --port 9000 --open
      cortex --home ~/.openclaw ui
    """
    if rt.config.server_url:
        raise ConfigError(_client_mode_ui(rt.config.server_url))
    try:
        import uvicorn

        from cortex.adapters.server.ui.local import (
            install_token,
            local_app,
            opener_file,
            signed_in_url,
        )
    except ImportError as exc:
        raise ConfigError(
            f"the dashboard needs the server extra ({exc}); pip install 'cortex-continuity[server]'"
        ) from exc
    check_listen("127.0.0.1", port)
    from cortex.adapters.hooks.doctor import diagnose

    def doctor() -> dict[str, Any]:
        return diagnose(rt.config, rt.clock, Path.home(), Path.cwd()).to_dict()

    app = local_app(rt.config, rt.clock if rt.now else None, doctor)
    url = signed_in_url(port, install_token(rt.config.home))
    rt.emit({"url": url, "home": str(rt.config.home)}, f"Cortex dashboard on {url} (Ctrl-C stops)")
    if open_browser:
        import webbrowser

        webbrowser.open(opener_file(rt.config.home, url).as_uri())
    # Open pages hold a live stream each: stop waiting for them after two seconds on Ctrl-C.
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )


def _client_mode_ui(server_url: str) -> str:
    """Why ``cortex ui`` does not serve a home in client mode, and where its pages are."""
    from urllib.parse import urlsplit

    parts = urlsplit(server_url.strip())
    login = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path.rstrip('/')}/ui/login"
    return (
        f"this home is a client of a team server, whose data its dashboard shows: open {login} "
        "and sign in with your API key (unset CORTEX_SERVER to see this home's local database)"
    )


def register(group: click.Group) -> None:
    """Add the ``mcp``, ``bridge`` and ``ui`` commands to the ``cortex`` group."""
    group.add_command(mcp_command)
    group.add_command(bridge_command)
    group.add_command(ui_command)
