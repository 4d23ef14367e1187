"""Reading DLT portal exports (core/dlt_csv.py): headers, encodings, and a reason for every refused row."""

from __future__ import annotations

import codecs
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mogateway.core.dlt_csv import DltCsvError, _lines, decode_csv, read_dlt_csv

PE = "1201159178420181234"
OTHER_PE = "1201159178420189999"

# The shape of a portal's "Content Templates" export: a title row, then the header, quoted multi-line
# content, statuses of every kind, and the ways Excel mangles 19-digit ids.
PORTAL_EXPORT = f"""Content Template Report,,,,,,
Template Id,Template Name,Template Content,Template Type,Header,Status,Entity Id
1107161234567890001,balance,Your balance is {{#var#}}.,Service Implicit,MOGWAY,Approved,{PE}
1107161234567890002,otp,"Your OTP is {{#numeric#}}.
Do not share it.",Transactional,MOGWAY,Active,{PE}
1107161234567890003,promo,Big sale {{#var#}},Promotional,MOGWAY,Rejected,{PE}
1.10716E+18,lost,Hello {{#var#}},Service Implicit,MOGWAY,Approved,{PE}
'1107161234567890004,quoted,Thanks for voting {{#var#}},Service Implicit,MOGWAY,Approved,{PE}
="1107161234567890005",formula,Ticket {{#alphanumeric#}} booked,Service Implicit,MOGWAY,Approved,{PE}
1107161234567890006,typo,Your OTP is {{#VAR#}},Service Implicit,MOGWAY,Approved,{PE}
1107161234567890007,other,Welcome {{#var#}},Service Implicit,MOGWAY,Approved,{OTHER_PE}
11071612345,short,Short id {{#var#}},Service Implicit,MOGWAY,Approved,{PE}
1107161234567890001,balance again,Your balance is {{#var#}}.,Service Implicit,MOGWAY,Approved,{PE}
1107161234567890002,otp changed,Your OTP is {{#var#}},Service Implicit,MOGWAY,Approved,{PE}
,,,,,,
1107161234567890008,novar,{{#var#}},Service Implicit,MOGWAY,Approved,{PE}
"""


def test_a_portal_export_is_read_with_a_reason_for_every_refused_row() -> None:
    result = read_dlt_csv(PORTAL_EXPORT, pe_id=PE)
    assert result.columns == {
        "template_id": "Template Id",
        "text": "Template Content",
        "status": "Status",
        "entity_id": "Entity Id",
        "name": "Template Name",
    }
    imported = {t.template_id: (line, t.text) for line, t in result.templates}
    assert imported == {
        "1107161234567890001": (3, "Your balance is {#var#}."),
        "1107161234567890002": (4, "Your OTP is {#numeric#}.\nDo not share it."),
        "1107161234567890004": (8, "Thanks for voting {#var#}"),
        "1107161234567890005": (9, "Ticket {#alphanumeric#} booked"),
    }
    refused = {(r.line, r.template_id): r.reason for r in result.refused}
    assert refused.keys() == {
        (6, "1107161234567890003"),
        (7, "1.10716E+18"),
        (10, "1107161234567890006"),
        (11, "1107161234567890007"),
        (12, "11071612345"),
        (14, "1107161234567890002"),
        (16, "1107161234567890008"),
    }
    assert "status 'Rejected'" in refused[(6, "1107161234567890003")]
    assert "Excel rounded" in refused[(7, "1.10716E+18")]
    assert "'{#VAR#}'" in refused[(10, "1107161234567890006")]
    assert f"belongs to entity {OTHER_PE}" in refused[(11, "1107161234567890007")]
    assert "19 digits" in refused[(12, "11071612345")]
    assert "same id is on line 4 with another text" in refused[(14, "1107161234567890002")]
    assert "no fixed text" in refused[(16, "1107161234567890008")]
    # Line 13 repeats line 3 exactly: one template, nothing refused.
    assert result.entity_ids == {PE, OTHER_PE}
    assert result.rows == 12  # the empty row is not one


def test_without_the_clients_pe_id_every_entity_is_accepted_and_named() -> None:
    result = read_dlt_csv(PORTAL_EXPORT)
    assert "1107161234567890007" in {t.template_id for _, t in result.templates}
    assert result.entity_ids == {PE, OTHER_PE}


def test_semicolons_tabs_and_other_header_names_are_understood() -> None:
    semicolons = "CONTENT_TEMPLATE_ID;Message;Template Status\n1107161234567890001;Bal {#var#};APPROVED\n"
    (only,) = read_dlt_csv(semicolons).templates
    assert only[1].template_id == "1107161234567890001" and only[1].text == "Bal {#var#}"
    tabs = "DLT Template ID\tTemplate Message\n1107161234567890001\tHi, {#var#}; bye\n"
    (only,) = read_dlt_csv(tabs).templates
    assert only[1].text == "Hi, {#var#}; bye"


def test_a_file_without_a_status_column_imports_every_valid_row() -> None:
    text = "template_id,text\n1107161234567890001,Bal {#var#}\n1107161234567890002,OTP {#numeric#}\n"
    assert len(read_dlt_csv(text).templates) == 2


def test_a_file_without_the_columns_is_refused_as_a_whole() -> None:
    with pytest.raises(DltCsvError, match="no header row naming a template id column"):
        read_dlt_csv("msisdn,operator\n919810012345,airtel\n")
    with pytest.raises(DltCsvError):
        read_dlt_csv("")


def test_encodings() -> None:
    text = "Template ID,Template Content\n1107161234567890001,आपका बैलेंस {#var#} है\n"
    assert decode_csv(text.encode("utf-8")) == text
    assert decode_csv(codecs.BOM_UTF8 + text.encode("utf-8")) == text
    assert decode_csv(codecs.BOM_UTF16_LE + text.encode("utf-16-le")) == text
    with pytest.raises(DltCsvError, match="CSV UTF-8"):
        decode_csv(text.encode("utf-16-le"))  # no BOM: not guessed
    with pytest.raises(DltCsvError, match="not UTF-8"):
        decode_csv("Template ID,Template Content\n1,caf\xe9\n".encode("cp1252"))
    (only,) = read_dlt_csv(decode_csv(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))).templates
    assert only[1].text == "आपका बैलेंस {#var#} है"


def test_templates_are_checked_as_the_clients_replies_are_compared() -> None:
    text = "Template ID,Template Content\n1107161234567890001,Line one\\n{#var#}\n"
    (only,) = read_dlt_csv(text, unescape_newlines=True).templates
    assert only[1].text == "Line one\\n{#var#}"  # stored as the portal has it; unescaped when compiled


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from(list('ab,"\r\n\x85\u2028\x0b\x1c')), max_size=40))
def test_lines_are_cut_exactly_as_a_text_stream_cuts_them(text: str) -> None:
    # The reader feeds csv lines without io: the cuts (and so the line numbers in refusals) must be
    # the ones io.StringIO(text, newline="") makes, and nothing csv keeps inside a cell may be cut.
    assert list(_lines(text)) == list(io.StringIO(text, newline=""))
