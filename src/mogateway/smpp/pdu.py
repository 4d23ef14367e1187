"""SMPP 3.4 PDUs as data, and their exact wire form (sans-IO: bytes in, bytes out).

Rules stated before the code:

* A PDU is a 16-byte header (command_length, command_id, command_status, sequence_number, big-endian
  unsigned 32-bit; see :mod:`mogateway.smpp.constants`) followed by a body. ``command_length`` counts
  the header too.
* Every PDU here is a small immutable dataclass (``core.immutable``); :func:`encode` turns it into
  bytes and :func:`decode` turns one complete PDU back (:mod:`mogateway.smpp.framer` cuts a stream into
  complete PDUs).
* Optional parameters are kept as raw :class:`~mogateway.smpp.tlv.Tlv` values in the order they arrived
  (:mod:`mogateway.smpp.tlv`).
* Malformed input raises :class:`~mogateway.smpp.fields.PduError` carrying the SMPP status to answer in
  a generic_nack (or in the response), and whether the stream can continue (``fatal``: the framing
  itself is lost). Bodies are read and written field by field with :mod:`mogateway.smpp.fields`.
* Responses with a non-zero status may arrive with an empty body (SMPP 3.4 §3.3); they decode to the
  same class with empty fields.
"""

from __future__ import annotations

from dataclasses import field, fields
from typing import ClassVar, Final, TypeAlias

from mogateway.core.immutable import immutable
from mogateway.smpp.constants import HEADER, HEADER_LENGTH, BindMode, CommandId, Status
from mogateway.smpp.fields import BodyReader, PduError, encode_cstring
from mogateway.smpp.tlv import Tlv, encode_tlvs, find_tlv

__all__ = [
    "Bind",
    "BindMode",
    "BindResp",
    "DeliverSm",
    "DeliverSmResp",
    "EnquireLink",
    "EnquireLinkResp",
    "GenericNack",
    "Pdu",
    "PduError",
    "SubmitSm",
    "SubmitSmResp",
    "Unbind",
    "UnbindResp",
    "decode",
    "encode",
    "response_class",
    "with_sequence",
]


_BIND_IDS: Final = {
    BindMode.TRANSMITTER: CommandId.BIND_TRANSMITTER,
    BindMode.RECEIVER: CommandId.BIND_RECEIVER,
    BindMode.TRANSCEIVER: CommandId.BIND_TRANSCEIVER,
}
_BIND_MODES: Final = {int(v): k for k, v in _BIND_IDS.items()}
_BIND_RESP_MODES: Final = {int(v) | 0x80000000: k for k, v in _BIND_IDS.items()}


# -------------------------------------------------------------------------------------------- PDUs


@immutable(kw_only=True)
class Bind:
    """bind_transmitter / bind_receiver / bind_transceiver (which one is ``mode``)."""

    mode: BindMode
    system_id: str
    password: str = field(default="", repr=False)
    system_type: str = ""
    interface_version: int = 0x34
    addr_ton: int = 0
    addr_npi: int = 0
    address_range: str = ""
    sequence: int = 0

    @property
    def command_id(self) -> int:
        return int(_BIND_IDS[self.mode])

    @property
    def status(self) -> int:
        return 0

    def body(self) -> bytes:
        return b"".join(
            (
                encode_cstring(self.system_id, "system_id", 16),
                encode_cstring(self.password, "password", 9),
                encode_cstring(self.system_type, "system_type", 13),
                bytes((self.interface_version, self.addr_ton, self.addr_npi)),
                encode_cstring(self.address_range, "address_range", 41),
            )
        )

    @classmethod
    def parse(cls, r: BodyReader, command_id: int, status: int) -> Bind:
        system_id = r.cstring("system_id", 16, Status.ESME_RINVSYSID)
        password = r.cstring("password", 9, Status.ESME_RINVPASWD)
        system_type = r.cstring("system_type", 13, Status.ESME_RINVSYSTYP)
        version, ton, npi = r.u8("interface_version"), r.u8("addr_ton"), r.u8("addr_npi")
        address_range = r.cstring("address_range", 41, Status.ESME_RINVMSGLEN)
        # SMPP 3.4 binds carry no TLVs; tolerate (and drop) trailing bytes rather than refuse a bind.
        return cls(
            mode=_BIND_MODES[command_id],
            system_id=system_id,
            password=password,
            system_type=system_type,
            interface_version=version,
            addr_ton=ton,
            addr_npi=npi,
            address_range=address_range,
            sequence=r.sequence,
        )


