"""The journal reads of concurrent webhooks (the replay window, the statuses' reply origins) are merged
into one read, each webhook getting the answer for its own keys; a failed read fails every webhook waiting."""

from __future__ import annotations

import asyncio

import pytest

from mogateway.api.whatsapp import _MergedReads


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
    reader = _MergedReads(journal.seen_whatsapp)
    results = await asyncio.gather(*(reader([x]) for x in "abcdef"))
    assert results == [set(), {"b"}, set(), set(), {"e"}, set()]
    assert journal.reads == [list("abcdef")]  # one read for the six webhooks

    async def later(x: str) -> set[str]:
        await asyncio.sleep(0.005)  # arrives while the first read runs
        return await reader([x])

    assert await asyncio.gather(reader(["a"]), later("b"), later("e")) == [set(), {"b"}, {"e"}]
    assert journal.reads[1:] == [["a"], ["b", "e"]]


async def test_a_failed_read_fails_each_waiting_webhook() -> None:
    reader = _MergedReads(_Journal(set(), fail=True).seen_whatsapp)
    results = await asyncio.gather(reader(["a"]), reader(["b"]), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    with pytest.raises(OSError):
        await reader(["c"])  # the reader is not stuck after a failure


async def test_mapping_answers_are_split_by_key_too() -> None:
    async def origins(refs: list[str]) -> dict[str, str]:
        return {r: "whatsapp:1" for r in refs if r.startswith("wamid.")}

    reader = _MergedReads(origins)
    got = await asyncio.gather(reader(["wamid.A", "x"]), reader(["wamid.B"]))
    assert got == [{"wamid.A": "whatsapp:1"}, {"wamid.B": "whatsapp:1"}]
