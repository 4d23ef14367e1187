"""DLT over real sockets: SMSC simulator → gateway (SMPP bind) → callback app → reply submit_sm, where every
part of a matched reply carries the client's PE id, the template id and the chain hash; a reply that
matches nothing is blocked (nothing reaches the SMSC) or sent with the bind's own TLVs; templates come
from a DLT portal's CSV; operators' DLT error codes come back with their meaning.

One ``mogateway serve`` for the module, as it runs by default (several workers, at least two), with two
binds in its TOML settings — one splitting long replies with a UDH, one with SAR TLVs — each to a
simulated SMSC of its own; each bind lives on one worker or another, the tests never ask which. Each
test registers its client on a shortcode of its own and reads only its own messages and submits."""

from __future__ import annotations

import hashlib
import itertools
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import ServeGateway, events, metric, state_from_timeline, wait_until
from test_smpp_end_to_end import SmscThread, smpp_gateway

from mogateway.smpp.constants import Status, TlvTag
from mogateway.testing.recorder import Answer, CallbackRecorder
from mogateway.testing.smsc import ReceivedSubmit

MSISDN = "919810012345"
PE = "1201159178420181234"
TM = "1702158080400000123"
CHAIN = hashlib.sha256(f"{PE},{TM}".encode()).hexdigest()
BIND_PE, BIND_TEMPLATE = "1101234567890123456", "1107123456789012345"  # the bind's defaults

T_BAL = "1107161234567890001"
T_STATEMENT = "1107161234567890002"
T_HINDI = "1107161234567890003"
T_HINDI_LONG = "1107161234567890004"

TEMPLATES = {
    T_BAL: "Your balance is Rs {#numeric#}.",
    T_STATEMENT: (
        "Dear customer, your statement for {#var#} is ready. Total due Rs {#numeric#} by {#var#}. Pay on "
        "time to avoid a late fee; for help call our support desk any day between 9 am and 9 pm. Thank "
        "you for banking with us."
    ),
    T_HINDI: "आपका बैलेंस {#var#} रुपये है।",
    T_HINDI_LONG: (
        "प्रिय ग्राहक, {#var#} का आपका विवरण तैयार है। कुल देय राशि {#numeric#} रुपये है। "
        "विलंब शुल्क से बचने के लिए समय पर भुगतान करें। धन्यवाद।"
    ),
}
REPLIES = {
    T_BAL: "Your balance is Rs 4520.",
    T_STATEMENT: TEMPLATES[T_STATEMENT]
    .replace("{#var#}", "March 2026", 1)
    .replace("{#numeric#}", "4520")
    .replace("{#var#}", "10 April"),
    T_HINDI: "आपका बैलेंस ₹4,520 रुपये है।",
    T_HINDI_LONG: TEMPLATES[T_HINDI_LONG].replace("{#var#}", "मार्च 2026").replace("{#numeric#}", "4520"),
}


SPLITS = ("udh", "sar")
_shortcodes = itertools.count(56_700)


@pytest.fixture(scope="module")
def smscs() -> Iterator[dict[str, SmscThread]]:
    """A simulated SMSC for each bind (split -> simulator)."""
    sims = {split: SmscThread() for split in SPLITS}
    yield sims
    for sim in sims.values():
        sim.close()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, smscs: dict[str, SmscThread]) -> Iterator[ServeGateway]:
    binds = [
        {
            "name": f"airtel-{split}",
            "host": "127.0.0.1",
            "port": sim.smsc.port,
            "system_id": "gw",
            "password": "pw",
            "operator": "airtel",
            "split": split,
            "reply_tlvs": {"0x1400": BIND_PE, "0x1500": "vendor", "0x1401": BIND_TEMPLATE},
            "dlt_chain_tlv": "0x1402",
            "dlt_tm_id": TM,
        }
        for split, sim in smscs.items()
    ]
    with smpp_gateway(tmp_path_factory.mktemp("dlt-smpp"), *binds, reply_max_parts=6) as gateway:
        for sim in smscs.values():
            sim.run(sim.smsc.wait_bound(20))
        yield gateway


@pytest.fixture
def smsc(smscs: dict[str, SmscThread]) -> SmscThread:
    """The SMSC of the UDH bind (the tests that do not care how long replies are split)."""
    return smscs["udh"]


@pytest.fixture
def sc() -> str:
    """A shortcode no other test of the module uses."""
    return str(next(_shortcodes))


@pytest.fixture
def app() -> Iterator[CallbackRecorder]:
    with CallbackRecorder.in_thread(Answer.text("OK")) as recorder:
        yield recorder


