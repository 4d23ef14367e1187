"""SMPP 3.4 numbers with names: command ids, command statuses and optional-parameter (TLV) tags; and
the three ways an ESME binds (here, not in ``pdu``, so that the settings can name them without loading
the codec: ``mogateway doctor``'s start).

Rules stated before the code:

* Every PDU starts with a 16-byte header (:data:`HEADER_LENGTH`): command_length, command_id,
  command_status and sequence_number, each a big-endian unsigned 32-bit integer.
* A response's command_id is its request's with bit 31 set (``0x80000000``).
* These enums name the values this gateway sends or acts on; a value outside them (a vendor status or
  tag) is still valid on the wire and is kept as a plain int.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

__all__ = ["HEADER", "HEADER_LENGTH", "BindMode", "CommandId", "Status", "TlvTag"]

HEADER_LENGTH: Final = 16
#: The header as it is packed: command_length, command_id, command_status, sequence_number.
HEADER: Final = struct.Struct(">IIII")


class CommandId(enum.IntEnum):
    """The command ids this codec speaks (responses have bit 31 set)."""

    GENERIC_NACK = 0x80000000
    BIND_RECEIVER = 0x00000001
    BIND_RECEIVER_RESP = 0x80000001
    BIND_TRANSMITTER = 0x00000002
    BIND_TRANSMITTER_RESP = 0x80000002
    SUBMIT_SM = 0x00000004
    SUBMIT_SM_RESP = 0x80000004
    DELIVER_SM = 0x00000005
    DELIVER_SM_RESP = 0x80000005
    UNBIND = 0x00000006
    UNBIND_RESP = 0x80000006
    BIND_TRANSCEIVER = 0x00000009
    BIND_TRANSCEIVER_RESP = 0x80000009
    ENQUIRE_LINK = 0x00000015
    ENQUIRE_LINK_RESP = 0x80000015


class Status(enum.IntEnum):
    """SMPP 3.4 command_status values (§5.1.3) the gateway sends or acts on."""

    ESME_ROK = 0x00
    ESME_RINVMSGLEN = 0x01
    ESME_RINVCMDLEN = 0x02
    ESME_RINVCMDID = 0x03
    ESME_RINVBNDSTS = 0x04
    ESME_RALYBND = 0x05
    ESME_RINVPRTFLG = 0x06
    ESME_RINVREGDLVFLG = 0x07
    ESME_RSYSERR = 0x08
    ESME_RINVSRCADR = 0x0A
    ESME_RINVDSTADR = 0x0B
    ESME_RINVMSGID = 0x0C
    ESME_RBINDFAIL = 0x0D
    ESME_RINVPASWD = 0x0E
    ESME_RINVSYSID = 0x0F
    ESME_RMSGQFUL = 0x14
    ESME_RINVSERTYP = 0x15
    ESME_RINVESMCLASS = 0x43
    ESME_RSUBMITFAIL = 0x45
    ESME_RINVSRCTON = 0x48
    ESME_RINVSRCNPI = 0x49
    ESME_RINVDSTTON = 0x50
    ESME_RINVDSTNPI = 0x51
    ESME_RINVSYSTYP = 0x53
    ESME_RTHROTTLED = 0x58
    ESME_RINVSCHED = 0x61
    ESME_RINVEXPIRY = 0x62
    ESME_RX_T_APPN = 0x64
    ESME_RX_P_APPN = 0x65
    ESME_RX_R_APPN = 0x66
    ESME_RINVOPTPARSTREAM = 0xC0
    ESME_ROPTPARNOTALLWD = 0xC1
    ESME_RINVPARLEN = 0xC2
    ESME_RMISSINGOPTPARAM = 0xC3
    ESME_RINVOPTPARAMVAL = 0xC4
    ESME_RDELIVERYFAILURE = 0xFE
    ESME_RUNKNOWNERR = 0xFF

    @classmethod
    def describe(cls, value: int) -> str:
        """``ESME_RTHROTTLED (0x58)`` for known values, ``0x1234`` for vendor ones."""
        try:
            return f"{cls(value).name} (0x{value:02X})"
        except ValueError:
            return f"0x{value:08X}"


class TlvTag(enum.IntEnum):
    """Optional parameter tags of SMPP 3.4 §5.3.2 (plus the India DLT tags most operators use)."""

    DEST_ADDR_SUBUNIT = 0x0005
    DEST_NETWORK_TYPE = 0x0006
    DEST_BEARER_TYPE = 0x0007
    DEST_TELEMATICS_ID = 0x0008
    SOURCE_ADDR_SUBUNIT = 0x000D
    SOURCE_NETWORK_TYPE = 0x000E
    SOURCE_BEARER_TYPE = 0x000F
    SOURCE_TELEMATICS_ID = 0x0010
    QOS_TIME_TO_LIVE = 0x0017
    PAYLOAD_TYPE = 0x0019
    ADDITIONAL_STATUS_INFO_TEXT = 0x001D
    RECEIPTED_MESSAGE_ID = 0x001E
    MS_MSG_WAIT_FACILITIES = 0x0030
    PRIVACY_INDICATOR = 0x0201
    SOURCE_SUBADDRESS = 0x0202
    DEST_SUBADDRESS = 0x0203
    USER_MESSAGE_REFERENCE = 0x0204
    USER_RESPONSE_CODE = 0x0205
    SOURCE_PORT = 0x020A
    DESTINATION_PORT = 0x020B
    SAR_MSG_REF_NUM = 0x020C
    LANGUAGE_INDICATOR = 0x020D
    SAR_TOTAL_SEGMENTS = 0x020E
    SAR_SEGMENT_SEQNUM = 0x020F
    SC_INTERFACE_VERSION = 0x0210
    CALLBACK_NUM_PRES_IND = 0x0302
    CALLBACK_NUM_ATAG = 0x0303
    NUMBER_OF_MESSAGES = 0x0304
    CALLBACK_NUM = 0x0381
    DPF_RESULT = 0x0420
    SET_DPF = 0x0421
    MS_AVAILABILITY_STATUS = 0x0422
    NETWORK_ERROR_CODE = 0x0423
    MESSAGE_PAYLOAD = 0x0424
    DELIVERY_FAILURE_REASON = 0x0425
    MORE_MESSAGES_TO_SEND = 0x0426
    MESSAGE_STATE = 0x0427
    USSD_SERVICE_OP = 0x0501
    DISPLAY_TIME = 0x1201
    SMS_SIGNAL = 0x1203
    MS_VALIDITY = 0x1204
    ALERT_ON_MESSAGE_DELIVERY = 0x130C
    ITS_REPLY_TYPE = 0x1380
    ITS_SESSION_INFO = 0x1383
    # India DLT (vendor range; the exact tags are per operator, these are the common ones).
    DLT_PE_ID = 0x1400
    DLT_TEMPLATE_ID = 0x1401


class BindMode(enum.StrEnum):
    """How an ESME binds: which direction of traffic the session carries."""

    TRANSMITTER = "transmitter"
    RECEIVER = "receiver"
    TRANSCEIVER = "transceiver"

    @property
    def can_transmit(self) -> bool:
        return self is not BindMode.RECEIVER

    @property
    def can_receive(self) -> bool:
        return self is not BindMode.TRANSMITTER
