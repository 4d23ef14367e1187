"""The bearer token's overlap window: which token a callback carries, and how the registry folds a next
token in once its window is over (the dispatcher asks ``ClientRecord.callback_token`` at each call)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from mogateway.core.clients import ClientRecord
from mogateway.edges.storage.sqlite import SqliteJournal
from mogateway.service.registry import Registry


def test_a_callback_carries_the_current_token_until_the_switch_then_the_next() -> None:
    client = ClientRecord(
        "cl_1", "A", ["56767"], [], "http://x/", "old", next_token="new", next_token_at=100.0
    )
    assert client.callback_token(99.9) == "old"
    assert client.callback_token(100.0) == "new"
    assert ClientRecord("cl_1", "A", ["56767"], [], "http://x/", "old").callback_token(1e12) == "old"


async def test_the_registry_rotates_with_an_overlap_and_folds_the_token_in_after_it(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    await journal.open()
    try:
        registry = Registry(journal)
        added = await registry.add(ClientRecord("", "A", ["56767"], [], "http://x/", ""))
        rotated = await registry.rotate_token(added.id, overlap_s=0.3)
        assert rotated is not None and rotated.token == added.token and rotated.next_token
        stored = await journal.get_client(added.id)
        assert stored is not None and stored.next_token == rotated.next_token  # kept (sealed) in the journal
        assert rotated.callback_token(time.time()) == added.token
        await asyncio.sleep(0.35)
        assert rotated.callback_token(time.time()) == rotated.next_token
        again = await registry.rotate_token(added.id)  # no overlap: at once, and the pending one is gone
        assert again is not None and again.token not in (added.token, rotated.next_token)
        assert again.next_token == "" and again.callback_token(time.time()) == again.token
    finally:
        await journal.close()
