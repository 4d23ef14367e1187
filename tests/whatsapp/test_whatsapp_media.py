"""WhatsApp media through the gateway, end to end: signed webhooks into a real ``mogateway serve``
(default workers) with ``public_url``, the callback's signed ``url``, and ``GET /v1/whatsapp/media/{id}``
streaming from the fake Graph API (a real server on loopback) — bytes, type, length, sha256, the 50 MiB
document within 10 MiB of the workers' RSS, and every refusal (expired media, Graph down, wrong token,
expired or tampered signature, a sha256 that does not match)."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from mogateway.config.secret_key import parse_key
from mogateway.core.media_url import derive_key, signed_url
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

from .whatsapp_harness import (
    WhatsAppStack,
    add_whatsapp_client,
    start_whatsapp_serve,
    whatsapp_config,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import (
    ADMIN_TOKEN,
    ServeProcess,
    metric,
    worker_pids,
)

PUBLIC_URL = "https://gw.example.test"  # what clients reach the gateway by (a proxy in front)
SECRET_KEY = base64.urlsafe_b64encode(bytes(range(32))).decode()
MiB = 1024 * 1024


def _config(graph_url: str) -> str:
    return whatsapp_config(graph_url, settings=f'public_url = "{PUBLIC_URL}"\nsecret_key = "{SECRET_KEY}"')


def _blank(call: RecordedCall) -> Answer:
    return Answer.text("")


class Media(WhatsAppStack):
    """The stack: the gateway, the fake Graph API, the application, Meta's webhook sender."""

    def __init__(self, serve: ServeProcess, graph: FakeGraphServer, app: CallbackRecorder) -> None:
        super().__init__(serve, graph, app)
        self.client_tokens: dict[str, str] = {}
        self.client_ids: dict[str, str] = {}
        self._sender = 919812340000

    def deliver(self, kind: str, media: dict[str, Any], **extra: Any) -> tuple[str, dict[str, Any]]:
        """A webhook with a media message; (its message id, its callback's whatsapp member)."""
        self._sender += 1
        msg = wh.media(str(self._sender), kind, media_id=media["id"], mime_type=media["mime_type"], **extra)
        msg[kind]["sha256"] = extra.get("sha256", media["sha256"])
        delivery = self.meta.send(msg)
        assert delivery.status == 200, delivery.text
        (mid,) = json.loads(delivery.text)["ids"]
        call = self.wait(
            lambda: [c for c in self.app.calls if c.headers.get("x-mogateway-message-id") == mid]
        )
        member: dict[str, Any] = call[0].json()["whatsapp"]
        return mid, member

    def local(self, url: str) -> str:
        """The signed URL as this test reaches the gateway (PUBLIC_URL is the proxy's name)."""
        assert url.startswith(PUBLIC_URL + "/v1/whatsapp/media/"), url
        return self.serve.url + url[len(PUBLIC_URL) :]

    def wait(self, predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            assert time.monotonic() < deadline, "nothing within the time"
            time.sleep(0.05)
        return value


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Media]:
    workdir = tmp_path_factory.mktemp("wa-media")
    with FakeGraphServer() as graph, CallbackRecorder.in_thread(_blank) as app:
        serve = start_whatsapp_serve(workdir, _config(graph.url), log_name="media")
        s = Media(serve, graph, app)
        try:
            shop = add_whatsapp_client(s.gw, app.url)
            s.client_tokens["shop"], s.client_ids["shop"] = shop["token"], shop["id"]
            other = s.gw.admin(
                "POST",
                "/v1/clients",
                json={"name": "other", "shortcodes": ["56161"], "callback_url": app.url},
            )
            assert other.status_code == 201, other.text
            s.client_tokens["other"], s.client_ids["other"] = other.json()["token"], other.json()["id"]
            yield s
        finally:
            s.close()


