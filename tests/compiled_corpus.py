"""One corpus through the layers scripts/compile.py builds, printed as JSON: tests/test_compiled.py runs
this file compiled and pure (``MOGATEWAY_PURE=1``) and compares the two outputs item by item."""

import enum
import json
import random
import sys
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime

import mogateway.compiled
from mogateway.core.contract import callback_body, judge_response
from mogateway.core.message import Message, Sender, id_for_source, message_id
from mogateway.core.numbering.msisdn import normalize_msisdn
from mogateway.core.text import count_parts, decode_short_message, encode_text, split_text
from mogateway.smpp.framer import Framer
from mogateway.smpp.pdu import DeliverSm, SubmitSm, decode, encode
from mogateway.smpp.receipt import format_receipt_text, parse_receipt, receipt_tlvs
from mogateway.smpp.segments import plan_reply
from mogateway.smpp.tlv import Tlv

rng = random.Random(30)
out = [mogateway.compiled.COMPILED]


def show(value):
    # A PDU by its fields: a compiled dataclass also lists its ClassVar COMMAND_ID among them (its repr
    # shows it); the command id is compared through encode() instead.
    if is_dataclass(value) and not isinstance(value, type):
        return [
            type(value).__name__,
            *[(f.name, show(getattr(value, f.name))) for f in fields(value) if f.name != "COMMAND_ID"],
        ]
    if isinstance(value, (list, tuple)):
        return [show(v) for v in value]
    if isinstance(value, enum.Enum):  # a compiled int field keeps the number, not the IntEnum member
        value = value.value
    return repr(value)


def attempt(fn, *args, **kw):
    try:
        return show(fn(*args, **kw))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


texts = ["hello", "Ünïcödé ₹ 😀", "{[~]}|^€\\", "a" * 200, "नमस्ते " * 30, ""]
stream = b""
for n in range(300):
    cls = rng.choice([SubmitSm, DeliverSm])
    pdu = cls(
        source_addr=str(rng.randrange(10**11, 10**12)),
        destination_addr=str(rng.randrange(10000, 99999)),
        esm_class=rng.choice([0, 0x40, 4]),
        data_coding=rng.choice([0, 3, 8]),
        short_message=bytes(rng.randrange(256) for _ in range(rng.randrange(0, 140))),
        tlvs=tuple(
            Tlv(rng.randrange(1, 0xFFFF), bytes(rng.randrange(256) for _ in range(rng.randrange(0, 6))))
            for _ in range(rng.randrange(0, 3))
        ),
        sequence=n + 1,
    )
    data = encode(pdu)
    stream += data
    out.append([data.hex(), attempt(decode, data), attempt(decode, data[: rng.randrange(len(data))])])
    out.append(attempt(decode_short_message, pdu.short_message, pdu.data_coding))
framer = Framer()  # the whole stream, in chunks that cut PDUs anywhere
out.append([attempt(framer.feed, stream[i : i + 97]) for i in range(0, len(stream), 97)])
for stat in ["DELIVRD", "UNDELIV", "EXPIRED", "REJECTD", "ENROUTE", "ACCEPTD", "UNKNOWN"]:
    moment = datetime(2026, 11, 27, 9, 30, tzinfo=UTC)
    text = format_receipt_text("ab12cd", stat, "000", moment, moment, "hi")
    receipt = DeliverSm(esm_class=4, short_message=text.encode(), tlvs=receipt_tlvs("ab12cd", stat))
    out.append(
        [
            attempt(parse_receipt, receipt),
            attempt(parse_receipt, DeliverSm(esm_class=4, short_message=text.encode())),
        ]
    )
for raw in [
    "+919876543210",
    "09876543210",
    "9876543210",
    "919876543210",
    "+14155550100",
    "98765",
    "٩٨٧٦٥٤٣٢١٠",
    919876543210,
]:
    out.append(attempt(normalize_msisdn, raw))
for text in texts:
    out.append(
        [
            attempt(count_parts, text),
            attempt(encode_text, text, "gsm7"),
            attempt(encode_text, text, "ucs2"),
            attempt(split_text, text, "ucs2", 67),
            attempt(plan_reply, text, default="gsm7", split="udh", reference=7),
            attempt(plan_reply, text, default="latin1", split="sar", reference=300),
        ]
    )
for status, ctype, body in [
    (200, "text/plain", b"ok"),
    (200, "text/plain; charset=utf-8", "₹".encode()),
    (200, "application/json", b"{}"),
    (500, "text/plain", b"x"),
    (200, "text/plain", b"  "),
]:
    out.append(attempt(judge_response, status, ctype, body))
sender = Sender(cc=91, ndc=98765, sn=43210, operator="Airtel", circle="Delhi")
for n in range(20):
    message = Message(
        id=message_id(1_795_000_000_000 + n, bytes(range(n, n + 10))),
        shortcode="56161",
        msisdn="+919876543210",
        text=texts[n % len(texts)],
        received_at=1_795_000_000.123 + n,
        origin="smpp:airtel",
        source_id=f"s{n}",
        sender=sender,
    )
    out.append(
        [
            attempt(callback_body, message, "ms"),
            attempt(callback_body, message, "s"),
            attempt(id_for_source, f"smsc:{n}", 1_795_000_000_000 + n),
        ]
    )
sys.stdout.write(json.dumps(out, ensure_ascii=False))