@immutable(kw_only=True)
class BindResp:
    """The answer to a bind; ``sc_interface_version`` arrives as a TLV."""

    mode: BindMode
    system_id: str = ""
    status: int = 0
    tlvs: tuple[Tlv, ...] = ()
    sequence: int = 0

    @property
    def command_id(self) -> int:
        return int(_BIND_IDS[self.mode]) | 0x80000000

    def body(self) -> bytes:
        return encode_cstring(self.system_id, "system_id", 16) + encode_tlvs(self.tlvs)

    @classmethod
    def parse(cls, r: BodyReader, command_id: int, status: int) -> BindResp:
        mode = _BIND_RESP_MODES[command_id]
        if not r.remaining and status:
            return cls(mode=mode, status=status, sequence=r.sequence)
        system_id = r.cstring("system_id", 16, Status.ESME_RINVSYSID)
        return cls(mode=mode, system_id=system_id, status=status, tlvs=r.tlvs(), sequence=r.sequence)


@immutable(kw_only=True)
class _HeaderOnly:
    """A PDU that is only a header (unbind, enquire_link and their responses, generic_nack)."""

    COMMAND_ID: ClassVar[CommandId]
    status: int = 0
    sequence: int = 0

    @property
    def command_id(self) -> int:
        return int(self.COMMAND_ID)

    def body(self) -> bytes:
        return b""

    @classmethod
    def parse(cls, r: BodyReader, command_id: int, status: int) -> _HeaderOnly:
        # A body on a header-only PDU is a length error (§3.2), but it is harmless: ignore it.
        return cls(status=status, sequence=r.sequence)


@immutable(kw_only=True)
class Unbind(_HeaderOnly):
    """unbind: either side ends the session."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.UNBIND


@immutable(kw_only=True)
class UnbindResp(_HeaderOnly):
    """unbind_resp."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.UNBIND_RESP


@immutable(kw_only=True)
class EnquireLink(_HeaderOnly):
    """enquire_link: a keepalive either side may send."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.ENQUIRE_LINK


@immutable(kw_only=True)
class EnquireLinkResp(_HeaderOnly):
    """enquire_link_resp."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.ENQUIRE_LINK_RESP


