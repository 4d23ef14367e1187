"""``verify_signature`` and ``SignatureVerifier`` as an application uses them, and every adapter
refusing a bad signature with 401 before its handler runs (real servers on 127.0.0.1)."""

from __future__ import annotations

import threading
import time

import httpx
import orjson
import pytest
from client_servers import TOKEN, Serve
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers as StarletteHeaders
from werkzeug.datastructures import Headers as WerkzeugHeaders

from mogateway.client import (
    InboundMessage,
    SignatureError,
    SignatureFailure,
    SignatureVerifier,
    verify_signature,
)
from mogateway.core.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER
from mogateway.testing.payloads import make_callback

SECRET = "app-signing-secret-0123456789-abcdefghij"
NEW_SECRET = "app-signing-secret-NEW-9876543210-zyxwvu"
NOW = 1_800_000_000


def signed(
    message: str = "HELLO", *, secret: str | list[str] = SECRET, at: int = NOW
) -> tuple[bytes, dict[str, str]]:
    return make_callback(message, token=TOKEN, signing_secret=secret, signed_at=at)


def reason(body: bytes, headers: object, secrets: object = SECRET, **kw: object) -> str:
    with pytest.raises(SignatureError) as caught:
        verify_signature(body, headers, secrets, now=kw.pop("now", NOW), **kw)  # type: ignore[arg-type]
    return caught.value.reason.value


# ------------------------------------------------------------------------------------ the function


def test_a_signed_callback_verifies_and_gives_its_timestamp() -> None:
    body, headers = signed()
    assert verify_signature(body, headers, SECRET, now=NOW) == NOW
    assert verify_signature(body.decode(), headers, [SECRET], now=NOW + 299) == NOW  # a decoded str body


def test_each_failure_has_its_reason() -> None:
    body, headers = signed()
    without_sig = {k: v for k, v in headers.items() if k != SIGNATURE_HEADER}
    without_ts = {k: v for k, v in headers.items() if k != TIMESTAMP_HEADER}
    assert reason(body, without_sig) == "missing"
    assert reason(body, without_ts) == "missing"
    assert reason(body, {}) == "missing"
    assert reason(body, {**headers, TIMESTAMP_HEADER: "yesterday"}) == "malformed"
    assert reason(body, {**headers, SIGNATURE_HEADER: "sha256=abc"}) == "malformed"
    assert reason(body, headers, now=NOW + 301) == "stale"
    assert reason(body, headers, now=NOW - 301) == "future"
    assert reason(body, headers, now=NOW + 3600, tolerance_s=3000) == "stale"
    assert reason(body + b" ", headers) == "no_match"
    assert reason(body, headers, "not-the-secret") == "no_match"
    assert {r.value for r in SignatureFailure} == {"missing", "malformed", "stale", "future", "no_match"}


def test_the_current_clock_is_used_when_now_is_not_given() -> None:
    body, headers = signed(at=int(time.time()))
    assert verify_signature(body, headers, SECRET) > 0
    body, headers = signed(at=int(time.time()) - 3600)
    with pytest.raises(SignatureError) as caught:
        verify_signature(body, headers, SECRET)
    assert caught.value.reason is SignatureFailure.STALE


def test_header_names_match_whatever_their_case_and_container() -> None:
    body, headers = signed()
    title = {k.title(): v for k, v in headers.items()}
    upper = {k.upper(): v for k, v in headers.items()}
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]  # ASGI scope["headers"]
    for source in (title, upper, raw, StarletteHeaders(headers), WerkzeugHeaders(list(title.items()))):
        assert verify_signature(body, source, SECRET, now=NOW) == NOW  # type: ignore[arg-type]


def test_a_repeated_signature_header_is_one_list_and_a_conflicting_timestamp_is_malformed() -> None:
    body, headers = signed(secret=[NEW_SECRET, SECRET])
    first, second = headers[SIGNATURE_HEADER].split(",")
    pairs = [(k, v) for k, v in headers.items() if k != SIGNATURE_HEADER]
    assert verify_signature(
        body, [*pairs, (SIGNATURE_HEADER, first), (SIGNATURE_HEADER, second)], SECRET, now=NOW
    )
    twice = [*headers.items(), (TIMESTAMP_HEADER, str(NOW + 1))]
    assert reason(body, twice) == "malformed"


def test_rotation_either_secret_verifies_both_signatures() -> None:
    body, headers = signed(secret=[NEW_SECRET, SECRET])
    for secrets in (SECRET, NEW_SECRET, [SECRET, NEW_SECRET], ["unrelated", NEW_SECRET]):
        assert verify_signature(body, headers, secrets, now=NOW) == NOW
    body, headers = signed(secret=NEW_SECRET)  # after the grace: only the new secret signs
    assert reason(body, headers, SECRET) == "no_match"


