"""One callback exchange: POST the body, read at most 64 KiB, judge the answer.

The deadline covers the whole exchange (connect, send, wait, read), not inactivity. Connection failures
(nothing was answered) are retried with backoff while the deadline lasts; when it runs out during such a
retry the outcome is "failed", when it runs out while waiting for an answer it is "timeout". Redirects
are never followed. The gateway's dispatcher and ``mogateway simulate`` both use this function, so what
``simulate`` reports is what the gateway would do.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import field

from mogateway.core.callback_url import UrlRefused, check_literal_host
from mogateway.core.contract import Outcome, OutcomeKind, judge_response
from mogateway.core.immutable import immutable
from mogateway.core.ports import AnswerIncomplete, AnswerMalformed, CallbackTransport, ConnectFailed
from mogateway.service.deadline import deadline

__all__ = ["Attempt", "Exchange", "exchange"]

_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 2.0
# The answer's bytes are read as text and never decompressed (a 64 KiB cap on compressed bytes would not
# bound the text), so ask for no content coding, and refuse an answer that is encoded anyway: read as
# Latin-1, gzip bytes would otherwise be "text" and go to the subscriber.
_IDENTITY = {"accept-encoding": "identity"}


@immutable
class Attempt:
    """One HTTP attempt: when it started (ms after the exchange began), how long it took, what came back."""

    started_ms: float
    elapsed_ms: float
    status: int | None
    error: str = ""


@immutable
class Exchange:
    outcome: Outcome
    attempts: list[Attempt] = field(default_factory=list)
    elapsed_ms: float = 0.0


async def exchange(
    client: CallbackTransport,
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    deadline_s: float,
    unescape_newlines: bool = True,
    allow_private: bool = True,
    channel: str = "sms",
) -> Exchange:
    """POST ``body`` to ``url`` and judge the answer within ``deadline_s`` seconds."""
    clock = time.monotonic
    start = clock()
    attempts: list[Attempt] = []

    def elapsed_ms() -> float:
        return (clock() - start) * 1000.0

    def done(outcome: Outcome) -> Exchange:
        return Exchange(outcome, attempts, elapsed_ms())

    try:
        check_literal_host(url, allow_private)
    except UrlRefused as exc:
        return Exchange(Outcome(OutcomeKind.FAILED, detail=f"refused URL: {exc}"), attempts, 0.0)

    headers = {**headers, **_IDENTITY}
    waiting_for_answer = False
    began = 0.0
    backoff = _FIRST_BACKOFF_S
    last_error = ""
    try:
        async with deadline(deadline_s):
            while True:
                began = elapsed_ms()
                waiting_for_answer = True
                try:
                    answer = await client.post(url, body, headers)
                except UrlRefused as exc:
                    attempts.append(Attempt(began, elapsed_ms() - began, None, f"refused: {exc}"))
                    return done(Outcome(OutcomeKind.FAILED, detail=f"refused URL: {exc}"))
                except ConnectFailed as exc:
                    waiting_for_answer = False
                    last_error = str(exc)
                    attempts.append(Attempt(began, elapsed_ms() - began, None, last_error))
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF_S)
                    continue
                except AnswerIncomplete as exc:
                    attempts.append(Attempt(began, elapsed_ms() - began, None, str(exc)))
                    return done(Outcome(OutcomeKind.BAD_RESPONSE, detail="incomplete answer body"))
                except AnswerMalformed as exc:
                    attempts.append(Attempt(began, elapsed_ms() - began, None, str(exc)))
                    return done(Outcome(OutcomeKind.BAD_RESPONSE, detail=str(exc)))
                attempts.append(Attempt(began, elapsed_ms() - began, answer.status))
                coding = answer.content_encoding
                if answer.status == 200 and coding not in ("", "identity"):
                    detail = f"content encoding {coding!r}"
                    return done(Outcome(OutcomeKind.BAD_RESPONSE, status=200, detail=detail))
                return done(
                    judge_response(
                        answer.status,
                        answer.content_type,
                        answer.body,
                        oversized=answer.oversized,
                        unescape_newlines=unescape_newlines,
                        channel=channel,
                    )
                )
    except TimeoutError:
        if waiting_for_answer:
            attempts.append(Attempt(began, elapsed_ms() - began, None, "timeout"))
            return done(Outcome(OutcomeKind.TIMEOUT, detail=f"no complete answer within {deadline_s:g} s"))
        return done(
            Outcome(OutcomeKind.FAILED, detail=f"could not connect within {deadline_s:g} s ({last_error})")
        )
