"""The connect-time half of the URL guard, in the callback HTTP client itself (and at registration).

Host names are resolved through the client's resolver; these tests give it one that answers what a
hostile DNS server would (no system configuration is touched), and a real callback server on 127.0.0.1
shows that an allowed answer is really used for connecting.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest

from mogateway.core.callback_url import UrlRefused
from mogateway.core.contract import OutcomeKind
from mogateway.edges.http1 import Http1Client
from mogateway.edges.urlguard import check_callback_url
from mogateway.service.caller import exchange
from mogateway.testing.recorder import Answer, CallbackRecorder

EMBEDDED_IPV4 = [
    "::7f00:1",
    "::a9fe:a9fe",
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::a00:1",
    "64:ff9b:1::5db8:d822",
    "2002:7f00:1::",
    "2002:a9fe:a9fe::",
    "2001:0:5db8:d822:0:0:80ff:fffe",
    "fec0::1",
    "::ffff:127.0.0.1",
]


class HostileDns:
    """A resolver with fixed answers; counts lookups."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[tuple[int, str]]:
        self.lookups.append(host)
        if host not in self.answers:
            raise OSError(f"no such host {host}")
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, a) for a in self.answers[host]]


@pytest.fixture
async def app() -> AsyncIterator[CallbackRecorder]:
    async with CallbackRecorder(Answer.text("OK")) as recorder:
        yield recorder


@pytest.mark.parametrize("address", EMBEDDED_IPV4)
async def test_literal_ipv6_forms_carrying_a_refused_ipv4_are_refused_before_connecting(address: str) -> None:
    client = Http1Client(allow_private=False)
    with pytest.raises(UrlRefused):
        await client.post(f"http://[{address}]:9/cb", b"{}", {})
    await client.close()


@pytest.mark.parametrize("address", EMBEDDED_IPV4)
async def test_a_name_resolving_to_such_a_form_is_refused_at_registration_and_connect(address: str) -> None:
    dns = HostileDns({"callback.example": [address]})
    with pytest.raises(UrlRefused, match="private, loopback or reserved"):
        await check_callback_url("http://callback.example/cb", False, resolve=dns)
    client = Http1Client(allow_private=False, resolve=dns)
    with pytest.raises(UrlRefused, match="private, loopback or reserved"):
        await client.post("http://callback.example/cb", b"{}", {})
    await client.close()
    assert dns.lookups == ["callback.example", "callback.example"]


async def test_rebinding_to_nat64_metadata_after_registration_is_refused_when_connecting(
    app: CallbackRecorder,
) -> None:
    dns = HostileDns({"callback.example": ["93.184.216.34"]})
    assert await check_callback_url("http://callback.example/cb", False, resolve=dns) == (
        "http://callback.example/cb"
    )
    dns.answers["callback.example"] = ["64:ff9b::a9fe:a9fe"]  # the owner of the name repoints it
    client = Http1Client(allow_private=False, resolve=dns)
    result = await exchange(
        client, "http://callback.example/cb", b"{}", {}, deadline_s=2, allow_private=False
    )
    await client.close()
    assert result.outcome.kind is OutcomeKind.FAILED
    assert "64:ff9b::a9fe:a9fe" in result.outcome.detail and "refused" in result.outcome.detail


async def test_the_resolver_answer_is_what_the_client_connects_to(app: CallbackRecorder) -> None:
    dns = HostileDns({"callback.example": ["127.0.0.1"]})
    client = Http1Client(allow_private=True, resolve=dns)
    answer = await client.post(f"http://callback.example:{app.port}/callback", b"{}", {})
    await client.close()
    assert answer.status == 200 and answer.body == b"OK"
    assert [c.headers["host"] for c in app.calls] == [f"callback.example:{app.port}"]


# ------------------------------------------------------------------------ the request line


@pytest.mark.parametrize("path", ["/call back", "/cb\r\nx-evil: 1", "/c\tb", "/cb\x00", "/cb\x7f", "/cb\x85"])
async def test_the_client_never_writes_a_request_line_with_controls_or_spaces(
    app: CallbackRecorder, path: str
) -> None:
    client = Http1Client(allow_private=True)
    with pytest.raises(UrlRefused, match="not allowed in a URL"):
        await client.post(app.base_url + path, b"{}", {})
    result = await exchange(client, app.base_url + path, b"{}", {}, deadline_s=2)
    await client.close()
    assert result.outcome.kind is OutcomeKind.FAILED
    assert result.outcome.detail.startswith("refused URL: character ")
    assert app.connections == 0


async def test_a_non_ascii_path_is_sent_percent_encoded(app: CallbackRecorder) -> None:
    client = Http1Client(allow_private=True)
    answer = await client.post(app.base_url + "/café?q=ü", b"{}", {})
    await client.close()
    assert answer.status == 200
    assert [c.path for c in app.calls] == ["/caf%C3%A9?q=%C3%BC"]


async def test_a_bad_host_name_is_a_refusal_not_a_crash() -> None:
    with pytest.raises(UrlRefused, match="not a valid host name"):
        await check_callback_url("http://a..b/cb", False)
    client = Http1Client(allow_private=True)
    with pytest.raises(UrlRefused, match="not a valid host name"):
        await client.post("http://a..b/cb", b"{}", {})
    await client.close()
