"""WhatsApp numbers route like shortcodes: the number, then the keyword; conflicts are named."""

from __future__ import annotations

from mogateway.core.clients import ClientRecord, RoutingTable, conflict


def _client(
    cid: str, *, shortcodes: list[str], whatsapp: list[str], keywords: list[str], at: float
) -> ClientRecord:
    return ClientRecord(
        id=cid,
        name=cid,
        shortcodes=shortcodes,
        keywords=keywords,
        callback_url="https://example.test/mo",
        token="t",
        created_at=at,
        whatsapp_numbers=whatsapp,
    )


def test_whatsapp_numbers_route_with_keywords_beside_shortcodes() -> None:
    default = _client("a", shortcodes=["56767"], whatsapp=["919876543210"], keywords=[], at=1)
    bal = _client("b", shortcodes=[], whatsapp=["919876543210"], keywords=["BAL"], at=2)
    table = RoutingTable([default, bal])
    assert table.route("919876543210", "bal please") is bal
    assert table.route("919876543210", "hello") is default
    assert table.route("56767", "bal") is default
    assert table.route("919876543211", "hello") is None


def test_a_taken_whatsapp_number_is_named_as_one() -> None:
    first = _client("a", shortcodes=[], whatsapp=["919876543210"], keywords=[], at=1)
    second = _client("b", shortcodes=["56767"], whatsapp=["919876543210"], keywords=[], at=2)
    why = conflict(RoutingTable([first]), second)
    assert why is not None and why.startswith("WhatsApp number 919876543210 already belongs to client a")


def test_old_documents_without_whatsapp_numbers_still_load() -> None:
    doc = _client("a", shortcodes=["56767"], whatsapp=[], keywords=[], at=1).to_doc()
    del doc["whatsapp_numbers"]
    assert ClientRecord.from_doc(doc).whatsapp_numbers == []
