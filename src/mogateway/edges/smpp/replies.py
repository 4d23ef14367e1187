"""The SMPP reply channel: a session reply goes back as submit_sm on the bind its MO came from.

Rules stated before the code:

* Bind choice: the MO's own bind (origin ``smpp:<name>``) when it is bound and may transmit; else a
  bound transmitting bind of the same operator; else the reply fails as retryable.
* Text: GSM-7 when it fits the link's default alphabet, else UCS-2, split as the bind says; every part
  asks for a delivery receipt (``registered_delivery``) and carries the bind's reply TLVs, with the
  client's DLT ids put in when the reply matched one of its templates (smpp.dlt).
* ESME_RTHROTTLED and ESME_RMSGQFUL are waits, not failures: the part is retried with backoff. Any
  other error, or a part that stays refused, fails the reply; it is retryable only if no part went out
  yet (a retry must not deliver the first parts twice).
* A submit_sm written without an answer (the session closed, the response timed out) may have been taken
  by the SMSC: the reply is reported as possibly sent and never resent on another session by this
  channel (the dispatcher decides, see ``service.replier``).
* Sending twice would reach the handset twice, so the channel needs an intent record: ``handover`` is
  awaited right before the first submit_sm is written, and not at all when the reply fails before.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from mogateway.core.ports import Reply, ReplyError, ReplySubmitted
from mogateway.edges.dlt_errors import describe_status
from mogateway.edges.smpp.bind import BindUnavailable, EsmeBind, ResponseLost
from mogateway.smpp.constants import Status
from mogateway.smpp.dlt import reply_tlvs
from mogateway.smpp.pdu import SubmitSm, SubmitSmResp
from mogateway.smpp.segments import plan_reply

__all__ = ["SmppReplyChannel"]

_WAIT_STATUSES: Final = frozenset({Status.ESME_RTHROTTLED, Status.ESME_RMSGQFUL})
_TEMPORARY: Final = _WAIT_STATUSES | {Status.ESME_RSYSERR, Status.ESME_RX_T_APPN, Status.ESME_RSUBMITFAIL}


class SmppReplyChannel:
    """``ReplyChannel`` over the configured binds (``name`` is "smpp")."""

    name = "smpp"
    needs_intent = True

    def __init__(
        self,
        binds: Mapping[str, EsmeBind],
        *,
        max_attempts: int = 6,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 5.0,
        submit_timeout_s: float = 30.0,
    ) -> None:
        self._binds = binds
        self._max_attempts = max_attempts
        self._backoff_initial = backoff_initial_s
        self._backoff_max = backoff_max_s
        self._timeout = submit_timeout_s
        self._references = itertools.count(random.randrange(0x10000))

    def pick(self, origin: str, operator: str = "") -> EsmeBind | None:
        """The bind a reply to an MO from ``origin`` leaves on (None: none can transmit now)."""
        name = origin.split(":", 1)[1] if origin.startswith("smpp:") else ""
        own = self._binds.get(name)
        if own is not None and own.can_transmit:
            return own
        wanted = (own.config.operator if own is not None else "") or operator
        if not wanted:
            return None
        for bind in self._binds.values():
            if bind.config.operator == wanted and bind.can_transmit:
                return bind
        return None

    def ready(self, reply: Reply) -> bool:
        """Whether a bind could take this reply now."""
        return self.pick(reply.message.origin, _operator(reply)) is not None

    async def send(
        self, reply: Reply, handover: Callable[[], Awaitable[None]] | None = None
    ) -> ReplySubmitted:
        """Submit ``reply``; the refs are the SMSC message ids of its parts."""
        origin = reply.message.origin
        bind = self.pick(origin, _operator(reply))
        if bind is None:
            raise ReplyError(f"no bound SMPP transmitter for {origin}", retryable=True)
        cfg = bind.config
        try:
            segments = plan_reply(
                reply.text,
                default=cfg.default_alphabet,
                split=cfg.split,
                reference=next(self._references),
            )
        except ValueError as exc:
            raise ReplyError(str(exc)) from None
        pe_tag, template_tag, chain_tag = cfg.dlt_tags()
        extra_tlvs = reply_tlvs(
            cfg.reply_tlv_list(),
            reply.dlt,
            pe_tag=pe_tag,
            template_tag=template_tag,
            chain_tag=chain_tag,
            tm_id=cfg.dlt_tm_id,
        )
        refs: list[str] = []
        for number, segment in enumerate(segments, start=1):
            pdu = SubmitSm(
                source_addr_ton=cfg.source_ton,
                source_addr_npi=cfg.source_npi,
                source_addr=reply.message.shortcode,
                dest_addr_ton=cfg.dest_ton,
                dest_addr_npi=cfg.dest_npi,
                destination_addr=reply.message.msisdn,
                esm_class=segment.esm_class,
                registered_delivery=cfg.registered_delivery,
                data_coding=segment.data_coding,
                short_message=segment.short_message,
                tlvs=segment.tlvs + extra_tlvs,
            )
            if number == 1 and handover is not None:
                await handover()
            try:
                refs.append(await self._submit_part(bind, pdu))
            except _PartFailed as exc:
                sent = f" after {len(refs)} of {len(segments)} parts ({', '.join(refs)})" if refs else ""
                raise ReplyError(
                    f"bind {bind.name}: part {number}: {exc.detail}{sent}",
                    retryable=exc.retryable and not refs,
                    possibly_sent=exc.possibly_sent,
                ) from None
        encoding = "UCS-2" if segments[0].data_coding == 8 else cfg.default_alphabet
        return ReplySubmitted(f"smpp:{bind.name}", len(segments), refs, f"{encoding}, {cfg.split}")

    async def _submit_part(self, bind: EsmeBind, pdu: SubmitSm) -> str:
        delay = self._backoff_initial
        last = ""
        for _attempt in range(self._max_attempts):
            try:
                response = await bind.submit(pdu, timeout=self._timeout)
            except BindUnavailable as exc:
                raise _PartFailed(str(exc), retryable=True) from None
            except ResponseLost as exc:
                raise _PartFailed(f"possibly sent: {exc}", retryable=False, possibly_sent=True) from None
            if response.status == 0 and isinstance(response, SubmitSmResp):
                return response.message_id
            last = Status.describe(response.status)
            dlt = describe_status(response.status)
            if dlt is not None:
                last = f"{last}, {dlt}"
            if response.status not in _WAIT_STATUSES:
                raise _PartFailed(f"refused: {last}", retryable=response.status in _TEMPORARY)
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(self._backoff_max, delay * 2)
        raise _PartFailed(f"still {last} after {self._max_attempts} attempts", retryable=True)


class _PartFailed(Exception):
    def __init__(self, detail: str, *, retryable: bool, possibly_sent: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retryable = retryable
        self.possibly_sent = possibly_sent


def _operator(reply: Reply) -> str:
    sender = reply.message.sender
    return sender.operator if sender is not None else ""
