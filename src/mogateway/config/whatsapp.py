"""WhatsApp settings, read from the ``[whatsapp]`` table and its ``[[whatsapp.numbers]]``.

```toml
[whatsapp]
app_secret = "…"          # signs every webhook (X-Hub-Signature-256)
verify_token = "…"        # the subscription handshake
graph_url = "https://graph.facebook.com"   # the default; a fake for tests
api_version = "v21.0"

[[whatsapp.numbers]]
phone_number_id = "106540352242922"
display_phone_number = "919876543210"
access_token = "…"        # system user token for /messages
mark_read = false         # mark each stored inbound message read
```

Without a ``[whatsapp]`` table the gateway serves no WhatsApp number and nothing changes. The secrets
come from the environment too: ``MOGATEWAY_WHATSAPP__APP_SECRET``, ``MOGATEWAY_WHATSAPP__VERIFY_TOKEN``
and, per number, ``MOGATEWAY_WHATSAPP_ACCESS_TOKEN_<phone_number_id>`` (which wins over the file).
"""

from __future__ import annotations

import os
import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

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
    numbers: list[WhatsAppNumber] = Field(default_factory=list)

    @field_validator("app_secret", "verify_token")
    @classmethod
    def _secret(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 8:
            raise ValueError("must be at least 8 characters")
        return value

    @field_validator("graph_url")
    @classmethod
    def _graph_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/")

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

    def number(self, phone_number_id: str) -> WhatsAppNumber | None:
        """The configured number with this id, or None."""
        for n in self.numbers:
            if n.phone_number_id == phone_number_id:
                return n
        return None
