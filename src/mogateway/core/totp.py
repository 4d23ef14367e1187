"""Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP) and recovery codes, for the portal.

Rules stated here, before the code:

* A TOTP secret is 20 random bytes (160 bits, RFC 4226's recommendation), shown to the person as
  unpadded base32 (what authenticator apps read, in an ``otpauth://totp/`` URI). Codes are 6 digits,
  HMAC-SHA1, 30-second steps, counted from the unix epoch: every authenticator app's defaults.
* A code is accepted for the step of the moment and one step either side (clock drift), compared in
  constant time, and only for a step later than the last one accepted for that person: a code seen
  once (over a shoulder, in a proxy's log) cannot be used again. :func:`matching_step` says which step
  matched, for the caller to remember.
* Recovery codes are 10 groups of random base32 letters; the journal keeps only their SHA-256 (they are
  long random strings, so a fast hash is enough: nothing to guess from a dictionary). Each one signs in
  once, instead of a TOTP code. They are compared case- and dash-insensitively.

No clock and no randomness here: the caller passes the time and the random bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from typing import Final
from urllib.parse import quote, urlencode

__all__ = [
    "DIGITS",
    "STEP_S",
    "SECRET_BYTES",
    "from_base32",
    "hotp",
    "matching_step",
    "otpauth_uri",
    "recovery_code",
    "recovery_hash",
    "step_at",
    "to_base32",
    "totp",
]

DIGITS: Final = 6
STEP_S: Final = 30
SECRET_BYTES: Final = 20
#: Steps either side of the current one whose codes are accepted too.
DRIFT_STEPS: Final = 1
_RECOVERY_ALPHABET: Final = "abcdefghjkmnpqrstuvwxyz23456789"


def to_base32(secret: bytes) -> str:
    """``secret`` as authenticator apps read it: base32, upper case, no padding."""
    return base64.b32encode(secret).decode("ascii").rstrip("=")


def from_base32(text: str) -> bytes:
    """The bytes of a base32 secret (blanks and case ignored, padding optional); ValueError if malformed."""
    cleaned = "".join(text.split()).upper()
    cleaned += "=" * (-len(cleaned) % 8)
    try:
        return base64.b32decode(cleaned)
    except Exception as exc:  # binascii.Error
        raise ValueError("not a base32 secret") from exc


def hotp(secret: bytes, counter: int, digits: int = DIGITS) -> str:
    """RFC 4226: the code of ``counter`` under ``secret`` (dynamic truncation of an HMAC-SHA1)."""
    mac = hmac.new(secret, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    value = ((mac[offset] & 0x7F) << 24) | (mac[offset + 1] << 16) | (mac[offset + 2] << 8) | mac[offset + 3]
    return str(value % (10**digits)).zfill(digits)


def step_at(unix_s: float) -> int:
    """The TOTP time step of ``unix_s``."""
    return int(unix_s // STEP_S)


def totp(secret: bytes, unix_s: float, digits: int = DIGITS) -> str:
    """RFC 6238: the code of the moment ``unix_s``."""
    return hotp(secret, step_at(unix_s), digits)


def matching_step(secret: bytes, code: str, unix_s: float, after_step: int) -> int | None:
    """The step whose code ``code`` is (within :data:`DRIFT_STEPS` of ``unix_s``, later than
    ``after_step``), or None. Every candidate is compared, so the time taken does not say which."""
    given = "".join(code.split())
    if len(given) != DIGITS or not given.isdigit():
        return None
    now = step_at(unix_s)
    found: int | None = None
    for step in range(now - DRIFT_STEPS, now + DRIFT_STEPS + 1):
        same = hmac.compare_digest(hotp(secret, step).encode(), given.encode())
        if same and step > after_step and found is None:
            found = step
    return found


def otpauth_uri(secret: bytes, account: str, issuer: str) -> str:
    """The ``otpauth://totp/`` URI an authenticator app takes (as a QR code or pasted)."""
    label = quote(f"{issuer}:{account}", safe="@:")
    query = urlencode({"secret": to_base32(secret), "issuer": issuer, "digits": DIGITS, "period": STEP_S})
    return f"otpauth://totp/{label}?{query}"


def recovery_code(random: bytes) -> str:
    """A recovery code from 10 random bytes: ``xxxxx-xxxxx`` (about 50 bits)."""
    letters = "".join(_RECOVERY_ALPHABET[b % len(_RECOVERY_ALPHABET)] for b in random[:10])
    return f"{letters[:5]}-{letters[5:10]}"


def recovery_hash(code: str) -> str:
    """What the journal keeps of a recovery code: the SHA-256 (hex) of its letters, case-folded."""
    letters = "".join(ch for ch in code.casefold() if ch.isalnum())
    return hashlib.sha256(letters.encode("ascii", errors="replace")).hexdigest()
