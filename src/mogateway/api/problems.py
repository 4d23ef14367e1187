"""RFC 9457 problem documents: every error the API returns has this shape."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import Match

__all__ = ["ApiProblem", "install_handlers", "problem"]

_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    415: "Unsupported media type",
    422: "Invalid input",
    500: "Internal error",
    503: "Unavailable",
}


def problem(status: int, detail: str, *, kind: str | None = None, **extra: Any) -> Response:
    """A problem+json response. ``kind`` names the problem type (a URN under urn:mogateway:problem:)."""
    body: dict[str, Any] = {
        "type": f"urn:mogateway:problem:{kind}" if kind else "about:blank",
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
    }
    body.update(extra)
    headers = {"www-authenticate": 'Bearer realm="mogateway"'} if status == 401 else None
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/problem+json", headers=headers
    )


class ApiProblem(Exception):
    """Raise inside a route to answer with a problem document."""

    def __init__(self, status: int, detail: str, *, kind: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.kind = kind
        self.extra = extra


def _field_name(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


def _methods_of_path(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match is not Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    return sorted(methods)


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiProblem)
    async def _api_problem(_: Request, exc: ApiProblem) -> Response:
        return problem(exc.status, exc.detail, kind=exc.kind, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> Response:
        errors = [
            {"field": _field_name(tuple(e.get("loc", ()))), "reason": e.get("msg", "")} for e in exc.errors()
        ]
        first = errors[0] if errors else {"field": "body", "reason": "invalid"}
        return problem(
            422,
            f"{first['field']}: {first['reason']}",
            kind="invalid-field",
            field=first["field"],
            reason=first["reason"],
            errors=errors,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        answer = problem(exc.status_code, str(exc.detail))
        answer.headers.update(exc.headers or {})
        if exc.status_code == 405:  # Starlette names the methods of one route; a path may have several
            answer.headers["allow"] = ", ".join(_methods_of_path(request))
        return answer

    @app.exception_handler(ClientDisconnect)
    async def _gone(_: Request, exc: ClientDisconnect) -> Response:
        # The client went away (or the server timed it out) before its body was complete: expected, no
        # traceback. Nobody will read this answer.
        return problem(400, "the client went away before the request body was complete")

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> Response:
        import logging

        logging.getLogger("mogateway.api").exception("unexpected error")
        return problem(500, "internal error; see the gateway log")
