"""The security headers every answer of the gateway carries (pure ASGI, around the whole app).

Rules:

* Every answer — API JSON and problem documents, redirects, 204s, static files, the 413 of the body
  limit — says ``X-Content-Type-Options: nosniff`` and may not be framed (``X-Frame-Options: DENY``
  and CSP ``frame-ancestors 'none'``).
* An answer that sets no Content-Security-Policy of its own gets ``default-src 'none'``: a JSON answer
  opened in a browser runs nothing and loads nothing. The pages that need more say so themselves: the
  console (api.console.render) and the API docs (api.apidocs); their headers are kept as they are.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["DEFAULT_HEADERS", "SecurityHeaders"]

DEFAULT_HEADERS: Final = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'"),
)


class SecurityHeaders:
    """Adds :data:`DEFAULT_HEADERS` to every HTTP answer that does not set them itself."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                headers.extend((name, value) for name, value in DEFAULT_HEADERS if name not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
