"""edges.whatsapp.graph_sender against the real fake Graph API (and a recorder for answers that are not
Graph's): request path and body, wamids, every error class, network failures, limits."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from mogateway.core.whatsapp_send import SendAction, split_text
from mogateway.edges.whatsapp.graph_sender import GraphSender, GraphSendError
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph.fixtures import CLOUD_PHONE_NUMBER_ID, TOKEN
from mogateway.testing.recorder import Answer, CallbackRecorder
from mogateway.testing.tls import make_certificates

PID = CLOUD_PHONE_NUMBER_ID
TO = "919812345678"


@pytest.fixture
def fake() -> Iterator[FakeGraphServer]:
    with FakeGraphServer() as server:
        yield server


@pytest.fixture
async def sender(fake: FakeGraphServer) -> AsyncIterator[GraphSender]:
    async with GraphSender(fake.url, "v21.0", timeout_s=5) as client:
        yield client


def control(fake: FakeGraphServer, method: str, path: str, **body: Any) -> Any:
    with httpx.Client(base_url=fake.url, timeout=5) as http:
        r = http.request(method, path, json=body or None)
        r.raise_for_status()
        return r.json()


def sent(fake: FakeGraphServer) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = control(fake, "GET", "/__fake/messages")["data"]
    return data


async def failure_of(coro: Any) -> GraphSendError:
    with pytest.raises(GraphSendError) as caught:
        await coro
    return caught.value


async def test_a_reply_goes_to_the_messages_path_as_the_reference_says(
    fake: FakeGraphServer, sender: GraphSender
) -> None:
    wamid = await sender.send_text(PID, TOKEN, TO, "Your balance is ₹240", context_wamid="wamid.IN")
    assert wamid.startswith("wamid.")
    (record,) = sent(fake)
    assert record["wamid"] == wamid and record["body"] == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": TO,
        "type": "text",
        "text": {"preview_url": False, "body": "Your balance is ₹240"},
        "context": {"message_id": "wamid.IN"},
    }
    (request,) = control(fake, "GET", "/__fake/requests")["data"]
    assert (request["method"], request["path"], request["version"], request["auth"]) == (
        "POST",
        f"/{PID}/messages",
        "v21.0",
        "header",
    )
    assert sender.messages_url(PID) == f"{fake.url}/v21.0/{PID}/messages"


async def test_a_long_reply_goes_in_parts_the_first_as_the_reply(
    fake: FakeGraphServer, sender: GraphSender
) -> None:
    text = ("word " * 1000) + "😀" * 3000
    parts = split_text(text)
    assert len(parts) == 3
    wamids = await sender.send_parts(PID, TOKEN, TO, parts, context_wamid="wamid.IN")
    records = sent(fake)
    assert [r["wamid"] for r in records] == wamids and len(set(wamids)) == 3
    assert "".join(r["text"] for r in records) == text
    assert [r["context_message_id"] for r in records] == ["wamid.IN", None, None]


async def test_a_part_that_fails_reports_the_parts_already_sent(
    fake: FakeGraphServer, sender: GraphSender
) -> None:
    control(
        fake,
        "POST",
        "/__fake/faults",
        path_regex="/messages$",
        skip=1,
        code=131047,
        http=400,
        details="more than 24 hours",
    )
    error = await failure_of(sender.send_parts(PID, TOKEN, TO, ["one", "two", "three"]))
    assert error.failure.action is SendAction.FAIL_NOW and error.failure.code == 131047
    assert error.sent == (sent(fake)[0]["wamid"],) and len(sent(fake)) == 1


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (131047, SendAction.FAIL_NOW),
        (131026, SendAction.FAIL_NOW),
        (100, SendAction.FAIL_NOW),
        (130429, SendAction.RETRY_BACKOFF),
        (131056, SendAction.RETRY_THIS_RECIPIENT),
        (1, SendAction.RETRY_BACKOFF),
        (2, SendAction.RETRY_BACKOFF),
        (131000, SendAction.RETRY_BACKOFF),
        (190, SendAction.FAIL_AND_ALERT_TOKEN),
        (131048, SendAction.FAIL_AND_ALERT_OPERATOR),
    ],
)
async def test_each_error_code_maps_to_its_action_with_meta_s_details(
    fake: FakeGraphServer, sender: GraphSender, code: int, action: SendAction
) -> None:
    control(fake, "POST", "/__fake/messages/errors", code=code, to=TO, details=f"details of {code}")
    error = await failure_of(sender.send_text(PID, TOKEN, TO, "hi"))
    failure = error.failure
    assert (failure.action, failure.code, failure.details) == (action, code, f"details of {code}")
    assert failure.title.startswith(f"(#{code}) ") and not failure.maybe_sent
    assert TOKEN not in str(error)
    assert await sender.send_text(PID, TOKEN, "919812345679", "another person is fine")


async def test_a_bad_or_missing_token(sender: GraphSender) -> None:
    bad = await failure_of(sender.send_text(PID, "not-a-token", TO, "hi"))
    assert (bad.failure.action, bad.failure.code, bad.failure.http_status) == (
        SendAction.FAIL_AND_ALERT_TOKEN,
        190,
        401,
    )
    assert "not-a-token" not in str(bad)
    none = await failure_of(sender.send_text(PID, "", TO, "hi"))
    assert none.failure.action is SendAction.FAIL_AND_ALERT_TOKEN and none.failure.code is None
    odd = await failure_of(sender.send_text("../me", TOKEN, TO, "hi"))
    assert odd.failure.action is SendAction.FAIL_NOW


async def test_5xx_and_network_errors_are_retried(fake: FakeGraphServer, sender: GraphSender) -> None:
    control(fake, "POST", "/__fake/faults", path_regex="/messages$", http=502, code=2)
    error = await failure_of(sender.send_text(PID, TOKEN, TO, "hi"))
    assert (error.failure.action, error.failure.http_status) == (SendAction.RETRY_BACKOFF, 502)
    control(fake, "POST", "/__fake/faults", path_regex="/messages$", drop=True)
    lost = await failure_of(sender.send_text(PID, TOKEN, TO, "hi"))
    assert (lost.failure.action, lost.failure.code, lost.failure.maybe_sent) == (
        SendAction.RETRY_BACKOFF,
        None,
        True,
    )
    assert await sender.send_text(PID, TOKEN, TO, "hi")  # the pool recovers


async def test_refused_connection_is_retried_and_not_sent() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with GraphSender(f"http://127.0.0.1:{port}", "v21.0", timeout_s=2) as client:
        error = await failure_of(client.send_text(PID, TOKEN, TO, "hi"))
    assert (error.failure.action, error.failure.maybe_sent) == (SendAction.RETRY_BACKOFF, False)


async def test_a_send_that_never_got_a_connection_is_not_possibly_sent() -> None:
    """Every pooled connection busy until the queue's deadline: the waiting send wrote nothing, so it is
    retried as unsent (not ended "possibly sent", which would lose the reply)."""
    async with (
        CallbackRecorder(Answer.late(3)) as app,
        GraphSender(app.base_url, "v21.0", timeout_s=1, queue_timeout_s=0.5, max_connections=1) as client,
    ):
        first, second = await asyncio.gather(
            failure_of(client.send_text(PID, TOKEN, TO, "one")),
            failure_of(client.send_text(PID, TOKEN, TO, "two")),
        )
        assert len(await app.until_calls(1)) == 1  # only one request reached the API
    outcomes = sorted([first.failure.maybe_sent, second.failure.maybe_sent])
    assert outcomes == [False, True]
    assert {first.failure.action, second.failure.action} == {SendAction.RETRY_BACKOFF}


@pytest.mark.parametrize(
    ("answer", "action", "maybe_sent", "title"),
    [
        (Answer.with_status(503, b"<html>upstream down</html>"), SendAction.RETRY_BACKOFF, True, "HTTP 503"),
        (Answer.with_status(404, b"not here"), SendAction.FAIL_NOW, False, "HTTP 404"),
        (
            Answer.with_status(302, headers=(("location", "http://127.0.0.1:1/"),)),
            SendAction.FAIL_NOW,
            False,
            "HTTP 302",
        ),
        (Answer.text("{}"), SendAction.FAIL_NOW, True, "answer without a wamid"),
        (
            Answer(body=json.dumps({"messages": [{"id": "wamid." + "x" * 70000}]}).encode()),
            SendAction.FAIL_NOW,
            True,
            "answer too large",
        ),
        (Answer.late(3), SendAction.RETRY_BACKOFF, True, "network error"),
        (Answer.hang_up(), SendAction.RETRY_BACKOFF, True, "network error"),
    ],
)
async def test_answers_that_are_not_graph_s(
    answer: Answer, action: SendAction, maybe_sent: bool, title: str
) -> None:
    async with CallbackRecorder(answer) as app, GraphSender(app.base_url, "v21.0", timeout_s=1) as client:
        error = await failure_of(client.send_text(PID, TOKEN, TO, "hi"))
        (call,) = await app.until_calls(1)
    assert (error.failure.action, error.failure.maybe_sent, error.failure.title) == (
        action,
        maybe_sent,
        title,
    )
    assert call.path == f"/v21.0/{PID}/messages" and call.headers["authorization"] == f"Bearer {TOKEN}"


async def test_mark_read(fake: FakeGraphServer, sender: GraphSender) -> None:
    await sender.mark_read(PID, TOKEN, "wamid.IN")
    reads = control(fake, "GET", "/__fake/messages/reads")["data"]
    assert [r["message_id"] for r in reads] == ["wamid.IN"]
    error = await failure_of(sender.mark_read(PID, TOKEN, "not-a-wamid"))
    assert error.failure.code == 100


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="graph_url"):
        GraphSender("ftp://x", "v21.0")
    with pytest.raises(ValueError, match="api_version"):
        GraphSender("https://graph.example", "21")


async def test_tls_with_the_ca_file_keeps_connections_alive_and_a_stranger_s_certificate_is_unsent(
    tmp_path: Any,
) -> None:
    """Graph over TLS (the standard ssl module), trusting a private CA through ``ca_file``; sends reuse
    one kept-alive connection. Without that CA the certificate is refused while connecting: nothing
    was written, so the send is retried as unsent."""
    certs = make_certificates(tmp_path)
    with FakeGraphServer(ssl_context=certs.server_context()) as fake:
        assert fake.url.startswith("https://")
        async with GraphSender(fake.url, "v21.0", timeout_s=5, ca_file=str(certs.ca_file)) as client:
            wamids = [await client.send_text(PID, TOKEN, TO, f"hi {n}") for n in range(3)]
            assert len(set(wamids)) == 3
            pool = client._numbers[PID].client._idle  # one connection, kept alive, reused
            assert sum(len(conns) for conns in pool.values()) == 1
            bad = await failure_of(client.send_text(PID, "not-a-token", TO, "hi"))
            assert bad.failure.code == 190  # the token is checked on every request
        async with GraphSender(fake.url, "v21.0", timeout_s=5) as stranger:
            refused = await failure_of(stranger.send_text(PID, TOKEN, TO, "hi"))
        assert (refused.failure.action, refused.failure.maybe_sent) == (SendAction.RETRY_BACKOFF, False)
        verify = ssl.create_default_context(cafile=str(certs.ca_file))
        with httpx.Client(base_url=fake.url, timeout=5, verify=verify) as http:
            bodies = [m["text"] for m in http.get("/__fake/messages").json()["data"]]
        assert bodies == ["hi 0", "hi 1", "hi 2"]


def test_a_ca_file_that_does_not_exist_fails_at_start(tmp_path: Any) -> None:
    with pytest.raises(OSError):
        GraphSender("https://graph.example", "v21.0", ca_file=str(tmp_path / "none.pem"))


async def test_a_full_send_queue_refuses_at_once_as_unsent() -> None:
    """A number's sends beyond its connections and its queue are refused at once, unsent (retried),
    never left to time out as "possibly sent"."""
    async with (
        CallbackRecorder(Answer.late(0.5, '{"messages": [{"id": "wamid.OK"}]}')) as app,
        GraphSender(app.base_url, "v21.0", timeout_s=5, max_connections=1, max_queued=1) as client,
    ):
        results = await asyncio.gather(
            *(client.send_text(PID, TOKEN, TO, f"m{n}") for n in range(4)), return_exceptions=True
        )
        assert results.count("wamid.OK") == 2  # one in flight, one waited for its connection
        assert len(await app.until_calls(2)) == 2
        refused = [r for r in results if isinstance(r, GraphSendError)]
        assert len(refused) == 2
        assert all(r.failure.maybe_sent is False for r in refused)
        assert all(r.failure.action is SendAction.RETRY_BACKOFF for r in refused)
        assert client.queues()[PID].refused == 2
