"""The sign-in page of either browser UI, once: the form with its own CSRF token (and the cookie that
holds it), and what a refused sign-in is told alike in both. Each UI checks its own credentials."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mogateway.api.browser.render import Pages
from mogateway.api.browser.sessions import SessionScope, safe_next, set_signin_cookie, signin_token

__all__ = ["EXPIRED", "client_address", "signin_form"]

#: What a sign-in whose form is not this gateway's own (stale, or from another site) is told.
EXPIRED = "The sign-in form had expired. Please try again."


def signin_form(
    request: Request,
    scope: SessionScope,
    pages: Pages,
    next_: str | None,
    error: str | None,
    status: int,
    **extra: Any,
) -> Response:
    """The UI's ``login.html`` (``extra``: what it shows again, the portal's e-mail address), with the
    form's token in a cookie of its own (``api.browser.sessions``: the browser's, or a new one)."""
    token = signin_token(request, scope)
    context = {"next": safe_next(scope, next_), "signin_csrf": token, "error": error, **extra}
    response = pages.html("login.html", context, status)
    set_signin_cookie(response, request, scope, token)
    return response


def client_address(request: Request) -> str:
    """The address a sign-in's failures are counted under (the peer's, or what a trusted proxy says)."""
    return request.client.host if request.client else "?"
