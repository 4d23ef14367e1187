"""WhatsApp secrets sealed at rest (config.sealed): the sealed form, the settings opening it, ``mogateway
secrets seal``, ``reencrypt``'s note, a start refused in one line, and a real ``mogateway serve`` whose
three WhatsApp secrets are all sealed answering Meta's handshake, a signed webhook and replying with the
sealed access token (the fake Graph API accepts only the right one)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mogateway.config import ConfigError, load_settings
from mogateway.config.sealed import SealedValueError, open_value, seal_value
from mogateway.config.secret_key import new_key, parse_key
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder, RecordedCall

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import (
    GatewayClient,
    clean_env,
    free_port,
    mogateway_command,
    serve_env,
    start_serve,
)

APP_SECRET = "app-secret-for-sealing-0123456789"
VERIFY_TOKEN = "verify-token-for-sealing"
ACCESS_TOKEN = "rehearsal-token"  # the fake Graph API's token: a reply goes out only with it
PNID = "106540352242922"
BUSINESS = "919876543210"
KEY = new_key()
OTHER_KEY = new_key()


def _config(path: Path, app_secret: str, verify_token: str, access_token: str, graph: str = "") -> Path:
    path.write_text(
        f"""
[whatsapp]
app_secret = "{app_secret}"
verify_token = "{verify_token}"
graph_url = "{graph or "http://127.0.0.1:9"}"

