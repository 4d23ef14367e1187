"""WhatsApp media without ``public_url`` (no ``url`` in the callback, the client's token still fetches,
doctor says why), the per-client concurrency limit (429) on a real ``serve``, and the Graph client's
timeout (504) and expiry handling against the fake Graph API."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mogateway.cli.doctor_checks import check_whatsapp_media
from mogateway.config import load_settings
from mogateway.edges.whatsapp.media import GraphMedia, MediaFetchError
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder

from .whatsapp_harness import (
    WhatsAppStack,
    add_whatsapp_client,
    start_whatsapp_serve,
    whatsapp_config,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import GatewayClient, ServeProcess


def _config(graph_url: str) -> str:
    return whatsapp_config(graph_url, settings="whatsapp_media_client_concurrency = 1")


class Plain(WhatsAppStack):
    def __init__(
        self, serve: ServeProcess, graph: FakeGraphServer, app: CallbackRecorder, token: str
    ) -> None:
        super().__init__(serve, graph, app)
        self.token = token

    def media_message(self, sender: str, **media: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(message id, the callback's member, the fake's description of the media)."""
        registered = self.register(**media)
        msg = wh.media(sender, "image", media_id=registered["id"], sha256=registered["sha256"])
        (mid,) = json.loads(self.meta.send(msg).text)["ids"]
        deadline = time.monotonic() + 15
        while not (calls := [c for c in self.app.calls if c.headers.get("x-mogateway-message-id") == mid]):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return mid, calls[0].json()["whatsapp"], registered


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plain]:
    workdir = tmp_path_factory.mktemp("wa-media-plain")
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(lambda call: Answer.text("")) as app:
        # One worker: the concurrency limit is per process.
        serve = start_whatsapp_serve(workdir, _config(graph.url), log_name="plain", args=["--workers", "1"])
        gw = GatewayClient(serve.url)
        shop = add_whatsapp_client(gw, app.url)
        gw.close()
        p = Plain(serve, graph, app, shop["token"])
        try:
            yield p
        finally:
            p.close()


def test_without_public_url_the_member_has_the_id_and_no_url(plain: Plain) -> None:
    mid, member, registered = plain.media_message("919812345001", text="a photo")
    assert member["image"]["id"] == registered["id"] and "url" not in member["image"]
    # The client's own token fetches it all the same.
    resp = plain.gw.request("GET", f"/v1/whatsapp/media/{mid}", token=plain.token)
    assert resp.status_code == 200 and resp.content == b"a photo"


def test_doctor_says_why_there_is_no_url(tmp_path: Path) -> None:
    config = tmp_path / "mogateway.toml"
    config.write_text(_config("http://127.0.0.1:9"))
    finding = check_whatsapp_media(load_settings(config))
    assert finding is not None and finding.status == "warn"
    assert "public_url is not set" in finding.detail and "MOGATEWAY_PUBLIC_URL" in finding.action
    with_url = check_whatsapp_media(load_settings(config, public_url="https://gw.example.com/"))
    assert with_url is not None and with_url.status == "ok"
    assert "under https://gw.example.com," in with_url.detail  # the trailing slash is dropped
    assert check_whatsapp_media(load_settings(None)) is None  # no WhatsApp, nothing to say


def test_a_second_fetch_of_the_same_client_at_once_is_429(plain: Plain) -> None:
    mid, _, registered = plain.media_message("919812345002", text="slow photo")
    httpx.patch(f"{plain.graph.url}/__fake/media/{registered['id']}", json={"lookup_delay_s": 1.5})
    first: list[httpx.Response] = []
    slow = threading.Thread(
        target=lambda: first.append(plain.gw.request("GET", f"/v1/whatsapp/media/{mid}", token=plain.token))
    )
    slow.start()
    deadline = time.monotonic() + 10
    while not [
        r
        for r in httpx.get(plain.graph.url + "/__fake/requests").json()["data"]
        if r["path"] == f"/{registered['id']}"
    ]:
        assert time.monotonic() < deadline, "the first fetch never reached Graph"
        time.sleep(0.02)
    # The first is now waiting for Graph's lookup (1.5 s), holding the client's one slot.
    second = plain.gw.request("GET", f"/v1/whatsapp/media/{mid}", token=plain.token)
    slow.join(10)
    assert second.status_code == 429, second.text
    assert second.json()["type"] == "urn:mogateway:problem:busy" and second.json()["retry_after_s"] == 1
    assert first[0].status_code == 200 and first[0].content == b"slow photo"
    # The slot is given back: a later fetch goes through.
    assert plain.gw.request("GET", f"/v1/whatsapp/media/{mid}", token=plain.token).status_code == 200


# ------------------------------------------------------------------------- the Graph client alone


def _run(graph_url: str, media_id: str, **options: Any) -> bytes:
    async def main() -> bytes:
        fetcher = GraphMedia(graph_url, "v21.0", **options)
        try:
            download = await fetcher.open(media_id, "rehearsal-token")
            try:
                return b"".join([chunk async for chunk in download.chunks()])
            finally:
                await download.aclose()
        finally:
            await fetcher.aclose()

    return asyncio.run(main())


def test_graph_that_does_not_answer_in_time_is_504() -> None:
    with FakeGraphServer() as graph:
        media = httpx.post(graph.url + "/__fake/media", json={"text": "x", "lookup_delay_s": 2}).json()
        with pytest.raises(MediaFetchError) as caught:
            _run(graph.url, media["id"], lookup_timeout_s=0.3)
        assert (caught.value.failure.status, caught.value.failure.kind) == (504, "graph-timeout")


def test_a_download_url_that_expired_is_looked_up_again() -> None:
    with FakeGraphServer() as graph:
        # Every URL the fake hands out is already expired: the fetcher looks up once more, then says 410.
        media = httpx.post(graph.url + "/__fake/media", json={"text": "x", "url_ttl_s": -1}).json()
        with pytest.raises(MediaFetchError) as caught:
            _run(graph.url, media["id"])
        assert (caught.value.failure.status, caught.value.failure.kind) == (410, "media-expired")
        lookups = [
            r
            for r in httpx.get(graph.url + "/__fake/requests").json()["data"]
            if r["path"] == f"/{media['id']}"
        ]
        assert len(lookups) == 2
        # A wrong token is Graph's 190: the number's token is refused (502), never shown.
        with pytest.raises(MediaFetchError) as refused:
            asyncio.run(_open_with(graph.url, media["id"], "wrong-token"))
        assert refused.value.failure.status == 502 and "190" in refused.value.failure.detail
        assert "wrong-token" not in str(refused.value)


async def _open_with(graph_url: str, media_id: str, token: str) -> None:
    fetcher = GraphMedia(graph_url, "v21.0")
    try:
        await fetcher.open(media_id, token)
    finally:
        await fetcher.aclose()


def test_the_fake_generates_large_media_without_holding_them() -> None:
    with FakeGraphServer() as graph:
        media = httpx.post(graph.url + "/__fake/media", json={"size": 3 * 1024 * 1024 + 5, "seed": 1}).json()
        data = _run(graph.url, media["id"])
        assert len(data) == 3 * 1024 * 1024 + 5
        import hashlib

        assert base64.b64encode(hashlib.sha256(data).digest()).decode() == media["sha256"]
