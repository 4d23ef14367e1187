"""The callback contract of the seed, in one place, for both sides.

The gateway builds callback bodies with :func:`callback_body` from the one message type
(:class:`mogateway.core.message.Message`) and judges the application's answer with :func:`judge_response`;
the client SDK parses bodies back into a message with :func:`parse_callback_body`. Every choice the
seed leaves open is written down in ``docs/contract.md`` and pinned by golden fixtures in the tests.

Rules stated here, before the code:

* Body keys, in this order: ``shortcode``, ``msisdn``, ``message``, ``sender`` (``cc``, ``ndc``, ``sn``,
  ``operator``, ``circle`` — always all five), ``tsiso``, ``tsunix``. ``shortcode``, ``msisdn``, ``cc``,
  ``ndc``, ``sn`` and ``tsunix`` are JSON numbers; ``sn`` therefore loses leading zeros (``012345`` is sent
  as ``12345``) and a reader restores them by padding to 6 digits.
* A WhatsApp MO (``Message.channel``) has one member more, after ``tsunix``: ``"channel": "whatsapp"``;
  its ``shortcode`` is the business number's digits, and after ``channel`` comes the ``whatsapp`` member
  (``core.whatsapp_member``: the message typed, version 1), spliced in as the exact text the message
  carries (``Message.whatsapp``; absent for a WhatsApp MO stored without one), with a media message's
  signed ``url`` added when the gateway has one (``core.whatsapp_media``). An SMS body has no
  ``channel`` and no ``whatsapp`` (byte-identical to the seed's).
* ``tsiso`` is ``yyyy-mm-ddThh:mm:ss.mmmZ`` in UTC; ``tsunix`` is milliseconds unless the client asked
  for seconds. Both are taken from the same instant, truncated to the millisecond.
* An answer is a reply only when the status is 200, the content type is ``text/plain`` (any charset) or
  absent, the body decodes and is not blank after unescaping. Everything else is a kind of "no reply".
* On the WhatsApp channel only, a 200 answer with ``Content-Type: application/json`` whose body is
  ``{"whatsapp": ...}`` is a rich reply when it keeps Meta's limits (``core.whatsapp_answer``): the
  outcome's ``reply`` is then its stored form (``encode_reply``). A JSON answer that breaks a rule is a
  bad response naming the member and the rule; on SMS any JSON answer is a bad response, as before.
"""

from __future__ import annotations

import enum
import re
from datetime import UTC, datetime
from typing import Any, Final, Literal

import orjson
from mypy_extensions import mypyc_attr

from mogateway.core.immutable import immutable
from mogateway.core.message import Message, Sender
from mogateway.core.whatsapp_answer import RichAnswerError, check_answer, encode_reply
from mogateway.core.whatsapp_media import with_media_url

__all__ = [
    "MAX_RESPONSE_BYTES",
    "CALLBACK_TIMEOUT_S",
    "Outcome",
    "OutcomeKind",
    "PayloadError",
    "Sender",
    "TsunixUnit",
    "callback_body",
    "callback_headers",
    "format_tsiso",
    "judge_response",
    "parse_callback_body",
    "parse_tsiso",
    "tsunix",
    "unescape_reply",
]

#: The seed's deadline for the whole callback exchange.
CALLBACK_TIMEOUT_S: Final = 30.0
#: At most this many bytes of an answer are read; a longer answer is a bad response.
MAX_RESPONSE_BYTES: Final = 64 * 1024

TsunixUnit = Literal["ms", "s"]


