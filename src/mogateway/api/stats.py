"""``GET /v1/stats``: traffic figures over a window, shared by the console, ``mogateway top`` and users'
own tools. Computed from rollups (service.stats), so polling it every second costs the gateway little."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from mogateway.api.common import AdminRoute, gateway_of, json_response
from mogateway.api.openapi import Stats, documented
from mogateway.api.problems import ApiProblem
from mogateway.service.stats import WindowError

__all__ = ["router"]

router = APIRouter(tags=["operations"], route_class=AdminRoute)


def window_pattern(max_days: int) -> str:
    """The windows ``GET /v1/stats`` takes, as a pattern: today, 1-59m, 1-23h, 1d to ``max_days``d (the
    same spans written otherwise, e.g. ``90s`` or ``48h``, are taken too)."""
    days = "|".join(str(d) for d in range(max_days, 0, -1))
    return f"^(today|([1-9]|[1-5][0-9])m|([1-9]|1[0-9]|2[0-3])h|({days})d)$"


@router.get(
    "/v1/stats",
    summary="Counts by outcome (in total and per client), MO/s and replies/s series, callback latency",
    description="`window`: `today` or a duration (`90s`, `5m`, `1h`, `2d`) from 1m to the retention of "
    "the stats (setting `stats_retention_days`); 422 outside it.",
    **documented(422, 503, ok=Stats),
)
async def stats(
    request: Request,
    window: str = Query("1h", json_schema_extra={"pattern": "^(today|[0-9]{1,6}[smhd])$"}),
) -> Response:
    gateway = gateway_of(request)
    if gateway.stats is None:
        raise ApiProblem(503, "the gateway is not started", kind="unavailable")
    try:
        doc = await gateway.stats.snapshot(window)
    except WindowError as exc:
        raise ApiProblem(422, str(exc), kind="invalid-field", field="window") from None
    return json_response(doc)