@immutable(kw_only=True)
class GenericNack(_HeaderOnly):
    """generic_nack: the answer to a PDU that could not be understood."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.GENERIC_NACK


@immutable(kw_only=True)
class _ShortMessage:
    """The body shared by submit_sm and deliver_sm (§4.4.1, §4.6.1)."""

    COMMAND_ID: ClassVar[CommandId]
    service_type: str = ""
    source_addr_ton: int = 0
    source_addr_npi: int = 0
    source_addr: str = ""
    dest_addr_ton: int = 0
    dest_addr_npi: int = 0
    destination_addr: str = ""
    esm_class: int = 0
    protocol_id: int = 0
    priority_flag: int = 0
    schedule_delivery_time: str = ""
    validity_period: str = ""
    registered_delivery: int = 0
    replace_if_present_flag: int = 0
    data_coding: int = 0
    sm_default_msg_id: int = 0
    short_message: bytes = b""
    tlvs: tuple[Tlv, ...] = ()
    sequence: int = 0

    @property
    def command_id(self) -> int:
        return int(self.COMMAND_ID)

    @property
    def status(self) -> int:
        return 0

    def tlv(self, tag: int) -> Tlv | None:
        """The first TLV with ``tag``, or None."""
        return find_tlv(self.tlvs, tag)

    def body(self) -> bytes:
        if len(self.short_message) > 254:
            raise ValueError("short_message is longer than 254 bytes; use message_payload")
        return b"".join(
            (
                encode_cstring(self.service_type, "service_type", 6),
                bytes((self.source_addr_ton, self.source_addr_npi)),
                encode_cstring(self.source_addr, "source_addr", 21),
                bytes((self.dest_addr_ton, self.dest_addr_npi)),
                encode_cstring(self.destination_addr, "destination_addr", 21),
                bytes((self.esm_class, self.protocol_id, self.priority_flag)),
                encode_cstring(self.schedule_delivery_time, "schedule_delivery_time", 17),
                encode_cstring(self.validity_period, "validity_period", 17),
                bytes(
                    (
                        self.registered_delivery,
                        self.replace_if_present_flag,
                        self.data_coding,
                        self.sm_default_msg_id,
                        len(self.short_message),
                    )
                ),
                self.short_message,
                encode_tlvs(self.tlvs),
            )
        )

    @classmethod
    def parse(cls, r: BodyReader, command_id: int, status: int) -> _ShortMessage:
        fast = cls._parse_well_formed(r)
        if fast is not None:
            return fast
        return cls._parse_fields(r)

    @classmethod
    def _parse_fields(cls, r: BodyReader) -> _ShortMessage:
        """Field by field, so that what is wrong is named with its own status."""
        service_type = r.cstring("service_type", 6, Status.ESME_RINVSERTYP)
        src_ton, src_npi = r.u8("source_addr_ton"), r.u8("source_addr_npi")
        # Some SMSCs send longer addresses (alphanumeric, with prefixes); 21 is §4.4.1's limit.
        source_addr = r.cstring("source_addr", 21, Status.ESME_RINVSRCADR)
        dst_ton, dst_npi = r.u8("dest_addr_ton"), r.u8("dest_addr_npi")
        destination_addr = r.cstring("destination_addr", 21, Status.ESME_RINVDSTADR)
        esm_class, protocol_id, priority = r.u8("esm_class"), r.u8("protocol_id"), r.u8("priority_flag")
        schedule = r.cstring("schedule_delivery_time", 17, Status.ESME_RINVSCHED)
        validity = r.cstring("validity_period", 17, Status.ESME_RINVEXPIRY)
        registered, replace_flag = r.u8("registered_delivery"), r.u8("replace_if_present_flag")
        data_coding, default_id = r.u8("data_coding"), r.u8("sm_default_msg_id")
        sm_length = r.u8("sm_length")
        short_message = r.octets("short_message", sm_length)
        return cls(
            service_type=service_type,
            source_addr_ton=src_ton,
            source_addr_npi=src_npi,
            source_addr=source_addr,
            dest_addr_ton=dst_ton,
            dest_addr_npi=dst_npi,
            destination_addr=destination_addr,
            esm_class=esm_class,
            protocol_id=protocol_id,
            priority_flag=priority,
            schedule_delivery_time=schedule,
            validity_period=validity,
            registered_delivery=registered,
            replace_if_present_flag=replace_flag,
            data_coding=data_coding,
            sm_default_msg_id=default_id,
            short_message=short_message,
            tlvs=r.tlvs(),
            sequence=r.sequence,
        )

    @classmethod
    def _parse_well_formed(cls, r: BodyReader) -> _ShortMessage | None:
        """The PDU when every mandatory field is present and within its size (the usual case), read
        with a few ``find`` calls; None sends the body through the field-by-field reader instead.
        It accepts exactly what that reader accepts (same limits: NUL included, 6/21/21/17/17)."""
        data = r.data
        find = data.find
        end_service = find(b"\x00")
        if not 0 <= end_service <= 5:
            return None
        start_source = end_service + 3  # after the NUL, source_addr_ton and source_addr_npi
        end_source = find(b"\x00", start_source)
        if not 0 <= end_source - start_source <= 20 or end_source < 0:
            return None
        start_dest = end_source + 3  # dest_addr_ton, dest_addr_npi
        end_dest = find(b"\x00", start_dest)
        if not 0 <= end_dest - start_dest <= 20 or end_dest < 0:
            return None
        start_schedule = end_dest + 4  # esm_class, protocol_id, priority_flag
        end_schedule = find(b"\x00", start_schedule)
        if not 0 <= end_schedule - start_schedule <= 16 or end_schedule < 0:
            return None
        end_validity = find(b"\x00", end_schedule + 1)
        if not 0 <= end_validity - end_schedule - 1 <= 16 or end_validity < 0:
            return None
        fixed = end_validity + 1
        if fixed + 5 > len(data):
            return None
        registered, replace_flag, data_coding, default_id, sm_length = data[fixed : fixed + 5]
        end_message = fixed + 5 + sm_length
        if end_message > len(data):
            return None
        r.pos = end_message
        return cls(
            service_type=data[:end_service].decode("latin-1"),
            source_addr_ton=data[end_service + 1],
            source_addr_npi=data[end_service + 2],
            source_addr=data[start_source:end_source].decode("latin-1"),
            dest_addr_ton=data[end_source + 1],
            dest_addr_npi=data[end_source + 2],
            destination_addr=data[start_dest:end_dest].decode("latin-1"),
            esm_class=data[end_dest + 1],
            protocol_id=data[end_dest + 2],
            priority_flag=data[end_dest + 3],
            schedule_delivery_time=data[start_schedule:end_schedule].decode("latin-1"),
            validity_period=data[end_schedule + 1 : end_validity].decode("latin-1"),
            registered_delivery=registered,
            replace_if_present_flag=replace_flag,
            data_coding=data_coding,
            sm_default_msg_id=default_id,
            short_message=data[fixed + 5 : end_message],
            tlvs=r.tlvs() if end_message < len(data) else (),
            sequence=r.sequence,
        )


@immutable(kw_only=True)
class SubmitSm(_ShortMessage):
    """submit_sm: a message from the ESME to a handset."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.SUBMIT_SM


