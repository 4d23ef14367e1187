"""Client secrets encrypted at rest: the one rule both journals store client documents with.

Rules stated here, before the code:

* The secrets of a client document are its bearer ``token`` and its signing secrets
  (:data:`SECRET_FIELDS`). Nothing else in the journal is encrypted.
* With a key (the ``secret_key`` setting: 32 random bytes, url-safe base64) every secret written is
  sealed with AES-256-GCM: a fresh 96-bit nonce per value, and the client id and field name as
  associated data, so a sealed value copied to another client or field does not open. It is stored as
  ``{"alg": "A256GCM", "kid": <key id>, "v": <base64url(nonce + ciphertext + tag)>}`` in place of the
  string; the key id (8 hex digits of a SHA-256 of the key) says which key sealed it without saying
  anything usable about the key.
* Without a key, secrets are written as plain strings, as they always were. A plain string is read
  whatever the key (so setting a key first, then ``mogateway secrets reencrypt``, needs no downtime).
* A sealed value is opened with the key whose id it names: ``secret_key``, or ``old_secret_key`` while
  a key is being replaced. No such key, or a value that fails authentication, raises
  :class:`SecretKeyError`, whose message is one line naming the setting. Secrets themselves never
  appear in a message, a log line or a repr.
"""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Sequence
from typing import Any, Final

from mogateway.config.sealed import b64 as _b64
from mogateway.config.sealed import key_id
from mogateway.config.sealed import unb64 as _unb64
from mogateway.config.secret_key import new_key, parse_key
from mogateway.core.ports import SecretKeyError

__all__ = [
    "KEY_SETTING",
    "OLD_KEY_SETTING",
    "SECRET_FIELDS",
    "Sealer",
    "SecretKeyError",
    "key_id",
    "new_key",
    "parse_key",
]

log = logging.getLogger(__name__)

#: The members of a client document that are secrets.
SECRET_FIELDS: Final = ("token", "signing_secret", "previous_signing_secret", "next_token")
#: How messages name the settings (the operator sets them under these names).
KEY_SETTING: Final = "secret_key (MOGATEWAY_SECRET_KEY)"
OLD_KEY_SETTING: Final = "old_secret_key (MOGATEWAY_OLD_SECRET_KEY)"

_ALG: Final = "A256GCM"
_NONCE_BYTES: Final = 12


class Sealer:
    """Seals secrets under ``key`` (None: writes them in plain text) and opens them with ``key`` or
    any of ``old_keys``. ``opened`` counts what was read: ``"plaintext"`` or the key id."""

    def __init__(self, key: bytes | None = None, old_keys: Sequence[bytes] = ()) -> None:
        self._key = key
        self._keys: dict[str, Any] = {}
        if key is not None or old_keys:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            for k in ([key] if key is not None else []) + list(old_keys):
                self._keys.setdefault(key_id(k), AESGCM(k))
        self.key_id = key_id(key) if key is not None else None
        self.opened: collections.Counter[str] = collections.Counter()
        self._warned_plaintext = False

    @classmethod
    def from_settings_values(cls, key: str | None, old_key: str | None = None) -> Sealer:
        """A sealer from the text of ``secret_key`` and ``old_secret_key`` (either may be None)."""
        return cls(
            parse_key(key) if key else None,
            [parse_key(old_key)] if old_key else [],
        )

    def __repr__(self) -> str:
        return f"Sealer(key_id={self.key_id!r}, keys={sorted(self._keys)!r})"

    # ------------------------------------------------------------------ one value

    def seal(self, value: str, context: str) -> str | dict[str, str]:
        """``value`` as it is stored: sealed under the key, or itself without a key or when empty."""
        if self.key_id is None or not value:
            return value
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._keys[self.key_id].encrypt(nonce, value.encode("utf-8"), context.encode("utf-8"))
        return {"alg": _ALG, "kid": self.key_id, "v": _b64(nonce + sealed)}

    def open(self, stored: object, context: str) -> str:
        """The secret a stored value holds (see the module's rules); SecretKeyError when it cannot."""
        if isinstance(stored, str):
            self.opened["plaintext" if stored else "empty"] += 1
            if stored and self.key_id is not None and not self._warned_plaintext:
                self._warned_plaintext = True
                log.warning(
                    "some client secrets are stored in plain text although %s is set: "
                    "run `mogateway secrets reencrypt` to encrypt them",
                    KEY_SETTING,
                )
            return stored
        if not isinstance(stored, dict) or stored.get("alg") != _ALG or not isinstance(stored.get("v"), str):
            raise SecretKeyError(f"the journal holds a client secret this mogateway cannot read ({context})")
        kid = str(stored.get("kid"))
        box = self._keys.get(kid)
        if box is None:
            raise SecretKeyError(self._no_key_message(kid))
        try:
            raw = _unb64(stored["v"])
            plain: bytes = box.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context.encode("utf-8"))
        except Exception:  # InvalidTag, bad base64, short value: all mean "altered"
            raise SecretKeyError(
                f"a client secret in the journal ({context}) fails authentication under key id {kid}: "
                "the stored value was altered or moved"
            ) from None
        self.opened[kid] += 1
        return plain.decode("utf-8")

    def _no_key_message(self, kid: str) -> str:
        if not self._keys:
            return f"the journal's client secrets are encrypted (key id {kid}) but {KEY_SETTING} is not set"
        known = ", ".join(sorted(self._keys))
        return (
            f"{KEY_SETTING} is not the key the journal's client secrets are encrypted with "
            f"(key id {kid}; configured: {known}); set it to that key, or to the new key with the old "
            f"one as {OLD_KEY_SETTING}"
        )

    # ------------------------------------------------------------------ client documents

    def seal_document(self, doc: dict[str, Any]) -> dict[str, Any]:
        """The client document ``doc`` (a dict with ``id``) with its secrets sealed, in place."""
        for name in SECRET_FIELDS:
            if name in doc:
                doc[name] = self.seal(doc[name], f"client/{doc['id']}/{name}")
        return doc

    def open_document(self, doc: dict[str, Any]) -> dict[str, Any]:
        """The stored client document ``doc`` with its secrets opened, in place."""
        for name in SECRET_FIELDS:
            if name in doc:
                doc[name] = self.open(doc[name], f"client/{doc.get('id')}/{name}")
        return doc