[[whatsapp.numbers]]
phone_number_id = "{PNID}"
display_phone_number = "{BUSINESS}"
access_token = "{access_token}"
"""
    )
    return path


def _sealed(key: str = KEY) -> tuple[str, str, str]:
    k = parse_key(key)
    return (
        seal_value(k, APP_SECRET, "whatsapp.app_secret"),
        seal_value(k, VERIFY_TOKEN, "whatsapp.verify_token"),
        seal_value(k, ACCESS_TOKEN, "whatsapp.access_token", bound_to=PNID),
    )


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("MOGATEWAY_")]:
        monkeypatch.delenv(name)


# ------------------------------------------------------------------------------------ the sealed form


def test_a_sealed_value_opens_under_its_key_and_context_only() -> None:
    key, other = parse_key(KEY), parse_key(OTHER_KEY)
    sealed = seal_value(key, ACCESS_TOKEN, "whatsapp.access_token", bound_to=PNID)
    assert sealed.startswith("sealed:v1:") and ACCESS_TOKEN not in sealed
    assert sealed != seal_value(key, ACCESS_TOKEN, "whatsapp.access_token", bound_to=PNID)  # fresh nonce
    assert (
        open_value(sealed, "whatsapp.access_token", [other, key], setting="s", bound_to=PNID) == ACCESS_TOKEN
    )

    with pytest.raises(SealedValueError, match="sealed for another setting") as wrong_context:
        open_value(sealed, "whatsapp.app_secret", [key], setting="whatsapp.app_secret")
    with pytest.raises(SealedValueError, match="not under secret_key or old_secret_key") as wrong_key:
        open_value(sealed, "whatsapp.access_token", [other], setting="whatsapp.access_token", bound_to=PNID)
    with pytest.raises(SealedValueError, match=r"secret_key \(MOGATEWAY_SECRET_KEY\) is not set"):
        open_value(sealed, "whatsapp.access_token", [], setting="whatsapp.access_token", bound_to=PNID)
    altered = sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")
    with pytest.raises(SealedValueError, match="altered"):
        open_value(altered, "whatsapp.access_token", [key], setting="whatsapp.access_token", bound_to=PNID)
    for exc in (wrong_context.value, wrong_key.value):
        assert ACCESS_TOKEN not in str(exc) and "\n" not in str(exc)


def test_settings_open_sealed_values_from_the_file_and_the_environment(
    tmp_path: Path, no_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, verify, token = _sealed()
    config = _config(tmp_path / "m.toml", app, verify, "clear-token-in-file")
    monkeypatch.setenv("MOGATEWAY_SECRET_KEY", OTHER_KEY)
    monkeypatch.setenv("MOGATEWAY_OLD_SECRET_KEY", KEY)  # a key being replaced still opens its values
    monkeypatch.setenv(f"MOGATEWAY_WHATSAPP_ACCESS_TOKEN_{PNID}", token)  # wins over the file
    wa = load_settings(config).whatsapp
    assert wa is not None
    assert wa.app_secret.get_secret_value() == APP_SECRET
    assert wa.verify_token.get_secret_value() == VERIFY_TOKEN
    number = wa.number(PNID)
    assert number is not None and number.access_token.get_secret_value() == ACCESS_TOKEN
    kid = app.split(":")[2]
    assert {how for _, how in wa.stored.values()} == {kid}
    assert sorted(context for context, _ in wa.stored.values()) == [
        "whatsapp.access_token",
        "whatsapp.app_secret",
        "whatsapp.verify_token",
    ]


def test_clear_values_keep_working_and_are_recorded_as_clear(tmp_path: Path, no_env: None) -> None:
    config = _config(tmp_path / "m.toml", APP_SECRET, VERIFY_TOKEN, ACCESS_TOKEN)
    wa = load_settings(config, secret_key=KEY).whatsapp
    assert wa is not None and wa.app_secret.get_secret_value() == APP_SECRET
    assert {how for _, how in wa.stored.values()} == {"clear"}


def test_a_sealed_app_secret_pasted_as_the_verify_token_stops_the_settings(
    tmp_path: Path, no_env: None
) -> None:
    app, _, token = _sealed()
    config = _config(tmp_path / "m.toml", app, app, token)
    with pytest.raises(ConfigError) as refused:
        load_settings(config, secret_key=KEY)
    message = str(refused.value)
    assert message.startswith("whatsapp.verify_token (MOGATEWAY_WHATSAPP__VERIFY_TOKEN) does not open")
    assert "--context whatsapp.verify_token" in message


OTHER_PNID = "106540352242999"


def test_a_sealed_access_token_opens_for_its_own_number_only(tmp_path: Path, no_env: None) -> None:
    key = parse_key(KEY)
    theirs = seal_value(key, "token-of-the-other-number", "whatsapp.access_token", bound_to=OTHER_PNID)
    config = _config(tmp_path / "m.toml", APP_SECRET, VERIFY_TOKEN, theirs)  # pasted into PNID's entry
    with pytest.raises(ConfigError) as refused:
        load_settings(config, secret_key=KEY)
    message = str(refused.value)
    assert message.startswith(f"whatsapp.numbers access_token of {PNID}")
    assert "sealed for another setting or another phone_number_id" in message
    assert f"--context whatsapp.access_token --number {PNID}" in message
    assert "token-of-the-other-number" not in message

    wa = load_settings(_config(tmp_path / "n.toml", *_sealed(KEY)), secret_key=KEY).whatsapp
    assert wa is not None and wa.numbers[0].access_token.get_secret_value() == ACCESS_TOKEN


def test_an_access_token_sealed_before_the_binding_is_refused_and_secrets_seal_binds_it(
    tmp_path: Path, no_env: None
) -> None:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from mogateway.config.sealed import b64, key_id

    key = parse_key(KEY)
    nonce = os.urandom(12)  # as mogateway sealed access tokens before: the context alone
    body = AESGCM(key).encrypt(nonce, ACCESS_TOKEN.encode(), b"mogateway setting\x00whatsapp.access_token")
    unbound = f"sealed:v1:{key_id(key)}:{b64(nonce + body)}"
    config = _config(tmp_path / "m.toml", APP_SECRET, VERIFY_TOKEN, unbound)
    with pytest.raises(ConfigError) as refused:
        load_settings(config, secret_key=KEY)
    assert "was sealed without its phone_number_id" in str(refused.value)
    assert f"mogateway secrets seal --context whatsapp.access_token --number {PNID}" in str(refused.value)

    seal = ("secrets", "seal", "--context", "whatsapp.access_token", "--number", PNID)
    bound = _cli(clean_env(MOGATEWAY_SECRET_KEY=KEY), *seal, stdin=unbound)
    assert bound.returncode == 0, bound.stderr
    config = _config(tmp_path / "m.toml", APP_SECRET, VERIFY_TOKEN, bound.stdout.strip())
    wa = load_settings(config, secret_key=KEY).whatsapp
    assert wa is not None and wa.numbers[0].access_token.get_secret_value() == ACCESS_TOKEN


# ------------------------------------------------------------------------------------ the CLI


def _cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*mogateway_command(), *args], input=stdin, env=env, capture_output=True, text=True, timeout=60
    )


def test_secrets_seal_reads_standard_input_and_seals_for_one_setting() -> None:
    env = clean_env(MOGATEWAY_SECRET_KEY=KEY)
    seal = ("secrets", "seal", "--context", "whatsapp.access_token", "--number", PNID)
    done = _cli(env, *seal, stdin=ACCESS_TOKEN + "\n")
    assert done.returncode == 0, done.stderr
    sealed = done.stdout.strip()
    assert ACCESS_TOKEN not in done.stdout and ACCESS_TOKEN not in done.stderr
    assert open_value(sealed, "whatsapp.access_token", [parse_key(KEY)], setting="s", bound_to=PNID) == (
        ACCESS_TOKEN
    )
    with pytest.raises(SealedValueError):
        open_value(sealed, "whatsapp.app_secret", [parse_key(KEY)], setting="s")

    # Moving to a new key: the sealed value on standard input is sealed again under the new one.
    rotated = clean_env(MOGATEWAY_SECRET_KEY=OTHER_KEY, MOGATEWAY_OLD_SECRET_KEY=KEY)
    again = _cli(rotated, *seal, stdin=sealed)
    assert again.returncode == 0, again.stderr
    opened = open_value(
        again.stdout.strip(), "whatsapp.access_token", [parse_key(OTHER_KEY)], setting="s", bound_to=PNID
    )
    assert opened == ACCESS_TOKEN


@pytest.mark.parametrize(
    ("env", "args", "stdin", "says"),
    [
        (
            {},
            ("--context", "whatsapp.access_token", "--number", PNID),
            "x",
            "set secret_key (MOGATEWAY_SECRET_KEY)",
        ),
        ({"MOGATEWAY_SECRET_KEY": KEY}, ("--context", "whatsapp.access_token"), "x", "--number: whatsapp"),
        (
            {"MOGATEWAY_SECRET_KEY": KEY},
            ("--context", "whatsapp.app_secret", "--number", PNID),
            "x",
            "--number is",
        ),
        ({"MOGATEWAY_SECRET_KEY": KEY}, ("--context", "whatsapp.token"), "x", "--context must be one of"),
        ({"MOGATEWAY_SECRET_KEY": KEY}, ("--context", "whatsapp.app_secret"), "\n", "nothing to seal"),
    ],
)
def test_secrets_seal_refuses_in_one_line(
    env: dict[str, str], args: tuple[str, ...], stdin: str, says: str
) -> None:
    done = _cli(clean_env(**env), "secrets", "seal", *args, stdin=stdin)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_reencrypt_lists_the_settings_secrets_to_seal_again(tmp_path: Path) -> None:
    app, verify, _ = _sealed(KEY)
    config = _config(tmp_path / "m.toml", app, verify, ACCESS_TOKEN)
    env = clean_env(
        MOGATEWAY_DATABASE=str(tmp_path / "journal.db"),
        MOGATEWAY_SECRET_KEY=OTHER_KEY,
        MOGATEWAY_OLD_SECRET_KEY=KEY,
    )
    done = _cli(env, "secrets", "reencrypt", "--config", str(config))
    assert done.returncode == 0, done.stderr
    kid = app.split(":")[2]
    lines = done.stdout.splitlines()
    assert "does not rewrite your config file" in done.stdout
    assert (
        f"  whatsapp.app_secret (MOGATEWAY_WHATSAPP__APP_SECRET), sealed under key id {kid}: "
        "mogateway secrets seal --context whatsapp.app_secret"
    ) in lines
    assert (
        f"  whatsapp.numbers access_token of {PNID} (MOGATEWAY_WHATSAPP_ACCESS_TOKEN_{PNID}), in clear: "
        f"mogateway secrets seal --context whatsapp.access_token --number {PNID}"
    ) in lines
    assert APP_SECRET not in done.stdout and ACCESS_TOKEN not in done.stdout


# ------------------------------------------------------------------------------------ serve


@pytest.mark.parametrize(
    ("key", "says"),
    [
        (None, "whatsapp.app_secret (MOGATEWAY_WHATSAPP__APP_SECRET) is sealed (key id"),
        (OTHER_KEY, "whatsapp.app_secret (MOGATEWAY_WHATSAPP__APP_SECRET) is sealed under key id"),
    ],
)
def test_serve_with_sealed_values_and_no_or_the_wrong_key_stops_in_one_line(
    tmp_path: Path, key: str | None, says: str
) -> None:
    config = _config(tmp_path / "m.toml", *_sealed(KEY))
    env = serve_env(tmp_path, **({"MOGATEWAY_SECRET_KEY": key} if key else {}))
    done = subprocess.run(
        [*mogateway_command(), "serve", "--port", str(free_port()), "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    for secret in (APP_SECRET, VERIFY_TOKEN, ACCESS_TOKEN, KEY, OTHER_KEY):
        assert secret not in done.stderr


def _answer(call: RecordedCall) -> Answer:
    return Answer.text(f"You said {call.json()['message']}")


def _wait(predicate: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)
    return value


@pytest.fixture(scope="module")
def graph() -> Iterator[FakeGraphServer]:
    with FakeGraphServer() as server:
        yield server


def test_serve_with_every_whatsapp_secret_sealed_handshakes_verifies_and_replies(
    tmp_path: Path, graph: FakeGraphServer
) -> None:
    sealed = _sealed(OTHER_KEY)
    config = _config(tmp_path / "m.toml", *sealed, graph=graph.url)
    # The values were sealed under the key being replaced: old_secret_key opens them.
    env = serve_env(tmp_path, MOGATEWAY_SECRET_KEY=KEY, MOGATEWAY_OLD_SECRET_KEY=OTHER_KEY)
    with CallbackRecorder.in_thread(_answer) as app:
        serve = start_serve(tmp_path, env, args=["--config", str(config)])
        gw = GatewayClient(serve.url)
        meta = wh.WebhookSender(serve.url + "/v1/whatsapp/webhook", APP_SECRET)
        try:
            ok = meta.handshake(VERIFY_TOKEN, challenge="424242")
            assert (ok.status_code, ok.text) == (200, "424242")
            assert meta.handshake(sealed[1]).status_code == 403  # the sealed text is not the token

            created = gw.admin(
                "POST",
                "/v1/clients",
                json={"name": "wa", "whatsapp_numbers": [BUSINESS], "callback_url": app.url},
            )
            assert created.status_code == 201, created.text
            body = meta.body(wh.text("919812345678", "SEALED"))
            assert meta.post(body, signature="sha256=" + "0" * 64).status == 401
            delivery = meta.post(body)
            assert delivery.status == 200, delivery.text

            def sent() -> list[dict[str, Any]]:
                data: list[dict[str, Any]] = httpx.get(
                    graph.url + "/__fake/messages", params={"to": "919812345678"}
                ).json()["data"]
                return data

            (reply,) = _wait(sent, "reply at the fake Graph API")
            assert reply["phone_number_id"] == PNID and reply["text"] == "You said SEALED"
        finally:
            meta.close()
            gw.close()
            assert serve.stop() == 0
    stderr = serve.stderr()
    assert "stored in clear" not in stderr
    for secret in (APP_SECRET, VERIFY_TOKEN, ACCESS_TOKEN):
        assert secret not in stderr


def test_serve_warns_once_that_clear_values_are_stored_in_clear_when_a_key_is_set(tmp_path: Path) -> None:
    app, verify, _ = _sealed(KEY)
    config = _config(tmp_path / "m.toml", app, verify, ACCESS_TOKEN)
    serve = start_serve(
        tmp_path,
        serve_env(tmp_path, MOGATEWAY_SECRET_KEY=KEY, MOGATEWAY_LOG_LEVEL="info"),  # info: the start line
        args=["--config", str(config), "--workers", "2"],
    )
    serve.wait_all_serving()  # the warning is one worker's; /healthz answered from either
    assert serve.stop() == 0
    warnings = [line for line in serve.stderr().splitlines() if "stored in clear" in line]
    assert len(warnings) == 1, serve.stderr()
    assert f"whatsapp.numbers access_token of {PNID}" in warnings[0]
    assert "app_secret" not in warnings[0] and ACCESS_TOKEN not in warnings[0]
