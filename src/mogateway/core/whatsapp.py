"""WhatsApp Cloud API webhooks, pure: the signature, the subscription handshake, and the body parsed into
typed events. No I/O and no clock: the edge passes the raw bytes, the headers' values and the settings.

Rules (the facts are in the reference notes on the Cloud API, §1):

* **Signature.** ``X-Hub-Signature-256: sha256=<lowercase hex HMAC-SHA256 of the raw body>`` keyed with
  the app secret. It is checked over the exact bytes received — never over a re-serialised body, which
  differs as soon as the text is not ASCII — and compared in constant time. A missing, malformed or wrong
  header, or an empty app secret, is refused (``False``); nothing says which. The edge checks the
  header's form first (:func:`signature_given`: refused before a byte of the body is read) and computes
  the HMAC while it reads (:class:`BodySignature`).
* **Handshake.** ``hub.mode=subscribe`` with the configured verify token (compared in constant time) and a
  challenge of visible ASCII → ``200`` with the challenge as the whole body; anything else → ``403``.
* **Body.** ``{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",
  "value": {...}}]}]}``; one body may carry several entries, changes, messages and statuses, parsed in
  order. Only bytes that are not JSON raise (:class:`WebhookMalformed`); any JSON is a :class:`Webhook`.
  Each message and each status is taken or left **on its own**: whatever cannot be read (a part of the
  body without its documented shape, a message without an id or a sender, a status without an id or a
  status value, items of a change without ``metadata.phone_number_id``) is left out as an
  :class:`Unread` (its kind, for a metric, and where and why, for the log: never text from the body),
  and the rest of the body is still taken. A change of another field is skipped and counted
  (``Webhook.skipped``), as is a status whose value this module does not know (only ``sent``,
  ``delivered``, ``read`` and ``failed`` are events): those are expected, not unreadable.
* **A message's sender** is ``from`` (digits, a leading ``+`` dropped) when it is there, and its
  business-scoped user id (``from_user_id``, Meta's BSUID, ``CC.<alphanumerics>``) when it is given: a
  person who uses a WhatsApp username may come with the BSUID only. A message with neither is unread.
  A group message carries ``group_id``. Nothing else is required: a missing or unreadable timestamp is
  ``0`` (the edge dates it), a missing ``type`` is ``unknown``, a type whose object is missing or
  malformed (Meta's ``"type": "interactive"`` with only ``errors`` when it cannot render what the person
  sent) keeps its type with an empty text and the message's ``errors``. The message object is kept as
  Meta sent it (``InboundMessage.raw``).
* **Events that are not a person's message** (:data:`EVENT_TYPES`): a reaction (``reaction.emoji``; an
  empty emoji removes one), a deleted (``revoke``) or edited (``edit``) message, a system notice
  (``system``: a changed number or user id). They never produce a reply (:func:`withholds_reply`, which
  the dispatcher applies to the application's answer). A reaction with an emoji and an edit reach the
  application (the emoji, the edited text); a removed reaction, a deletion and a system notice are
  stored as refused with the reason (:func:`stored_only`), never called back.
* **The text a message carries** (the callback's ``message``): ``text.body``; an interactive
  ``button_reply``/``list_reply`` → its title; a template quick-reply ``button`` → its text; media
  (image, audio, video, document, sticker) → the caption or ``""``, with the media id and MIME type kept
  (fetching the media is not this module's business); a reaction → its emoji; an edit → the edited
  text; a system notice → its ``body``; any other type → ``""``, with the type kept.
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
from mogateway.core.message import Message

__all__ = [
    "BodySignature",
    "EVENT_TYPES",
    "HANDSHAKE_MAX_CHALLENGE",
    "MEDIA_TYPES",
    "SIGNATURE_HEADER",
    "STATUS_VALUES",
    "GraphErrorDetail",
    "HandshakeAnswer",
    "InboundMessage",
    "StatusKind",
    "StatusUpdate",
    "Unread",
    "Webhook",
    "WebhookMalformed",
    "WebhookProblem",
    "handshake",
    "parse_webhook",
    "sign_body",
    "signature_given",
    "stored_only",
    "verify_signature",
    "withholds_reply",
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
    sender: str  # the person's wa_id (``from``), digits; "" when Meta gave the BSUID only
    wamid: str
    timestamp: int  # Unix seconds; 0 when the webhook gave none that reads
    type: str  # Meta's message type, kept as given (``text``, ``interactive``, ``image``, ``location``...)
    text: str  # what the callback's ``message`` carries (module docstring)
    profile_name: str | None = None  # contacts[].profile.name for this sender, when given
    #: The message object exactly as Meta sent it (not compared: the fields above are what it means).
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    user_id: str | None = None  # the sender's business-scoped user id (``from_user_id``), when given
    group_id: str | None = None  # the group a group message was sent in
    context_wamid: str | None = None  # the message this one replies to
    media_id: str | None = None  # for image/audio/video/document/sticker
    mime_type: str | None = None
    reply_id: str | None = None  # interactive reply id or quick-reply button payload
    errors: tuple[GraphErrorDetail, ...] = ()  # for ``unsupported``/``unknown`` messages


@immutable
class StatusUpdate:
    """A status of a message the business sent (``value.statuses[]``)."""

    waba_id: str
    business_number: str
    phone_number_id: str
    wamid: str
    status: StatusKind
    timestamp: int
    recipient: str  # ``recipient_id`` (or ``recipient_user_id``); "" when neither is given
    errors: tuple[GraphErrorDetail, ...] = ()


@immutable
class WebhookProblem:
    """Errors that concern a whole change (``value.errors[]``), not one message."""

    waba_id: str
    business_number: str
    phone_number_id: str
    errors: tuple[GraphErrorDetail, ...]


@immutable
class Unread:
    """A part of a body left out because it could not be read: ``kind`` names what (a metric's label:
    ``body``, ``change``, ``number``, ``message``, ``status``), ``reason`` says where and why."""

    kind: str
    reason: str


@immutable
class Webhook:
    """Everything one body carried, in body order within each kind."""

    messages: tuple[InboundMessage, ...] = ()
    statuses: tuple[StatusUpdate, ...] = ()
    problems: tuple[WebhookProblem, ...] = ()
    skipped: int = 0  # changes of other fields, and statuses of unknown values
    unread: tuple[Unread, ...] = ()  # what could not be read, in body order


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


def signature_given(header: str | None) -> str | None:
    """The lower-case hex digest a well-formed ``X-Hub-Signature-256`` carries, or None for a missing or
    malformed header (known before a byte of the body is read)."""
    if header is None:
        return None
    value = header.strip()
    if value[: len(_SIGNATURE_PREFIX)].lower() != _SIGNATURE_PREFIX:
        return None
    given = value[len(_SIGNATURE_PREFIX) :].lower()
    if len(given) != 64 or not set(given) <= _HEX:
        return None
    return given


class BodySignature:
    """The HMAC-SHA256 of a body as it is read, chunk by chunk (nothing of the body is kept here)."""

    def __init__(self, app_secret: str | bytes) -> None:
        self._mac = hmac.new(_secret_bytes(app_secret), digestmod=hashlib.sha256)

    def update(self, chunk: bytes) -> None:
        self._mac.update(chunk)

    def matches(self, given: str) -> bool:
        """True when ``given`` (from :func:`signature_given`) is the digest of the bytes read (constant
        time)."""
        return hmac.compare_digest(given.encode("ascii"), self._mac.hexdigest().encode("ascii"))


def verify_signature(body: bytes, header: str | None, app_secret: str | bytes) -> bool:
    """True when ``header`` is the signature of exactly ``body`` under ``app_secret`` (constant time)."""
    given = signature_given(header)
    if not _secret_bytes(app_secret) or given is None:
        return False
    signature = BodySignature(app_secret)
    signature.update(body)
    return signature.matches(given)


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

#: Message types that are not a person's message to the business (module docstring).
EVENT_TYPES: Final = frozenset({"reaction", "revoke", "edit", "system"})


def parse_webhook(body: bytes) -> Webhook:
    """Every message, status and whole-change error in ``body`` that reads, and what did not
    (:class:`Unread`); :class:`WebhookMalformed` only for bytes that are not JSON."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise WebhookMalformed("the body is not JSON (UTF-8)") from None
    out = _Collected()
    if not isinstance(data, dict) or data.get("object") != _OBJECT:
        out.unread.append(Unread("body", f"the body is not an object with object={_OBJECT!r}"))
        return out.webhook()
    entries = data.get("entry")
    if not isinstance(entries, list):
        out.unread.append(Unread("body", "entry is not a list"))
        return out.webhook()
    for e, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("changes"), list):
            out.unread.append(Unread("change", f"entry[{e}] is not an object with a changes list"))
            continue
        waba_id = _text(entry.get("id")) or ""
        for c, change in enumerate(entry["changes"]):
            where = f"entry[{e}].changes[{c}]"
            if not isinstance(change, dict):
                out.unread.append(Unread("change", f"{where} is not an object"))
            elif change.get("field") != "messages":
                out.skipped += 1
            elif not isinstance(change.get("value"), dict):
                out.unread.append(Unread("change", f"{where}.value is not an object"))
            else:
                _parse_value(change["value"], waba_id, where + ".value", out)
    return out.webhook()


