"""The replay-window reads of concurrent webhooks are merged into one journal read, each webhook
getting the answer for its own ids; a failed read fails every webhook waiting on it."""

from __future__ import annotations

import asyncio

import pytest

from mogateway.api.whatsapp import _SeenReader


class _Journal:
    def __init__(self, seen: set[str], fail: bool = False) -> None:
        self.seen = seen
        self.fail = fail
        self.reads: list[list[str]] = []

    async def seen_whatsapp(self, ids: list[str]) -> set[str]:
        self.reads.append(ids)
        await asyncio.sleep(0.01)
        if self.fail:
            raise OSError("disk gone")
        return self.seen & set(ids)


async def test_concurrent_reads_are_merged_and_answered_each_for_its_own_ids() -> None:
    journal = _Journal({"b", "e"})
    reader = _SeenReader(journal)
    results = await asyncio.gather(*(reader.seen([x]) for x in "abcdef"))
    assert results == [set(), {"b"}, set(), set(), {"e"}, set()]
    assert journal.reads == [list("abcdef")]  # one read for the six webhooks

    async def later(x: str) -> set[str]:
        await asyncio.sleep(0.005)  # arrives while the first read runs
        return await reader.seen([x])

    assert await asyncio.gather(reader.seen(["a"]), later("b"), later("e")) == [set(), {"b"}, {"e"}]
    assert journal.reads[1:] == [["a"], ["b", "e"]]


async def test_a_failed_read_fails_each_waiting_webhook() -> None:
    reader = _SeenReader(_Journal(set(), fail=True))
    results = await asyncio.gather(reader.seen(["a"]), reader.seen(["b"]), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    with pytest.raises(OSError):
        await reader.seen(["c"])  # the reader is not stuck after a failure
