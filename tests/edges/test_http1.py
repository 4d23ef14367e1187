"""The lean callback HTTP client against raw servers on 127.0.0.1 that send exactly the bytes we choose."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trustme

from mogateway.core.callback_url import UrlRefused
from mogateway.core.contract import MAX_RESPONSE_BYTES
from mogateway.core.ports import AnswerIncomplete, AnswerMalformed, ConnectFailed
from mogateway.edges.http1 import (
    MAX_ANSWER_HEAD_BYTES,
    MAX_CAPTURED_HEADER_BYTES,
    MAX_CAPTURED_HEADERS,
    Http1Client,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """Serves each connection with ``handler``; counts connections and requests."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def read_request(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        self.requests.append(head + body)
        return head + body

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer)
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[RawServer]]]:
    servers: list[RawServer] = []

    async def start(
        handler_factory: Callable[[RawServer], Handler], ssl_ctx: ssl.SSLContext | None = None
    ) -> RawServer:
        srv = RawServer(lambda r, w: asyncio.sleep(0))
        srv.handler = handler_factory(srv)
        srv.server = await asyncio.start_server(srv._serve, "127.0.0.1", 0, ssl=ssl_ctx)
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        assert srv.server is not None
        srv.server.close()
        await srv.server.wait_closed()


def keep_alive_answers(body: bytes = b"hello", extra: bytes = b"") -> Callable[[RawServer], Handler]:
    def factory(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await srv.read_request(reader) is not None:
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                    + extra
                    + b"content-length: %d\r\n\r\n" % len(body)
                    + body
                )
                await writer.drain()

        return handler

    return factory


async def test_post_sends_one_well_formed_request_and_reuses_the_connection(serve) -> None:
    srv = await serve(keep_alive_answers(b"OK"))
    client = Http1Client(allow_private=True)
    url = f"http://127.0.0.1:{srv.port}/cb?x=1"
    for _ in range(3):
        answer = await client.post(
            url, b'{"a":1}', {"content-type": "application/json", "authorization": "Bearer t"}
        )
        assert (answer.status, answer.content_type, answer.body, answer.oversized) == (
            200,
            "text/plain",
            b"OK",
            False,
        )
    await client.close()
    assert srv.connections == 1
    first = srv.requests[0]
    assert first.startswith(b"POST /cb?x=1 HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n" % srv.port)
    assert b"authorization: Bearer t\r\n" in first and b"content-length: 7\r\n\r\n" in first
    assert first.endswith(b'{"a":1}')