class _Collected:
    """What :func:`parse_webhook` has read so far."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.statuses: list[StatusUpdate] = []
        self.problems: list[WebhookProblem] = []
        self.unread: list[Unread] = []
        self.skipped = 0

    def webhook(self) -> Webhook:
        return Webhook(
            tuple(self.messages), tuple(self.statuses), tuple(self.problems), self.skipped, tuple(self.unread)
        )


def _items(value: dict[str, Any], key: str, where: str, out: _Collected) -> list[Any]:
    items = value.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        out.unread.append(Unread("change", f"{where}.{key} is not a list"))
        return []
    return items


def _parse_value(value: dict[str, Any], waba_id: str, where: str, out: _Collected) -> None:
    raw_messages = _items(value, "messages", where, out)
    raw_statuses = _items(value, "statuses", where, out)
    raw_errors = _items(value, "errors", where, out)
    if not (raw_messages or raw_statuses or raw_errors):
        return
    metadata = value.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    pid = _text(metadata.get("phone_number_id"))
    if not pid:
        n = len(raw_messages) + len(raw_statuses)
        out.unread.extend(
            Unread("number", f"{where}.metadata.phone_number_id is missing: {n} items left out")
            for _ in range(max(n, 1))
        )
        return
    business = (_text(metadata.get("display_phone_number")) or "").translate(_NUMBER_PUNCTUATION)
    business = business if _digits(business) else ""
    names = _profile_names(value)
    for m, raw in enumerate(raw_messages):
        message = _message(raw, f"{where}.messages[{m}]", waba_id, business, pid, names, out)
        if message is not None:
            out.messages.append(message)
    for s, raw in enumerate(raw_statuses):
        _status(raw, f"{where}.statuses[{s}]", waba_id, business, pid, out)
    if raw_errors:
        out.problems.append(WebhookProblem(waba_id, business, pid, _errors(raw_errors)))


def _profile_names(value: dict[str, Any]) -> dict[str, str]:
    """Each contact's profile name, by its wa_id and by its business-scoped user id."""
    names: dict[str, str] = {}
    contacts = value.get("contacts")
    for contact in contacts if isinstance(contacts, list) else ():
        if not isinstance(contact, dict) or not isinstance(contact.get("profile"), dict):
            continue
        name = _text(contact["profile"].get("name"))
        if name is None:
            continue
        for key in ("wa_id", "user_id"):
            who = _text(contact.get(key))
            if who:
                names[who] = name
    return names


