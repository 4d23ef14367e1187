"""Fetching a WhatsApp message's media through the gateway: :func:`fetch_media`.

A media message's callback names the media in its ``whatsapp`` member (``message.whatsapp.media``):
Meta's ``id``, the ``mime_type``, the ``sha256`` and — when the gateway has a ``public_url`` — a
``url`` signed for this message and this client, valid ``whatsapp_media_url_ttl_s`` (an hour by
default). :func:`fetch_media` GETs that ``url``; without one (or once it has expired) it asks
``{gateway_url}/v1/whatsapp/media/{message_id}`` with the client's own ``token``. The body is streamed:
to a file (``to=`` a path or a binary file object: nothing is held in memory) or returned as bytes. The
sha256 is checked against the member's while it streams, and a body the gateway cut short (it does so
when its own check fails) raises :class:`MediaError`, as every refusal does (``status`` and the problem's
``kind``: ``url-expired``, ``media-expired``, ``not-found``…).

    from mogateway.client import fetch_media, parse_message

    message = parse_message(body, message_id=request.headers["x-mogateway-message-id"])
    if message.whatsapp and message.whatsapp.media:
        fetch_media(message, to=f"/srv/bills/{message.message_id}", token=MY_TOKEN,
                    gateway_url="https://gw.example.com")
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from typing import IO, TYPE_CHECKING, Any

from mogateway.client.message import InboundMessage, parse_message

if TYPE_CHECKING:  # imported when a media is fetched: the SDK's import stays light
    import httpx

__all__ = ["MediaError", "fetch_media"]


class MediaError(Exception):
    """The media could not be fetched whole. ``status`` is the gateway's HTTP status (0: no complete
    answer), ``kind`` its problem's kind (``url-expired``, ``media-expired``, ``sha256-mismatch``…)."""

    def __init__(self, status: int, kind: str, detail: str) -> None:
        super().__init__(f"{status} {kind}: {detail}" if status else f"{kind}: {detail}")
        self.status = status
        self.kind = kind
        self.detail = detail


def _digest(text: str | None) -> bytes | None:
    if not text:
        return None
    if len(text) == 64:
        try:
            return bytes.fromhex(text)
        except ValueError:
            return None
    cleaned = text.strip().rstrip("=").replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def fetch_media(
    callback_or_message: InboundMessage | bytes | str,
    *,
    to: str | os.PathLike[str] | IO[bytes] | None = None,
    token: str | None = None,
    gateway_url: str | None = None,
    message_id: str = "",
    timeout_s: float = 30.0,
    client: httpx.Client | None = None,
) -> bytes | None:
    """The media of a WhatsApp callback (a parsed :class:`InboundMessage`, or the body as received with
    ``message_id`` from its ``x-mogateway-message-id`` header). Written to ``to`` (None returned) or
    returned as bytes. Uses the member's signed ``url`` when there is one; else (or with
    ``gateway_url`` and ``token`` as the fallback when the signed URL is refused as expired) the
    gateway's path with ``token``. ``timeout_s`` bounds each read, not the whole download."""
    message = (
        callback_or_message
        if isinstance(callback_or_message, InboundMessage)
        else parse_message(callback_or_message, message_id=message_id)
    )
    media = message.whatsapp.media if message.whatsapp is not None else None
    if media is None:
        raise MediaError(0, "not-media", "this callback is not a WhatsApp media message")
    targets: list[tuple[str, dict[str, str]]] = []
    if media.url:
        targets.append((media.url, {}))
    if gateway_url and token and message.message_id:
        path = f"{gateway_url.rstrip('/')}/v1/whatsapp/media/{message.message_id}"
        targets.append((path, {"authorization": f"Bearer {token}"}))
    if not targets:
        raise MediaError(
            0,
            "no-url",
            "the callback has no media url (the gateway has no public_url): pass gateway_url and token",
        )
    import httpx

    owned = client is None
    http = client or httpx.Client(timeout=timeout_s)
    try:
        for index, (url, headers) in enumerate(targets):
            try:
                return _fetch(http, url, headers, to, _digest(media.sha256))
            except MediaError as exc:
                # An expired signed URL: the client's token may still fetch it.
                if exc.kind == "url-expired" and index + 1 < len(targets):
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        if owned:
            http.close()


def _fetch(
    http: httpx.Client,
    url: str,
    headers: dict[str, str],
    to: str | os.PathLike[str] | IO[bytes] | None,
    expected: bytes | None,
) -> bytes | None:
    hasher = hashlib.sha256()
    chunks: list[bytes] = []
    opened: IO[bytes] | None = None
    sink: IO[bytes] | None = None
    if isinstance(to, str | os.PathLike):
        sink = opened = open(to, "wb")  # noqa: SIM115 (closed below, removed when the fetch fails)
    elif to is not None:
        sink = to
    try:
        return _stream(http, url, headers, sink, chunks, hasher, expected)
    except MediaError:
        if opened is not None:
            opened.close()
            os.unlink(opened.name)  # never leave a partial or wrong file under the name asked for
        raise
    finally:
        if opened is not None:
            opened.close()


def _stream(
    http: httpx.Client,
    url: str,
    headers: dict[str, str],
    sink: IO[bytes] | None,
    chunks: list[bytes],
    hasher: Any,
    expected: bytes | None,
) -> bytes | None:
    import httpx

    try:
        with http.stream("GET", url, headers=headers) as response:
            if response.status_code != 200:
                _refuse(response)
            try:
                for chunk in response.iter_raw():
                    hasher.update(chunk)
                    if sink is not None:
                        sink.write(chunk)
                    else:
                        chunks.append(chunk)
            except httpx.HTTPError as exc:
                raise MediaError(
                    0, "cut-short", f"the gateway cut the media short ({type(exc).__name__})"
                ) from None
    except httpx.HTTPError as exc:
        raise MediaError(0, "unreachable", f"the gateway could not be reached: {exc}") from None
    if expected is not None and hasher.digest() != expected:
        raise MediaError(0, "sha256-mismatch", "the media's sha256 is not the one in the callback")
    return None if sink is not None else b"".join(chunks)


def _refuse(response: httpx.Response) -> None:
    response.read()
    kind, detail = "http-error", f"HTTP {response.status_code}"
    try:
        problem: Any = response.json()
    except ValueError:
        problem = None
    if isinstance(problem, dict):
        kind = str(problem.get("type", "")).rpartition(":")[2] or kind
        detail = str(problem.get("detail") or detail)
    raise MediaError(response.status_code, kind, detail)
