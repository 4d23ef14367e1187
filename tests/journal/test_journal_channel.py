"""``MessageFilter.channel`` on both engines: read from the origin exactly as ``Message.channel`` is."""

from __future__ import annotations

import dataclasses

from test_journal_behaviour import mo

from mogateway.core.message import Message, channel_of
from mogateway.core.ports import Journal, MessageFilter


def at(message_id: str, origin: str, when: float) -> Message:
    return dataclasses.replace(mo(message_id, received_at=when), origin=origin)


async def test_find_by_channel_reads_the_origin_as_message_channel_does(journal: Journal) -> None:
    messages = [
        at("s1", "http", 1000.0),
        at("w1", "whatsapp:106540352242922", 2000.0),
        at("s2", "smpp:b1", 3000.0),
        at("w2", "whatsapp:callback", 4000.0),
        at("s3", "WhatsApp:not-quite", 5000.0),  # channel_of is case-sensitive: an SMS
        at("s4", "xwhatsapp:1", 6000.0),
    ]
    await journal.store(messages)

    async def ids(**kw: object) -> list[str]:
        return [r.id for r in await journal.find(MessageFilter(**kw))]  # type: ignore[arg-type]

    assert await ids(channel="whatsapp") == ["w2", "w1"]
    assert await ids(channel="sms") == ["s4", "s3", "s2", "s1"]
    assert await ids() == ["s4", "s3", "w2", "s2", "w1", "s1"]
    for m in messages:  # the SQL agrees with the model
        (found,) = await journal.find(
            MessageFilter(channel=channel_of(m.origin), since=m.received_at, until=m.received_at + 1)
        )
        assert found.id == m.id and found.message.channel == channel_of(m.origin)
    # with the other filters and keyset paging
    assert await ids(channel="whatsapp", limit=1) == ["w2"]
    assert await ids(channel="whatsapp", limit=1, before=(4000.0, "w2")) == ["w1"]
    assert await ids(channel="sms", since=2500.0, until=5500.0) == ["s3", "s2"]
    assert await ids(channel="whatsapp", shortcode="56767", msisdn="919812345678") == ["w2", "w1"]