def _message(
    raw: Any,
    where: str,
    waba_id: str,
    business: str,
    pid: str,
    names: dict[str, str],
    out: _Collected,
) -> InboundMessage | None:
    if not isinstance(raw, dict):
        out.unread.append(Unread("message", f"{where} is not an object"))
        return None
    wamid = _text(raw.get("id"))
    if not wamid:
        out.unread.append(Unread("message", f"{where}.id is missing"))
        return None
    sender = (_text(raw.get("from")) or "").removeprefix("+")
    sender = sender if _digits(sender) else ""
    user_id = _text(raw.get("from_user_id")) or None
    kind = _text(raw.get("type")) or "unknown"
    if not user_id and kind == "system" and isinstance(raw.get("system"), dict):
        user_id = _text(raw["system"].get("user_id")) or None  # a changed user id without from_user_id
    if not sender and not user_id:
        out.unread.append(Unread("message", f"{where} has neither from (digits) nor from_user_id"))
        return None
    context = raw.get("context")
    context_wamid = _text(context.get("id")) if isinstance(context, dict) else None
    text, media_id, mime_type, reply_id = _content(raw, kind)
    errors = raw.get("errors")
    return InboundMessage(
        waba_id=waba_id,
        business_number=business,
        phone_number_id=pid,
        sender=sender,
        wamid=wamid,
        timestamp=_timestamp(raw.get("timestamp")),
        type=kind,
        text=text,
        profile_name=names.get(sender) or (names.get(user_id) if user_id else None),
        raw=raw,
        user_id=user_id,
        group_id=_text(raw.get("group_id")) or None,
        context_wamid=context_wamid or None,
        media_id=media_id,
        mime_type=mime_type,
        reply_id=reply_id,
        errors=_errors(errors) if isinstance(errors, list) else (),
    )


