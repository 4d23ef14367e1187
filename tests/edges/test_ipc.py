"""edges.ipc: requests between workers over a real Unix socket — answered, failed, timed out."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mogateway.edges.ipc import IpcServer, Peer, PeerUnreachable, RemoteError


async def test_a_request_is_answered_fails_or_times_out_and_a_late_answer_is_dropped(tmp_path: Path) -> None:
    release = asyncio.Event()
    late_answers = 0

    async def echo(args: Any) -> Any:
        return {"echo": args}

    async def slow(args: Any) -> Any:
        nonlocal late_answers
        await release.wait()
        late_answers += 1
        return "late"

    async def broken(args: Any) -> Any:
        raise ValueError("no such thing")

    path = str(tmp_path / "w0.sock")
    server = IpcServer(path, {"echo": echo, "slow": slow, "broken": broken})
    await server.start()
    peer = Peer(0, path)
    try:
        assert await peer.request("echo", [1, "two"], timeout=2.0) == {"echo": [1, "two"]}
        with pytest.raises(RemoteError, match="no such thing"):
            await peer.request("broken", None, timeout=2.0)

        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await peer.request("slow", None, timeout=0.1)
        assert 0.1 <= loop.time() - started < 1.0
        # the timed-out request is forgotten: its answer, when it comes, resolves nothing
        release.set()
        for _ in range(100):
            if late_answers:
                break
            await asyncio.sleep(0.01)
        assert late_answers == 1
        assert await peer.request("echo", "after", timeout=2.0) == {"echo": "after"}
        assert peer._connection is not None and not peer._connection._waiting
    finally:
        await peer.close()
        await server.stop()


async def test_a_request_to_a_worker_that_is_not_listening_was_never_sent(tmp_path: Path) -> None:
    peer = Peer(3, str(tmp_path / "w3.sock"))
    with pytest.raises(PeerUnreachable, match="worker 3"):
        await peer.request("echo", None, timeout=1.0)
    await peer.close()
