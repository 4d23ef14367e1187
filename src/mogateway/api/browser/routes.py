"""How a request of either browser UI is handled before its page's own work, once for both: a request
answered early (no session: sign-in; a refused POST; an id that is none), its form, the POST checks.

A helper that finds a request must be answered otherwise than by its handler raises :class:`Answered`
with that response; the UI's route (a :class:`BrowserRoute`) sends it. A handler then reads as its
page's work only (``session, form = await guard(request)``), and no handler can forget to return a
refusal: it never gets past the helper.

Rules the helpers keep for both UIs:

* A state-changing POST needs the session's CSRF token and, when the browser names the site it came
  from, this gateway as that site; anything else is the UI's refused page (403), and changes nothing
  (:func:`posted_form`).
* An id in a URL must have an id's shape (``core.ids``): anything else (``.``, ``..``) is the UI's
  not-found page, before any handler runs (:meth:`BrowserRoute.bad_id`).
* A page without a session redirects to sign-in, with the page as where sign-in leads
  (:func:`to_signin`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs, urlencode

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.responses import RedirectResponse, Response

from mogateway.api.browser.render import Pages
from mogateway.api.browser.sessions import BrowserSession, SessionScope, same_origin, same_secret
from mogateway.core.ids import not_an_id

__all__ = ["Answered", "BrowserRoute", "posted_form", "read_form", "redirect", "refused", "to_signin"]


class Answered(Exception):
    """The response a request gets instead of its handler's (raised by the helpers, sent by the route)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


class BrowserRoute(APIRoute):
    """A route of a browser UI: an :class:`Answered` is the response, and a ``*_id`` path parameter that
    is not an id is answered by :meth:`bad_id` without running the handler."""

    async def bad_id(self, request: Request, name: str, value: str) -> Response:
        """The answer to an id that is none (the UI's not-found page, or sign-in without a session)."""
        raise NotImplementedError

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            try:
                bad = not_an_id(request.path_params)
                if bad is None:
                    return await handler(request)
                return await self.bad_id(request, *bad)
            except Answered as answered:
                return answered.response

        return checked


def redirect(url: str) -> RedirectResponse:
    """POST/redirect/GET and every other move of a browser UI: a 303."""
    return RedirectResponse(url, status_code=303)


def to_signin(request: Request, scope: SessionScope) -> RedirectResponse:
    """To the UI's sign-in page, which leads back to this page once signed in."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return redirect(scope.signin_path + "?" + urlencode({"next": target}))


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form (the only kind the UIs send); the first value of each field."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def refused(pages: Pages, reason: str) -> Response:
    """The UI's refused page (403)."""
    return pages.html("refused.html", {"reason": reason}, 403)


async def posted_form(request: Request, session: BrowserSession, pages: Pages) -> dict[str, str]:
    """The form of a state-changing POST of ``session``; a POST from another site, or without the
    session's CSRF token, is answered by the UI's refused page."""
    form = await read_form(request)
    if not same_origin(request):
        raise Answered(refused(pages, "The request came from another site."))
    if not same_secret(form.get("csrf", ""), session.csrf):
        raise Answered(refused(pages, "The form was missing its security token or it was stale."))
    return form
