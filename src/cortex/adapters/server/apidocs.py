"""``/docs``: the API's interactive page (Swagger UI over ``/openapi.json``), served whole by
the server itself, so that it works where the browser reaches nothing but the server.

Swagger UI's script, stylesheet and icon come from the ``swagger-ui-bundle-v2`` package (the
``server`` extra) and are served at ``/docs/static/``: those three files by name and nothing
else, so no path there reaches another file of the package or anything outside its folder.
FastAPI's own ``/docs`` and ``/redoc`` load theirs from a CDN, so ``create_app`` turns both
off. Without the package the server runs as before and ``/docs`` answers a 404 that says
what to install.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from cortex.errors import NotFoundError
from cortex.logs import getLogger

PAGE = "/docs"
ASSETS = "/docs/static"
SCRIPT, STYLESHEET, ICON = "swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"
MAJOR = 5
"""The Swagger UI major version the page needs: 4 cannot show an OpenAPI 3.1 document,
which is what FastAPI writes."""
INSTALL = "pip install 'cortex-continuity[server]'"


def swagger_folder() -> Path | str:
    """The installed Swagger UI's folder, or the one line that says why there is none.

    Two packages install the module ``swagger_ui_bundle``: ``swagger-ui-bundle-v2`` (Swagger
    UI 5) and the older ``swagger-ui-bundle`` (Swagger UI 4), which another program's
    dependencies may have installed over it."""
    try:
        from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]
    except ImportError:
        return f"the API page needs the swagger-ui-bundle-v2 package; {INSTALL}"
    folder = Path(str(swagger_ui_path))
    major = folder.name.rpartition("-")[2].split(".")[0]
    if not (major.isdigit() and int(major) >= MAJOR):
        return (
            f"the API page needs Swagger UI {MAJOR}, and the installed swagger_ui_bundle holds "
            f"{folder.name}; pip install --force-reinstall swagger-ui-bundle-v2"
        )
    return folder


class Assets(StaticFiles):
    """The files of one folder named in ``names``, and no other path (404)."""

    def __init__(self, folder: Path, names: frozenset[str]) -> None:
        super().__init__(directory=folder)
        self.names = names

    def get_path(self, scope: Scope) -> str:
        path = super().get_path(scope)  # normalised: ``a/../b`` is ``b``
        if path not in self.names:
            raise HTTPException(404)
        return path


def add_api_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and its files at ``ASSETS`` from the installed Swagger UI."""
    found = swagger_folder()
    if isinstance(found, str):
        getLogger("cortex.server").warning("no API page at %s: %s", PAGE, found)
    else:
        app.mount(ASSETS, Assets(found, frozenset({SCRIPT, STYLESHEET, ICON})))

    async def page(request: Request) -> HTMLResponse:
        if isinstance(found, str):
            raise NotFoundError(f"{found} (/openapi.json is served without it)")
        root = str(request.scope.get("root_path", "")).rstrip("/")  # behind a proxy's prefix
        return get_swagger_ui_html(
            openapi_url=root + str(app.openapi_url),
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/{SCRIPT}",
            swagger_css_url=f"{root}{ASSETS}/{STYLESHEET}",
            swagger_favicon_url=f"{root}{ASSETS}/{ICON}",
            oauth2_redirect_url=None,  # the API's scheme is a bearer key: no OAuth2 flow
            swagger_ui_parameters={"validatorUrl": None},  # never send the document to swagger.io
        )

    app.add_route(PAGE, page, include_in_schema=False)  # GET and HEAD, as FastAPI adds its own
