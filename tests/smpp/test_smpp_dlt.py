"""DLT on the SMPP link (smpp/dlt.py, the bind's dlt_* settings): TLVs of a matched reply, DLT errors."""

from __future__ import annotations

import csv
import hashlib
import importlib.resources
from typing import Any

import pytest
from pydantic import ValidationError

from mogateway.config.smpp import BindConfig
from mogateway.core.dlt import DltIds
from mogateway.edges.dlt_errors import describe_status, parse_receipt, shipped_dlt_errors
from mogateway.smpp import receipt as pure_receipt
from mogateway.smpp.constants import Status
from mogateway.smpp.dlt import DltErrors, reply_tlvs
from mogateway.smpp.pdu import DeliverSm
from mogateway.smpp.tlv import Tlv

PE = "1201159178420181234"
TID = "1107161234567890001"
TM = "1702158080400000123"
IDS = DltIds(PE, TID)


def bind(**fields: Any) -> BindConfig:
    return BindConfig(name="airtel-dl", host="127.0.0.1", system_id="gw", **fields)


def test_a_matched_reply_puts_the_clients_ids_in_the_binds_tlvs() -> None:
    cfg = bind(reply_tlvs={"0x1400": "1101234567890123456", "0x1500": "x", "0x1401": "1107000000000000000"})
    tlvs = reply_tlvs(cfg.reply_tlv_list(), IDS)
    # Same tags replaced in place, the bind's other TLVs kept in their order.
    assert [(t.tag, t.value) for t in tlvs] == [(0x1400, PE.encode()), (0x1500, b"x"), (0x1401, TID.encode())]
    # An unmatched reply carries the bind's TLVs exactly.
    assert reply_tlvs(cfg.reply_tlv_list(), None) == cfg.reply_tlv_list()


def test_the_ids_go_in_the_tags_the_bind_names_and_the_chain_hash_when_configured() -> None:
    cfg = bind(dlt_pe_tlv="0x3000", dlt_template_tlv="0x3001", dlt_chain_tlv="0x1402", dlt_tm_id=TM)
    pe_tag, template_tag, chain_tag = cfg.dlt_tags()
    assert (pe_tag, template_tag, chain_tag) == (0x3000, 0x3001, 0x1402)
    tlvs = reply_tlvs(
        (), IDS, pe_tag=pe_tag, template_tag=template_tag, chain_tag=chain_tag, tm_id=cfg.dlt_tm_id
    )
    expected_hash = hashlib.sha256(f"{PE},{TM}".encode()).hexdigest().encode()
    assert tlvs == (Tlv(0x3000, PE.encode()), Tlv(0x3001, TID.encode()), Tlv(0x1402, expected_hash))


def test_dlt_tag_defaults_are_the_common_ones() -> None:
    assert bind().dlt_tags() == (0x1400, 0x1401, None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dlt_chain_tlv": "0x1402"}, "dlt_chain_tlv and dlt_tm_id go together"),
        ({"dlt_tm_id": TM}, "dlt_chain_tlv and dlt_tm_id go together"),
        ({"dlt_pe_tlv": "1400x"}, "must be hex like 0x1400"),
        ({"dlt_template_tlv": "0x10000"}, "outside 0x0001..0xFFFF"),
        ({"dlt_template_tlv": "0x1400"}, "must be different tags"),
        ({"dlt_chain_tlv": "0x1402", "dlt_tm_id": "17021 58"}, "not a telemarketer id"),
    ],
)
def test_bad_dlt_bind_settings_are_refused_at_start(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        bind(**fields)


def test_the_error_table_is_well_formed_and_says_what_is_unverified() -> None:
    resource = importlib.resources.files("mogateway") / "data" / "dlt_errors.csv"
    rows = list(csv.DictReader(resource.read_text(encoding="utf-8").splitlines()))
    assert len(rows) == len(shipped_dlt_errors())  # no code given twice
    assert {r["verified"] for r in rows} == {"yes", "no"}
    assert all(r["name"] and r["meaning"] for r in rows)
    provenance = (importlib.resources.files("mogateway") / "data" / "DLT_ERRORS_PROVENANCE.md").read_text()
    for row in rows:
        if row["verified"] == "no":
            assert row["code"] in provenance, f"{row['code']} is unverified but its source is not named"


def test_dlt_errors_are_described_where_known() -> None:
    describe_receipt_error = shipped_dlt_errors().describe_receipt_error
    assert (
        describe_receipt_error("630")
        == "DLT TEMPLATE_NOT_FOUND: no template with this id (or no template id TLV)"
    )
    assert describe_receipt_error("633") is not None and describe_receipt_error("633").endswith(
        ", unverified"
    )  # type: ignore[union-attr]
    assert describe_receipt_error("000") is None
    assert describe_receipt_error("xyz") is None
    assert describe_status(Status.ESME_RMISSINGOPTPARAM) is not None
    assert describe_status(Status.ESME_RTHROTTLED) is None


def test_a_receipt_with_a_dlt_error_says_what_it_means() -> None:
    text = (
        b"id:0a1b2c sub:001 dlvrd:000 submit date:2611051200 done date:2611051201 stat:UNDELIV err:630 text:"
    )
    receipt = parse_receipt(DeliverSm(esm_class=0x04, short_message=text))
    assert receipt is not None and receipt.outcome == "failed"
    assert (
        receipt.detail
        == "stat:UNDELIV err:630 (DLT TEMPLATE_NOT_FOUND: no template with this id (or no template id TLV))"
    )
    delivered = text.replace(b"UNDELIV", b"DELIVRD")
    receipt = parse_receipt(DeliverSm(esm_class=0x04, short_message=delivered))
    assert receipt is not None and receipt.detail == "stat:DELIVRD err:630"  # a delivered reply has no error


def test_the_table_is_built_from_rows_already_read() -> None:
    errors = DltErrors.from_rows(
        [
            {"where": "receipt", "code": "630", "name": "T", "meaning": "no such template", "verified": "no"},
            {"where": "submit_sm_resp", "code": "0xC3", "name": "M", "meaning": "missing", "verified": "yes"},
        ]
    )
    assert len(errors) == 2
    assert errors.describe_receipt_error(" 630 ") == "DLT T: no such template, unverified"
    assert errors.describe_status(0xC3) == "DLT M: missing"
    with pytest.raises(ValueError, match=r"t\.csv: unknown place 'deliver_sm'"):
        DltErrors.from_rows([{"where": "deliver_sm", "code": "1"}], source="t.csv")


def test_the_sans_io_receipt_parser_describes_errors_only_from_the_table_it_is_given() -> None:
    text = b"id:0a1b2c sub:001 dlvrd:000 stat:UNDELIV err:630 text:"
    pdu = DeliverSm(esm_class=0x04, short_message=text)
    bare = pure_receipt.parse_receipt(pdu)
    assert bare is not None and bare.detail == "stat:UNDELIV err:630"
    own = DltErrors.from_rows(
        [{"where": "receipt", "code": "630", "name": "X", "meaning": "ours", "verified": "yes"}]
    )
    described = pure_receipt.parse_receipt(pdu, own)
    assert described is not None and described.detail == "stat:UNDELIV err:630 (DLT X: ours)"
