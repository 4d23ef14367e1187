"""SMPP bind settings, read from the ``[smpp]`` table and its ``[[smpp.binds]]`` of the settings file.

```toml
[[smpp.binds]]
name = "airtel-dl"
host = "smsc.example.net"
port = 2775
system_id = "aggr01"
password = "secret"
mode = "transceiver"          # receiver | transmitter | transceiver
operator = "airtel"
circle = "delhi"
throughput = 50               # submit_sm per second
window = 10
enquire_link_s = 30
tls = false
default_alphabet = "gsm7"     # what data_coding 0 means on this link: gsm7 | latin1 | ascii
split = "udh"                 # udh | sar | payload
reply_tlvs = { "0x1400" = "1101234567890123456", "0x1401" = "1107123456789012345" }
dlt_pe_tlv = "0x1400"         # where a reply that matched its client's DLT template puts the PE id
dlt_template_tlv = "0x1401"   # ... and the template id
dlt_chain_tlv = "0x1402"      # optional, with dlt_tm_id: the PE-TM chain hash (the tag is the operator's)
dlt_tm_id = "1702158080400000123"
```
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from mogateway.smpp.constants import BindMode

if TYPE_CHECKING:
    from mogateway.smpp.tlv import Tlv

__all__ = ["BindConfig", "SmppSettings"]

_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


class BindConfig(BaseModel):
    """One SMPP bind to an operator's SMSC."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="unique name; MO from this bind have origin smpp:<name>")
    host: str
    port: int = Field(2775, ge=1, le=65535)
    system_id: str = Field(max_length=15)
    password: SecretStr = Field(SecretStr(""), description="at most 8 characters (SMPP 3.4)")
    system_type: str = Field("", max_length=12)
    mode: BindMode = BindMode.TRANSCEIVER
    operator: str = ""
    circle: str = ""
    throughput: float = Field(50.0, gt=0, description="submit_sm per second")
    window: int = Field(10, ge=1, le=1000, description="requests awaiting a response")
    enquire_link_s: float = Field(30.0, ge=0, description="keepalive after this many quiet seconds; 0 off")
    tls: bool = False
    tls_verify: bool = True
    default_alphabet: Literal["gsm7", "latin1", "ascii"] = "gsm7"
    reply_tlvs: dict[str, str] = Field(default_factory=dict, description="hex tag -> value")
    split: Literal["udh", "sar", "payload"] = "udh"
    dedupe_window_s: float = Field(600.0, ge=0, description="same MO content within this is one MO")
    reassembly_timeout_s: float = Field(60.0, gt=0, description="deliver a long MO incomplete after this")
    response_timeout_s: float = Field(10.0, gt=0)
    registered_delivery: int = Field(1, ge=0, le=255)
    source_ton: int = Field(0, ge=0, le=255, description="TON of the shortcode in replies")
    source_npi: int = Field(0, ge=0, le=255)
    dest_ton: int = Field(1, ge=0, le=255, description="TON of the msisdn in replies")
    dest_npi: int = Field(1, ge=0, le=255)
    dlt_pe_tlv: str = Field("0x1400", description="TLV of the client's PE id on a DLT-matched reply")
    dlt_template_tlv: str = Field("0x1401", description="TLV of the template id on a DLT-matched reply")
    dlt_chain_tlv: str | None = Field(None, description="TLV of the PE-TM chain hash (operator-specific)")
    dlt_tm_id: str | None = Field(None, description="telemarketer id (or chain) hashed with the PE id")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("use letters, digits, '.', '_' or '-' (at most 64)")
        return value

    @field_validator("password")
    @classmethod
    def _password(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value().encode("latin-1", "replace")) > 8:
            raise ValueError("SMPP 3.4 passwords are at most 8 characters")
        return value

    @field_validator("reply_tlvs")
    @classmethod
    def _tlvs(cls, value: dict[str, str]) -> dict[str, str]:
        for tag in value:
            _tag_number(tag)
        return value

    @field_validator("dlt_pe_tlv", "dlt_template_tlv", "dlt_chain_tlv")
    @classmethod
    def _dlt_tag(cls, value: str | None) -> str | None:
        if value is not None:
            _tag_number(value)
        return value

    @field_validator("dlt_tm_id")
    @classmethod
    def _tm_id(cls, value: str | None) -> str | None:
        if value is not None:
            # here, not at the top: every command that reads the settings (doctor) would load the DLT
            # rules for the few binds that set a chain
            from mogateway.core.dlt import DltInvalid, check_tm_id

            try:
                check_tm_id(value)
            except DltInvalid as exc:
                raise ValueError(exc.reason) from None
        return value

    @model_validator(mode="after")
    def _dlt_chain(self) -> BindConfig:
        # Half a chain setting would silently send no hash, and the operator would drop every reply.
        if (self.dlt_chain_tlv is None) != (self.dlt_tm_id is None):
            raise ValueError("dlt_chain_tlv and dlt_tm_id go together: set both or neither")
        tags = [self.dlt_pe_tlv, self.dlt_template_tlv, self.dlt_chain_tlv]
        numbers = [_tag_number(t) for t in tags if t is not None]
        if len(set(numbers)) != len(numbers):
            raise ValueError("dlt_pe_tlv, dlt_template_tlv and dlt_chain_tlv must be different tags")
        return self

    def dlt_tags(self) -> tuple[int, int, int | None]:
        """The TLV tags of the PE id, the template id and the chain hash (None: not sent)."""
        chain = None if self.dlt_chain_tlv is None else _tag_number(self.dlt_chain_tlv)
        return _tag_number(self.dlt_pe_tlv), _tag_number(self.dlt_template_tlv), chain

    def reply_tlv_list(self) -> tuple[Tlv, ...]:
        """The configured reply TLVs, in file order. Values are sent as the plain string (no NUL),
        which is how Indian operators expect the 19-digit DLT ids."""
        from mogateway.smpp.tlv import Tlv

        return tuple(Tlv(int(tag, 16), text.encode("latin-1")) for tag, text in self.reply_tlvs.items())


def _tag_number(tag: str) -> int:
    try:
        number = int(tag, 16)
    except ValueError:
        raise ValueError(f"TLV tag {tag!r} must be hex like 0x1400") from None
    if not 0 < number <= 0xFFFF:
        raise ValueError(f"TLV tag {tag!r} is outside 0x0001..0xFFFF")
    return number


class SmppSettings(BaseModel):
    """The ``[smpp]`` table."""

    model_config = ConfigDict(extra="forbid")

    binds: list[BindConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> SmppSettings:
        names = [b.name for b in self.binds]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"bind names must be unique: {', '.join(duplicates)}")
        return self
