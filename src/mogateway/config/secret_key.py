"""The ``secret_key`` setting's shape: 32 random bytes in url-safe base64 (``edges.storage.sealing``
seals client secrets with it). Settings check a key with :func:`parse_key` when they load, so a bad
key stops start-up in one line that never shows the value.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Final

__all__ = ["new_key", "parse_key"]

_KEY_BYTES: Final = 32
_KEY_SHAPE: Final = "must be 32 random bytes in url-safe base64 (make one with `mogateway secrets new-key`)"


def new_key() -> str:
    """A fresh key for ``secret_key``: 32 random bytes, url-safe base64 (44 characters)."""
    return base64.urlsafe_b64encode(os.urandom(_KEY_BYTES)).decode("ascii")


def parse_key(text: str) -> bytes:
    """The 32 key bytes of a ``secret_key`` value; ValueError (without the value) when it is not one."""
    cleaned = text.strip().rstrip("=")
    try:
        # validate=True: a character outside the alphabet (or padding in the middle) is an error, not
        # the end of the key.
        raw = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(_KEY_SHAPE) from None
    if len(raw) != _KEY_BYTES:
        raise ValueError(_KEY_SHAPE)
    return raw
