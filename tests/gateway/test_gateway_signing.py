"""Signed callbacks from a real gateway: what a signing client receives (verified with the SDK), rotation
with its grace period, turning signing on and off, and where a secret may and may not appear.

The gateways are ``mogateway serve`` with several workers (one per module for each grace setting), each
test on shortcodes of its own: a secret rotated through one worker signs on every worker at once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_harness import Codes, ServeGateway, serve_gateway, wait_until

from mogateway import __version__
from mogateway.client import SignatureError, verify_signature
from mogateway.core.clients import ClientRecord
from mogateway.core.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER
from mogateway.testing.recorder import CallbackRecorder, RecordedCall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "callback"
SC = "56767"
GRACE_S = 1.5
URLSAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.fixture(scope="module")
def short_grace_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeGateway]:
    with serve_gateway(tmp_path_factory.mktemp("grace"), signing_grace_s=GRACE_S) as gateway:
        yield gateway


def one_call(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, message: str = "HELLO"
) -> tuple[RecordedCall, str]:
    accepted = gw.push(codes[0], message)
    gw.wait_state(accepted["id"])
    calls = [c for c in app.calls if c.headers.get("x-mogateway-message-id") == accepted["id"]]
    assert len(calls) == 1, app.calls
    return calls[0], accepted["id"]


def verifies(call: RecordedCall, secret: str) -> bool:
    try:
        verify_signature(call.body, call.headers, secret)
    except SignatureError:
        return False
    return True


def test_a_signing_client_gets_callbacks_the_sdk_verifies(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url, sign_callbacks=True)
    secret = client["signing_secret"]
    assert client["sign_callbacks"] is True and client["signing_grace_until"] is None
    assert len(secret) >= 43 and set(secret) <= URLSAFE  # 32 random bytes, url-safe
    assert secret != client["token"]

    call, message_id = one_call(gw, codes, app)
    assert verify_signature(call.body, call.headers, secret) == int(call.headers[TIMESTAMP_HEADER])
    assert abs(int(call.headers[TIMESTAMP_HEADER]) - time.time()) < 10
    assert call.headers[SIGNATURE_HEADER].count("v1=") == 1
    # The contract's own headers are those of an unsigned callback, unchanged.
    template = json.loads((FIXTURES / "signed_headers.json").read_text())
    for name in ("content-type", "authorization", "user-agent", "x-mogateway-message-id"):
        expected = template[name].format(token=client["token"], version=__version__, message_id=message_id)
        assert call.headers[name] == expected
    assert gw.message(message_id)["state"] == "replied"

    with pytest.raises(SignatureError) as caught:
        verify_signature(call.body.replace(b"HELLO", b"HELLP"), call.headers, secret)
    assert caught.value.reason.value == "no_match"


def test_an_unsigned_client_gets_no_signature_headers(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    assert client["sign_callbacks"] is False and "signing_secret" not in client
    call, _ = one_call(gw, codes, app)
    assert TIMESTAMP_HEADER not in call.headers and SIGNATURE_HEADER not in call.headers
    assert not [
        name for name in call.headers if name.startswith("x-mogateway-") and name != "x-mogateway-message-id"
    ]


def test_the_secret_is_shown_once_and_never_again(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url, sign_callbacks=True)
    secret, token = client["signing_secret"], client["token"]
    shown = gw.admin("GET", f"/v1/clients/{client['id']}")
    listed = gw.admin("GET", "/v1/clients")
    patched = gw.admin(
        "PATCH", f"/v1/clients/{client['id']}", json={"name": "renamed", "sign_callbacks": True}
    )
    for response in (shown, listed, patched):
        assert response.status_code == 200
        assert secret not in response.text and token not in response.text
        assert "signing_secret" not in response.text
    assert shown.json()["sign_callbacks"] is True
    assert patched.json()["sign_callbacks"] is True  # already signing: the same secret, not shown
    call, message_id = one_call(gw, codes, app)
    assert verifies(call, secret)
    # Neither the timeline nor the message shows a secret.
    assert secret not in gw.admin("GET", f"/v1/messages/{message_id}").text
    # A rotated token comes without the signing secret (and the other way round).
    rotated_token = gw.admin("POST", f"/v1/clients/{client['id']}/token").json()
    assert "signing_secret" not in rotated_token and rotated_token["token"] != token
    rotated_secret = gw.admin("POST", f"/v1/clients/{client['id']}/signing-secret").json()
    assert "token" not in rotated_secret and rotated_secret["signing_secret"] != secret


def test_signing_can_be_turned_on_and_off(gw: ServeGateway, codes: Codes, app: CallbackRecorder) -> None:
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    refused = gw.admin("POST", f"/v1/clients/{client['id']}/signing-secret")
    assert refused.status_code == 409
    assert refused.headers["content-type"] == "application/problem+json"
    assert "sign_callbacks" in refused.json()["detail"]

    on = gw.admin("PATCH", f"/v1/clients/{client['id']}", json={"sign_callbacks": True})
    assert on.status_code == 200 and on.json()["sign_callbacks"] is True
    secret = on.json()["signing_secret"]
    call, _ = one_call(gw, codes, app)
    assert verifies(call, secret)

    off = gw.admin("PATCH", f"/v1/clients/{client['id']}", json={"sign_callbacks": False})
    assert off.json()["sign_callbacks"] is False and "signing_secret" not in off.json()
    call, _ = one_call(gw, codes, app, "AGAIN")
    assert SIGNATURE_HEADER not in call.headers and TIMESTAMP_HEADER not in call.headers

    again = gw.admin("PATCH", f"/v1/clients/{client['id']}", json={"sign_callbacks": True}).json()
    assert again["signing_secret"] != secret  # a new secret: the old one was forgotten


def test_rotation_signs_with_both_secrets_during_the_grace_then_only_the_new(
    short_grace_gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    gw = short_grace_gw
    client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url, sign_callbacks=True)
    old = client["signing_secret"]
    before = time.time()
    rotated = gw.admin("POST", f"/v1/clients/{client['id']}/signing-secret")
    assert rotated.status_code == 200
    new = rotated.json()["signing_secret"]
    assert new != old
    shown = gw.admin("GET", f"/v1/clients/{client['id']}").json()
    grace_until = shown["signing_grace_until"]
    assert grace_until is not None and grace_until == rotated.json()["signing_grace_until"]
    from mogateway.core.contract import parse_tsiso

    assert before + GRACE_S - 1 <= parse_tsiso(grace_until).timestamp() <= time.time() + GRACE_S + 1

    during, _ = one_call(gw, codes, app, "DURING")
    assert during.headers[SIGNATURE_HEADER].count("v1=") == 2
    assert verifies(during, old) and verifies(during, new)
    # Newest first: the first value is the new secret's.
    first = during.headers[SIGNATURE_HEADER].split(",")[0]
    assert verify_signature(during.body, {**during.headers, SIGNATURE_HEADER: first}, new)

    wait_until(
        lambda: gw.admin("GET", f"/v1/clients/{client['id']}").json()["signing_grace_until"] is None,
        "the grace period to end",
        timeout=GRACE_S + 5,
    )
    assert time.time() >= parse_tsiso(grace_until).timestamp()
    after, _ = one_call(gw, codes, app, "AFTER")
    assert after.headers[SIGNATURE_HEADER].count("v1=") == 1
    assert verifies(after, new) and not verifies(after, old)
    assert gw.admin("GET", f"/v1/clients/{client['id']}").json()["signing_grace_until"] is None


def test_a_rotation_with_no_grace_signs_with_the_new_secret_at_once(
    tmp_path: Path, codes: Codes, app: CallbackRecorder
) -> None:
    with serve_gateway(tmp_path, signing_grace_s=0) as gw:
        client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url, sign_callbacks=True)
        rotated = gw.admin("POST", f"/v1/clients/{client['id']}/signing-secret").json()
        assert rotated["signing_grace_until"] is None
        call, _ = one_call(gw, codes, app)
        assert verifies(call, rotated["signing_secret"]) and not verifies(call, client["signing_secret"])


def test_secrets_never_reach_the_log(tmp_path: Path, codes: Codes, app: CallbackRecorder) -> None:
    """The whole log of a gateway at DEBUG (every worker's: its stderr)."""
    with serve_gateway(tmp_path, log_level="debug") as gw:
        client = gw.add_client(shortcodes=[codes[0]], callback_url=app.url, sign_callbacks=True)
        one_call(gw, codes, app)
        rotated = gw.admin("POST", f"/v1/clients/{client['id']}/signing-secret").json()
        one_call(gw, codes, app, "AGAIN")
        bad = gw.admin("PATCH", f"/v1/clients/{client['id']}", json={"sign_callbacks": "perhaps"})
        assert bad.status_code == 422
    logged = gw.stderr()
    assert "DEBUG" in logged  # (the log was at DEBUG)
    for secret in (client["token"], client["signing_secret"], rotated["signing_secret"]):
        assert secret not in logged


def test_a_client_record_keeps_its_secrets_out_of_its_repr() -> None:
    record = ClientRecord(
        id="cl_1",
        name="bank",
        shortcodes=[SC],
        keywords=[],
        callback_url="https://app.example/sms",
        token="token-value-0123456789",
        signing_secret="signing-value-0123456789",
        previous_signing_secret="previous-value-0123456789",
        previous_signing_until=10.0,
    )
    text = repr(record)
    assert "cl_1" in text and "bank" in text
    assert "token-value" not in text and "signing-value" not in text and "previous-value" not in text
    assert record.signing_secrets(9.0) == ["signing-value-0123456789", "previous-value-0123456789"]
    assert record.signing_secrets(10.0) == ["signing-value-0123456789"]
