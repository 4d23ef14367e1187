"""WhatsApp Cloud API webhooks, pure: the signature, the subscription handshake, and the body parsed into
typed events. No I/O and no clock: the edge passes the raw bytes, the headers' values and the settings.

Rules (the facts are in the reference notes on the Cloud API, §1):

* **Signature.** ``X-Hub-Signature-256: sha256=<lowercase hex HMAC-SHA256 of the raw body>`` keyed with
  the app secret. It is checked over the exact bytes received — never over a re-serialised body, which
  differs as soon as the text is not ASCII — and compared in constant time. A missing, malformed or wrong
  header, or an empty app secret, is refused (``False``); nothing says which.
* **Handshake.** ``hub.mode=subscribe`` with the configured verify token (compared in constant time) and a
  challenge of visible ASCII → ``200`` with the challenge as the whole body; anything else → ``403``.
* **Body.** ``{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",
  "value": {...}}]}]}``; one body may carry several entries, changes, messages and statuses, parsed in
  order. A change of another field is skipped and counted (``Webhook.skipped``), as is a status whose
  value this module does not know (only ``sent``, ``delivered``, ``read`` and ``failed`` are events).
  Anything else that does not have the documented shape — not JSON, a missing id, sender or timestamp, a
  text message without ``text.body`` — makes the whole body malformed: :class:`WebhookMalformed`, with a
  reason naming where. No other exception leaves :func:`parse_webhook`.
* **The text a message carries** (the callback's ``message``): ``text.body``; an interactive
  ``button_reply``/``list_reply`` → its title; a template quick-reply ``button`` → its text; media
  (image, audio, video, document, sticker) → the caption or ``""``, with the media id and MIME type kept
  (fetching the media is not this module's business); any other type → ``""``, with the type kept.
* Numbers are digits: the business ``display_phone_number`` is normalised (spaces, ``+``, dashes,
  dots and brackets dropped); a sender ``from`` must be digits (a leading ``+`` is dropped).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from dataclasses import field
from typing import Any, Final

import orjson

from mogateway.core.immutable import immutable

__all__ = [
    "HANDSHAKE_MAX_CHALLENGE",
    "MEDIA_TYPES",
    "SIGNATURE_HEADER",
    "STATUS_VALUES",
    "GraphErrorDetail",
    "HandshakeAnswer",
    "InboundMessage",
    "StatusKind",
    "StatusUpdate",
    "Webhook",
    "WebhookMalformed",
    "WebhookProblem",
    "handshake",
    "parse_webhook",
    "sign_body",
    "verify_signature",
]

#: The header name as Meta sends it (HTTP header names are case-insensitive).
SIGNATURE_HEADER: Final = "X-Hub-Signature-256"
_SIGNATURE_PREFIX: Final = "sha256="
_HEX: Final = frozenset("0123456789abcdef")
#: A challenge longer than this is refused: Meta's are short digit strings, and a body reflected verbatim
#: should stay small.
HANDSHAKE_MAX_CHALLENGE: Final = 256
MEDIA_TYPES: Final = frozenset({"image", "audio", "video", "document", "sticker"})
_OBJECT: Final = "whatsapp_business_account"
#: Unix seconds fit in 11 digits until the year 5138.
_MAX_TIMESTAMP_DIGITS: Final = 12
_NUMBER_PUNCTUATION: Final = str.maketrans("", "", " +-.()\u00a0")


class WebhookMalformed(ValueError):
    """A webhook body without the documented shape; ``reason`` says where (no text from the body)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StatusKind(enum.StrEnum):
    """The statuses of a message the business sent, as Meta names them."""

    SENT = "sent"
    DELIVERED = "delivered"
    READ = "read"
    FAILED = "failed"


STATUS_VALUES: Final = frozenset(s.value for s in StatusKind)


@immutable
class GraphErrorDetail:
    """One entry of an ``errors`` list (a status's, an unsupported message's, or a whole webhook's)."""

    code: int
    title: str
    message: str
    details: str


