"""``GET /v1/stats``: traffic figures over a window, shared by the console, ``mogateway top`` and users'
own tools. Computed from rollups (service.stats), so polling it every second costs the gateway little."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.auth import require_token
from mogateway.api.problems import ApiProblem
from mogateway.service.stats import WindowError

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get(
    "/v1/stats",
    summary="Counts by outcome (in total and per client), MO/s and replies/s series, callback latency",
)
async def stats(request: Request, window: str = "1h") -> Response:
    gateway: Any = request.app.state.gateway
    require_token(request, gateway.admin_token, "admin")
    if gateway.stats is None:
        raise ApiProblem(503, "the gateway is not started", kind="unavailable")
    try:
        doc = await gateway.stats.snapshot(window)
    except WindowError as exc:
        raise ApiProblem(422, str(exc), kind="invalid-field", field="window") from None
    return Response(orjson.dumps(doc), media_type="application/json")