@immutable(kw_only=True)
class DeliverSm(_ShortMessage):
    """deliver_sm: an MO or a delivery receipt from the SMSC."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.DELIVER_SM

    @property
    def is_receipt(self) -> bool:
        """esm_class message type 0x04 (SMSC delivery receipt) or 0x20 (intermediate notification)."""
        return self.esm_class & 0x3C in (0x04, 0x20)


@immutable(kw_only=True)
class _MessageIdResp:
    """submit_sm_resp / deliver_sm_resp: a message id (unused in deliver_sm_resp) and a status."""

    COMMAND_ID: ClassVar[CommandId]
    message_id: str = ""
    status: int = 0
    sequence: int = 0

    @property
    def command_id(self) -> int:
        return int(self.COMMAND_ID)

    def body(self) -> bytes:
        return encode_cstring(self.message_id, "message_id", 65)

    @classmethod
    def parse(cls, r: BodyReader, command_id: int, status: int) -> _MessageIdResp:
        if not r.remaining:  # error responses (and some deliver_sm_resp) carry no body at all
            return cls(status=status, sequence=r.sequence)
        message_id = r.cstring("message_id", 65, Status.ESME_RINVMSGID)
        # SMPP 5.0 peers may append TLVs to responses; 3.4 has none to keep, so skip them.
        return cls(message_id=message_id, status=status, sequence=r.sequence)


@immutable(kw_only=True)
class SubmitSmResp(_MessageIdResp):
    """submit_sm_resp: the SMSC's message id for the submitted part."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.SUBMIT_SM_RESP


@immutable(kw_only=True)
class DeliverSmResp(_MessageIdResp):
    """deliver_sm_resp: the ESME's acknowledgement of a deliver_sm."""

    COMMAND_ID: ClassVar[CommandId] = CommandId.DELIVER_SM_RESP


