"""The memory pages: search and list, one memory's history, edit and forget (confirmed)."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cortex.adapters.server.ui.app import Ui
from cortex.adapters.server.ui.filters import url_part
from cortex.adapters.server.ui.pages import query_number
from cortex.core.memory_models import LAYERS, Memory
from cortex.services.app import Services

PAGE = 50


def routes(ui: Ui) -> list[Route]:
    """The memory routes of ``ui``."""

    def memories(request: Request, app: Services) -> Response:
        q = request.query_params
        query, layer, project = q.get("q", "").strip(), q.get("layer") or None, q.get("project")
        rows: list[tuple[Memory, float | None, str]]
        scope = {"layer": layer, "project": project or None, "all_projects": not project}
        if query:
            hits = app.memory.search(query, limit=PAGE, expand=True, **scope)
            rows = [(h.memory, h.score, h.why) for h in hits]
            offset = 0
        else:
            offset = query_number(request, "offset", 0, low=0)
            found = app.memory.list(limit=PAGE, offset=offset, **scope)
            rows = [(m, None, "") for m in found]
        kept = {k: v for k, v in (("layer", layer), ("project", project)) if v}
        pages = {
            "older": urlencode({**kept, "offset": offset + PAGE}) if len(rows) == PAGE else "",
            "newer": urlencode({**kept, "offset": max(0, offset - PAGE)}) if offset else "",
        }
        return ui.render(
            request,
            "memory.html",
            {
                "rows": rows,
                "query": query,
                "layer": layer or "",
                "project": project or "",
                "layers": LAYERS,
                "projects": app.dashboard.projects(),
                "now": app.clock.now(),
                **pages,
            },
        )

    def memory(request: Request, app: Services) -> Response:
        history = app.dashboard.memory_history(str(request.path_params["memory_id"]))
        confirm = request.url.path.endswith("/forget")
        return ui.render(
            request,
            "memory_item.html",
            {"h": history, "m": history.memory, "now": app.clock.now(), "confirm": confirm},
        )

    def edit(request: Request, app: Services, form: dict[str, str]) -> str:
        mid = str(request.path_params["memory_id"])
        app.memory.edit(
            mid,
            actor="ui",
            content=form.get("content"),
            tags=form["tags"] if "tags" in form else None,
        )
        return f"/memory/{url_part(mid)}?notice=memory-saved"

    def forget(request: Request, app: Services, form: dict[str, str]) -> str:
        mid = str(request.path_params["memory_id"])
        app.memory.forget(mid, actor="ui")
        return "/memory?notice=memory-forgotten"

    return [
        Route("/memory", ui.page(memories)),
        Route("/memory/{memory_id}", ui.page(memory)),
        Route("/memory/{memory_id}/forget", ui.page(memory)),
        Route("/memory/{memory_id}/edit", ui.action(edit), methods=["POST"]),
        Route("/memory/{memory_id}/forget", ui.action(forget), methods=["POST"]),
    ]
