"""``/docs`` (Swagger UI) and ``/redoc`` with their assets served by the gateway itself, and ``/static``.

Rules: no page the gateway serves loads anything from another host, so the API docs and the console
work on a machine with no internet; each docs page carries a Content-Security-Policy that says so (and
forbids framing it), besides the headers every answer has (api.headers).

Swagger UI and Redoc are vendored under ``api/static`` (with their licences) and shipped in the wheel;
Swagger UI's online validator and Redoc's web fonts are off.
"""

from __future__ import annotations

import base64
import hashlib
import re
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


def _with_policy(page: HTMLResponse) -> HTMLResponse:
    """``page`` with a Content-Security-Policy that lets it run its own scripts and nothing else: the
    gateway's files, and the page's inline scripts by their SHA-256 (so no injected script runs). The
    viewers set styles inline and Redoc runs its search in a worker made from a blob."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"
        for script in re.findall(r"<script>(.*?)</script>", bytes(page.body).decode("utf-8"), re.DOTALL)
    )
    policy = (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
        "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    )
    page.headers["content-security-policy"] = policy.replace("  ", " ")
    return page


_SWAGGER_UI = _with_policy(
    get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="mogateway API",
        swagger_js_url="/static/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url="/static/swagger-ui/swagger-ui.css",
        swagger_favicon_url=_FAVICON,
        swagger_ui_parameters={"validatorUrl": None},
    )
)
_REDOC = _with_policy(
    get_redoc_html(
        openapi_url="/openapi.json",
        title="mogateway API",
        redoc_js_url="/static/redoc/redoc.standalone.js",
        redoc_favicon_url=_FAVICON,
        with_google_fonts=False,
    )
)


def _page(made: HTMLResponse) -> HTMLResponse:
    return HTMLResponse(
        made.body, headers={"content-security-policy": made.headers["content-security-policy"]}
    )


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return _page(_SWAGGER_UI)


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return _page(_REDOC)


def install_docs(app: FastAPI) -> Any:
    """Add /docs, /redoc and /static to ``app`` (created with ``docs_url=None, redoc_url=None``)."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
