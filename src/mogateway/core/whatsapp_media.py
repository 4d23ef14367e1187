"""WhatsApp media through the gateway: the rules of fetching a message's media from Graph. Pure.

The I/O is ``edges.whatsapp.media`` (the Graph calls, streamed) and ``api.whatsapp_media`` (the route);
what they decide is here:

* **Which messages have media**: those whose ``whatsapp`` member (``core.whatsapp_member``) is of a
  :data:`MEDIA_TYPES` type with a media ``id`` (:func:`media_of`). The callback's media object gets the
  signed ``url`` (``core.media_url``) as its last member (:func:`with_media_url`); the other members'
  bytes do not change.
* **Graph's answers.** ``GET /{version}/{media_id}`` answers ``{url, mime_type, sha256, file_size, id,
  messaging_product}`` (:func:`parse_media_answer`). An error is Graph's envelope, read by its ``code``
  (:func:`media_failure`): Graph's ``100`` with subcode ``33`` ("object … does not exist") is what an
  expired or unknown media id answers — Meta keeps an inbound message's media 7 days (its Media page:
  "Media IDs in webhooks expire after 7 days") — so the gateway answers **410** ``media-expired``;
  ``190`` (the number's token) and any other Graph error or a 5xx is **502** ``graph-error``; no answer
  in time is **504** ``graph-timeout``. A download URL that answers 404 has expired too (the URL lives
  minutes; the gateway fetches it once more with a fresh lookup before it says 410).
* **The sha256.** Meta's webhook gives it in base64 (the member's ``sha256``), Graph's lookup in hex;
  :func:`expected_digest` reads either into the 32 bytes. The webhook's value is the one checked; Graph's
  is used only when the webhook had none that reads.
* **Size.** Meta's largest media is a document of 100 MB (Meta's "Supported media types": image 5 MB,
  audio and video 16 MB, sticker 500 KB, document 100 MB): :data:`META_MAX_BYTES` is the default cap
  (``whatsapp_media_max_bytes``), checked against Graph's ``file_size`` and the download's
  ``Content-Length`` before a byte is streamed (:func:`too_large`), and counted while streaming.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final

import orjson

from mogateway.core.immutable import immutable
from mogateway.core.whatsapp_member import MEDIA_OBJECT, TYPE_OBJECTS

__all__ = [
    "META_MAX_BYTES",
    "MEDIA_TYPES",
    "MediaFailure",
    "MediaLocation",
    "MediaRef",
    "expected_digest",
    "is_media_member",
    "media_failure",
    "media_of",
    "parse_media_answer",
    "too_large",
    "with_media_url",
]

#: Meta's largest media (a document, 100 MB): the default of ``whatsapp_media_max_bytes``.
META_MAX_BYTES: Final = 100 * 1024 * 1024
#: The message types whose object is a media object.
MEDIA_TYPES: Final = tuple(kind for kind, obj in TYPE_OBJECTS.items() if obj == MEDIA_OBJECT)
_MAX_DETAIL: Final = 300
_TYPE_PREFIX: Final = '{"v":1,"type":"'


@immutable
class MediaRef:
    """The media of a stored message, as its ``whatsapp`` member names it."""

    kind: str
    media_id: str
    mime_type: str
    sha256: str
    file_size: int | None
    filename: str


@immutable
class MediaLocation:
    """Graph's answer to ``GET /{media_id}``: where to download it, and what it is."""

    url: str
    mime_type: str
    sha256: str
    file_size: int | None


@immutable
class MediaFailure:
    """Why a media could not be fetched: the HTTP status and problem kind the gateway answers."""

    status: int
    kind: str
    detail: str


