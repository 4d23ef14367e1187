"""One callback exchange over HTTP: POST the body, read at most 64 KiB, judge the answer.

The deadline covers the whole exchange (connect, send, wait, read), not inactivity. Connection failures
(nothing was answered) are retried with backoff while the deadline lasts; when it runs out during such a
retry the outcome is "failed", when it runs out while waiting for an answer it is "timeout". Redirects
are never followed. The gateway's dispatcher and ``mogateway simulate`` both use this function, so what
``simulate`` reports is what the gateway would do.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp

from mogateway.core.contract import MAX_RESPONSE_BYTES, Outcome, OutcomeKind, judge_response
from mogateway.service.urlguard import UrlRefused, check_literal_host

__all__ = ["Attempt", "Exchange", "exchange"]

_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 2.0
# The answer's bytes are read as text and never decompressed (a 64 KiB cap on compressed bytes would not
# bound the text), so ask for no content coding, and refuse an answer that is encoded anyway: read as
# Latin-1, gzip bytes would otherwise be "text" and go to the subscriber.
_IDENTITY = {"accept-encoding": "identity"}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One HTTP attempt: when it started (ms after the exchange began), how long it took, what came back."""

    started_ms: float
    elapsed_ms: float
    status: int | None
    error: str = ""


@dataclass(frozen=True, slots=True)
class Exchange:
    outcome: Outcome
    attempts: list[Attempt] = field(default_factory=list)
    elapsed_ms: float = 0.0


async def _read_capped(resp: aiohttp.ClientResponse) -> tuple[bytes, bool]:
    length = resp.content_length
    if length is not None:
        if length > MAX_RESPONSE_BYTES:
            return b"", True
        return await resp.read(), False
    chunks: list[bytes] = []
    total = 0
    async for chunk in resp.content.iter_any():
        total += len(chunk)
        if total > MAX_RESPONSE_BYTES:
            return b"", True
        chunks.append(chunk)
    return b"".join(chunks), False


def _refusal(exc: BaseException) -> UrlRefused | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, UrlRefused):
            return seen
        os_error = getattr(seen, "os_error", None)
        if isinstance(os_error, UrlRefused):
            return os_error
        seen = seen.__cause__ or seen.__context__
    return None


async def exchange(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    deadline_s: float,
    unescape_newlines: bool = True,
    allow_private: bool = True,
) -> Exchange:
    """POST ``body`` to ``url`` and judge the answer within ``deadline_s`` seconds."""
    loop_time = time.monotonic
    start = loop_time()
    attempts: list[Attempt] = []

    def elapsed_ms() -> float:
        return (loop_time() - start) * 1000.0

    try:
        check_literal_host(url, allow_private)
    except UrlRefused as exc:
        return Exchange(Outcome(OutcomeKind.FAILED, detail=f"refused URL: {exc}"), attempts, 0.0)

    waiting_for_answer = False
    began = 0.0
    backoff = _FIRST_BACKOFF_S
    last_error = ""
    try:
        async with asyncio.timeout(deadline_s):
            while True:
                began = elapsed_ms()
                waiting_for_answer = True
                try:
                    async with session.post(
                        url, data=body, headers={**_IDENTITY, **headers}, allow_redirects=False
                    ) as resp:
                        status = resp.status
                        content_type = resp.headers.get("content-type")
                        coding = resp.headers.get("content-encoding", "").strip().lower()
                        data, oversized = await _read_capped(resp)
                except (aiohttp.ClientConnectionError, OSError) as exc:
                    waiting_for_answer = False
                    refused = _refusal(exc)
                    if refused is not None:
                        attempts.append(Attempt(began, elapsed_ms() - began, None, f"refused: {refused}"))
                        return Exchange(
                            Outcome(OutcomeKind.FAILED, detail=f"refused URL: {refused}"),
                            attempts,
                            elapsed_ms(),
                        )
                    last_error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    attempts.append(Attempt(began, elapsed_ms() - began, None, last_error))
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF_S)
                    continue
                except aiohttp.ClientPayloadError as exc:
                    attempts.append(Attempt(began, elapsed_ms() - began, None, f"incomplete answer: {exc}"))
                    return Exchange(
                        Outcome(OutcomeKind.BAD_RESPONSE, detail="incomplete answer body"),
                        attempts,
                        elapsed_ms(),
                    )
                except aiohttp.ClientResponseError as exc:
                    attempts.append(Attempt(began, elapsed_ms() - began, None, f"malformed answer: {exc}"))
                    return Exchange(
                        Outcome(OutcomeKind.BAD_RESPONSE, detail=f"malformed HTTP answer: {exc.message}"),
                        attempts,
                        elapsed_ms(),
                    )
                attempts.append(Attempt(began, elapsed_ms() - began, status))
                if status == 200 and coding not in ("", "identity"):
                    outcome = Outcome(
                        OutcomeKind.BAD_RESPONSE, status=status, detail=f"content encoding {coding!r}"
                    )
                else:
                    outcome = judge_response(
                        status, content_type, data, oversized=oversized, unescape_newlines=unescape_newlines
                    )
                return Exchange(outcome, attempts, elapsed_ms())
    except TimeoutError:
        total = elapsed_ms()
        if waiting_for_answer:
            attempts.append(Attempt(began, total - began, None, "timeout"))
            return Exchange(
                Outcome(OutcomeKind.TIMEOUT, detail=f"no complete answer within {deadline_s:g} s"),
                attempts,
                total,
            )
        return Exchange(
            Outcome(OutcomeKind.FAILED, detail=f"could not connect within {deadline_s:g} s ({last_error})"),
            attempts,
            total,
        )
