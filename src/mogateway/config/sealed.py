"""Sealed values: a secret written into the settings encrypted under ``secret_key``, as text.

Rules stated here, before the code:

* A sealed value reads ``sealed:v1:<key id>:<base64url(nonce + ciphertext + tag)>``: AES-256-GCM under
  the gateway's ``secret_key`` (:mod:`config.secret_key`), a fresh 96-bit nonce per value, and the
  setting it is for (its *context*, one of :data:`CONTEXTS`) as associated data, so a sealed app secret
  pasted as an access token does not open. ``mogateway secrets seal --context <context>`` makes one.
* An access token is bound to its number: its associated data also holds the ``phone_number_id`` it
  is for (the contexts of :data:`BOUND`), so number A's sealed token pasted into number B's entry does
  not open — B's replies never go out with A's token. A token sealed before this binding (its context
  alone) is refused too, with the command that seals it again bound (``mogateway secrets seal
  --context whatsapp.access_token --number <phone_number_id>``, which opens such a value from standard
  input, :func:`open_value`'s ``accept_unbound``).
* The key id is the one the journal's sealed client secrets name (:func:`key_id`: 8 hex digits of a
  SHA-256 of the key): it says which key sealed a value without saying anything usable about the key.
* Settings open sealed values once, when they load, with ``secret_key`` or ``old_secret_key``; a value
  that cannot be opened (no key, another key, altered, sealed for another setting) raises
  :class:`SealedValueError`, one line naming the setting and never the value.
* Any other text is the secret itself, in clear, as before.

These are pure functions over bytes (no file, no network): the settings use them to open what an
operator wrote, ``edges.storage.sealing`` shares the key id and base64 form for the journal's secrets.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable
from typing import Final

__all__ = [
    "BOUND",
    "CONTEXTS",
    "PREFIX",
    "SealedValueError",
    "b64",
    "is_sealed",
    "key_id",
    "open_value",
    "seal_value",
    "sealed_key_id",
    "unb64",
]

#: What starts every sealed value (``v1``: the form below; a later form gets another version).
PREFIX: Final = "sealed:v1:"
#: The settings a value may be sealed for (``--context``), each its own associated data.
CONTEXTS: Final = ("whatsapp.app_secret", "whatsapp.verify_token", "whatsapp.access_token")

#: The contexts whose values are bound to something more: context -> what (its setting's name).
BOUND: Final = {"whatsapp.access_token": "phone_number_id"}

_NONCE_BYTES: Final = 12
# Keeps a sealed setting apart from the journal's sealed client secrets (whose context is
# ``client/<id>/<field>``) even under the same key.
_AAD_PREFIX: Final = b"mogateway setting\x00"


class SealedValueError(Exception):
    """A sealed setting that cannot be opened; the message is one line naming the setting.

    Not a ValueError on purpose: raised while the settings validate, it reaches ``load_settings``
    as itself instead of being folded into a generic validation message.
    """


def key_id(key: bytes) -> str:
    """The id a sealed value names its key by: 8 hex digits of a SHA-256 of the key."""
    return hashlib.sha256(b"mogateway secret key id\x00" + key).hexdigest()[:8]


def b64(raw: bytes) -> str:
    """url-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def unb64(text: str) -> bytes:
    """The bytes of :func:`b64`'s text (binascii.Error/ValueError when it is not base64)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def is_sealed(text: str) -> bool:
    """Whether ``text`` is a sealed value (rather than a secret in clear)."""
    return text.startswith(PREFIX)


def sealed_key_id(text: str) -> str:
    """The key id a sealed value names ("" when it names none)."""
    kid, _, _ = text.removeprefix(PREFIX).partition(":")
    return kid


def _aad(context: str, bound_to: str = "") -> bytes:
    if context not in CONTEXTS:
        raise ValueError(f"unknown context {context!r} (one of {', '.join(CONTEXTS)})")
    if (context in BOUND) != bool(bound_to):
        what = BOUND.get(context)
        raise ValueError(f"{context} is sealed bound to its {what}" if what else f"{context} is not bound")
    return _AAD_PREFIX + context.encode("ascii") + (b"\x00" + bound_to.encode("utf-8") if bound_to else b"")


def seal_value(key: bytes, value: str, context: str, *, bound_to: str = "") -> str:
    """``value`` sealed under ``key`` for the setting ``context`` (and, for the contexts of
    :data:`BOUND`, for ``bound_to``: an access token's ``phone_number_id``)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, value.encode("utf-8"), _aad(context, bound_to))
    return f"{PREFIX}{key_id(key)}:{b64(nonce + sealed)}"


def _unbound_aad(context: str) -> bytes:
    """The associated data of a value sealed before :data:`BOUND` bound its context."""
    return _AAD_PREFIX + context.encode("ascii")


def open_value(
    text: str,
    context: str,
    keys: Iterable[bytes],
    *,
    setting: str,
    bound_to: str = "",
    accept_unbound: bool = False,
) -> str:
    """The secret the sealed ``text`` holds, opened with whichever of ``keys`` sealed it.

    ``setting`` names the setting in messages (``whatsapp.app_secret (MOGATEWAY_WHATSAPP__APP_SECRET)``);
    ``bound_to`` is what a value of a :data:`BOUND` context must have been sealed for. A value sealed
    before the binding is refused, naming the command that seals it again, unless ``accept_unbound``
    (that command, opening it to seal it again).
    """
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    by_id = {key_id(k): k for k in keys}
    kid, _, body = text.removeprefix(PREFIX).partition(":")
    if not kid or not body:
        raise SealedValueError(f"{setting} starts with {PREFIX!r} but is not a sealed value")
    key = by_id.get(kid)
    if key is None:
        if not by_id:
            raise SealedValueError(
                f"{setting} is sealed (key id {kid}) but secret_key (MOGATEWAY_SECRET_KEY) is not set"
            )
        raise SealedValueError(
            f"{setting} is sealed under key id {kid}, not under secret_key or old_secret_key "
            f"(key ids {', '.join(sorted(by_id))}): set secret_key to that key, or seal the value again"
        )
    aad = _aad(context, bound_to)
    reseal = f"--context {context}" + (f" --number {bound_to}" if bound_to else "")
    raw = b""
    try:
        raw = unb64(body)
        plain = AESGCM(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], aad)
        return plain.decode("utf-8")
    except Exception:  # InvalidTag, bad base64, a short value: sealed for another setting, or altered
        pass
    if bound_to and raw:
        try:
            plain = AESGCM(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _unbound_aad(context))
        except Exception:
            pass
        else:
            if accept_unbound:
                return plain.decode("utf-8")
            raise SealedValueError(
                f"{setting} was sealed without its {BOUND[context]} (before access tokens were bound to "
                f"their number): seal it again, its sealed value on standard input, with "
                f"`mogateway secrets seal {reseal}`"
            )
    another = f"another setting or another {BOUND[context]}" if bound_to else "another setting"
    raise SealedValueError(
        f"{setting} does not open under key id {kid}: it was sealed for {another} "
        f"(seal it with {reseal}) or altered"
    )
