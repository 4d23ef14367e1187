"""``GET /readyz``: readiness, for what sends traffic to the gateway (``service.readiness``).

``/healthz`` stays the liveness probe (restart the process when it fails); ``/readyz`` says whether to
send this process traffic now: ``200 {"ready": true}``, or ``503`` problem JSON whose ``reasons`` list
each cause (``kind``: ``journal_not_writable``, ``free_space_low``, ``no_bind_up``; ``detail``). Each
worker process answers for itself. No authentication, as ``/healthz``.
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import Response

from mogateway.api.openapi import documented
from mogateway.api.problems import problem

__all__ = ["router"]

router = APIRouter()


class Ready(BaseModel):
    ready: bool


@router.get(
    "/readyz",
    tags=["operations"],
    summary="Readiness: 200 while this process takes traffic, else 503 with the reasons (no auth)",
    **documented(503, auth=None, ok=Ready),
)
async def readyz(request: Request) -> Response:
    reasons = request.app.state.gateway.readiness()
    if not reasons:
        return Response(orjson.dumps({"ready": True}), media_type="application/json")
    detail = "; ".join(reason.detail for reason in reasons)
    return problem(
        503, f"not ready: {detail}", kind="not-ready", ready=False, reasons=[r.as_json() for r in reasons]
    )
