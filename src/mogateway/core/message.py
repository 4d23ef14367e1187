"""The MO: one message a person sent to a shortcode, as every part of the gateway holds it.

There is one type, :class:`Message`, from the moment intake names it to the callback the application
parses. Sources build one with ``id=""`` and no ``sender`` (the operator's word on operator and circle
rides along as a :class:`Sender` hint, see :class:`Arrival`); intake gives it its id, its sender or its
:class:`Rejection`; the journal stores it, the work queue carries it, the dispatcher calls with it, the
admin API shows it and the client SDK wraps it. A new field is added here and in the journal's one
schema description, nowhere else.

Rules:

* ``id`` is the gateway's id: 26 characters of RFC 4648's base32hex in lower case, whose order is the
  order of the bytes, so ids that start with a time sort by it as plain strings. A message a source
  named (``source_id``) has the id :func:`id_for_source` gives its origin and source id, the same on
  every node and every retry, which is what lets the journal and the queue deduplicate it; any other
  gets a time-sortable random id. A source id that carries the time its source first saw the message
  (SMPP's content ids) gives a time-sortable id too: the journal's keys then grow at one end instead
  of all over (see ``id_for_source``).
* An MO with an ``Arrival.repeat_window_s`` (SMPP) that repeats one received from the same number within
  that window is that MO (a redelivery), whichever bind or worker it came through: ``core.repeats``.
* ``received_at`` is unix seconds (a float): when the message reached the gateway, or when the source
  says it was sent.
* ``sender`` is set exactly when the message was accepted (an Indian mobile number, see
  ``core.numbering``); ``rejection`` exactly when it was refused.
* ``channel`` is where the MO came from and where its reply goes: ``whatsapp`` for an origin
  ``whatsapp:<phone_number_id>`` (its ``source_id`` is then the inbound wamid and its ``shortcode`` the
  business number's digits, :data:`BUSINESS_NUMBER_RULE`), ``sms`` for every other origin. It is read
  from the origin, so the journal, the work queue and the worker IPC carry it without a field of their own.
* ``whatsapp`` is a WhatsApp MO's callback member (``core.whatsapp_member``) as its exact compact JSON
  text: built once from the webhook, stored with the message and carried as that text by the journal,
  the work queue and the worker IPC, so the callback's bytes are the same after a restart and on every
  node. It is None for an SMS (which therefore costs nothing more), and for a WhatsApp MO stored before
  the journal had it (its callback then has no member).
* Messages are values: immutable (``core.immutable``), compared by their fields.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

import orjson

from mogateway.core.immutable import immutable

__all__ = [
    "BUSINESS_NUMBER_RULE",
    "CHANNELS",
    "SHORTCODE_RULE",
    "Arrival",
    "Message",
    "Rejection",
    "Sender",
    "channel_of",
    "check_business_number",
    "check_destination",
    "check_shortcode",
    "id_for_source",
    "message_id",
]

#: What a shortcode is here: 3 to 10 digits, not starting with 0 (the number a person texts).
SHORTCODE_RULE = "3 to 10 digits, not starting with 0"
_SHORTCODE = re.compile(r"\A[1-9][0-9]{2,9}\Z")


def check_shortcode(text: str) -> str:
    """``text`` when it is a shortcode (:data:`SHORTCODE_RULE`); raises ValueError naming the rule."""
    if not _SHORTCODE.match(text):
        raise ValueError(f"must be {SHORTCODE_RULE}")
    return text


#: A WhatsApp business number as the gateway keys it: its digits with the country code, 11 to 15 of them
#: (E.164 allows 15; at least 11 keeps it apart from a shortcode, which has at most 10).
BUSINESS_NUMBER_RULE = "11 to 15 digits with the country code, not starting with 0"
_BUSINESS_NUMBER = re.compile(r"\A[1-9][0-9]{10,14}\Z")
_NUMBER_PUNCTUATION = str.maketrans("", "", " +-.()")

#: The channels an MO comes in by (and its reply goes out by).
CHANNELS: Final = ("sms", "whatsapp")


def check_business_number(text: str) -> str:
    """The digits of a WhatsApp business number (spaces, ``+``, dashes dropped); ValueError naming
    :data:`BUSINESS_NUMBER_RULE`."""
    digits = text.translate(_NUMBER_PUNCTUATION)
    if not _BUSINESS_NUMBER.match(digits):
        raise ValueError(f"must be {BUSINESS_NUMBER_RULE}")
    return digits


def channel_of(origin: str) -> str:
    """The channel of an MO from ``origin``: ``whatsapp`` for ``whatsapp:…``, else ``sms``."""
    return "whatsapp" if origin.startswith("whatsapp:") else "sms"


def check_destination(message: Message) -> str:
    """The number ``message`` was sent to, checked for its channel (a shortcode, or a business number);
    ValueError naming the rule."""
    if message.channel == "whatsapp":
        return check_business_number(message.shortcode)
    return check_shortcode(message.shortcode)


@immutable
class Sender:
    """The ``sender`` object: where the MO came from. ``operator``/``circle`` are "" when unknown."""

    cc: int
    ndc: int
    sn: int
    operator: str = ""
    circle: str = ""

    @property
    def sn_digits(self) -> str:
        """The subscriber number with its 6 digits (leading zeros restored)."""
        return f"{self.sn:06d}"

    @property
    def msisdn(self) -> str:
        """The 12-digit msisdn these parts make up."""
        return f"{self.cc}{self.ndc:04d}{self.sn:06d}"


@immutable
class Rejection:
    """Why intake refused a message: the offending field and the reason, as the source is told."""

    field: str
    reason: str


@immutable
class Message:
    """One MO (see the module docstring for the rules its fields keep)."""

    id: str
    shortcode: str
    msisdn: str
    text: str
    received_at: float
    origin: str = "http"
    source_id: str | None = None
    sender: Sender | None = None
    rejection: Rejection | None = None
    notes: tuple[str, ...] = ()
    whatsapp: str | None = None

    @property
    def channel(self) -> str:
        """``sms`` or ``whatsapp`` (see the module docstring)."""
        return channel_of(self.origin)

    @property
    def wamid(self) -> str | None:
        """The inbound WhatsApp message id (None for an SMS)."""
        return self.source_id if self.channel == "whatsapp" else None

    @property
    def accepted(self) -> bool:
        """True for a message intake accepted (it has a sender), False for a refused one."""
        return self.rejection is None

    def with_changes(self, **changes: Any) -> Message:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)

    # The work queue and the worker IPC carry messages as compact JSON arrays in this field order.
    def to_array(self) -> list[Any]:
        """The message as a list of plain values (see :meth:`from_array`)."""
        s = self.sender
        r = self.rejection
        values: list[Any] = [
            self.id,
            self.shortcode,
            self.msisdn,
            self.text,
            self.received_at,
            self.origin,
            self.source_id,
            None if s is None else [s.cc, s.ndc, s.sn, s.operator, s.circle],
            None if r is None else [r.field, r.reason],
            list(self.notes),
        ]
        if self.whatsapp is not None:  # an SMS's array stays as it was: ten values
            values.append(self.whatsapp)
        return values

    @classmethod
    def from_array(cls, values: Sequence[Any]) -> Message:
        """The message :meth:`to_array` made: 10 values, or 11 with ``whatsapp``."""
        whatsapp = None
        if len(values) == 10:
            (mid, shortcode, msisdn, text, received_at, origin, source_id, s, r, notes) = values
        else:
            (mid, shortcode, msisdn, text, received_at, origin, source_id, s, r, notes, whatsapp) = values
        return cls(
            mid,
            shortcode,
            msisdn,
            text,
            received_at,
            origin,
            source_id,
            None if s is None else Sender(*s),
            None if r is None else Rejection(*r),
            tuple(notes),
            whatsapp,
        )

    def to_json(self) -> bytes:
        """The message as one compact JSON array (see :meth:`from_json`)."""
        return orjson.dumps(self.to_array())

    @classmethod
    def from_json(cls, data: bytes | str) -> Message:
        """The message :meth:`to_json` wrote."""
        return cls.from_array(orjson.loads(data))


@immutable
class Arrival:
    """A message as a source handed it over, before intake judged it.

    ``message`` has no id (intake names it) and no sender; ``operator`` and ``circle`` are what the
    source knows of the sender (an operator's push after a port, a bind's configured operator), used by
    intake when its own tables know less; ``problem`` is a field and reason the adapter already found
    wrong (a JSON member of the wrong type, an unparseable SMPP address): the message is then recorded
    as rejected like any other.
    """

    message: Message
    operator: str | None = None
    circle: str | None = None
    problem: Rejection | None = None
    #: When the source saw this message, in unix milliseconds, if its source id carries that time (content
    #: ids): it dates the message's id (:func:`id_for_source`).
    first_seen_ms: int | None = None
    #: An MO of the same source id family (the same content, or the same SMSC message id) from the same
    #: number received within this many seconds before is this one, from whichever origin it came (0:
    #: never; see ``core.repeats``).
    repeat_window_s: float = 0.0


#: Every pair of lower-case base32hex digits, indexed by the 10 bits they stand for.
_B32_DIGITS: Final = "0123456789abcdefghijklmnopqrstuv"
_B32_PAIRS: Final = tuple(a + b for a in _B32_DIGITS for b in _B32_DIGITS)


def _b32(raw: bytes) -> str:
    """``raw`` (16 octets) in lower-case base32hex without padding, as ``base64.b32hexencode`` writes it
    (26 digits; the last one carries two zero bits), ten bits at a time."""
    if len(raw) != 16:
        return base64.b32hexencode(raw).decode("ascii").rstrip("=").lower()
    bits = int.from_bytes(raw, "big") << 2  # 130 bits: 13 pairs of digits
    pairs = _B32_PAIRS
    return "".join([pairs[(bits >> shift) & 0x3FF] for shift in range(120, -1, -10)])


def message_id(now_ms: int, random10: bytes) -> str:
    """A fresh id from the time in milliseconds and 10 random bytes: 26 base32 characters, time-sortable."""
    return _b32(now_ms.to_bytes(6, "big") + random10)


def id_for_source(source_key: str, first_seen_ms: int | None = None) -> str:
    """The id of a message a source named ``source_key`` ("<origin>:<source id>"): same key, same id.

    Being a pure function of the key, it is the same on every node, which is what lets the journal and
    the work queue deduplicate a message pushed twice, even to two different nodes.

    ``first_seen_ms`` is for source ids that carry the time they were made (SMPP's content ids): the id
    then starts with that time, like :func:`message_id`, followed by 10 bytes of the key's hash. Ids in
    time order keep the journal's inserts and updates on the last pages of its indexes; hashed ids land
    anywhere, which costs SQLite two to three times the work per MO (``bench/journal.py --ids``).
    """
    if first_seen_ms is None:
        return _b32(hashlib.blake2b(source_key.encode("utf-8"), digest_size=16).digest())
    digest = hashlib.blake2b(source_key.encode("utf-8"), digest_size=10).digest()
    return message_id(first_seen_ms, digest)
