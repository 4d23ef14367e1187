"""The pure rules of WhatsApp media through the gateway: signed URLs (``core.media_url``), the media of
a member, the url in the callback, Graph's answers and errors, digests (``core.whatsapp_media``)."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mogateway.core.contract import callback_body
from mogateway.core.media_url import EXPIRED, INVALID, check, derive_key, sign, signed_url
from mogateway.core.message import Message, Sender
from mogateway.core.whatsapp_media import (
    MEDIA_TYPES,
    expected_digest,
    is_media_member,
    media_failure,
    media_of,
    parse_media_answer,
    too_large,
    with_media_url,
)
from mogateway.core.whatsapp_member import member_json

KEY = derive_key(b"a shared secret of the cluster")
OLD = derive_key(b"the key before the rotation")
MID = "2lsqbom9gc7jn5j105giu25n54"
CLIENT = "cl_yzlyqvifrpdcs23h"
NOW = 1_800_000_000


# ------------------------------------------------------------------------------------ signed URLs


def test_a_signed_url_names_the_message_client_and_expiry() -> None:
    url = signed_url("https://gw.example.com/", KEY, MID, CLIENT, NOW + 3600)
    sig = sign(KEY, MID, CLIENT, NOW + 3600)
    assert url == f"https://gw.example.com/v1/whatsapp/media/{MID}?client={CLIENT}&exp={NOW + 3600}&sig={sig}"
    assert len(sig) == 43 and "=" not in sig


def test_check_accepts_only_the_signed_triple_before_its_expiry() -> None:
    exp = str(NOW + 60)
    sig = sign(KEY, MID, CLIENT, NOW + 60)
    assert check([KEY], MID, CLIENT, exp, sig, NOW) is None
    assert check([KEY], MID, CLIENT, exp, sig, NOW + 61) == EXPIRED
    assert check([KEY], "another" + MID[7:], CLIENT, exp, sig, NOW) == INVALID
    assert check([KEY], MID, "cl_someoneelse0000", exp, sig, NOW) == INVALID
    assert check([KEY], MID, CLIENT, str(NOW + 7200), sig, NOW) == INVALID  # the expiry is signed
    assert check([KEY], MID, CLIENT, "0" + exp, sig, NOW) == INVALID  # not the text signed
    assert check([KEY], MID, CLIENT, "soon", sig, NOW) == INVALID
    assert check([KEY], MID, CLIENT, exp, "", NOW) == INVALID
    assert check([OLD], MID, CLIENT, exp, sig, NOW) == INVALID  # another key
    assert check([OLD, KEY], MID, CLIENT, exp, sig, NOW) is None  # a rotation: either key verifies
    # An expired URL with a tampered signature is invalid, not expired: the signature comes first.
    assert check([KEY], MID, CLIENT, exp, sig[:-1] + "x", NOW + 61) == INVALID


@given(st.text(min_size=1, max_size=60))
def test_no_other_signature_passes(sig: str) -> None:
    real = sign(KEY, MID, CLIENT, NOW + 60)
    assert (check([KEY], MID, CLIENT, str(NOW + 60), sig, NOW) is None) == (sig == real)


def test_the_key_is_derived_not_the_secret() -> None:
    assert derive_key(b"s") != b"s" and len(derive_key(b"s")) == 32
    assert derive_key(b"s") == derive_key(b"s") != derive_key(b"t")


# -------------------------------------------------------------------------------- the member's media


def _raw(kind: str, **obj: object) -> dict[str, object]:
    return {"id": "wamid.X", "type": kind, kind: {"id": "1003383421387123", "mime_type": "image/jpeg", **obj}}


def test_media_of_reads_a_media_member_only() -> None:
    digest = base64.b64encode(hashlib.sha256(b"x").digest()).decode()
    ref = media_of(member_json(_raw("document", sha256=digest, filename="bill.pdf", file_size="12")))
    assert ref is not None and (ref.kind, ref.media_id, ref.filename, ref.file_size) == (
        "document",
        "1003383421387123",
        "bill.pdf",
        12,
    )
    assert media_of(member_json({"id": "w", "type": "text", "text": {"body": "hi"}})) is None
    assert media_of(member_json({"id": "w", "type": "image"})) is None  # no media id
    assert media_of(None) is None and media_of("not json") is None
    assert set(MEDIA_TYPES) == {"image", "audio", "video", "document", "sticker"}


def test_the_url_is_the_media_objects_last_member_and_nothing_else_changes() -> None:
    member = member_json(_raw("image", caption="my bill", sha256="abc"), "Asha")
    with_url = with_media_url(member, "https://gw/x")
    assert with_url == member[:-2] + ',"url":"https://gw/x"}}'
    text = member_json({"id": "w", "type": "text", "text": {"body": "hi"}})
    assert with_media_url(text, "https://gw/x") == text
    location = member_json({"id": "w", "type": "location", "location": {"latitude": 1.0, "longitude": 2.0}})
    assert with_media_url(location, "https://gw/x") == location
    assert is_media_member(member) and not is_media_member(text) and not is_media_member(location)
    assert is_media_member('{"type":"image","v":1}')  # not the member's own order: read it to know


def _message(channel_origin: str, member: str | None) -> Message:
    return Message(
        id=MID,
        shortcode="919876543210",
        msisdn="919812345678",
        text="my bill",
        received_at=datetime(2025, 11, 27, 4, tzinfo=UTC).timestamp(),
        origin=channel_origin,
        sender=Sender(cc=91, ndc=9812, sn=345678, operator="vi", circle=""),
        whatsapp=member,
    )


def test_callback_body_adds_the_url_to_whatsapp_media_only() -> None:
    member = member_json(_raw("image", caption="my bill"))
    wa = _message("whatsapp:106540352242922", member)
    body = callback_body(wa, "ms", "https://gw/v1/whatsapp/media/x?sig=1")
    assert json.loads(body)["whatsapp"]["image"]["url"] == "https://gw/v1/whatsapp/media/x?sig=1"
    assert body.replace(b',"url":"https://gw/v1/whatsapp/media/x?sig=1"', b"") == callback_body(wa)
    sms = _message("smpp:airtel", None)
    assert callback_body(sms, "ms", "https://gw/ignored") == callback_body(sms)  # SMS: byte-identical
    assert b"whatsapp" not in callback_body(sms)


# ------------------------------------------------------------------------------- Graph's answers


def test_graph_media_answer_is_read_with_its_digit_string_size() -> None:
    body = orjson.dumps(
        {
            "messaging_product": "whatsapp",
            "url": "https://lookaside.example/x",
            "mime_type": "image/jpeg",
            "sha256": "ab" * 32,
            "file_size": "303833",
            "id": "1",
        }
    )
    location = parse_media_answer(body)
    assert location is not None and location.file_size == 303833 and location.url.endswith("/x")
    assert parse_media_answer(b'{"id": "1"}') is None and parse_media_answer(b"<html>") is None


def test_graph_errors_become_the_routes_problems() -> None:
    gone = orjson.dumps(
        {
            "error": {
                "message": "(#100) Object does not exist",
                "code": 100,
                "error_subcode": 33,
                "fbtrace_id": "T1",
            }
        }
    )
    failure = media_failure(400, gone)
    assert (failure.status, failure.kind) == (410, "media-expired") and "T1" in failure.detail
    token = media_failure(401, orjson.dumps({"error": {"message": "bad token abc", "code": 190}}))
    assert (token.status, token.kind) == (502, "graph-error") and "abc" not in token.detail
    assert media_failure(503, orjson.dumps({"error": {"message": "down", "code": 2}})).status == 502
    assert media_failure(404, b"Not Found").kind == "media-expired"
    assert media_failure(500, b"<html>").kind == "graph-error"


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(hashlib.sha256(b"x").digest()).decode(),
        base64.urlsafe_b64encode(hashlib.sha256(b"x").digest()).decode().rstrip("="),
        hashlib.sha256(b"x").hexdigest(),
        hashlib.sha256(b"x").hexdigest().upper(),
    ],
)
def test_a_digest_reads_in_base64_or_hex(text: str) -> None:
    assert expected_digest(text) == hashlib.sha256(b"x").digest()


def test_what_is_not_a_digest_is_none() -> None:
    assert expected_digest("") is None and expected_digest("IMAGE_HASH") is None
    assert expected_digest("z" * 64) is None and expected_digest("!" * 44) is None


def test_size_cap() -> None:
    assert too_large(101, 100) and not too_large(100, 100) and not too_large(None, 100)