def _content(raw: dict[str, Any], kind: str) -> tuple[str, str | None, str | None, str | None]:
    """(text, media id, MIME type, reply id) of a message of type ``kind``; an object that is missing
    or not of its documented shape gives what of it reads (an empty text at least)."""
    obj = raw.get(kind)
    if not isinstance(obj, dict):
        return "", None, None, None
    if kind == "text":
        return _text(obj.get("body")) or "", None, None, None
    if kind == "interactive":
        sub = obj.get("type")
        reply = obj.get(sub) if sub in ("button_reply", "list_reply") else None
        if isinstance(reply, dict):
            return _text(reply.get("title")) or "", None, None, _text(reply.get("id"))
        return "", None, None, None
    if kind == "button":
        return _text(obj.get("text")) or "", None, None, _text(obj.get("payload"))
    if kind in MEDIA_TYPES:
        media_id = _text(obj.get("id")) or None
        return _text(obj.get("caption")) or "", media_id, _text(obj.get("mime_type")), None
    if kind == "reaction":
        return _text(obj.get("emoji")) or "", None, None, None
    if kind == "system":
        return _text(obj.get("body")) or "", None, None, None
    if kind == "edit":
        edited = obj.get("message")
        if isinstance(edited, dict):
            return _content(edited, _text(edited.get("type")) or "text")
    return "", None, None, None


def _status(raw: Any, where: str, waba_id: str, business: str, pid: str, out: _Collected) -> None:
    if not isinstance(raw, dict):
        out.unread.append(Unread("status", f"{where} is not an object"))
        return
    wamid = _text(raw.get("id"))
    value = _text(raw.get("status"))
    if not wamid or not value:
        out.unread.append(Unread("status", f"{where} has no id or no status"))
        return
    if value not in STATUS_VALUES:
        out.skipped += 1
        return
    recipient = _text(raw.get("recipient_id")) or _text(raw.get("recipient_user_id")) or ""
    errors = raw.get("errors")
    out.statuses.append(
        StatusUpdate(
            waba_id,
            business,
            pid,
            wamid,
            StatusKind(value),
            _timestamp(raw.get("timestamp")),
            recipient,
            _errors(errors) if isinstance(errors, list) else (),
        )
    )


def _errors(raw: list[Any]) -> tuple[GraphErrorDetail, ...]:
    """The entries of an ``errors`` list that have an integer code (the others say nothing usable)."""
    out = []
    for error in raw:
        if not isinstance(error, dict):
            continue
        code = error.get("code")
        if not isinstance(code, int) or isinstance(code, bool):
            continue
        data = error.get("error_data")
        details = _text(data.get("details")) if isinstance(data, dict) else None
        out.append(
            GraphErrorDetail(
                code=code,
                title=_text(error.get("title")) or "",
                message=_text(error.get("message")) or "",
                details=details or "",
            )
        )
    return tuple(out)


# -- events that are not a person's message ----------------------------------------------------------


def stored_only(m: InboundMessage) -> str | None:
    """Why ``m`` is stored as refused and never called back (a removed reaction, a deletion, a system
    notice), or None for a message the application is called with."""
    if m.type not in EVENT_TYPES or (m.type == "reaction" and m.text) or m.type == "edit":
        return None
    what = {"reaction": "a removed reaction", "revoke": "a deleted message", "system": "a system notice"}
    return f"{what[m.type]} is not a person's message: stored, not passed on"


def withholds_reply(message: Message) -> bool:
    """True for a WhatsApp event the application is called with but which is never answered (a
    reaction, an edit): the dispatcher records its answer and sends nothing."""
    if message.channel != "whatsapp" or not message.notes:
        return False
    first = message.notes[0]
    return first.startswith("whatsapp ") and first[len("whatsapp ") :] in EVENT_TYPES


# -- shape checks ------------------------------------------------------------------------------------


def _digits(text: str) -> bool:
    return bool(text) and text.isascii() and text.isdigit()


def _text(value: Any) -> str | None:
    """``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


def _timestamp(value: Any) -> int:
    """Unix seconds: Meta sends a digit string; a JSON integer is taken too. 0 when it does not read."""
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        return 0
    if not _digits(text) or len(text) > _MAX_TIMESTAMP_DIGITS:
        return 0
    return int(text)
