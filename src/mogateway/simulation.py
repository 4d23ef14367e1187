"""What ``mogateway simulate`` does, as functions: send contract-exact MOs, judge, summarize.

The exchange itself is the gateway's own (:func:`mogateway.service.caller.exchange`: same deadline,
same 64 KiB cap, no redirects, same retries, same judgement), so a simulated answer is judged exactly as
the gateway would judge it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mogateway.core.contract import Outcome, OutcomeKind, TsunixUnit
from mogateway.core.immutable import immutable
from mogateway.core.whatsapp import withholds_reply
from mogateway.edges.http1 import Http1Client
from mogateway.service.caller import Exchange, exchange
from mogateway.testing.payloads import DEFAULT_MSISDN, DEFAULT_SHORTCODE, Channel, make_callback, make_mo

if TYPE_CHECKING:
    from mogateway.testing.simulated_whatsapp import Details

__all__ = [
    "EXIT_CODES",
    "EXIT_MIXED",
    "LatencySummary",
    "Run",
    "SimulatedMO",
    "WITHHELD_DETAIL",
    "WhatsAppExchange",
    "exit_code",
    "percentile",
    "simulate_many",
    "simulate_once",
]

#: Exit code of ``mogateway simulate`` for each outcome (2 is taken by usage errors).
EXIT_CODES: dict[OutcomeKind, int] = {
    OutcomeKind.REPLY: 0,
    OutcomeKind.BLANK: 3,
    OutcomeKind.TIMEOUT: 4,
    OutcomeKind.HTTP_ERROR: 5,
    OutcomeKind.BAD_RESPONSE: 6,
    OutcomeKind.FAILED: 7,
    OutcomeKind.UNROUTABLE: 8,
}
#: Exit code when repeated callbacks ended in different outcomes, some without a reply.
EXIT_MIXED = 1


@dataclass(frozen=True, slots=True)
class SimulatedMO:
    """The MO to send (each request gets a fresh time and message id)."""

    message: str
    token: str = field(repr=False)
    msisdn: str = DEFAULT_MSISDN
    shortcode: str = DEFAULT_SHORTCODE
    operator: str = ""
    circle: str = ""
    tsunix_unit: TsunixUnit = "ms"
    #: Sign each request as the gateway signs for a client that signs (newest secret first); () = unsigned.
    signing_secrets: tuple[str, ...] = field(default=(), repr=False)
    #: ``whatsapp``: the callback of a WhatsApp MO (``shortcode`` is the business number), whose reply
    #: goes out as WhatsApp messages of up to 4,096 characters instead of SMS parts.
    channel: Channel = "sms"
    #: A WhatsApp MO of this type (``testing.simulated_whatsapp.TYPES``; None: a text), its details.
    whatsapp_type: str | None = None
    details: Details | None = None

    def check(self) -> None:
        """Raise ValueError when the gateway could never send this MO (bad msisdn or shortcode, a
        WhatsApp detail that does not fit the type — ``DetailError`` — or a WhatsApp message the gateway
        stores without calling back)."""
        make_mo(
            self.message,
            msisdn=self.msisdn,
            shortcode=self.shortcode,
            channel=self.channel,
            whatsapp_message=self.whatsapp_message(),
        )

    def whatsapp_message(self) -> dict[str, Any] | None:
        """A fresh Meta message object of :attr:`whatsapp_type` (a new wamid each time), or None."""
        if self.channel != "whatsapp" or self.whatsapp_type is None:
            return None
        from mogateway.core.numbering import normalize_msisdn
        from mogateway.testing.simulated_whatsapp import Details, build

        return build(
            self.whatsapp_type, normalize_msisdn(self.msisdn), self.message, self.details or Details()
        )

    def withholds_reply(self) -> bool:
        """True when the gateway never sends a reply to this MO, whatever the answer (a WhatsApp
        reaction: ``core.whatsapp.withholds_reply``)."""
        if self.channel != "whatsapp" or self.whatsapp_type is None:
            return False
        mo = make_mo(
            self.message,
            msisdn=self.msisdn,
            shortcode=self.shortcode,
            channel=self.channel,
            whatsapp_message=self.whatsapp_message(),
        )
        return withholds_reply(mo)

    def request(self) -> tuple[bytes, dict[str, str]]:
        """Body and headers of one callback for this MO, timed now."""
        return make_callback(
            self.message,
            msisdn=self.msisdn,
            shortcode=self.shortcode,
            operator=self.operator,
            circle=self.circle,
            tsunix_unit=self.tsunix_unit,
            token=self.token,
            signing_secret=self.signing_secrets or None,
            channel=self.channel,
            whatsapp_message=self.whatsapp_message(),
        )


#: The detail of an answer the gateway withholds (as ``service.dispatcher`` records it).
WITHHELD_DETAIL = "a WhatsApp reaction or edit is not a person's message: its answer is never sent"


@immutable
class WhatsAppExchange(Exchange):
    """An exchange of a WhatsApp MO: the callback's ``whatsapp`` member as sent (compact JSON), and the
    reply the gateway would withhold (the outcome is then ``blank``), if any."""

    member: str | None = None
    withheld_reply: str | None = None


async def simulate_once(
    session: Http1Client,
    url: str,
    mo: SimulatedMO,
    *,
    deadline_s: float,
    unescape_newlines: bool = True,
) -> Exchange:
    """One callback to ``url``, judged as the gateway judges it."""
    body, headers = mo.request()
    done = await exchange(
        session,
        url,
        body,
        headers,
        deadline_s=deadline_s,
        unescape_newlines=unescape_newlines,
        channel=mo.channel,
    )
    if mo.channel != "whatsapp":
        return done
    fields = {f.name: getattr(done, f.name) for f in dataclasses.fields(done)}
    _, marker, member = body.partition(b',"whatsapp":')
    fields["member"] = member[:-1].decode("utf-8") if marker else None
    if done.outcome.sends_reply and mo.withholds_reply():  # as the dispatcher does
        fields["outcome"] = Outcome(OutcomeKind.BLANK, done.outcome.status, None, WITHHELD_DETAIL)
        fields["withheld_reply"] = done.outcome.reply or ""
    return WhatsAppExchange(**fields)


@dataclass(frozen=True, slots=True)
class Run:
    """Every exchange of a repeated simulation, and the wall time it took."""

    exchanges: list[Exchange]
    wall_s: float
    concurrency: int

    @property
    def outcomes(self) -> Counter[OutcomeKind]:
        """How many exchanges ended in each outcome."""
        return Counter(x.outcome.kind for x in self.exchanges)


async def simulate_many(
    url: str,
    mo: SimulatedMO,
    *,
    repeat: int,
    concurrency: int,
    deadline_s: float,
    unescape_newlines: bool = True,
) -> Run:
    """``repeat`` callbacks, at most ``concurrency`` at a time, over one connection pool."""
    if repeat < 1 or concurrency < 1:
        raise ValueError("repeat and concurrency must be at least 1")
    gate = asyncio.Semaphore(concurrency)
    # simulate is pointed at the developer's own application, usually on this machine: no address guard.
    session = Http1Client(allow_private=True)

    async def one() -> Exchange:
        async with gate:
            return await simulate_once(
                session, url, mo, deadline_s=deadline_s, unescape_newlines=unescape_newlines
            )

    started = time.monotonic()
    try:
        exchanges = await asyncio.gather(*(one() for _ in range(repeat)))
    finally:
        await session.close()
    wall = time.monotonic() - started
    return Run(list(exchanges), wall, concurrency)


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values (p in 0..100); 0.0 for no values."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latency of a run in milliseconds."""

    p50: float
    p90: float
    p99: float
    max: float
    min: float
    mean: float

    @classmethod
    def of(cls, exchanges: Sequence[Exchange]) -> LatencySummary:
        """Summarize the elapsed time of ``exchanges``."""
        values = sorted(x.elapsed_ms for x in exchanges)
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(
            p50=percentile(values, 50),
            p90=percentile(values, 90),
            p99=percentile(values, 99),
            max=values[-1],
            min=values[0],
            mean=sum(values) / len(values),
        )


def exit_code(kinds: Sequence[OutcomeKind]) -> int:
    """0 when every exchange produced a reply; the outcome's code when all ended alike; else 1."""
    distinct = set(kinds)
    if len(distinct) == 1:
        return EXIT_CODES[next(iter(distinct))]
    return 0 if distinct <= {OutcomeKind.REPLY} else EXIT_MIXED
