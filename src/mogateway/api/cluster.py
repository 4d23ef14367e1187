"""Cluster view of the API: the gateway nodes alive now, their SMPP binds and queue lag."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Request
from starlette.responses import Response

from mogateway.api.common import AdminRoute, gateway_of, json_response
from mogateway.api.openapi import NodeList, documented
from mogateway.api.problems import ApiProblem
from mogateway.core.isotime import iso

__all__ = ["router"]

router = APIRouter(tags=["operations"], route_class=AdminRoute)


@router.get(
    "/v1/nodes",
    summary="The gateway nodes alive now (heartbeats), their binds and queue lag",
    **documented(503, ok=NodeList),
)
async def list_nodes(request: Request) -> Response:
    cluster = gateway_of(request).cluster
    if cluster is None:
        raise ApiProblem(503, "the gateway is not started", kind="unavailable")
    nodes = []
    for node in await cluster.directory.nodes():
        doc = asdict(node)
        doc["started_at"] = iso(node.started_at)
        doc["seen_at"] = iso(node.seen_at)
        doc["self"] = node.name == cluster.name
        nodes.append(doc)
    body = {"node": cluster.name, "count": len(nodes), "nodes": nodes}
    return json_response(body)