async def test_an_idle_connection_closed_by_the_server_is_replaced_at_once(serve) -> None:
    closed = asyncio.Event()

    def factory(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # one answer per connection, advertised as keep-alive, then the server closes it
            if await srv.read_request(reader) is not None:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
                await asyncio.sleep(0.05)
                writer.close()
                await writer.wait_closed()
                closed.set()

        return handler

    srv = await serve(factory)
    client = Http1Client(allow_private=True)
    url = f"http://127.0.0.1:{srv.port}/"
    assert (await client.post(url, b"1", {})).body == b"ok"
    await asyncio.wait_for(closed.wait(), 5)  # the server has closed the idle connection
    assert (await client.post(url, b"2", {})).body == b"ok"
    await client.close()
    assert srv.connections == 2
    assert len(srv.requests) == 2


async def test_chunked_and_close_delimited_answers(serve) -> None:
    def chunked(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await srv.read_request(reader)
            writer.write(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
            )
            await writer.drain()

        return handler

    def until_close(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await srv.read_request(reader)
            writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end")
            await writer.drain()

        return handler

    client = Http1Client(allow_private=True)
    a = await serve(chunked)
    b = await serve(until_close)
    assert (await client.post(f"http://127.0.0.1:{a.port}/", b"", {})).body == b"abcde"
    assert (await client.post(f"http://127.0.0.1:{b.port}/", b"", {})).body == b"until the end"
    await client.close()


async def test_an_answer_over_the_cap_is_reported_oversized_without_reading_it_all(serve) -> None:
    big = b"x" * (MAX_RESPONSE_BYTES + 1)
    srv = await serve(keep_alive_answers(big))
    client = Http1Client(allow_private=True)
    answer = await client.post(f"http://127.0.0.1:{srv.port}/", b"", {})
    assert answer.oversized and answer.body == b""
    exact = await serve(keep_alive_answers(b"y" * MAX_RESPONSE_BYTES))
    answer = await client.post(f"http://127.0.0.1:{exact.port}/", b"", {})
    assert not answer.oversized and len(answer.body) == MAX_RESPONSE_BYTES
    await client.close()


async def test_an_endless_header_is_cut_at_the_head_bound_not_buffered(serve) -> None:
    sent: list[int] = []

    def endless(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await srv.read_request(reader)
            # What the server sends before the client closes is to count what the client read, not
            # what the kernel takes: a small send buffer, and the loop (the client's too) runs between
            # pieces. Else the kernel's buffers alone (autotuned, up to tcp_wmem's maximum, 4 MiB here)
            # take the pieces before the client reads any, and the sum says nothing of the client.
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
            writer.write(b"HTTP/1.1 200 OK\r\nx-endless: ")
            piece = b"a" * 8192
            try:
                for _ in range(2048):  # 16 MiB at most, should the client never stop reading
                    writer.write(piece)
                    await writer.drain()
                    sent.append(len(piece))
                    await asyncio.sleep(0)
            except ConnectionError:
                pass

        return handler

    client = Http1Client(allow_private=True)
    with pytest.raises(AnswerMalformed, match="headers run over"):
        await client.post(f"http://127.0.0.1:{(await serve(endless)).port}/", b"", {})
    assert sum(sent) < 4 * 1024 * 1024  # closed early: far from the 16 MiB the server would send
    # Just under the bound is an answer like any other.
    big = b"x-big: " + b"b" * (MAX_ANSWER_HEAD_BYTES - 200) + b"\r\n"
    srv = await serve(keep_alive_answers(b"fine", extra=big))
    assert (await client.post(f"http://127.0.0.1:{srv.port}/", b"", {})).body == b"fine"
    await client.close()


async def test_failures_are_told_apart(serve, unused_tcp_port: int) -> None:
    def garbage(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await srv.read_request(reader)
            writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.5)

        return handler

    def cut(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await srv.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part")
            await writer.drain()

        return handler

    def silent_close(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await srv.read_request(reader)

        return handler

    client = Http1Client(allow_private=True)
    with pytest.raises(AnswerMalformed):
        await client.post(f"http://127.0.0.1:{(await serve(garbage)).port}/", b"", {})
    with pytest.raises(AnswerIncomplete):
        await client.post(f"http://127.0.0.1:{(await serve(cut)).port}/", b"", {})
    with pytest.raises(ConnectFailed):
        await client.post(f"http://127.0.0.1:{(await serve(silent_close)).port}/", b"", {})
    with pytest.raises(ConnectFailed):
        await client.post(f"http://127.0.0.1:{unused_tcp_port}/", b"", {})
    await client.close()


async def test_a_cancelled_request_never_leaves_its_connection_for_the_next(serve) -> None:
    def slow_then_fast(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            n = 0
            while await srv.read_request(reader) is not None:
                n += 1
                if n == 1:
                    await asyncio.sleep(0.3)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n%d" % n)
                await writer.drain()

        return handler

    srv = await serve(slow_then_fast)
    client = Http1Client(allow_private=True)
    url = f"http://127.0.0.1:{srv.port}/"
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await client.post(url, b"", {})
    answer = await client.post(url, b"", {})
    assert answer.body == b"1"  # a fresh connection's first answer, not the late one of the old
    assert srv.connections == 2
    await client.close()


async def test_loopback_is_refused_unless_allowed(serve) -> None:
    srv = await serve(keep_alive_answers())
    guarded = Http1Client(allow_private=False)
    with pytest.raises(UrlRefused):
        await guarded.post(f"http://localhost:{srv.port}/", b"", {})
    await guarded.close()
    assert srv.connections == 0


async def test_header_injection_is_refused(serve) -> None:
    srv = await serve(keep_alive_answers())
    client = Http1Client(allow_private=True)
    with pytest.raises(ValueError):
        await client.post(f"http://127.0.0.1:{srv.port}/", b"", {"x-id": "a\r\nevil: 1"})
    await client.close()


async def test_https_with_certificate_verification(serve) -> None:
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    srv = await serve(keep_alive_answers(b"secure"), server_ctx)
    client = Http1Client(allow_private=True, ssl_context=client_ctx)
    assert (await client.post(f"https://localhost:{srv.port}/", b"", {})).body == b"secure"
    await client.close()
    untrusting = Http1Client(allow_private=True)
    with pytest.raises(ConnectFailed):
        await untrusting.post(f"https://localhost:{srv.port}/", b"", {})
    await untrusting.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's")
@pytest.mark.parametrize("quick_ack", [True, False])
async def test_answers_are_acknowledged_at_once_on_a_kept_alive_connection(serve, quick_ack: bool) -> None:
    """Between a request and its answer, the client's socket is in quick-ACK mode: an application that
    writes its headers and body in two writes without TCP_NODELAY gets its headers acknowledged at once
    instead of after Linux's delayed-ACK timer (40 ms a callback; the figures: bench/callback_nagle.py).
    Without it (the control), a request sent right after an answer puts the connection in the kernel's
    interactive mode, which delays ACKs — the very case."""
    answered = asyncio.Event()
    holding = asyncio.Event()

    def factory(srv: RawServer) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await srv.read_request(reader) is not None:
                if len(srv.requests) > 1:  # hold the second answer while the test looks
                    holding.set()
                    await answered.wait()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\n")
                await writer.drain()
                writer.write(b"OK")  # a second write, as http.server makes
                await writer.drain()

        return handler

    srv = await serve(factory)
    client = Http1Client(allow_private=True, quick_ack=quick_ack)
    url = f"http://127.0.0.1:{srv.port}/cb"
    assert (await client.post(url, b"1", {})).body == b"OK"
    (conn,) = [conn for idle in client._idle.values() for conn in idle]
    sock = conn.transport.get_extra_info("socket")
    second = asyncio.create_task(client.post(url, b"2", {}))
    await asyncio.wait_for(holding.wait(), 5)
    mode = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK)
    answered.set()
    assert (await asyncio.wait_for(second, 5)).body == b"OK"
    await client.close()
    assert srv.connections == 1
    if quick_ack:
        assert mode == 1
    elif mode == 1:
        pytest.skip("this kernel did not delay ACKs on the connection: the control shows nothing")


async def test_headers_are_captured_only_when_asked_and_within_the_bound(serve) -> None:
    extra = b"X-Request-Id: abc-123\r\nset-cookie: sid=s3cret; HttpOnly\r\n"
    srv = await serve(keep_alive_answers(b"OK", extra))
    url = f"http://127.0.0.1:{srv.port}/"
    plain = Http1Client(allow_private=True)
    answer = await plain.post(url, b"", {})
    await plain.close()
    assert answer.body == b"OK" and answer.headers == () and answer.headers_left_out == 0
    capturing = Http1Client(allow_private=True, capture_headers=True)
    for _ in range(2):  # the capture starts again for each answer on a kept-alive connection
        answer = await capturing.post(url, b"", {})
        assert answer.headers == (
            ("content-type", "text/plain"),
            ("x-request-id", "abc-123"),
            ("set-cookie", "sid=s3cret; HttpOnly"),
            ("content-length", "2"),
        )
        assert answer.headers_left_out == 0 and answer.body == b"OK"
    await capturing.close()
    assert srv.connections == 2  # one per client: the capturing one reused its connection


async def test_a_header_capture_keeps_at_most_its_count_and_its_size(serve) -> None:
    many = b"".join(b"x-h%d: %d\r\n" % (n, n) for n in range(MAX_CAPTURED_HEADERS + 10))
    big = b"x-big: " + b"v" * MAX_CAPTURED_HEADER_BYTES + b"\r\nx-after: small\r\n"
    client = Http1Client(allow_private=True, capture_headers=True)
    by_count = await serve(keep_alive_answers(b"OK", many))
    answer = await client.post(f"http://127.0.0.1:{by_count.port}/", b"", {})
    assert len(answer.headers) == MAX_CAPTURED_HEADERS and answer.body == b"OK"
    assert answer.headers[1] == ("x-h0", "0")
    assert answer.headers_left_out == 1 + 10 + 1  # content-type came first; then 10 more and the length
    by_size = await serve(keep_alive_answers(b"OK", big))
    answer = await client.post(f"http://127.0.0.1:{by_size.port}/", b"", {})
    assert [name for name, _ in answer.headers] == ["content-type", "x-after", "content-length"]
    assert answer.headers_left_out == 1
    assert sum(len(n) + len(v) for n, v in answer.headers) <= MAX_CAPTURED_HEADER_BYTES
    await client.close()
