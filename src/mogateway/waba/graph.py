"""A small synchronous Graph API client: one request at a time, typed errors, bounded retries.

Why synchronous httpx: a migration is a short, strictly ordered conversation with prompts in
between, so an event loop buys nothing; httpx gives per-request timeouts (register may take 15 s),
connection reuse, and a plain API library users can call from a script.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from mogateway.waba.endpoint import DEFAULT_GRAPH_URL, DEFAULT_VERSION
from mogateway.waba.errors import GraphError, Retry, TransportError

MAX_RESPONSE_BYTES = 1 << 20  # Graph answers here are small; a huge body is an error, not data.
TIME_SCALE_ENV = "MOGATEWAY_WABA_TIME_SCALE"
REDACTED = "***"


def time_scale() -> float:
    """Factor applied to every wait of the tool (backoff, cool-downs); ``0.001`` makes tests fast."""
    raw = os.environ.get(TIME_SCALE_ENV, "")
    try:
        value = float(raw) if raw else 1.0
    except ValueError:
        return 1.0
    return max(value, 0.0)


@dataclass(frozen=True)
class GraphRequest:
    """One Graph call, described before it is sent: what dry runs print and what the client sends."""

    method: str
    path: str
    params: Mapping[str, str] = field(default_factory=dict)
    json: Mapping[str, Any] | None = None
    retry: bool = True
    """False for calls that must never be repeated automatically (register)."""
    timeout_s: float = 30.0


@dataclass(frozen=True)
class BackoffPolicy:
    """Exponential backoff with full jitter for transient and throttled errors."""

    attempts: int = 5
    base_s: float = 1.0
    cap_s: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt number ``attempt + 1`` (attempt counts from 1)."""
        ceiling = min(self.cap_s, self.base_s * (2 ** (attempt - 1)))
        return random.uniform(ceiling / 2, ceiling) * time_scale()


RetryNotice = Callable[[GraphRequest, Exception, int, float], None]


class GraphClient:
    """Sends :class:`GraphRequest` objects to ``{graph_url}/{version}/…`` with a bearer token.

    The token only ever travels in the ``Authorization`` header (and in ``debug_token``'s
    ``input_token``, which Graph requires); :meth:`redact` removes it from any text shown to people.
    """

    def __init__(
        self,
        token: str,
        *,
        graph_url: str = DEFAULT_GRAPH_URL,
        version: str = DEFAULT_VERSION,
        backoff: BackoffPolicy | None = None,
        on_retry: RetryNotice | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._token = token
        self.graph_url = graph_url.rstrip("/")
        self.version = version
        self.backoff = backoff or BackoffPolicy()
        self.on_retry = on_retry
        self._sleep = sleep
        self._http = httpx.Client(
            transport=transport,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "mogateway-waba"},
            follow_redirects=False,
        )

    def __enter__(self) -> GraphClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    @property
    def token(self) -> str:
        """The access token (needed by ``debug_token``'s ``input_token``)."""
        return self._token

    def url(self, path: str) -> str:
        """Full URL of a Graph path."""
        return f"{self.graph_url}/{self.version}/{path.lstrip('/')}"

    def redact(self, text: str) -> str:
        """``text`` with the token replaced by ``***``."""
        return redact(text, self._token)

    def send(self, request: GraphRequest) -> dict[str, Any]:
        """Send ``request``; retry transient and throttled failures when ``request.retry`` allows it.

        Raises :class:`GraphError` for an error answer and :class:`TransportError` when Graph
        cannot be reached.
        """
        attempt = 1
        while True:
            try:
                return self._send_once(request)
            except GraphError as err:
                if not request.retry or err.classify().retry is not Retry.BACKOFF:
                    raise
                failure: Exception = err
            except TransportError as err:
                # A request that may have reached Graph is repeated only when repeating is safe.
                if not request.retry and err.request_sent:
                    raise
                failure = err
            if attempt >= self.backoff.attempts:
                raise failure
            delay = self.backoff.delay(attempt)
            if self.on_retry is not None:
                self.on_retry(request, failure, attempt, delay)
            self._sleep(delay)
            attempt += 1

    def _send_once(self, request: GraphRequest) -> dict[str, Any]:
        method = request.method.upper()
        try:
            response = self._http.request(
                method,
                self.url(request.path),
                params=dict(request.params) or None,
                json=dict(request.json) if request.json is not None else None,
                timeout=request.timeout_s,
            )
        except httpx.ConnectError as exc:
            raise TransportError(
                self.redact(f"cannot connect to {self.graph_url}: {exc}"),
                method=method,
                path=request.path,
                request_sent=False,
            ) from None
        except httpx.TransportError as exc:
            raise TransportError(
                self.redact(f"no answer from {self.graph_url}: {type(exc).__name__} {exc}"),
                method=method,
                path=request.path,
            ) from None
        trace = response.headers.get("x-fb-trace-id")
        if len(response.content) > MAX_RESPONSE_BYTES:
            raise GraphError(
                http_status=response.status_code,
                code=-1,
                message="response too large",
                fbtrace_id=trace,
                method=method,
                path=request.path,
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400 or (isinstance(body, dict) and "error" in body):
            raise GraphError.from_response(
                response.status_code, body, method=method, path=request.path, trace_header=trace
            )
        if not isinstance(body, dict):
            raise GraphError(
                http_status=response.status_code,
                code=-1,
                message="Graph answered something that is not a JSON object",
                fbtrace_id=trace,
                is_transient=True,
                method=method,
                path=request.path,
            )
        return body


def redact(text: str, *secrets: str | None) -> str:
    """Replace every non-empty secret in ``text`` with ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def is_success(body: Mapping[str, Any]) -> bool:
    """Graph's ``success`` flag, which Meta's own collection shows both as ``true`` and ``"true"``."""
    value = body.get("success")
    return value is True or (isinstance(value, str) and value.lower() == "true")
