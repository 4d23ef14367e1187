"""WhatsApp settings, read from the ``[whatsapp]`` table and its ``[[whatsapp.numbers]]``.

```toml
[whatsapp]
app_secret = "…"          # signs every webhook (X-Hub-Signature-256)
verify_token = "…"        # the subscription handshake
graph_url = "https://graph.facebook.com"   # the default; a fake for tests
api_version = "v21.0"
max_webhook_bytes = 1048576   # a webhook body larger than this is refused (413)
max_webhook_items = 500       # messages and statuses taken from one body; the rest left out, counted
max_message_age_s = 691200    # a message sent longer ago than this (8 days) is acknowledged, not stored
graph_ca_file = ""            # PEM CA file to trust for graph_url instead of the system's (a private proxy)
graph_max_connections = 64    # Graph connections (sends in flight) per number
graph_max_queued = 2048       # sends waiting for a connection per number; more are refused (unsent, retried)
graph_queue_timeout_s = 10.0  # longest wait for a connection (unsent, retried, after it)
graph_timeout_s = 10.0        # the network's deadline per send, once it has a connection slot
max_pending_webhook_messages = 5000  # a worker holding more unanswered messages answers webhooks 503

[[whatsapp.numbers]]
phone_number_id = "106540352242922"
display_phone_number = "919876543210"
access_token = "…"        # system user token for /messages
mark_read = false         # mark each stored inbound message read
```

Without a ``[whatsapp]`` table the gateway serves no WhatsApp number and nothing changes. The secrets
come from the environment too: ``MOGATEWAY_WHATSAPP__APP_SECRET``, ``MOGATEWAY_WHATSAPP__VERIFY_TOKEN``
and, per number, ``MOGATEWAY_WHATSAPP_ACCESS_TOKEN_<phone_number_id>`` (which wins over the file).

Each of the three secrets may be written sealed under ``secret_key`` (``config.sealed``: ``sealed:v1:…``,
made by ``mogateway secrets seal --context whatsapp.access_token --number <phone_number_id>``: an access
token is bound to its number), in the file or the environment; the
settings open them when they load (:meth:`WhatsAppSettings.opened`), so everything that reads them sees
the secret itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, field_validator, model_validator

from mogateway.config.sealed import SealedValueError, is_sealed, open_value, sealed_key_id
from mogateway.core.message import check_business_number

__all__ = ["TOKEN_ENV_PREFIX", "WhatsAppNumber", "WhatsAppSettings"]

_ID = re.compile(r"\A[0-9]{1,32}\Z")
_VERSION = re.compile(r"\Av[0-9]{1,3}\.[0-9]{1,3}\Z")
TOKEN_ENV_PREFIX = "MOGATEWAY_WHATSAPP_ACCESS_TOKEN_"


class WhatsAppNumber(BaseModel):
    """One business number served by the gateway (a number ``waba migrate`` moved to the Cloud API)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    phone_number_id: str = Field(description="the id in Graph API paths")
    display_phone_number: str = Field(description="the number's digits, as webhooks name it")
    access_token: SecretStr = SecretStr("")
    mark_read: bool = False

    @field_validator("phone_number_id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("must be digits (the Graph API's phone number id)")
        return value

    @field_validator("display_phone_number")
    @classmethod
    def _number(cls, value: str) -> str:
        return check_business_number(value)

    @model_validator(mode="after")
    def _token_from_environment(self) -> WhatsAppNumber:
        from_env = os.environ.get(TOKEN_ENV_PREFIX + self.phone_number_id)
        if from_env:
            object.__setattr__(self, "access_token", SecretStr(from_env))
        if not self.access_token.get_secret_value():
            raise ValueError(
                f"access_token is required (or {TOKEN_ENV_PREFIX}{self.phone_number_id} in the environment)"
            )
        return self


class WhatsAppSettings(BaseModel):
    """The ``[whatsapp]`` table: the app's webhook secrets, the Graph API and the numbers served."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app_secret: SecretStr = Field(description="the Meta app's secret: webhooks are signed with it")
    verify_token: SecretStr = Field(description="the token Meta's subscription handshake must present")
    graph_url: str = "https://graph.facebook.com"
    api_version: str = "v21.0"
    #: Meta documents webhook bodies of up to 3 MB, for fields the gateway does not take (history
    #: syncs); a messages body is a few KiB (a text is at most 4,096 characters). 1 MiB holds dozens of
    #: the largest texts and bounds what one connection with a well-formed signature header makes a
    #: worker hold (docs/whatsapp.md, "Limits").
    max_webhook_bytes: int = Field(1024 * 1024, ge=16 * 1024, le=3 * 1024 * 1024)
    max_webhook_items: int = Field(500, ge=1, le=10_000)
    #: Longer than Meta's retries (up to 7 days): older is a replay, answered 200 and not stored.
    max_message_age_s: int = Field(8 * 86400, ge=86400)
    #: A PEM file of the CAs to trust for ``graph_url`` instead of the system's: a private Graph proxy
    #: (or the bench's fake) with its own certificate authority. Empty: the system's CAs.
    graph_ca_file: str = ""
    graph_max_connections: int = Field(64, ge=1, le=1024)
    graph_max_queued: int = Field(2048, ge=0, le=100_000)
    graph_queue_timeout_s: float = Field(10.0, gt=0, le=300)
    graph_timeout_s: float = Field(10.0, gt=0, le=300)
    #: Admission control (``service.admission``): while a worker holds more messages than this that it
    #: accepted and has not answered yet (their callback or reply still to come), new webhooks are
    #: answered 503 and Meta delivers them again later. 0 turns it off.
    max_pending_webhook_messages: int = Field(5000, ge=0, le=1_000_000)
    numbers: list[WhatsAppNumber] = Field(default_factory=list)

    @field_validator("app_secret", "verify_token")
    @classmethod
    def _secret(cls, value: SecretStr) -> SecretStr:
        _check_length(value.get_secret_value())
        return value

    @field_validator("graph_url")
    @classmethod
    def _graph_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/")

    @field_validator("graph_ca_file")
    @classmethod
    def _ca_file(cls, value: str) -> str:
        if value and not os.path.isfile(value):
            raise ValueError(f"no such file: {value}")
        return value

    @field_validator("api_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not _VERSION.match(value):
            raise ValueError("must look like v21.0")
        return value

    @model_validator(mode="after")
    def _unique(self) -> WhatsAppSettings:
        ids = [n.phone_number_id for n in self.numbers]
        if len(set(ids)) != len(ids):
            raise ValueError("numbers: each phone_number_id may appear once")
        shown = [n.display_phone_number for n in self.numbers]
        if len(set(shown)) != len(shown):
            raise ValueError("numbers: each display_phone_number may appear once")
        return self

    # How each secret was written (set by ``opened``; ``mogateway secrets reencrypt`` says which to seal
    # again): setting name -> (its sealing context, "clear" or the key id it was sealed under).
    _stored: dict[str, tuple[str, str]] = PrivateAttr(default_factory=dict)

    @property
    def stored(self) -> dict[str, tuple[str, str]]:
        """How each secret was written, by the name messages give the setting: its sealing context
        (``--context``) and ``"clear"`` or the key id it was sealed under."""
        return dict(self._stored)

    def opened(self, keys: Sequence[bytes]) -> WhatsAppSettings:
        """These settings with every sealed secret opened with one of ``keys`` (``secret_key``, then
        ``old_secret_key``); :class:`SealedValueError` names the first that cannot be."""
        stored: dict[str, tuple[str, str]] = {}

        def open_one(value: SecretStr, context: str, setting: str, bound_to: str = "") -> SecretStr:
            text = value.get_secret_value()
            if not is_sealed(text):
                stored[setting] = (context, "clear")
                return value
            stored[setting] = (context, sealed_key_id(text))
            return SecretStr(open_value(text, context, keys, setting=setting, bound_to=bound_to))

        updates: dict[str, object] = {}
        for field in ("app_secret", "verify_token"):
            setting = f"whatsapp.{field} (MOGATEWAY_WHATSAPP__{field.upper()})"
            secret = open_one(getattr(self, field), f"whatsapp.{field}", setting)
            try:
                _check_length(secret.get_secret_value())
            except ValueError as exc:
                raise SealedValueError(f"invalid setting {setting}: {exc}") from None
            updates[field] = secret
        numbers = []
        for n in self.numbers:
            setting = (
                f"whatsapp.numbers access_token of {n.phone_number_id} "
                f"({TOKEN_ENV_PREFIX}{n.phone_number_id})"
            )
            token = open_one(n.access_token, "whatsapp.access_token", setting, n.phone_number_id)
            numbers.append(n.model_copy(update={"access_token": token}))
        updates["numbers"] = numbers
        result = self.model_copy(update=updates)
        result._stored = stored
        return result

    def number(self, phone_number_id: str) -> WhatsAppNumber | None:
        """The configured number with this id, or None."""
        for n in self.numbers:
            if n.phone_number_id == phone_number_id:
                return n
        return None


def _check_length(secret: str) -> None:
    if len(secret) < 8:
        raise ValueError("must be at least 8 characters")
