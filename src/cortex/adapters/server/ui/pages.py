"""The session pages: the timeline, one session, its pins, the next start explained, health."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cortex.adapters.server.ui import charts
from cortex.adapters.server.ui.app import Ui
from cortex.adapters.server.ui.filters import url_part
from cortex.errors import ValidationError
from cortex.files import check_id
from cortex.services.app import Services
from cortex.services.dashboard import STATUSES

MAX_LIST = 500


def query_number(request: Request, name: str, default: int, low: int = 1) -> int:
    """A whole-number query parameter, ``low`` or more (at most ``MAX_LIST`` for a limit)."""
    raw = request.query_params.get(name) or str(default)
    high = MAX_LIST if name == "limit" else 10**9
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ValidationError(f"{name} {raw!r} must be a number from {low} to {high}")
    return int(raw)


def _confidence(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValidationError(f"confidence {raw!r} is not a number; give 0 to 1") from None


def routes(ui: Ui) -> list[Route]:
    """The session, next-start and health routes of ``ui``."""

    def sessions(request: Request, app: Services) -> Response:
        q = request.query_params
        chosen = {k: q.get(k) or None for k in ("project", "status", "since", "until")}
        limit = query_number(request, "limit", 60)
        offset = query_number(request, "offset", 0, low=0)
        found = app.dashboard.sessions(
            project=chosen["project"],
            status=chosen["status"],
            since=chosen["since"],
            until=chosen["until"],
            limit=limit,
            offset=offset,
        )
        kept = {k: v for k, v in chosen.items() if v}
        older = urlencode({**kept, "offset": offset + limit}) if len(found) == limit else ""
        return ui.render(
            request,
            "sessions.html",
            {
                "found": found,
                "chosen": chosen,
                "older": older,
                "statuses": STATUSES,
                "projects": app.dashboard.projects(),
                "timeline": charts.timeline(found, app.clock.now(), ui.base(request)),
                "live": True,
            },
        )

    def session(request: Request, app: Services) -> Response:
        detail = app.dashboard.session(str(request.path_params["session_id"]))
        return ui.render(request, "session.html", {"d": detail, "s": detail.session, "live": True})

    def pin_save(request: Request, app: Services, form: dict[str, str]) -> str:
        sid = str(request.path_params["session_id"])
        app.sessions.add_pin(
            form.get("label", ""),
            form.get("content", ""),
            check_id(sid),
            critical=form.get("critical") == "on",
            confidence=_confidence(form.get("confidence") or "1.0"),
        )
        return f"/sessions/{url_part(sid)}?notice=pin-saved"

    def pin_remove(request: Request, app: Services, form: dict[str, str]) -> str:
        sid = str(request.path_params["session_id"])
        app.sessions.remove_pin(form.get("label", ""), check_id(sid))
        return f"/sessions/{url_part(sid)}?notice=pin-removed"

    def next_start(request: Request, app: Services) -> Response:
        q = request.query_params
        projects = app.dashboard.projects()
        project = q.get("project") or (projects[0] if projects else None)
        keywords = [q.get("keywords", "")] if q.get("keywords") else []
        preview = app.dashboard.next_start(project, keywords)
        return ui.render(
            request,
            "next.html",
            {
                "n": preview,
                "projects": projects,
                "keywords": q.get("keywords", ""),
                "chart": charts.score_bars(preview.candidates, preview.threshold),
            },
        )

    def health(request: Request, app: Services) -> Response:
        check = request.query_params.get("check") == "1"
        report = app.dashboard.health(check=check)
        doctor = ui.binding.doctor() if check and ui.binding.doctor is not None else None
        return ui.render(
            request,
            "health.html",
            {
                "h": report,
                "store_url": report.url if ui.binding.store_details else None,
                "chart": charts.day_bars(report.captures_per_day),
                "live": True,
                "doctor": doctor,
                "has_doctor": ui.binding.doctor is not None,
            },
        )

    return [
        Route("/sessions", ui.page(sessions)),
        Route("/sessions/{session_id}", ui.page(session)),
        Route("/sessions/{session_id}/pins", ui.action(pin_save), methods=["POST"]),
        Route("/sessions/{session_id}/pins/remove", ui.action(pin_remove), methods=["POST"]),
        Route("/next", ui.page(next_start)),
        Route("/health", ui.page(health)),
    ]