def _problem(resp: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json"), resp.headers
    body: dict[str, Any] = resp.json()
    assert body["type"] == f"urn:mogateway:problem:{kind}", body
    return body


# ------------------------------------------------------------------------------------ the callback


def test_a_media_callback_carries_a_signed_url_that_fetches_the_bytes(stack: Media) -> None:
    photo = b"\xff\xd8\xff\xe0 a photo of my bill " * 1000
    media = stack.register(data_b64=base64.b64encode(photo).decode(), mime_type="image/jpeg")
    before = time.time()
    mid, member = stack.deliver("image", media, caption="my bill")
    image = member["image"]
    # The url is the media object's last member, after what the webhook said.
    assert list(image) == ["id", "mime_type", "sha256", "caption", "url"]
    url = urlsplit(image["url"])
    assert f"{url.scheme}://{url.netloc}" == PUBLIC_URL and url.path == f"/v1/whatsapp/media/{mid}"
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert query["client"].startswith("cl_") and len(query["sig"]) == 43
    assert before + 3600 - 5 <= int(query["exp"]) <= time.time() + 3600 + 5  # whatsapp_media_url_ttl_s

    resp = httpx.get(stack.local(image["url"]))  # no token: the signature is the authority
    assert resp.status_code == 200, resp.text
    assert resp.content == photo
    assert resp.headers["content-type"] == "image/jpeg"
    assert resp.headers["content-length"] == str(len(photo))
    assert base64.b64encode(hashlib.sha256(resp.content).digest()).decode() == image["sha256"]


def test_the_client_token_fetches_its_own_messages_media_and_no_other(stack: Media) -> None:
    doc = b"%PDF-1.7 statement " * 2000  # a registered body is at most 64 KiB of JSON
    media = stack.register(data_b64=base64.b64encode(doc).decode(), mime_type="application/pdf")
    mid, _member = stack.deliver("document", media, filename="statement.pdf")
    path = f"/v1/whatsapp/media/{mid}"

    own = stack.gw.request("GET", path, token=stack.client_tokens["shop"])
    assert own.status_code == 200 and own.content == doc
    assert own.headers["content-disposition"] == "attachment; filename*=UTF-8''statement.pdf"
    assert stack.gw.request("GET", path, token=ADMIN_TOKEN).content == doc  # the operator

    # Another client's token, a token that is no one's, a message that does not exist: the same 404.
    wrong = stack.gw.request("GET", path, token=stack.client_tokens["other"])
    unknown = stack.gw.request("GET", path, token="not-a-token-of-anyone-0123456789")
    missing = stack.gw.request(
        "GET", "/v1/whatsapp/media/0000000000000000000000000", token=stack.client_tokens["shop"]
    )
    bodies = [_problem(r, 404, "not-found") for r in (wrong, unknown, missing)]
    assert len({b["detail"] for b in bodies}) == 1
    _problem(stack.gw.request("GET", path), 401, "unauthorized")


def test_the_application_fetches_the_media_with_its_token_while_it_handles_the_callback(
    stack: Media,
) -> None:
    """The journal names a message's client with its answer: until then, the client it is routed to
    (the one being called back) fetches with its token; another client's token still gets the 404."""
    doc = b"%PDF-1.7 in flight " * 1000
    media = stack.register(data_b64=base64.b64encode(doc).decode(), mime_type="application/pdf")
    stack.app.answer = Answer.late(8.0, "")  # the application is still handling the callback
    try:
        mid, _member = stack.deliver("document", media, filename="now.pdf")
        path = f"/v1/whatsapp/media/{mid}"
        assert stack.gw.message(mid)["state"] == "queued"  # not answered yet
        own = stack.gw.request("GET", path, token=stack.client_tokens["shop"])
        assert own.status_code == 200 and own.content == doc, own.text
        _problem(stack.gw.request("GET", path, token=stack.client_tokens["other"]), 404, "not-found")
        assert stack.gw.message(mid)["state"] == "queued"  # all of it while the callback was open
    finally:
        stack.app.answer = _blank


def test_a_text_message_has_no_media(stack: Media) -> None:
    delivery = stack.meta.send(wh.text("919812349999", "hello"))
    (mid,) = json.loads(delivery.text)["ids"]
    call = stack.wait(lambda: [c for c in stack.app.calls if c.headers.get("x-mogateway-message-id") == mid])
    assert "url" not in json.dumps(call[0].json()["whatsapp"])
    _problem(stack.gw.request("GET", f"/v1/whatsapp/media/{mid}", token=ADMIN_TOKEN), 404, "not-found")


# ----------------------------------------------------------------------------- signed URL refusals


def test_a_tampered_or_expired_signed_url_is_403(stack: Media) -> None:
    media = stack.register(text="a voice note", mime_type="audio/ogg")
    mid, member = stack.deliver("audio", media)
    url = stack.local(member["audio"]["url"])
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    base = f"{stack.serve.url}{parts.path}"

    sig = query["sig"]
    tampered = sig[:-1] + ("A" if sig[-1] != "A" else "B")
    _problem(httpx.get(base, params={**query, "sig": tampered}), 403, "bad-signature")
    # A later expiry with the same signature: the expiry is signed.
    _problem(httpx.get(base, params={**query, "exp": str(int(query["exp"]) + 3600)}), 403, "bad-signature")
    # Another client named with this signature.
    assert query["client"] == stack.client_ids["shop"]
    _problem(httpx.get(base, params={**query, "client": stack.client_ids["other"]}), 403, "bad-signature")

    # A URL signed by the gateway's key whose TTL has run out (made here with the same derived key).
    key = derive_key(parse_key(SECRET_KEY))
    old = signed_url(PUBLIC_URL, key, mid, query["client"], int(time.time()) - 1)
    body = _problem(httpx.get(stack.local(old)), 403, "url-expired")
    assert "expired" in body["detail"]
    # The same key, still valid: the check above is the expiry, not the key.
    fresh = signed_url(PUBLIC_URL, key, mid, query["client"], int(time.time()) + 60)
    assert httpx.get(stack.local(fresh)).content == b"a voice note"


# ------------------------------------------------------------------------------ Graph's failures


def test_media_graph_no_longer_has_is_410(stack: Media) -> None:
    media = stack.register(text="old photo", mime_type="image/png")
    _mid, member = stack.deliver("image", media)
    stack.change(media["id"], expired=True)
    body = _problem(httpx.get(stack.local(member["image"]["url"])), 410, "media-expired")
    assert "code 100, subcode 33" in body["detail"] and "7 days" in body["detail"]


def test_graph_down_is_502(stack: Media) -> None:
    media = stack.register(text="a video", mime_type="video/mp4")
    _mid, member = stack.deliver("video", media)
    url = stack.local(member["video"]["url"])
    faults = stack.graph.url + "/__fake/faults"
    try:
        httpx.post(
            faults, json={"path_regex": f"^/{media['id']}$", "http": 503, "code": 2}
        ).raise_for_status()
        body = _problem(httpx.get(url), 502, "graph-error")
        assert "error code 2" in body["detail"]
        # times 5: a GET on a kept-alive connection that drops is tried once more by the client
        httpx.post(
            faults, json={"path_regex": f"^/{media['id']}$", "drop": True, "times": 5}
        ).raise_for_status()
        _problem(httpx.get(url), 502, "graph-unreachable")
    finally:
        httpx.delete(faults)
    assert httpx.get(url).content == b"a video"  # Graph is back


def test_a_sha256_that_does_not_match_cuts_the_body_short(stack: Media) -> None:
    media = stack.register(size=512 * 1024, seed=5, mime_type="image/webp")  # several chunks
    data = httpx.get(stack.local(stack.deliver("sticker", media)[1]["sticker"]["url"])).content
    assert hashlib.sha256(data).hexdigest() == media["sha256_hex"]  # with the right sha256: whole
    wrong = base64.b64encode(hashlib.sha256(b"another file").digest()).decode()
    _mid, member = stack.deliver("sticker", media, sha256=wrong)
    got = bytearray()
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("GET", stack.local(member["sticker"]["url"])) as r,
    ):
        assert r.status_code == 200 and r.headers["content-length"] == str(len(data))
        for chunk in r.iter_raw():
            got += chunk
    assert 0 < len(got) < len(data) and bytes(got) == data[: len(got)]