def submits_for(smsc: SmscThread, sc: str, count: int, timeout: float = 10.0) -> list[ReceivedSubmit]:
    """The submit_sm the SMSC received for replies from ``sc``, once there are ``count``."""

    def mine() -> list[ReceivedSubmit]:
        return [s for s in list(smsc.smsc.submits) if s.pdu.source_addr == sc]

    wait_until(lambda: len(mine()) >= count, f"{count} submit_sm from {sc}", timeout)
    return mine()


def dlt_client(gw: ServeGateway, app: CallbackRecorder, sc: str, *, enforce: bool) -> str:
    cid = str(gw.add_client(shortcodes=[sc], callback_url=app.url, dlt_pe_id=PE, dlt_enforce=enforce)["id"])
    for template_id, text in TEMPLATES.items():
        resp = gw.admin(
            "POST", f"/v1/clients/{cid}/dlt-templates", json={"template_id": template_id, "text": text}
        )
        assert resp.status_code == 201, resp.text
    return cid


def one_reply(gw: ServeGateway, smsc: SmscThread, sc: str, mo: str) -> dict[str, Any]:
    """Inject one MO to ``sc`` through ``smsc``'s bind; its message once it reached a final state."""
    smsc.run(smsc.smsc.wait_bound(10))
    assert smsc.run(smsc.smsc.inject_mo(MSISDN, sc, mo)) == [0]
    (listed,) = gw.admin("GET", "/v1/messages", params={"shortcode": sc}).json()["messages"]
    final = frozenset({"replied", "delivered", "undelivered", "reply_blocked", "reply_failed"})
    message: dict[str, Any] = gw.wait_state(listed["id"], final, timeout=15)
    return message


def tlvs(submit: ReceivedSubmit) -> list[tuple[int, bytes]]:
    return [(t.tag, t.value) for t in submit.pdu.tlvs]


def dlt_tlvs(template_id: str) -> list[tuple[int, bytes]]:
    """The bind's reply_tlvs with the client's ids put in place, then the chain hash."""
    return [
        (0x1400, PE.encode()),
        (0x1500, b"vendor"),
        (0x1401, template_id.encode()),
        (0x1402, CHAIN.encode()),
    ]


@pytest.mark.parametrize(
    ("template_id", "split", "data_coding", "parts"),
    [
        (T_BAL, "udh", 0, 1),  # GSM-7, one part
        (T_STATEMENT, "udh", 0, 2),  # GSM-7, two parts with a UDH
        (T_HINDI, "udh", 8, 1),  # UCS-2, one part
        (T_HINDI_LONG, "udh", 8, 2),  # UCS-2, two parts with a UDH
        (T_STATEMENT, "sar", 0, 2),  # GSM-7, two parts with SAR TLVs
        (T_HINDI_LONG, "sar", 8, 2),  # UCS-2, two parts with SAR TLVs
    ],
)
def test_every_part_of_a_matched_reply_carries_the_dlt_tlvs(
    gw: ServeGateway,
    smscs: dict[str, SmscThread],
    sc: str,
    app: CallbackRecorder,
    template_id: str,
    split: str,
    data_coding: int,
    parts: int,
) -> None:
    smsc = smscs[split]  # the MO comes in on that bind, and its reply goes out on it
    dlt_client(gw, app, sc, enforce=True)
    app.answer = Answer.text(REPLIES[template_id])
    message = one_reply(gw, smsc, sc, "BAL")
    submits = submits_for(smsc, sc, parts)
    assert len(submits) == parts
    for number, submit in enumerate(submits, start=1):
        assert submit.pdu.data_coding == data_coding
        own = [(tag, value) for tag, value in tlvs(submit) if tag >= 0x1400]
        assert own == dlt_tlvs(template_id), f"part {number}"
        if parts > 1 and split == "udh":
            assert submit.pdu.esm_class & 0x40 and submit.pdu.short_message[5] == number
        if split == "sar":
            sar = {tag: value for tag, value in tlvs(submit) if tag < 0x1400}
            assert sar[TlvTag.SAR_SEGMENT_SEQNUM] == bytes([number])
    (submitted,) = events(message, "reply_submitted")
    assert (submitted["dlt_template"], submitted["parts"]) == (template_id, parts)
    assert message["state"] in ("replied", "delivered") and state_from_timeline(message) == message["state"]


