"""``/docs`` (Swagger UI) and ``/redoc`` with their assets served by the gateway itself, and ``/static``.

Rules: no page the gateway serves loads anything from another host, so the API docs and the console
work on a machine with no internet. Swagger UI and Redoc are vendored under ``api/static`` (with their
licences) and shipped in the wheel; Swagger UI's online validator and Redoc's web fonts are off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

__all__ = ["STATIC_DIR", "install_docs"]

#: Static assets shipped in the package (package-data in pyproject.toml).
STATIC_DIR = Path(__file__).with_name("static")

router = APIRouter(include_in_schema=False)
_FAVICON = "/static/console/favicon.svg"


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="mogateway API",
        swagger_js_url="/static/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url="/static/swagger-ui/swagger-ui.css",
        swagger_favicon_url=_FAVICON,
        swagger_ui_parameters={"validatorUrl": None},
    )


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="mogateway API",
        redoc_js_url="/static/redoc/redoc.standalone.js",
        redoc_favicon_url=_FAVICON,
        with_google_fonts=False,
    )


def install_docs(app: FastAPI) -> Any:
    """Add /docs, /redoc and /static to ``app`` (created with ``docs_url=None, redoc_url=None``)."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
