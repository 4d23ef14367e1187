"""What the API's handlers share: the typed view of the gateway they work on, the admin routes'
authentication, JSON answers and the client lookup, each written once.

Rules:

* A handler sees the gateway only through :class:`GatewayView` (:func:`gateway_of`): what it may use
  is listed here, and mypy holds ``node.Gateway`` to it (``api.app``).
* Every route of an admin router is an :class:`AdminRoute`: the admin token is checked before anything
  else of the request is looked at — before its body is read or validated — so a request without the
  token learns nothing about what the route accepts (401, never 422). Then each ``*_id`` path
  parameter must have an id's shape (``core.ids``): anything else is 404 and reaches no handler.
* A client is looked up in the journal's current copy (another node may have changed it a moment
  ago): 503 when this node cannot open the stored secrets (a ``secret_key`` other than the one they
  were sealed with), 404 when there is no such client.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from mogateway.api.auth import require_token
from mogateway.api.problems import ApiProblem
from mogateway.core.clients import ClientRecord
from mogateway.core.ids import not_an_id, what_id
from mogateway.core.ports import SecretKeyError
from mogateway.gateway_view import GatewayView

__all__ = [
    "AdminRoute",
    "client_of",
    "gateway_of",
    "json_response",
    "reload_clients",
]


def gateway_of(request: Request) -> GatewayView:
    """The gateway the request's application serves."""
    gateway: GatewayView = request.app.state.gateway
    return gateway


class AdminRoute(APIRoute):
    """A route that answers only to the admin token, checked before the request's body is read."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def authenticated(request: Request) -> Response:
            require_token(request, gateway_of(request).admin_token, "admin")
            bad = not_an_id(request.path_params)
            if bad is not None:
                name, value = bad
                raise ApiProblem(404, f"no {what_id(name)} {value!r}: not an id", kind="not-found")
            return await handler(request)

        return authenticated


def json_response(data: Any, status: int = 200) -> Response:
    """``data`` as a JSON answer (orjson; the models in api.openapi document it)."""
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


async def reload_clients(gateway: GatewayView) -> None:
    """Read the clients again from the journal (another node may have changed them); 503 when this
    node cannot open their secrets, with the one-line reason and no traceback."""
    try:
        await gateway.registry.load()
    except SecretKeyError as exc:
        raise ApiProblem(503, str(exc), kind="secret-key") from None


async def client_of(gateway: GatewayView, client_id: str) -> ClientRecord:
    """The client ``client_id`` as the journal has it now (503 and 404 problems: see the rules)."""
    await reload_clients(gateway)
    client = gateway.registry.get(client_id)
    if client is None:
        raise ApiProblem(404, f"no client {client_id}", kind="not-found")
    return client