def test_the_verifier_never_shows_its_secrets_and_refuses_nonsense() -> None:
    verifier = SignatureVerifier(SECRET, NEW_SECRET, tolerance_s=60)
    assert SECRET not in repr(verifier) and NEW_SECRET not in repr(verifier) and len(verifier) == 2
    body, headers = signed()
    assert SignatureVerifier(f" {SECRET}\n").verify(body, headers, now=NOW) == NOW
    for bad in ((), ("",), ("  ",)):
        with pytest.raises(ValueError):
            SignatureVerifier(*bad)
    with pytest.raises(ValueError):
        SignatureVerifier(SECRET, tolerance_s=0)
    with pytest.raises(ValueError):
        verify_signature(body, headers, [], now=NOW)


@given(body=st.binary(max_size=1024), at=st.integers(min_value=0, max_value=2**33), data=st.data())
def test_property_sign_verify_round_trip_and_any_byte_change_fails(
    body: bytes, at: int, data: st.DataObject
) -> None:
    from mogateway.core.signing import signature_headers

    headers = signature_headers([SECRET], at, body)
    assert verify_signature(body, headers, SECRET, now=at) == at
    if body:
        index = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
        changed = bytearray(body)
        changed[index] ^= data.draw(st.integers(min_value=1, max_value=255))
        with pytest.raises(SignatureError) as caught:
            verify_signature(bytes(changed), headers, SECRET, now=at)
        assert caught.value.reason is SignatureFailure.NO_MATCH


# ------------------------------------------------------------------------------------ the adapters


class Calls:
    """A handler that counts its calls (the 401s must come before it runs)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, message: InboundMessage) -> str:
        with self._lock:
            self.count += 1
        return f"You said: {message.message}"


def post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers, timeout=10)


def problem_of(response: httpx.Response) -> dict[str, object]:
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    document: dict[str, object] = orjson.loads(response.content)
    assert document["status"] == 401
    return document


def test_each_adapter_answers_a_good_signature_and_refuses_bad_ones_before_the_handler(serve: Serve) -> None:
    handler = Calls()
    now = int(time.time())
    with serve(handler, signing_secrets=[NEW_SECRET, SECRET]) as url:
        ok = post(url, *signed("HI", at=now))
        assert (ok.status_code, ok.text) == (200, "You said: HI")
        rotated = post(url, *signed("HI", secret=[NEW_SECRET, SECRET], at=now))
        assert rotated.status_code == 200
        assert handler.count == 2

        body, headers = signed("HI", at=now)
        tampered = post(url, body.replace(b'"HI"', b'"HO"'), headers)
        assert problem_of(tampered)["reason"] == "no_match"
        old = post(url, *signed("HI", at=now - 3600))
        assert problem_of(old)["reason"] == "stale"
        ahead = post(url, *signed("HI", at=now + 3600))
        assert problem_of(ahead)["reason"] == "future"
        unsigned = post(url, *make_callback("HI", token=TOKEN))
        assert problem_of(unsigned)["reason"] == "missing"
        wrong = post(url, *signed("HI", secret="someone-elses-secret", at=now))
        assert problem_of(wrong)["reason"] == "no_match"
        assert handler.count == 2  # no refused request reached the handler

        # The token is still checked first: a good signature does not stand in for it.
        body, headers = signed("HI", at=now)
        no_token = post(url, body, {**headers, "authorization": "Bearer wrong"})
        assert no_token.status_code == 401 and "reason" not in orjson.loads(no_token.content)
    assert handler.count == 2


def test_each_adapter_honours_its_tolerance(serve: Serve) -> None:
    with serve(Calls(), signing_secrets=SECRET, signature_tolerance_s=5) as url:
        assert post(url, *signed(at=int(time.time()))).status_code == 200
        assert problem_of(post(url, *signed(at=int(time.time()) - 60)))["reason"] == "stale"


def test_the_fastapi_dependency_checks_the_signature_before_the_route_runs() -> None:
    from fastapi import Depends, FastAPI, Response

    from mogateway.client.fastapi import install_problem_responses, message_dependency, reply_response
    from mogateway.testing.callback_apps import serve_asgi

    handler = Calls()
    app = FastAPI()
    install_problem_responses(app)
    verified = message_dependency([TOKEN], signing_secrets=[SECRET])

    @app.post("/sms")
    async def sms(message: InboundMessage = Depends(verified)) -> Response:
        return reply_response(handler(message))

    with serve_asgi(app) as base:
        now = int(time.time())
        assert post(base + "/sms", *signed("HI", at=now)).text == "You said: HI"
        body, headers = signed("HI", at=now)
        assert problem_of(post(base + "/sms", body + b" ", headers))["reason"] == "no_match"
        assert problem_of(post(base + "/sms", *signed("HI", at=now - 600)))["reason"] == "stale"
    assert handler.count == 1


def test_without_signing_secrets_an_adapter_ignores_signatures(serve: Serve) -> None:
    with serve(Calls()) as url:
        assert post(url, *make_callback("HI", token=TOKEN)).status_code == 200
        assert post(url, *signed("HI", at=1)).status_code == 200
