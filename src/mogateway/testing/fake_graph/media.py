"""The fake Graph API's media: what an inbound media message's id leads to (reference "Media, locations
and rich replies").

* ``GET /{version}/{media_id}`` with a valid Bearer token answers ``{"messaging_product": "whatsapp",
  "url", "mime_type", "sha256" (hex), "file_size" (a digit string, as Graph writes it), "id"}``; a media
  marked expired, or an id never registered, answers Graph's ``100``/``33`` ("does not exist"), as Graph
  does for an expired media id. The ``url`` is a download URL of this server that expires after
  ``url_ttl_s`` seconds of the world's clock (300 by default: Meta's "5 minutes").
* The download URL (``GET /__fake/media/download/{key}``) wants the same Bearer token (else Graph's 190
  envelope, 401), answers 404 once expired (what Meta's CDN does), and streams the bytes with
  ``Content-Length``: a registered body, or ``size`` bytes generated on the fly from ``seed`` (64 KiB at
  a time: a 50 MiB media is never held whole). ``break_after`` closes the connection after that many
  bytes (a download that breaks); ``lookup_delay_s`` delays the lookup (Graph that does not answer).
* Tests register media with ``POST /__fake/media`` (``{"data_b64"|"text"|"size"+"seed", "mime_type",
  "id"?, "sha256"?, "expired"?, "break_after"?, "lookup_delay_s"?, "url_ttl_s"?}``: ``sha256`` overrides
  what the lookup says, so a test can make it lie), which answers the id, the true sha256 in hex and in
  base64 (Meta's webhook form) and the size; ``PATCH /__fake/media/{id}`` changes these options.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from mogateway.testing.fake_graph.errors import FakeGraphError, not_found
from mogateway.testing.fake_graph.world import World

__all__ = ["FakeMedia", "MediaItem", "generated_chunks"]

CHUNK = 64 * 1024
DEFAULT_URL_TTL_S = 300.0


def generated_chunks(size: int, seed: int) -> Iterator[bytes]:
    """``size`` deterministic bytes from ``seed``, 64 KiB at a time (the same on every call)."""
    block = b"".join(hashlib.sha512(f"{seed}:{i}".encode()).digest() for i in range(CHUNK // 64))
    sent = 0
    index = 0
    while sent < size:
        n = min(CHUNK, size - sent)
        # Each chunk differs (its first 8 bytes are its index), so a reordered body has another digest.
        chunk = (index.to_bytes(8, "big") + block[8:])[:n]
        yield chunk
        sent += n
        index += 1


@dataclass
class MediaItem:
    media_id: str
    mime_type: str
    size: int
    digest: bytes
    data: bytes | None = None
    seed: int = 0
    sha256_override: str | None = None
    expired: bool = False
    break_after: int | None = None
    lookup_delay_s: float = 0.0
    url_ttl_s: float = DEFAULT_URL_TTL_S

    def chunks(self) -> Iterator[bytes]:
        if self.data is not None:
            for start in range(0, len(self.data), CHUNK):
                yield self.data[start : start + CHUNK]
        else:
            yield from generated_chunks(self.size, self.seed)


class FakeMedia:
    """The registered media and the download URLs handed out (one per server)."""

    def __init__(self) -> None:
        self.items: dict[str, MediaItem] = {}
        self.urls: dict[str, tuple[str, float]] = {}  # key -> (media id, expires at)
        self.downloads = 0
        self._next = 4490000000000001

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def register(self, body: dict[str, Any]) -> MediaItem:
        media_id = str(body.get("id") or self._new_id())
        if not media_id.isdigit():
            raise ValueError("id must be digits")
        data: bytes | None = None
        if "data_b64" in body:
            data = base64.b64decode(str(body["data_b64"]))
        elif "text" in body:
            data = str(body["text"]).encode("utf-8")
        seed = int(body.get("seed", 0))
        if data is not None:
            size, digest = len(data), hashlib.sha256(data).digest()
        else:
            size = int(body.get("size", 0))
            if size <= 0:
                raise ValueError("give data_b64, text, or a positive size (and a seed)")
            hasher = hashlib.sha256()
            for chunk in generated_chunks(size, seed):
                hasher.update(chunk)
            digest = hasher.digest()
        item = MediaItem(
            media_id=media_id,
            mime_type=str(body.get("mime_type") or "application/octet-stream"),
            size=size,
            digest=digest,
            data=data,
            seed=seed,
        )
        self.update(item, body)
        self.items[media_id] = item
        return item

    @staticmethod
    def update(item: MediaItem, body: dict[str, Any]) -> None:
        if "sha256" in body:
            item.sha256_override = None if body["sha256"] is None else str(body["sha256"])
        if "expired" in body:
            item.expired = bool(body["expired"])
        if "break_after" in body:
            item.break_after = None if body["break_after"] is None else int(body["break_after"])
        if "lookup_delay_s" in body:
            item.lookup_delay_s = float(body["lookup_delay_s"])
        if "url_ttl_s" in body:
            item.url_ttl_s = float(body["url_ttl_s"])

    def _new_id(self) -> str:
        self._next += 1
        return str(self._next)

    async def lookup(self, world: World, media_id: str, base_url: str) -> dict[str, Any] | None:
        """The lookup's answer, or None when ``media_id`` is not a registered media (another object)."""
        item = self.items.get(media_id)
        if item is None:
            return None
        if item.lookup_delay_s:
            await asyncio.sleep(item.lookup_delay_s)
        if item.expired:
            raise not_found(media_id)
        key = secrets.token_urlsafe(24)
        self.urls[key] = (media_id, world.clock.now() + item.url_ttl_s)
        return {
            "messaging_product": "whatsapp",
            "url": f"{base_url}/__fake/media/download/{key}?ext={int(world.clock.now())}",
            "mime_type": item.mime_type,
            "sha256": item.sha256_override if item.sha256_override is not None else item.digest.hex(),
            "file_size": str(item.size),
            "id": media_id,
        }

    def described(self, item: MediaItem) -> dict[str, Any]:
        return {
            "id": item.media_id,
            "sha256": base64.b64encode(item.digest).decode("ascii"),
            "sha256_hex": item.digest.hex(),
            "file_size": item.size,
            "mime_type": item.mime_type,
        }


async def download(
    request: web.Request, media: FakeMedia, world: World, token: str | None
) -> web.StreamResponse:
    """``GET /__fake/media/download/{key}``: the bytes, streamed (module docstring)."""
    try:
        world.authenticate(token)
    except FakeGraphError as err:
        return web.json_response(err.envelope("download"), status=err.http_status)
    entry = media.urls.get(request.match_info["key"])
    if entry is None or world.clock.now() > entry[1] or entry[0] not in media.items:
        return web.Response(status=404, text="URL signature expired")
    item = media.items[entry[0]]
    media.downloads += 1
    response = web.StreamResponse(
        status=200, headers={"Content-Type": item.mime_type, "Content-Length": str(item.size)}
    )
    await response.prepare(request)
    sent = 0
    for chunk in item.chunks():
        if item.break_after is not None and sent + len(chunk) > item.break_after:
            await response.write(chunk[: max(0, item.break_after - sent)])
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write(chunk)
        sent += len(chunk)
    await response.write_eof()
    return response
