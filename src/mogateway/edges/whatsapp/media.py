"""Fetching WhatsApp media from Graph: the lookup, then the download, streamed. The rules are
``core.whatsapp_media``'s; this module carries them over HTTP (httpx, as ``graph_sender``):

* :meth:`GraphMedia.lookup` — ``GET {graph_url}/{version}/{media_id}`` with the number's access token as
  a Bearer token, under one overall deadline, at most 64 KiB of answer read → a
  :class:`~mogateway.core.whatsapp_media.MediaLocation`.
* :meth:`GraphMedia.open` — ``GET`` the location's URL with the same token, answered as a
  :class:`Download` whose body is read chunk by chunk (:meth:`Download.chunks`) and never held whole; a
  download URL that answers 404 (it lives minutes) is looked up once more and tried again.
* Any failure raises :class:`MediaFetchError` with the
  :class:`~mogateway.core.whatsapp_media.MediaFailure` the route answers: Graph's error (410 expired,
  502), no connection (502), no answer in time (504). The token is never logged, never in an error's
  text (httpx logs URLs, never headers; the lookup URL holds only the media id).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from mogateway.core.whatsapp_media import MediaFailure, MediaLocation, media_failure, parse_media_answer

__all__ = ["Download", "GraphMedia", "MediaFetchError"]

_MAX_LOOKUP_ANSWER = 64 * 1024


class MediaFetchError(Exception):
    """A media that cannot be fetched; ``failure`` is what the route answers."""

    def __init__(self, failure: MediaFailure) -> None:
        super().__init__(f"{failure.status} {failure.kind}: {failure.detail}")
        self.failure = failure


def _outage(exc: BaseException, what: str) -> MediaFetchError:
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return MediaFetchError(MediaFailure(504, "graph-timeout", f"Graph did not answer the {what} in time"))
    return MediaFetchError(
        MediaFailure(
            502, "graph-unreachable", f"Graph could not be reached for the {what} ({type(exc).__name__})"
        )
    )


class Download:
    """An open download: its status was 2xx; read :meth:`chunks`, then :meth:`aclose` (always)."""

    def __init__(self, response: httpx.Response, location: MediaLocation) -> None:
        self._response = response
        self.location = location
        length = response.headers.get("content-length", "")
        self.content_length: int | None = int(length) if length.isascii() and length.isdigit() else None
        self.content_type = response.headers.get("content-type", "") or location.mime_type

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as the socket gives it (at most 64 KiB a read, passed on without copying or
        re-chunking); :class:`MediaFetchError` (502/504) when the download breaks."""
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise _outage(exc, "download") from None

    async def aclose(self) -> None:
        await self._response.aclose()


class GraphMedia:
    """One client for all numbers; close it with :meth:`aclose`."""

    def __init__(
        self,
        graph_url: str,
        api_version: str,
        *,
        lookup_timeout_s: float = 10.0,
        read_timeout_s: float = 30.0,
        max_connections: int = 100,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.graph_url = graph_url.rstrip("/")
        self.api_version = api_version
        self.lookup_timeout_s = lookup_timeout_s
        # A download has no overall deadline (a 100 MB document takes its time); each read has one.
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(read_timeout_s, connect=min(10.0, read_timeout_s)),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=20),
            follow_redirects=False,
            transport=transport,
        )

    async def lookup(self, media_id: str, access_token: str) -> MediaLocation:
        """Where Graph keeps ``media_id`` now (its download URL lives minutes)."""
        if not media_id.isascii() or not media_id.isdigit() or len(media_id) > 64:
            raise MediaFetchError(MediaFailure(410, "media-expired", "the media id is not one Graph gives"))
        url = f"{self.graph_url}/{self.api_version}/{media_id}"
        try:
            async with asyncio.timeout(self.lookup_timeout_s):
                async with self._client.stream("GET", url, headers=_bearer(access_token)) as response:
                    body = b""
                    async for chunk in response.aiter_raw():
                        body += chunk
                        if len(body) > _MAX_LOOKUP_ANSWER:
                            break
                    status = response.status_code
        except (httpx.HTTPError, TimeoutError) as exc:
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
            # identity: the bytes streamed are the file's (their sha256 is checked), never a compressed form
            headers = {**_bearer(access_token), "accept-encoding": "identity"}
            request = self._client.build_request("GET", location.url, headers=headers)
            try:
                async with asyncio.timeout(self.lookup_timeout_s):
                    response = await self._client.send(request, stream=True)
            except (httpx.HTTPError, TimeoutError) as exc:
                raise _outage(exc, "download") from None
            if 200 <= response.status_code < 300:
                return Download(response, location)
            body = await _head_of(response)
            if response.status_code == 404 and attempt == 1:
                continue  # the URL expired between the lookup and the download: look it up again
            raise MediaFetchError(media_failure(response.status_code, body))
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self._client.aclose()


def _bearer(access_token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {access_token}"}


async def _head_of(response: httpx.Response) -> bytes:
    """At most 64 KiB of an error answer, then the response is closed."""
    body = b""
    try:
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > _MAX_LOOKUP_ANSWER:
                break
    except httpx.HTTPError:
        pass
    finally:
        await response.aclose()
    return body