def test_a_reply_matching_nothing_is_blocked_and_never_reaches_the_smsc(
    gw: ServeGateway, smsc: SmscThread, sc: str, app: CallbackRecorder
) -> None:
    cid = dlt_client(gw, app, sc, enforce=True)
    app.answer = Answer.text("Your balance is Rs 4,520.")  # a comma: not {#numeric#}
    message = one_reply(gw, smsc, sc, "BAL")
    assert message["state"] == "reply_blocked"
    (blocked,) = events(message, "reply_blocked")
    assert blocked["reason"] == "no DLT template matches"
    closest = blocked["closest"][0]
    assert closest["template_id"] == T_BAL and "{#numeric#} (digits 0-9)" in closest["why"]
    time.sleep(0.3)  # give a wrongly sent submit_sm the time to arrive
    assert [s for s in smsc.smsc.submits if s.pdu.source_addr == sc] == []
    metrics = gw.admin("GET", "/metrics").text  # summed over the workers
    assert metric(metrics, "mogateway_dlt_replies_total", client=cid, result="blocked") == 1


def test_without_enforcement_an_unmatched_reply_carries_the_binds_own_tlvs(
    gw: ServeGateway, smsc: SmscThread, sc: str, app: CallbackRecorder
) -> None:
    dlt_client(gw, app, sc, enforce=False)
    app.answer = Answer.text("Balance 4520")
    message = one_reply(gw, smsc, sc, "BAL")
    (submit,) = submits_for(smsc, sc, 1)
    assert tlvs(submit) == [(0x1400, BIND_PE.encode()), (0x1500, b"vendor"), (0x1401, BIND_TEMPLATE.encode())]
    (submitted,) = events(message, "reply_submitted")
    assert "dlt_template" not in submitted and submitted["dlt"].startswith("no DLT template matches")


def test_templates_imported_from_a_portal_csv_drive_the_tlvs(
    gw: ServeGateway, smsc: SmscThread, sc: str, app: CallbackRecorder
) -> None:
    export = (
        "Content Template Report\n"
        "Template Id,Template Name,Template Content,Status,Entity Id\n"
        f'{T_BAL},bal,"Your balance is Rs {{#numeric#}}.",Approved,{PE}\n'
        f"{T_HINDI},bal-hi,{TEMPLATES[T_HINDI]},Approved,{PE}\n"
        f"1107161234567890099,x,Old {{#var#}},Inactive,{PE}\n"
    )
    cid = str(gw.add_client(shortcodes=[sc], callback_url=app.url, dlt_pe_id=PE, dlt_enforce=True)["id"])
    report = gw.admin("POST", f"/v1/clients/{cid}/dlt-templates/import", content=export.encode()).json()
    assert report["added"] == [T_BAL, T_HINDI] and len(report["refused"]) == 1
    app.answer = Answer.text(REPLIES[T_HINDI])
    message = one_reply(gw, smsc, sc, "BAL")
    (submit,) = submits_for(smsc, sc, 1)
    assert [(t, v) for t, v in tlvs(submit) if t >= 0x1400] == dlt_tlvs(T_HINDI)
    assert events(message, "reply_submitted")[0]["dlt_template"] == T_HINDI


def test_an_operators_dlt_error_in_a_receipt_is_recorded_with_its_meaning(
    gw: ServeGateway, smsc: SmscThread, sc: str, app: CallbackRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(smsc.smsc, "receipt_stat", "UNDELIV")  # the shared SMSC's, for this test only
    monkeypatch.setattr(smsc.smsc, "receipt_err", "633")
    dlt_client(gw, app, sc, enforce=True)
    app.answer = Answer.text(REPLIES[T_BAL])
    message = one_reply(gw, smsc, sc, "BAL")
    message = gw.wait_state(message["id"], frozenset({"undelivered"}), timeout=10)
    (delivery,) = events(message, "delivery")
    assert delivery["detail"].startswith("stat:UNDELIV err:633 (DLT TEMPLATE_NOT_MATCHED:")
    assert delivery["detail"].endswith(", unverified)")


def test_an_smsc_refusing_for_a_missing_tlv_fails_the_reply_with_the_dlt_meaning(
    gw: ServeGateway, smsc: SmscThread, sc: str, app: CallbackRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(smsc.smsc, "refuse_next", [Status.ESME_RMISSINGOPTPARAM])  # the next submit_sm
    dlt_client(gw, app, sc, enforce=False)
    app.answer = Answer.text("Balance 4520")
    message = one_reply(gw, smsc, sc, "BAL")
    assert message["state"] == "reply_failed"
    (failed,) = events(message, "reply_failed")
    assert (
        "ESME_RMISSINGOPTPARAM (0xC3), DLT ESME_RMISSINGOPTPARAM: an expected TLV is missing"
        in failed["detail"]
    )