@immutable
class InboundMessage:
    """One message a person sent to the business number."""

    waba_id: str
    business_number: str  # display_phone_number, digits only
    phone_number_id: str
    sender: str  # the person's wa_id (``from``), digits
    wamid: str
    timestamp: int  # Unix seconds
    type: str  # Meta's message type, kept as given (``text``, ``interactive``, ``image``, ``location``...)
    text: str  # what the callback's ``message`` carries (module docstring)
    profile_name: str | None = None  # contacts[].profile.name for this sender, when given
    context_wamid: str | None = None  # the message this one replies to
    media_id: str | None = None  # for image/audio/video/document/sticker
    mime_type: str | None = None
    reply_id: str | None = None  # interactive reply id or quick-reply button payload
    errors: tuple[GraphErrorDetail, ...] = ()  # for ``unsupported``/``unknown`` messages
    raw: dict[str, Any] = field(default_factory=dict, compare=False)  # the message object as Meta sent it


@immutable
class StatusUpdate:
    """A status of a message the business sent (``value.statuses[]``)."""

    waba_id: str
    business_number: str
    phone_number_id: str
    wamid: str
    status: StatusKind
    timestamp: int
    recipient: str
    errors: tuple[GraphErrorDetail, ...] = ()


@immutable
class WebhookProblem:
    """Errors that concern a whole change (``value.errors[]``), not one message."""

    waba_id: str
    business_number: str
    phone_number_id: str
    errors: tuple[GraphErrorDetail, ...]


@immutable
class Webhook:
    """Everything one body carried, in body order within each kind."""

    messages: tuple[InboundMessage, ...] = ()
    statuses: tuple[StatusUpdate, ...] = ()
    problems: tuple[WebhookProblem, ...] = ()
    skipped: int = 0  # changes of other fields, and statuses of unknown values


@immutable
class HandshakeAnswer:
    """What to answer the verification GET: the status, the body (text/plain) and, for a refusal, why."""

    status: int
    body: str
    reason: str = ""


# -- signature ---------------------------------------------------------------------------------------


def _secret_bytes(app_secret: str | bytes) -> bytes:
    return app_secret.encode("utf-8") if isinstance(app_secret, str) else app_secret


def sign_body(body: bytes, app_secret: str | bytes) -> str:
    """The ``X-Hub-Signature-256`` value Meta would send for ``body``: ``sha256=<hex>``."""
    digest = hmac.new(_secret_bytes(app_secret), body, hashlib.sha256).hexdigest()
    return _SIGNATURE_PREFIX + digest


def verify_signature(body: bytes, header: str | None, app_secret: str | bytes) -> bool:
    """True when ``header`` is the signature of exactly ``body`` under ``app_secret`` (constant time)."""
    secret = _secret_bytes(app_secret)
    if not secret or header is None:
        return False
    value = header.strip()
    if value[: len(_SIGNATURE_PREFIX)].lower() != _SIGNATURE_PREFIX:
        return False
    given = value[len(_SIGNATURE_PREFIX) :].lower()
    if len(given) != 64 or not set(given) <= _HEX:
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(given.encode("ascii"), expected.encode("ascii"))


# -- handshake ---------------------------------------------------------------------------------------


def handshake(
    mode: str | None, token: str | None, challenge: str | None, verify_token: str
) -> HandshakeAnswer:
    """The answer to ``GET ?hub.mode=&hub.verify_token=&hub.challenge=`` (module docstring)."""
    if not verify_token:
        return HandshakeAnswer(403, "", "no verify token is configured")
    token_ok = hmac.compare_digest((token or "").encode("utf-8"), verify_token.encode("utf-8"))
    if mode != "subscribe":
        return HandshakeAnswer(403, "", "hub.mode is not subscribe")
    if not token_ok:
        return HandshakeAnswer(403, "", "hub.verify_token does not match")
    if not challenge or len(challenge) > HANDSHAKE_MAX_CHALLENGE or not _visible_ascii(challenge):
        return HandshakeAnswer(403, "", "hub.challenge is missing or not short visible ASCII")
    return HandshakeAnswer(200, challenge)


def _visible_ascii(text: str) -> bool:
    return all("\x21" <= ch <= "\x7e" for ch in text)


# -- body --------------------------------------------------------------------------------------------


