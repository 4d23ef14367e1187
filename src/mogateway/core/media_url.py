"""Signed media URLs: the callback's ``url`` that lets one client fetch one message's media. Pure.

A WhatsApp media message's callback carries, in its media object, a gateway URL::

    {public_url}/v1/whatsapp/media/{message_id}?client={client_id}&exp={unix seconds}&sig={signature}

Rules, before the code:

* **What is signed**: the message id, the client id and the expiry, each on its own line
  (``"mogateway media v1\\n{message_id}\\n{client_id}\\n{exp}"``), with HMAC-SHA256; the signature is
  the 32 bytes in url-safe base64 without padding (43 characters). A URL made for one message or one
  client is worth nothing for another, and its expiry cannot be moved.
* **The key** is derived from a secret every node of a cluster shares (the settings' ``secret_key``;
  without one, the ``[whatsapp]`` app secret), never the secret itself (:func:`derive_key`): no node
  keeps state of the URLs it made, any node checks any URL. Several keys may verify (the
  ``old_secret_key`` of a rotation); the first signs.
* **Checking** (:func:`check`) is in constant time (``hmac.compare_digest``) against every key, and
  tells a bad signature from an expired URL: both are refused, with a different reason.
* Ids have the shape of ``core.ids`` (no character to escape); the URL is built without escaping.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Final

__all__ = [
    "EXPIRED",
    "INVALID",
    "MEDIA_PATH",
    "check",
    "derive_key",
    "media_path",
    "sign",
    "signed_url",
]

#: The route, with the message id in place of ``{}``.
MEDIA_PATH: Final = "/v1/whatsapp/media/{}"
_LABEL: Final = b"mogateway whatsapp media url v1"
_PREFIX: Final = "mogateway media v1"
#: :func:`check`'s answers other than None (valid).
INVALID: Final = "the signature is not valid for this message and client"
EXPIRED: Final = "the signed URL has expired"


def derive_key(secret: bytes) -> bytes:
    """The signing key made from a shared ``secret`` (HMAC-SHA256 of a fixed label): the secret is
    used for nothing else under this name, and the key says nothing about the secret."""
    return hmac.new(secret, _LABEL, hashlib.sha256).digest()


def sign(key: bytes, message_id: str, client_id: str, exp: int) -> str:
    """The signature of a URL for ``message_id``, ``client_id``, valid until ``exp`` (Unix seconds)."""
    text = f"{_PREFIX}\n{message_id}\n{client_id}\n{exp}"
    digest = hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def media_path(message_id: str) -> str:
    """The route's path for ``message_id``."""
    return MEDIA_PATH.format(message_id)


def signed_url(public_url: str, key: bytes, message_id: str, client_id: str, exp: int) -> str:
    """The whole URL (``public_url`` without a trailing slash)."""
    sig = sign(key, message_id, client_id, exp)
    return f"{public_url.rstrip('/')}{media_path(message_id)}?client={client_id}&exp={exp}&sig={sig}"


def check(
    keys: Sequence[bytes], message_id: str, client_id: str, exp_text: str, sig: str, now: float
) -> str | None:
    """None when ``sig`` signs (``message_id``, ``client_id``, ``exp_text``) under one of ``keys`` and
    ``exp`` is not past ``now``; else :data:`INVALID` or :data:`EXPIRED`. The signature is checked first,
    so an expiry that was tampered with is :data:`INVALID`."""
    if not exp_text.isdigit() or len(exp_text) > 12 or not sig or len(sig) > 64:
        return INVALID
    exp = int(exp_text)
    if str(exp) != exp_text:  # leading zeros: not the text that was signed
        return INVALID
    given = sig.encode("ascii", errors="replace")
    matched = False
    for key in keys:
        expected = sign(key, message_id, client_id, exp).encode("ascii")
        if hmac.compare_digest(given, expected):
            matched = True
    if not matched:
        return INVALID
    if now > exp:
        return EXPIRED
    return None
