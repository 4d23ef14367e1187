"""Fetching WhatsApp media from Graph: the lookup, then the download, streamed. The rules are
``core.whatsapp_media``'s; this module carries them over HTTP:

* :meth:`GraphMedia.lookup` — ``GET {graph_url}/{version}/{media_id}`` with the number's access token as
  a Bearer token, under one overall deadline, at most 64 KiB of answer read → a
  :class:`~mogateway.core.whatsapp_media.MediaLocation`.
* :meth:`GraphMedia.open` — ``GET`` the location's URL with the same token, answered as a
  :class:`Download` whose body is read chunk by chunk (:meth:`Download.chunks`, 64 KiB at most) and
  never held whole: the client reads at most a few chunks ahead of the one being passed on (aiohttp's
  stream pauses the socket above its high-water mark). A download URL that answers 404 (it lives
  minutes) is looked up once more and tried again.
* Any failure raises :class:`MediaFetchError` with the
  :class:`~mogateway.core.whatsapp_media.MediaFailure` the route answers: Graph's error (410 expired,
  502), no connection (502), no answer in time (504). The token is never logged, never in an error's
  text.

aiohttp, not httpx (``graph_sender``'s): its C parser passes a body on at about a third of httpx's CPU
per MiB (measured 0.45 against 1.3–1.8 ms per MiB on this project's machine), and a media fetch is all
body.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp

from mogateway.core.whatsapp_media import MediaFailure, MediaLocation, media_failure, parse_media_answer

__all__ = ["CHUNK_BYTES", "Download", "GraphMedia", "MediaFetchError"]

#: At most this many bytes per chunk passed on.
CHUNK_BYTES = 64 * 1024
_MAX_LOOKUP_ANSWER = 64 * 1024


class MediaFetchError(Exception):
    """A media that cannot be fetched; ``failure`` is what the route answers."""

    def __init__(self, failure: MediaFailure) -> None:
        super().__init__(f"{failure.status} {failure.kind}: {failure.detail}")
        self.failure = failure


def _outage(exc: BaseException, what: str) -> MediaFetchError:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return MediaFetchError(MediaFailure(504, "graph-timeout", f"Graph did not answer the {what} in time"))
    return MediaFetchError(
        MediaFailure(
            502, "graph-unreachable", f"Graph could not be reached for the {what} ({type(exc).__name__})"
        )
    )


class Download:
    """An open download: its status was 2xx; read :meth:`chunks`, then :meth:`aclose` (always)."""

    def __init__(self, response: aiohttp.ClientResponse, location: MediaLocation) -> None:
        self._response = response
        self.location = location
        length = response.headers.get("content-length", "")
        self.content_length: int | None = int(length) if length.isascii() and length.isdigit() else None
        self.content_type = response.headers.get("content-type", "") or location.mime_type

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it comes, at most :data:`CHUNK_BYTES` a chunk; :class:`MediaFetchError`
        (502/504) when the download breaks."""
        try:
            async for chunk in self._response.content.iter_chunked(CHUNK_BYTES):
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _outage(exc, "download") from None

    async def aclose(self) -> None:
        if self._response.content.at_eof():
            self._response.release()  # read whole: the connection goes back to the pool
        else:
            self._response.close()  # cut short: the connection is dropped, never reused half-read


class GraphMedia:
    """One client for all numbers; make it on the running event loop, close it with :meth:`aclose`."""

    def __init__(
        self,
        graph_url: str,
        api_version: str,
        *,
        lookup_timeout_s: float = 10.0,
        read_timeout_s: float = 30.0,
        max_connections: int = 100,
    ) -> None:
        self.graph_url = graph_url.rstrip("/")
        self.api_version = api_version
        self.lookup_timeout_s = lookup_timeout_s
        # A download has no overall deadline (a 100 MB document takes its time); each read has one.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=min(10.0, read_timeout_s), sock_read=read_timeout_s
            ),
            connector=aiohttp.TCPConnector(limit=max_connections, ttl_dns_cache=300),
            auto_decompress=False,  # the bytes streamed are the file's: their sha256 is checked
            trust_env=False,
        )

    async def lookup(self, media_id: str, access_token: str) -> MediaLocation:
        """Where Graph keeps ``media_id`` now (its download URL lives minutes)."""
        if not media_id.isascii() or not media_id.isdigit() or len(media_id) > 64:
            raise MediaFetchError(MediaFailure(410, "media-expired", "the media id is not one Graph gives"))
        url = f"{self.graph_url}/{self.api_version}/{media_id}"
        try:
            async with asyncio.timeout(self.lookup_timeout_s):
                async with self._session.get(
                    url, headers=_bearer(access_token), allow_redirects=False
                ) as response:
                    body = await _head(response)
                    status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _outage(exc, "media lookup") from None
        if not 200 <= status < 300:
            raise MediaFetchError(media_failure(status, body))
        location = parse_media_answer(body)
        if location is None:
            raise MediaFetchError(MediaFailure(502, "graph-error", "Graph's media lookup answer has no url"))
        return location

    async def open(self, media_id: str, access_token: str) -> Download:
        """The media's download, open (status 2xx, headers read, body not yet)."""
        for attempt in (1, 2):
            location = await self.lookup(media_id, access_token)
            headers = {**_bearer(access_token), "accept-encoding": "identity"}
            try:
                async with asyncio.timeout(self.lookup_timeout_s):
                    response = await self._session.get(location.url, headers=headers, allow_redirects=False)
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise _outage(exc, "download") from None
            if 200 <= response.status < 300:
                return Download(response, location)
            try:
                async with asyncio.timeout(self.lookup_timeout_s):
                    body = await _head(response)
            except (aiohttp.ClientError, TimeoutError):
                body = b""
            finally:
                response.close()
            if response.status == 404 and attempt == 1:
                continue  # the URL expired between the lookup and the download: look it up again
            raise MediaFetchError(media_failure(response.status, body))
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self._session.close()


async def _head(response: aiohttp.ClientResponse) -> bytes:
    """The answer's body, at most 64 KiB of it."""
    body = b""
    while len(body) <= _MAX_LOOKUP_ANSWER:
        chunk = await response.content.read(_MAX_LOOKUP_ANSWER + 1 - len(body))
        if not chunk:
            break
        body += chunk
    return body[:_MAX_LOOKUP_ANSWER]


def _bearer(access_token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {access_token}"}
