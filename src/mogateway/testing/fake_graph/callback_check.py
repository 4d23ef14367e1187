"""The fake's side of a callback override: Meta sends the new URL its verification GET first.

Rules this file keeps:
* an override URL is ``https://`` (at most 200 characters), or ``http://`` to this machine only
  (``127.0.0.1``, ``localhost``, ``[::1]``): the rehearsal of a gateway on loopback;
* when the knob ``verify_callback_uri`` is on (the default, as with Meta) the override is taken only if
  ``GET <url>?hub.mode=subscribe&hub.verify_token=<token>&hub.challenge=<random>`` is answered ``200``
  with exactly the challenge; otherwise Graph's error 2200 "Callback verification failed", naming the
  HTTP status or the network error (the code and wording are Meta's for app subscriptions; that Meta
  answers the same for a WABA override is this fake's assumption);
* one overall deadline (5 s), redirects not followed, at most 1 KiB of the answer read.
"""

from __future__ import annotations

import secrets
from typing import Final
from urllib.parse import urlsplit

import aiohttp

from mogateway.testing.fake_graph.errors import FakeGraphError

__all__ = ["callback_uri_ok", "verify_callback"]

MAX_URI: Final = 200
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})


def callback_uri_ok(uri: str) -> bool:
    """An https URL of at most 200 characters, or an http URL to this machine."""
    if len(uri) > MAX_URI:
        return False
    if uri.startswith("https://"):
        return True
    try:
        return uri.startswith("http://") and urlsplit(uri).hostname in _LOOPBACK
    except ValueError:
        return False


def _failed(what: str) -> FakeGraphError:
    return FakeGraphError(2200, f"Callback verification failed with the following errors: {what}")


async def verify_callback(uri: str, verify_token: str, *, timeout_s: float = 5.0) -> None:
    """Run Meta's handshake against ``uri``; raise Graph's 2200 error unless it is answered right."""
    challenge = str(secrets.randbelow(9 * 10**8) + 10**8)
    params = {"hub.mode": "subscribe", "hub.verify_token": verify_token, "hub.challenge": challenge}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.get(uri, params=params, allow_redirects=False) as answer,
        ):
            body = await answer.content.read(1024)
            status = answer.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _failed(f"curl_errno = {type(exc).__name__}; HTTP Status Code = 0") from None
    if status != 200:
        raise _failed(f"HTTP Status Code = {status}; HTTP Message = {answer.reason or ''}")
    if body.decode("utf-8", "replace") != challenge:
        raise _failed("HTTP Status Code = 200; the response does not match the challenge")
