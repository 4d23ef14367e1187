"""``whatsapp_media_store``: media kept when the message comes, served after Meta forgot them, only whole
and right, written too by a fetch that streams from Graph, and removed with their message (retention).
A real ``serve`` and the fake Graph API; the sweep on its own."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mogateway.edges.whatsapp.media_store import MediaStore
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder

from .whatsapp_harness import WhatsAppStack, add_whatsapp_client, start_whatsapp_serve, whatsapp_config

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import GatewayClient, ServeProcess


class Kept(WhatsAppStack):
    def __init__(
        self, serve: ServeProcess, graph: FakeGraphServer, app: CallbackRecorder, store: Path, token: str
    ) -> None:
        super().__init__(serve, graph, app)
        self.store, self.token = store, token
        self._sender = 919812350000

    def deliver(self, media: dict[str, Any], sha256: str | None = None) -> str:
        self._sender += 1
        msg = wh.media(str(self._sender), "document", media_id=media["id"], sha256=sha256 or media["sha256"])
        (mid,) = json.loads(self.meta.send(msg).text)["ids"]
        return str(mid)

    def fetch(self, mid: str) -> httpx.Response:
        """The media with the client's token: only once the message is routed to that client (its
        callback answered), as any other message is 404 to it; the file may be kept well before."""
        self._wait_routed(mid)
        return self.gw.request("GET", f"/v1/whatsapp/media/{mid}", token=self.token)

    def _wait_routed(self, mid: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while self.gw.admin("GET", f"/v1/messages/{mid}").json().get("client_id") is None:
            assert time.monotonic() < deadline, f"{mid} was never routed"
            time.sleep(0.05)


def _wait_lookups(graph: FakeGraphServer, media_id: str, count: int = 1, timeout: float = 15.0) -> None:
    """Until the fake Graph API was asked for ``media_id`` ``count`` times (the prefetch began)."""
    deadline = time.monotonic() + timeout
    while (
        len(
            [
                r
                for r in httpx.get(graph.url + "/__fake/requests").json()["data"]
                if r["path"] == f"/{media_id}"
            ]
        )
        < count
    ):
        assert time.monotonic() < deadline, "the media was never looked up"
        time.sleep(0.05)


def _wait_file(path: Path, timeout: float = 15.0) -> bytes:
    deadline = time.monotonic() + timeout
    while not path.is_file():
        assert time.monotonic() < deadline, f"{path.name} was not kept"
        time.sleep(0.05)
    return path.read_bytes()


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kept]:
    workdir = tmp_path_factory.mktemp("wa-media-store")
    store = workdir / "media"
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(lambda call: Answer.text("")) as app:
        config = whatsapp_config(graph.url, settings=f'whatsapp_media_store = "{store}"')
        serve = start_whatsapp_serve(workdir, config, log_name="store")
        gw = GatewayClient(serve.url)
        shop = add_whatsapp_client(gw, app.url)
        gw.close()
        k = Kept(serve, graph, app, store, shop["token"])
        try:
            yield k
        finally:
            k.close()


def test_a_media_is_kept_as_it_comes_and_served_after_meta_forgot_it(kept: Kept) -> None:
    media = kept.register(size=700_000, seed=1, mime_type="application/pdf")
    mid = kept.deliver(media)
    data = _wait_file(kept.store / mid)  # fetched when the message came, nobody asked
    assert hashlib.sha256(data).hexdigest() == media["sha256_hex"]
    assert oct((kept.store).stat().st_mode & 0o777) == "0o700"
    kept.change(media["id"], expired=True)  # Meta's 7 days are over
    resp = kept.fetch(mid)
    assert resp.status_code == 200 and resp.content == data
    assert resp.headers["content-length"] == str(len(data))


def test_a_media_that_is_not_its_sha256_is_never_kept(kept: Kept) -> None:
    media = kept.register(size=200_000, seed=2)
    other = kept.register(size=10, seed=3)  # a real digest, of other bytes
    mid = kept.deliver(media, sha256=other["sha256"])
    _wait_lookups(kept.graph, media["id"])
    time.sleep(1.0)  # its download (200 kB on loopback) ends well within this
    assert not (kept.store / mid).exists()
    assert not [p for p in kept.store.iterdir() if p.name.startswith(".tmp-")]


def test_a_fetch_from_graph_keeps_what_the_first_try_missed(kept: Kept) -> None:
    media = kept.register(size=500_000, seed=4)
    kept.change(media["id"], break_after=100_000)  # the download at arrival breaks
    mid = kept.deliver(media)
    _wait_lookups(kept.graph, media["id"])
    time.sleep(1.0)  # the broken download ends well within this
    assert not (kept.store / mid).exists()
    kept.change(media["id"], break_after=None)
    resp = kept.fetch(mid)  # streamed from Graph, and written to the store as it goes
    assert resp.status_code == 200 and hashlib.sha256(resp.content).hexdigest() == media["sha256_hex"]
    assert _wait_file(kept.store / mid) == resp.content


# ------------------------------------------------------------------------------ the sweep on its own


def test_the_sweep_removes_the_files_of_deleted_messages_and_stale_temporary_files(tmp_path: Path) -> None:
    async def main() -> tuple[int, list[str]]:
        store = MediaStore(tmp_path / "media")
        for name in ("2lsqbom9gc7jn5j105giu25n54", "9v4ikac94cb21ma09e2tl5cfts"):
            (store.directory / name).write_bytes(b"x")
        stale = store.directory / ".tmp-abc-1234"
        stale.write_bytes(b"half")
        os.utime(stale, (time.time() - 7200, time.time() - 7200))
        (store.directory / ".tmp-def-5678").write_bytes(b"being written")

        async def exists(message_id: str) -> bool:
            return message_id == "2lsqbom9gc7jn5j105giu25n54"

        removed = await store.sweep(exists)
        return removed, sorted(p.name for p in store.directory.iterdir())

    removed, left = asyncio.run(main())
    assert removed == 2
    assert left == [".tmp-def-5678", "2lsqbom9gc7jn5j105giu25n54"]


def test_the_store_makes_its_directories_0700_and_its_files_0600_whatever_the_umask(tmp_path: Path) -> None:
    """A kept media is a subscriber's photo, voice or document: private under a umask of 022 too (which
    gives 0755 and 0644), not only under ``serve``'s own 077."""
    text = b"a voice note"
    name = "2lsqbom9gc7jn5j105giu25n54"

    async def main() -> tuple[int, bool]:
        store = MediaStore(tmp_path / "kept" / "media")
        writer = store.writer(name)
        assert writer is not None
        writer.write(text)
        (being_written,) = store.directory.iterdir()
        return being_written.stat().st_mode & 0o777, await writer.finish(
            hashlib.sha256(text).digest(), len(text)
        )

    old = os.umask(0o022)
    try:
        while_written, kept = asyncio.run(main())
    finally:
        os.umask(old)
    assert kept
    assert oct(while_written) == "0o600"
    assert oct((tmp_path / "kept" / "media" / name).stat().st_mode & 0o777) == "0o600"
    for directory in (tmp_path / "kept", tmp_path / "kept" / "media"):
        assert oct(directory.stat().st_mode & 0o777) == "0o700", directory