def _member(member_json: str) -> dict[str, Any] | None:
    try:
        data = orjson.loads(member_json)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def media_of(member_json: str | None) -> MediaRef | None:
    """The media of a message whose ``whatsapp`` member is ``member_json``, or None (no member, not a
    media type, no media id)."""
    if not member_json:
        return None
    data = _member(member_json)
    if data is None:
        return None
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in MEDIA_TYPES:
        return None
    obj = data.get(kind)
    if not isinstance(obj, dict):
        return None
    media_id = obj.get("id")
    if not isinstance(media_id, str) or not media_id:
        return None
    size = obj.get("file_size")
    return MediaRef(
        kind=kind,
        media_id=media_id,
        mime_type=_text(obj.get("mime_type")),
        sha256=_text(obj.get("sha256")),
        file_size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        filename=_text(obj.get("filename")),
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def is_media_member(member_json: str) -> bool:
    """Whether ``member_json`` may be a media message's member (False only when it surely is not): a
    string test on the member's leading ``type``, so a text's callback never pays for a signed URL."""
    if not member_json.startswith(_TYPE_PREFIX):
        return True  # not written by core.whatsapp_member: let with_media_url read it
    return member_json[len(_TYPE_PREFIX) :].partition('"')[0] in MEDIA_TYPES


def with_media_url(member_json: str, url: str) -> str:
    """``member_json`` with ``url`` as the last member of its media object; unchanged when the message
    is not a media message (or has no media id)."""
    if not is_media_member(member_json):  # a text, a location…: not parsed at all
        return member_json
    data = _member(member_json)
    if data is None:
        return member_json
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in MEDIA_TYPES:
        return member_json
    obj = data.get(kind)
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        return member_json
    obj.pop("url", None)
    obj["url"] = url
    return orjson.dumps(data).decode("utf-8")


def expected_digest(text: str) -> bytes | None:
    """The 32 bytes of a SHA-256 written in base64 (standard or url-safe, padded or not) or hex."""
    value = text.strip()
    if len(value) == 64:
        try:
            return bytes.fromhex(value)
        except ValueError:
            pass
    if 43 <= len(value) <= 44:
        cleaned = value.rstrip("=").replace("-", "+").replace("_", "/")
        try:
            raw = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
        except (binascii.Error, ValueError):
            return None
        return raw if len(raw) == 32 else None
    return None


def parse_media_answer(body: bytes) -> MediaLocation | None:
    """Graph's answer to the media lookup, or None when it has no ``url`` (not Graph's answer)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    url = data.get("url")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        return None
    size = data.get("file_size")
    file_size: int | None = None
    if isinstance(size, int) and not isinstance(size, bool):
        file_size = size
    elif isinstance(size, str) and size.isascii() and size.isdigit() and len(size) <= 18:
        file_size = int(size)
    return MediaLocation(
        url=url, mime_type=_text(data.get("mime_type")), sha256=_text(data.get("sha256")), file_size=file_size
    )


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def media_failure(http_status: int, body: bytes) -> MediaFailure:
    """What an answer other than 2xx to the media lookup means (module docstring)."""
    error: Any = None
    try:
        data = orjson.loads(body)
        error = data.get("error") if isinstance(data, dict) else None
    except orjson.JSONDecodeError:
        pass
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        code = error["code"]
        subcode = error.get("error_subcode")
        message = _clip(_text(error.get("message")))
        trace = _text(error.get("fbtrace_id"))
        where = f" (fbtrace_id {trace})" if trace else ""
        if code == 100 and subcode == 33:
            return MediaFailure(
                410,
                "media-expired",
                f"Graph no longer has this media (code 100, subcode 33: {message}){where}; Meta keeps "
                "an inbound message's media for 7 days",
            )
        if code == 190:
            return MediaFailure(
                502, "graph-error", f"Graph refused the number's access token (code 190){where}"
            )
        return MediaFailure(502, "graph-error", f"Graph answered error code {code}: {message}{where}")
    if http_status == 404:
        return MediaFailure(410, "media-expired", "Graph no longer has this media (HTTP 404)")
    return MediaFailure(502, "graph-error", f"Graph answered HTTP {http_status} without its error envelope")


def too_large(size: int | None, limit: int) -> bool:
    """True when a known ``size`` is above ``limit``."""
    return size is not None and size > limit