@mypyc_attr(allow_interpreted_subclasses=True)  # the SDK's InvalidPayload is one (client/message.py)
class PayloadError(ValueError):
    """A callback body that breaks the contract. ``field`` names the offending member (dotted path)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


# --------------------------------------------------------------------------------------------- time


def _as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no defined instant; pass an aware one")
    return moment.astimezone(UTC)


def format_tsiso(moment: datetime) -> str:
    """``yyyy-mm-ddThh:mm:ss.mmmZ`` in UTC, truncated (not rounded) to the millisecond."""
    m = _as_utc(moment)
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond // 1000:03d}Z"
    )


def tsunix(moment: datetime, unit: TsunixUnit = "ms") -> int:
    """Unix time of ``moment``: milliseconds (default, as the seed's sample) or seconds."""
    m = _as_utc(moment)
    micros = (m - _EPOCH) // _ONE_MICROSECOND
    return micros // 1000 if unit == "ms" else micros // 1_000_000


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND: Final = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - _EPOCH
_TSISO_RE: Final = re.compile(r"\A(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z\Z")


def parse_tsiso(text: str) -> datetime:
    """Parse the exact ``tsiso`` shape back into an aware UTC datetime (raises ValueError)."""
    match = _TSISO_RE.match(text)
    if match is None:
        raise ValueError("expected yyyy-mm-ddThh:mm:ss.mmmZ")
    y, mo, d, h, mi, s, ms = (int(g) for g in match.groups())
    return datetime(y, mo, d, h, mi, s, ms * 1000, tzinfo=UTC)


# ------------------------------------------------------------------------------------------ request


def callback_body(message: Message, unit: TsunixUnit = "ms", media_url: str | None = None) -> bytes:
    """The exact bytes of the callback body for an accepted ``message`` (compact UTF-8 JSON, keys in seed
    order). Raises ValueError for a message without a sender (a rejected one is never called back).

    ``media_url``: the signed URL of a WhatsApp media message's media (``core.media_url``), written as
    the last member of the ``whatsapp`` member's media object; ignored for any other message."""
    s = message.sender
    if s is None:
        raise ValueError(f"message {message.id} has no sender: it was not accepted")
    moment = datetime.fromtimestamp(message.received_at, UTC)
    body: dict[str, Any] = {
        "shortcode": int(message.shortcode),
        "msisdn": int(message.msisdn),
        "message": message.text,
        "sender": {
            "cc": s.cc,
            "ndc": s.ndc,
            "sn": s.sn,
            "operator": s.operator,
            "circle": s.circle,
        },
        "tsiso": format_tsiso(moment),
        "tsunix": tsunix(moment, unit),
    }
    if message.channel == "sms":
        return orjson.dumps(body)
    body["channel"] = message.channel
    data = orjson.dumps(body)
    member = message.whatsapp
    if member is None:
        return data
    if media_url is not None:
        member = with_media_url(member, media_url)
    # The member is already compact JSON (core.whatsapp_member): it goes in as it is, after "channel".
    return b"".join((data[:-1], b',"whatsapp":', member.encode("utf-8"), b"}"))


def callback_headers(token: str, message_id: str, version: str) -> dict[str, str]:
    """The headers of a callback request (the seed's two, plus user-agent and the message id)."""
    return {
        "content-type": "application/json",
        "authorization": f"Bearer {token}",
        "user-agent": f"mogateway/{version}",
        "x-mogateway-message-id": message_id,
    }


def _require(obj: dict[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise PayloadError(path, "is required")
    return obj[key]


def _number(value: Any, path: str, digits: int | None = None) -> int:
    # bool is an int in Python but never a JSON number.
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        else:
            raise PayloadError(path, "must be a number")
    if value < 0:
        raise PayloadError(path, "must not be negative")
    if digits is not None and len(str(value)) > digits:
        raise PayloadError(path, f"must have at most {digits} digits")
    return int(value)


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise PayloadError(path, "must be a string")
    return value


# A 13-digit tsunix is milliseconds until the year 2286; below 10**11 it can only be seconds.
_MS_THRESHOLD: Final = 10**11


def parse_callback_body(body: bytes | str, *, message_id: str = "") -> Message:
    """Parse and check a callback body into the message it carries (``origin`` "callback", ``id``
    ``message_id``: the body does not carry it, the ``x-mogateway-message-id`` header does). Raises
    :class:`PayloadError` naming the first bad field.

    Lenient where the contract is ambiguous (``tsunix`` in seconds or milliseconds, decided by
    magnitude; numeric members sent as digit strings), strict where it is not (India only, 12 digits).
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PayloadError("body", f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PayloadError("body", "must be a JSON object")

    shortcode = _number(_require(data, "shortcode", "shortcode"), "shortcode", digits=15)
    msisdn = _number(_require(data, "msisdn", "msisdn"), "msisdn")
    if len(str(msisdn)) != 12:
        raise PayloadError("msisdn", "must have 12 digits")
    if not str(msisdn).startswith("91"):
        raise PayloadError("msisdn", "must be an Indian number (country code 91)")
    message = _string(_require(data, "message", "message"), "message")

    sender_raw = _require(data, "sender", "sender")
    if not isinstance(sender_raw, dict):
        raise PayloadError("sender", "must be an object")
    cc = _number(_require(sender_raw, "cc", "sender.cc"), "sender.cc")
    if cc != 91:
        raise PayloadError("sender.cc", "must be 91")
    ndc = _number(_require(sender_raw, "ndc", "sender.ndc"), "sender.ndc", digits=4)
    sn_raw = sender_raw.get("sn")
    sn = int(str(msisdn)[6:]) if sn_raw is None else _number(sn_raw, "sender.sn", digits=6)
    operator = _string(sender_raw.get("operator") or "", "sender.operator")
    circle = _string(sender_raw.get("circle") or "", "sender.circle")
    sender = Sender(cc=cc, ndc=ndc, sn=sn, operator=operator, circle=circle)
    if sender.msisdn != str(msisdn):
        raise PayloadError("sender", f"cc+ndc+sn ({sender.msisdn}) does not match msisdn {msisdn}")

    tsiso_raw = _string(_require(data, "tsiso", "tsiso"), "tsiso")
    try:
        received_at = parse_tsiso(tsiso_raw)
    except ValueError as exc:
        raise PayloadError("tsiso", str(exc)) from None
    ts = _number(_require(data, "tsunix", "tsunix"), "tsunix")
    ts_ms = ts if ts >= _MS_THRESHOLD else ts * 1000
    if abs(ts_ms - tsunix(received_at, "ms")) >= 1000:
        raise PayloadError("tsunix", "does not match tsiso")

    channel = data.get("channel", "sms")
    if channel not in ("sms", "whatsapp"):
        raise PayloadError("channel", "must be sms or whatsapp")
    member = data.get("whatsapp")
    if member is not None:
        if channel != "whatsapp":
            raise PayloadError("whatsapp", "is only sent with channel whatsapp")
        if not isinstance(member, dict):
            raise PayloadError("whatsapp", "must be an object")

    return Message(
        id=message_id,
        shortcode=str(shortcode),
        msisdn=str(msisdn),
        text=message,
        received_at=received_at.timestamp(),
        # A WhatsApp MO's channel is read from its origin (core.message).
        origin="callback" if channel == "sms" else "whatsapp:callback",
        sender=sender,
        whatsapp=None if member is None else orjson.dumps(member).decode("utf-8"),
    )


# ------------------------------------------------------------------------------------------ outcome


class OutcomeKind(enum.StrEnum):
    """How a callback ended. Only ``REPLY`` sends anything to the subscriber."""

    REPLY = "reply"  # 200, text/plain, non-blank body
    BLANK = "blank"  # 200, text/plain, empty or whitespace-only body
    TIMEOUT = "timeout"  # no complete answer within the client's deadline
    HTTP_ERROR = "http_error"  # any status other than 200
    BAD_RESPONSE = "bad_response"  # wrong content type, undecodable or oversized body
    FAILED = "failed"  # could not connect (after retries within the deadline) or refused URL
    UNROUTABLE = "unroutable"  # no client application for this shortcode/keyword


@immutable
class Outcome:
    """The judgement of one callback exchange."""

    kind: OutcomeKind
    status: int | None = None
    reply: str | None = None
    detail: str = ""

    @property
    def sends_reply(self) -> bool:
        return self.kind is OutcomeKind.REPLY


def unescape_reply(text: str) -> str:
    r"""Turn the two-character sequence ``\n`` into a line break (the seed's sample reply uses it)."""
    return text.replace("\\n", "\n")


def _media_type_and_charset(content_type: str | None) -> tuple[str, str]:
    if not content_type:
        return "", "utf-8"
    media, _, params = content_type.partition(";")
    charset = "utf-8"
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "charset" and value:
            charset = value.strip().strip('"').lower()
    return media.strip().lower(), charset


def judge_response(
    status: int,
    content_type: str | None,
    body: bytes,
    *,
    oversized: bool = False,
    unescape_newlines: bool = True,
    channel: str = "sms",
) -> Outcome:
    """Apply the outcome rules to a complete answer (``oversized``: more than 64 KiB was sent) to a
    callback of ``channel`` (``sms`` or ``whatsapp``: only WhatsApp takes a JSON answer)."""
    if status != 200:
        return Outcome(OutcomeKind.HTTP_ERROR, status=status, detail=f"status {status}")
    media, charset = _media_type_and_charset(content_type)
    rich = media == "application/json" and channel == "whatsapp"
    if media not in ("", "text/plain") and not rich:
        return Outcome(OutcomeKind.BAD_RESPONSE, status=status, detail=f"content type {media!r}")
    if oversized:
        return Outcome(
            OutcomeKind.BAD_RESPONSE, status=status, detail=f"body larger than {MAX_RESPONSE_BYTES} bytes"
        )
    if rich:
        return _judge_rich(status, body)
    try:
        text = body.decode(charset)
    except LookupError:
        return Outcome(OutcomeKind.BAD_RESPONSE, status=status, detail=f"unknown charset {charset!r}")
    except UnicodeDecodeError:
        return Outcome(OutcomeKind.BAD_RESPONSE, status=status, detail=f"body is not valid {charset}")
    if unescape_newlines:
        text = unescape_reply(text)
    text = text.strip()
    if not text:
        return Outcome(OutcomeKind.BLANK, status=status, detail="blank body")
    return Outcome(OutcomeKind.REPLY, status=status, reply=text)


def _judge_rich(status: int, body: bytes) -> Outcome:
    """A WhatsApp JSON answer: a rich reply, or a bad response saying which rule it breaks."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return Outcome(
            OutcomeKind.BAD_RESPONSE, status=status, detail=f"rich answer: body is not JSON ({exc})"
        )
    try:
        messages = check_answer(data)
    except RichAnswerError as exc:
        return Outcome(OutcomeKind.BAD_RESPONSE, status=status, detail=f"rich answer: {exc}")
    return Outcome(OutcomeKind.REPLY, status=status, reply=encode_reply(messages))