Pdu: TypeAlias = (
    Bind
    | BindResp
    | Unbind
    | UnbindResp
    | EnquireLink
    | EnquireLinkResp
    | GenericNack
    | SubmitSm
    | SubmitSmResp
    | DeliverSm
    | DeliverSmResp
)

_PARSERS: Final[dict[int, type[Bind | BindResp | _HeaderOnly | _ShortMessage | _MessageIdResp]]] = {
    CommandId.BIND_RECEIVER: Bind,
    CommandId.BIND_TRANSMITTER: Bind,
    CommandId.BIND_TRANSCEIVER: Bind,
    CommandId.BIND_RECEIVER_RESP: BindResp,
    CommandId.BIND_TRANSMITTER_RESP: BindResp,
    CommandId.BIND_TRANSCEIVER_RESP: BindResp,
    CommandId.UNBIND: Unbind,
    CommandId.UNBIND_RESP: UnbindResp,
    CommandId.ENQUIRE_LINK: EnquireLink,
    CommandId.ENQUIRE_LINK_RESP: EnquireLinkResp,
    CommandId.GENERIC_NACK: GenericNack,
    CommandId.SUBMIT_SM: SubmitSm,
    CommandId.SUBMIT_SM_RESP: SubmitSmResp,
    CommandId.DELIVER_SM: DeliverSm,
    CommandId.DELIVER_SM_RESP: DeliverSmResp,
}

_RESPONSES: Final[dict[type[object], type[object]]] = {
    Unbind: UnbindResp,
    EnquireLink: EnquireLinkResp,
    SubmitSm: SubmitSmResp,
    DeliverSm: DeliverSmResp,
}


def response_class(request: Pdu) -> type[Pdu] | None:
    """The class answering ``request`` (None for responses). Binds answer with :class:`BindResp`."""
    if isinstance(request, Bind):
        return BindResp
    return _RESPONSES.get(type(request))  # type: ignore[return-value]


def encode(pdu: Pdu) -> bytes:
    """The wire bytes of ``pdu`` (raises ValueError when a field does not fit SMPP 3.4)."""
    body = pdu.body()
    return HEADER.pack(HEADER_LENGTH + len(body), pdu.command_id, pdu.status, pdu.sequence) + body


def decode(data: bytes) -> Pdu:
    """One complete PDU from exactly ``data`` (header included). Raises :class:`PduError`."""
    if len(data) < HEADER_LENGTH:
        raise PduError(Status.ESME_RINVCMDLEN, f"{len(data)} bytes is shorter than a header", fatal=True)
    length, command_id, status, sequence = HEADER.unpack_from(data)
    if length != len(data):
        raise PduError(
            Status.ESME_RINVCMDLEN,
            f"command_length {length} but {len(data)} bytes given",
            sequence=sequence,
            command_id=command_id,
            fatal=True,
        )
    parser = _PARSERS.get(command_id)
    if parser is None:
        raise PduError(
            Status.ESME_RINVCMDID,
            f"unknown command_id 0x{command_id:08X}",
            sequence=sequence,
            command_id=command_id,
        )
    reader = BodyReader(data[HEADER_LENGTH:], command_id, sequence)
    return parser.parse(reader, command_id, status)  # type: ignore[return-value]


_FIELD_NAMES: dict[type[object], tuple[str, ...]] = {}


def with_sequence(pdu: Pdu, sequence: int) -> Pdu:
    """A copy of ``pdu`` carrying ``sequence``.

    Copies the fields of the (already valid) PDU instead of running ``dataclasses.replace``, which
    looks the fields up and validates again: this runs once per submit_sm.
    """
    cls = type(pdu)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls) if f.name != "sequence")
    copy = object.__new__(cls)
    for name in names:
        setattr(copy, name, getattr(pdu, name))
    setattr(copy, "sequence", sequence)  # noqa: B010 (the field is read-only to the type checker only)
    return copy