def parse_webhook(body: bytes) -> Webhook:
    """Every message, status and whole-change error in ``body``; :class:`WebhookMalformed` otherwise."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise WebhookMalformed("the body is not JSON (UTF-8)") from None
    root = _dict(data, "the body")
    if root.get("object") != _OBJECT:
        raise WebhookMalformed(f"object is not {_OBJECT!r}")
    messages: list[InboundMessage] = []
    statuses: list[StatusUpdate] = []
    problems: list[WebhookProblem] = []
    skipped = 0
    for e, entry_data in enumerate(_list(root.get("entry"), "entry")):
        entry = _dict(entry_data, f"entry[{e}]")
        waba_id = _opt_str(entry.get("id"), f"entry[{e}].id") or ""
        for c, change_data in enumerate(_list(entry.get("changes"), f"entry[{e}].changes")):
            where = f"entry[{e}].changes[{c}]"
            change = _dict(change_data, where)
            if change.get("field") != "messages":
                skipped += 1
                continue
            value = _dict(change.get("value"), f"{where}.value")
            skipped += _parse_value(value, waba_id, where + ".value", messages, statuses, problems)
    return Webhook(tuple(messages), tuple(statuses), tuple(problems), skipped)


def _parse_value(
    value: dict[str, Any],
    waba_id: str,
    where: str,
    messages: list[InboundMessage],
    statuses: list[StatusUpdate],
    problems: list[WebhookProblem],
) -> int:
    raw_messages = _opt_list(value.get("messages"), f"{where}.messages")
    raw_statuses = _opt_list(value.get("statuses"), f"{where}.statuses")
    raw_errors = _opt_list(value.get("errors"), f"{where}.errors")
    if not (raw_messages or raw_statuses or raw_errors):
        return 0
    metadata = _dict(value.get("metadata"), f"{where}.metadata")
    display = _str(metadata.get("display_phone_number"), f"{where}.metadata.display_phone_number")
    business = display.translate(_NUMBER_PUNCTUATION)
    if not _digits(business):
        raise WebhookMalformed(f"{where}.metadata.display_phone_number is not a phone number")
    pid = _str(metadata.get("phone_number_id"), f"{where}.metadata.phone_number_id")
    names = _profile_names(value, where)
    for m, raw in enumerate(raw_messages):
        messages.append(
            _message(
                _dict(raw, f"{where}.messages[{m}]"), f"{where}.messages[{m}]", waba_id, business, pid, names
            )
        )
    skipped = 0
    for s, raw in enumerate(raw_statuses):
        status = _status(
            _dict(raw, f"{where}.statuses[{s}]"), f"{where}.statuses[{s}]", waba_id, business, pid
        )
        if status is None:
            skipped += 1
        else:
            statuses.append(status)
    if raw_errors:
        problems.append(WebhookProblem(waba_id, business, pid, _errors(raw_errors, f"{where}.errors")))
    return skipped


def _profile_names(value: dict[str, Any], where: str) -> dict[str, str]:
    names: dict[str, str] = {}
    for i, raw in enumerate(_opt_list(value.get("contacts"), f"{where}.contacts")):
        contact = _dict(raw, f"{where}.contacts[{i}]")
        wa_id = _opt_str(contact.get("wa_id"), f"{where}.contacts[{i}].wa_id")
        profile = contact.get("profile")
        if wa_id and isinstance(profile, dict):
            name = _opt_str(profile.get("name"), f"{where}.contacts[{i}].profile.name")
            if name is not None:
                names[wa_id] = name
    return names


def _message(
    raw: dict[str, Any], where: str, waba_id: str, business: str, pid: str, names: dict[str, str]
) -> InboundMessage:
    sender = _str(raw.get("from"), f"{where}.from").removeprefix("+")
    if not _digits(sender):
        raise WebhookMalformed(f"{where}.from is not digits")
    wamid = _str(raw.get("id"), f"{where}.id")
    timestamp = _timestamp(raw.get("timestamp"), f"{where}.timestamp")
    kind = _str(raw.get("type"), f"{where}.type")
    context = raw.get("context")
    context_wamid = None
    if context is not None:
        context_wamid = _opt_str(_dict(context, f"{where}.context").get("id"), f"{where}.context.id")
    text, media_id, mime_type, reply_id = _content(raw, kind, where)
    errors = _errors(_opt_list(raw.get("errors"), f"{where}.errors"), f"{where}.errors")
    return InboundMessage(
        waba_id=waba_id,
        business_number=business,
        phone_number_id=pid,
        sender=sender,
        wamid=wamid,
        timestamp=timestamp,
        type=kind,
        text=text,
        profile_name=names.get(sender),
        context_wamid=context_wamid,
        media_id=media_id,
        mime_type=mime_type,
        reply_id=reply_id,
        errors=errors,
        raw=raw,
    )


def _content(raw: dict[str, Any], kind: str, where: str) -> tuple[str, str | None, str | None, str | None]:
    """(text, media id, MIME type, reply id) of a message of type ``kind``."""
    if kind == "text":
        body = _dict(raw.get("text"), f"{where}.text")
        return _str(body.get("body"), f"{where}.text.body", empty=True), None, None, None
    if kind == "interactive":
        inter = _dict(raw.get("interactive"), f"{where}.interactive")
        sub = inter.get("type")
        if sub in ("button_reply", "list_reply"):
            reply = _dict(inter.get(sub), f"{where}.interactive.{sub}")
            title = _str(reply.get("title"), f"{where}.interactive.{sub}.title", empty=True)
            return title, None, None, _opt_str(reply.get("id"), f"{where}.interactive.{sub}.id")
        return "", None, None, None
    if kind == "button":
        button = _dict(raw.get("button"), f"{where}.button")
        text = _str(button.get("text"), f"{where}.button.text", empty=True)
        return text, None, None, _opt_str(button.get("payload"), f"{where}.button.payload")
    if kind in MEDIA_TYPES:
        media = _dict(raw.get(kind), f"{where}.{kind}")
        caption = _opt_str(media.get("caption"), f"{where}.{kind}.caption") or ""
        media_id = _str(media.get("id"), f"{where}.{kind}.id")
        return caption, media_id, _opt_str(media.get("mime_type"), f"{where}.{kind}.mime_type"), None
    return "", None, None, None


def _status(raw: dict[str, Any], where: str, waba_id: str, business: str, pid: str) -> StatusUpdate | None:
    wamid = _str(raw.get("id"), f"{where}.id")
    value = _str(raw.get("status"), f"{where}.status")
    timestamp = _timestamp(raw.get("timestamp"), f"{where}.timestamp")
    recipient = _str(raw.get("recipient_id"), f"{where}.recipient_id")
    errors = _errors(_opt_list(raw.get("errors"), f"{where}.errors"), f"{where}.errors")
    if value not in STATUS_VALUES:
        return None
    return StatusUpdate(waba_id, business, pid, wamid, StatusKind(value), timestamp, recipient, errors)


def _errors(raw: list[Any], where: str) -> tuple[GraphErrorDetail, ...]:
    out = []
    for i, item in enumerate(raw):
        error = _dict(item, f"{where}[{i}]")
        code = error.get("code")
        if not isinstance(code, int) or isinstance(code, bool):
            raise WebhookMalformed(f"{where}[{i}].code is not an integer")
        data = error.get("error_data")
        details = ""
        if data is not None:
            details = (
                _opt_str(
                    _dict(data, f"{where}[{i}].error_data").get("details"), f"{where}[{i}].error_data.details"
                )
                or ""
            )
        out.append(
            GraphErrorDetail(
                code=code,
                title=_opt_str(error.get("title"), f"{where}[{i}].title") or "",
                message=_opt_str(error.get("message"), f"{where}[{i}].message") or "",
                details=details,
            )
        )
    return tuple(out)


# -- shape checks ------------------------------------------------------------------------------------


def _digits(text: str) -> bool:
    return bool(text) and text.isascii() and text.isdigit()


def _dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WebhookMalformed(f"{where} is not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise WebhookMalformed(f"{where} is not a list")
    return value


def _opt_list(value: Any, where: str) -> list[Any]:
    return [] if value is None else _list(value, where)


def _str(value: Any, where: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise WebhookMalformed(f"{where} is missing or not a string")
    if not value and not empty:
        raise WebhookMalformed(f"{where} is empty")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise WebhookMalformed(f"{where} is not a string")
    return value


def _timestamp(value: Any, where: str) -> int:
    """Unix seconds: Meta sends a digit string; a JSON integer is taken too."""
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        raise WebhookMalformed(f"{where} is missing or not a number")
    if not _digits(text) or len(text) > _MAX_TIMESTAMP_DIGITS:
        raise WebhookMalformed(f"{where} is not Unix seconds")
    return int(text)
