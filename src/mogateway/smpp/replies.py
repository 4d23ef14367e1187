"""The SMPP reply channel: a session reply goes back as submit_sm on the bind its MO came from.

Rules stated before the code:

* Bind choice: the MO's own bind (origin ``smpp:<name>``) when it is bound and may transmit; else a
  bound transmitting bind of the same operator; else the reply fails as retryable.
* Text: GSM-7 when it fits the link's default alphabet, else UCS-2, split as the bind says; every part
  asks for a delivery receipt (``registered_delivery``) and carries the bind's reply TLVs (DLT ids).
* ESME_RTHROTTLED and ESME_RMSGQFUL are waits, not failures: the part is retried with backoff. Any
  other error, or a part that stays refused, fails the reply; it is retryable only if no part went out
  yet (a retry must not deliver the first parts twice).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Mapping
from typing import Any, Final

from mogateway.smpp.esme import BindUnavailable, EsmeBind
from mogateway.smpp.pdu import Status, SubmitSm, SubmitSmResp
from mogateway.smpp.segments import plan_reply

__all__ = ["SmppReplyChannel"]

_WAIT_STATUSES: Final = frozenset({Status.ESME_RTHROTTLED, Status.ESME_RMSGQFUL})
_TEMPORARY: Final = _WAIT_STATUSES | {Status.ESME_RSYSERR, Status.ESME_RX_T_APPN, Status.ESME_RSUBMITFAIL}


def _reply_types() -> tuple[Any, Any]:
    from mogateway.service.replies import ReplyError, ReplySubmitted  # the service layer imports us

    return ReplyError, ReplySubmitted


class SmppReplyChannel:
    """``ReplyChannel`` over the configured binds (``name`` is "smpp")."""

    name = "smpp"

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

    async def send(self, reply: Any) -> Any:
        """Submit ``reply`` (a ``mogateway.service.replies.Reply``); the refs are the SMSC message ids."""
        reply_error, reply_submitted = _reply_types()
        bind = self.pick(reply.origin, getattr(reply, "operator", "") or "")
        if bind is None:
            raise reply_error(f"no bound SMPP transmitter for {reply.origin}", retryable=True)
        cfg = bind.config
        try:
            segments = plan_reply(
                reply.text,
                default=cfg.default_alphabet,
                split=cfg.split,
                reference=next(self._references),
            )
        except ValueError as exc:
            raise reply_error(str(exc), retryable=False) from None
        extra_tlvs = cfg.reply_tlv_list()
        refs: list[str] = []
        for number, segment in enumerate(segments, start=1):
            pdu = SubmitSm(
                source_addr_ton=cfg.source_ton,
                source_addr_npi=cfg.source_npi,
                source_addr=reply.shortcode,
                dest_addr_ton=cfg.dest_ton,
                dest_addr_npi=cfg.dest_npi,
                destination_addr=reply.msisdn,
                esm_class=segment.esm_class,
                registered_delivery=cfg.registered_delivery,
                data_coding=segment.data_coding,
                short_message=segment.short_message,
                tlvs=segment.tlvs + extra_tlvs,
            )
            try:
                refs.append(await self._submit_part(bind, pdu))
            except _PartFailed as exc:
                sent = f" after {len(refs)} of {len(segments)} parts ({', '.join(refs)})" if refs else ""
                raise reply_error(
                    f"bind {bind.name}: part {number}: {exc.detail}{sent}",
                    retryable=exc.retryable and not refs,
                ) from None
        encoding = "UCS-2" if segments[0].data_coding == 8 else cfg.default_alphabet
        return reply_submitted(f"smpp:{bind.name}", len(segments), refs, f"{encoding}, {cfg.split}")

    async def _submit_part(self, bind: EsmeBind, pdu: SubmitSm) -> str:
        delay = self._backoff_initial
        last = ""
        for _attempt in range(self._max_attempts):
            try:
                response = await bind.submit(pdu, timeout=self._timeout)
            except BindUnavailable as exc:
                raise _PartFailed(str(exc), retryable=True) from None
            except TimeoutError:
                raise _PartFailed("no submit_sm_resp in time", retryable=True) from None
            if response.status == 0 and isinstance(response, SubmitSmResp):
                return response.message_id
            last = Status.describe(response.status)
            if response.status not in _WAIT_STATUSES:
                raise _PartFailed(f"refused: {last}", retryable=response.status in _TEMPORARY)
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(self._backoff_max, delay * 2)
        raise _PartFailed(f"still {last} after {self._max_attempts} attempts", retryable=True)


class _PartFailed(Exception):
    def __init__(self, detail: str, *, retryable: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retryable = retryable
