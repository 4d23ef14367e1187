"""The HTTP application: ingest and admin APIs over one gateway, with limits and problem documents."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response

from mogateway import __version__
from mogateway.api import admin, cluster, dlt, health, ingest, portal_admin, stats, whatsapp, whatsapp_media
from mogateway.api.apidocs import install_docs
from mogateway.api.console import install_console
from mogateway.api.headers import SecurityHeaders
from mogateway.api.limits import BodyLimit
from mogateway.api.openapi import Health, documented, install_openapi
from mogateway.api.portal import install_portal
from mogateway.api.problems import install_handlers
from mogateway.gateway_view import GatewayView
from mogateway.node import Gateway

__all__ = ["create_app"]


def _limits(doc: dict[str, Any], settings: Any) -> None:
    """The parts of /openapi.json that depend on the settings: the batch size, the stats window."""
    batch = doc["paths"]["/v1/inbound/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    for form in batch["anyOf"]:
        (form if form["type"] == "array" else form["properties"]["items"])["maxItems"] = (
            settings.max_batch_items
        )
    for parameter in doc["paths"]["/v1/stats"]["get"]["parameters"]:
        if parameter["name"] == "window":
            parameter["schema"]["pattern"] = stats.window_pattern(settings.stats_retention_days)


def create_app(gateway: Gateway, *, manage_lifecycle: bool = True) -> Any:
    """The ASGI application. With ``manage_lifecycle`` the app starts and stops the gateway itself."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            await gateway.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await gateway.stop()

    app = FastAPI(
        title="mogateway",
        version=__version__,
        summary="Inbound-SMS gateway: ingest MOs, manage client applications, inspect messages.",
        lifespan=lifespan,
        docs_url=None,  # served by api.apidocs from the package's own assets (no CDN)
        redoc_url=None,
    )
    view: GatewayView = gateway  # what the handlers may use of it (api.common), checked by mypy
    app.state.gateway = view
    install_handlers(app)
    app.include_router(ingest.router)
    # Second: the routers are matched in order on every request (the POST of Meta's webhooks does not
    # come through them: api.whatsapp.WebhookFastPath).
    app.include_router(whatsapp.router)
    app.include_router(admin.router)
    app.include_router(portal_admin.router)
    app.include_router(dlt.router)
    app.include_router(cluster.router)
    app.include_router(stats.router)
    app.include_router(health.router)  # /readyz
    app.include_router(whatsapp_media.router)  # GET /v1/whatsapp/media/{message_id}
    install_docs(app)
    install_openapi(app, refine=lambda doc: _limits(doc, gateway.settings))
    install_console(app, gateway)
    install_portal(app, gateway)

    @app.get(
        "/healthz",
        tags=["operations"],
        summary="Liveness and basic state (no auth)",
        **documented(auth=None, ok=Health),
    )
    async def healthz(request: Request) -> Response:
        return Response(orjson.dumps(gateway.health()), media_type="application/json")

    s = gateway.settings
    limited = BodyLimit(
        whatsapp.WebhookFastPath(app, app),  # Meta's webhooks without FastAPI's layers (api.whatsapp)
        s.max_body_bytes,
        {
            "/v1/inbound/batch": s.max_batch_bytes,
            # Its own, smaller limit (config.whatsapp): a webhook body is held until its HMAC is checked.
            whatsapp.WEBHOOK_PATH: s.whatsapp.max_webhook_bytes if s.whatsapp else s.max_body_bytes,
        },
        per_suffix={dlt.IMPORT_SUFFIX: s.max_batch_bytes},  # a DLT portal's export can be large
    )
    return SecurityHeaders(limited)  # nosniff, no framing, a CSP on every answer (api.headers)