def test_a_download_that_breaks_is_cut_short_too(stack: Media) -> None:
    media = stack.register(size=2 * MiB, seed=7, mime_type="video/mp4")
    _mid, member = stack.deliver("video", media)
    stack.change(media["id"], break_after=MiB)
    got = 0
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("GET", stack.local(member["video"]["url"])) as r,
    ):
        for chunk in r.iter_raw():
            got += len(chunk)
    assert got < MiB


def test_a_media_above_the_size_cap_is_refused_before_a_byte(stack: Media) -> None:
    media = stack.register(size=100 * MiB + 1, seed=3, mime_type="application/pdf")
    _mid, member = stack.deliver("document", media)
    body = _problem(httpx.get(stack.local(member["document"]["url"])), 502, "media-too-large")
    assert "whatsapp_media_max_bytes=104857600" in body["detail"]


# ------------------------------------------------------------------------------------------ memory


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def test_a_50_mib_document_streams_with_the_workers_rss_growing_less_than_10_mib(stack: Media) -> None:
    size = 50 * MiB
    media = stack.register(size=size, seed=11, mime_type="application/pdf")
    _mid, member = stack.deliver("document", media)
    url = stack.local(member["document"]["url"])
    small = stack.register(size=MiB, seed=12, mime_type="application/pdf")
    _, warm = stack.deliver("document", small)
    for _ in range(2):  # every worker has run the code path once (connection pools, imports)
        assert len(httpx.get(stack.local(warm["document"]["url"])).content) == MiB

    pids = list(worker_pids(stack.serve.process.pid).values()) or [stack.serve.process.pid]
    for pid in pids:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
    before = {pid: _status(pid, "VmRSS") for pid in pids}
    hasher = hashlib.sha256()
    got = 0
    with httpx.stream("GET", url, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-length"] == str(size)
        for chunk in r.iter_raw():
            hasher.update(chunk)
            got += len(chunk)
    assert got == size and hasher.hexdigest() == media["sha256_hex"]
    growth = {pid: _status(pid, "VmHWM") - before[pid] for pid in pids}
    assert max(growth.values()) < 10 * MiB, {pid: g / MiB for pid, g in growth.items()}


# ------------------------------------------------------------------------------------ metrics


def test_the_fetches_are_counted(stack: Media) -> None:
    text = stack.gw.request("GET", "/metrics", token=ADMIN_TOKEN).text
    fetches = "mogateway_whatsapp_media_fetches_total"
    assert metric(text, fetches, result="ok") >= 5
    assert metric(text, fetches, result="sha256_mismatch") == 1
    assert metric(text, fetches, result="expired") == 1
    assert metric(text, fetches, result="too_large") == 1
    assert metric(text, "mogateway_whatsapp_media_bytes_total") >= 50 * MiB
    assert metric(text, "mogateway_whatsapp_media_first_byte_seconds_count") >= 5
    log = stack.serve.stderr()
    assert "rehearsal-token" not in log
    # A cut body is explained by the gateway's own line, not by uvicorn's error about it.
    assert "cut short: its sha256 is not the webhook's" in log
    assert "without completing response" not in log


# ------------------------------------------------------------------------------------------- SDK


def test_the_sdk_fetches_by_the_signed_url_or_the_token(stack: Media, tmp_path: Path) -> None:
    from mogateway.client import MediaError, fetch_media, parse_message

    media = stack.register(size=3 * MiB + 17, seed=21, mime_type="video/mp4")
    mid, _member = stack.deliver("video", media)
    call = next(c for c in stack.app.calls if c.headers.get("x-mogateway-message-id") == mid)
    # The URL names the gateway by its public name: the SDK is pointed at it as an application would be.
    body = call.body.replace(PUBLIC_URL.encode(), stack.serve.url.encode())
    message = parse_message(body, message_id=mid)

    target = tmp_path / "video.mp4"
    assert fetch_media(message, to=target) is None
    assert hashlib.sha256(target.read_bytes()).hexdigest() == media["sha256_hex"]
    # Without a signed URL: the gateway path with the client's own token.
    plain = json.loads(body)
    del plain["whatsapp"]["video"]["url"]
    data = fetch_media(
        json.dumps(plain), message_id=mid, token=stack.client_tokens["shop"], gateway_url=stack.serve.url
    )
    assert data is not None and hashlib.sha256(data).hexdigest() == media["sha256_hex"]
    with pytest.raises(MediaError) as refused:
        fetch_media(
            json.dumps(plain), message_id=mid, token=stack.client_tokens["other"], gateway_url=stack.serve.url
        )
    assert (refused.value.status, refused.value.kind) == (404, "not-found")

    # A body whose sha256 differs from the callback's: the SDK refuses it and leaves no file behind.
    wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    bad_media = stack.register(size=MiB, seed=22, mime_type="video/mp4")
    bad_mid, _ = stack.deliver("video", bad_media, sha256=wrong)
    bad_call = next(c for c in stack.app.calls if c.headers.get("x-mogateway-message-id") == bad_mid)
    bad = parse_message(
        bad_call.body.replace(PUBLIC_URL.encode(), stack.serve.url.encode()), message_id=bad_mid
    )
    with pytest.raises(MediaError) as cut:
        fetch_media(bad, to=tmp_path / "bad.mp4")
    assert cut.value.kind == "cut-short" and not (tmp_path / "bad.mp4").exists()


# --------------------------------------------------------------------------------------- console


def test_the_console_opens_the_media_for_a_signed_in_operator(stack: Media) -> None:
    import re

    media = stack.register(text="the photo the operator looks at", mime_type="image/png")
    mid, _ = stack.deliver("image", media)
    (text_id,) = json.loads(stack.meta.send(wh.text("919812348888", "no media here")).text)["ids"]
    with httpx.Client(base_url=stack.serve.url) as browser:
        # Not signed in: to the sign-in page, never the media.
        assert "/console/login" in browser.get(f"/console/messages/{mid}/media").headers["location"]
        form = browser.get("/console/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form)
        assert csrf
        signed = browser.post("/console/login", data={"csrf": csrf[1], "token": ADMIN_TOKEN})
        assert signed.status_code == 303, signed.text
        page = browser.get(f"/console/messages/{mid}")
        assert f'href="/console/messages/{mid}/media"' in page.text and "open media" in page.text
        link = browser.get(f"/console/messages/{mid}/media")
        assert link.status_code == 303
        target = link.headers["location"]
        assert target.startswith(f"/v1/whatsapp/media/{mid}?client=operator&exp=")
        opened = browser.get(target)
        assert opened.status_code == 200 and opened.content == b"the photo the operator looks at"
        assert opened.headers["content-type"] == "image/png"
        # A text message's page has no such link.
        text_page = browser.get(f"/console/messages/{text_id}")
        assert text_page.status_code == 200 and "open media" not in text_page.text


def test_the_portal_opens_the_media_of_the_clients_own_messages_only(stack: Media) -> None:
    """A portal person of the client the message was routed to opens its media (a URL signed for that
    client); a person of another client gets 404 for the same message."""
    import re

    media = stack.register(text="the bill a customer sent", mime_type="image/jpeg")
    mid, _ = stack.deliver("image", media)
    browsers: dict[str, httpx.Client] = {}
    for name in ("shop", "other"):
        resp = stack.gw.admin(
            "POST",
            f"/v1/clients/{stack.client_ids[name]}/portal/invites",
            json={"email": f"a@{name}.example"},
        )
        assert resp.status_code == 201, resp.text
        browser = httpx.Client(base_url=stack.serve.url, timeout=20)
        link = resp.json()["invite_path"]
        assert browser.get(link).status_code == 200
        done = browser.post(link, data={"password": "a long password 1", "again": "a long password 1"})
        assert done.status_code == 303, done.text
        browsers[name] = browser
    try:
        shop, other = browsers["shop"], browsers["other"]
        page = shop.get(f"/portal/messages/{mid}")
        assert page.status_code == 200 and f'href="/portal/messages/{mid}/media"' in page.text
        opened = shop.get(f"/portal/messages/{mid}/media")
        assert opened.status_code == 303
        target = opened.headers["location"]
        assert re.match(rf"/v1/whatsapp/media/{mid}\?client={stack.client_ids['shop']}&exp=\d+&sig=", target)
        fetched = shop.get(target)
        assert fetched.status_code == 200 and fetched.content == b"the bill a customer sent"
        assert other.get(f"/portal/messages/{mid}").status_code == 404
        assert other.get(f"/portal/messages/{mid}/media", follow_redirects=False).status_code == 404
    finally:
        for browser in browsers.values():
            browser.close()
