"""docs/client.md, as written: its code blocks are taken from the doc by the heading they are under and
run as a developer would, so the five-minute walkthrough and the reference keep working.

Sections 2-4: the application of section 2 is written to ``echo_app.py`` and started with section 3's
command; section 3's ``mogateway simulate`` sessions are run and their output compared with the doc's
(timings aside); section 4's tests run under pytest in a subprocess, and fail against a broken echo.
Section 5: its ``mogateway clients add`` against a real ``mogateway serve``, the application started
with the token it gives, and one MO through the gateway to the application and back as the reply.
The reference's Python blocks are executed, each in the namespace a reader has at that point of the
doc, and what they promise is checked, so a renamed API or a changed answer breaks this test.

The test changes only what a test must: the port (9000 may be taken here), the token where the
gateway generates one, the callback URL of section 5, and the doc's placeholders (``...``, ``…``)."""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import ServeProcess, clean_env, free_port, start_serve

from markdown_doc import MarkdownDoc
from mogateway.client import InboundMessage, parse_message
from mogateway.testing.payloads import make_callback, make_message

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/client.md")
BIN = Path(sys.executable).parent


# --------------------------------------------------------------------------------- the doc's blocks


def section(heading: str) -> str:
    """The text under the ``## `` heading that starts with ``heading``, up to the next ``## ``."""
    return DOC.section(f"## {heading}")


def blocks(heading: str, language: str) -> list[str]:
    """The ``language`` code blocks of that section, in order."""
    return DOC.blocks(f"## {heading}", language)


def block_with(heading: str, language: str, marker: str) -> str:
    """The one ``language`` block of the section that contains ``marker``."""
    (found,) = [b for b in blocks(heading, language) if marker in b]
    return found


def run_block(code: str, namespace: dict[str, Any], name: str) -> dict[str, Any]:
    """Execute a Python block of the doc in ``namespace`` (what the reader has defined so far)."""
    exec(compile(code, f"docs/client.md: {name}", "exec"), namespace)
    return namespace


def shell_env(**extra: str) -> dict[str, str]:
    """A developer's shell: no MOGATEWAY_* setting of ours, the virtualenv's ``python`` and ``mogateway``
    first on PATH, and ``extra``."""
    env = clean_env(**extra)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{BIN}{os.pathsep}{os.defpath}"
    return env


def bash(
    script: str, cwd: Path, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


# ------------------------------------------------------------------- sections 2 and 3: the application


def write_echo_app(workdir: Path) -> int:
    """Section 2's application as ``workdir/echo_app.py``, on a free port instead of 9000; the port."""
    (code,) = blocks("2. ", "python")
    assert "port=9000" in code, "section 2's application changed: adapt"
    port = free_port()
    (workdir / "echo_app.py").write_text(code.replace("port=9000", f"port={port}"))
    return port


def start_command() -> str:
    """Section 3's command that starts the application written in section 2."""
    first = blocks("3. ", "sh")[0].splitlines()[0]
    assert first.startswith("MOGATEWAY_CLIENT_TOKEN=s3cret python echo_app.py"), first
    return first


@contextmanager
def running_app(workdir: Path, command: str, port: int) -> Iterator[str]:
    """``command`` run by bash in ``workdir`` until the block ends; yields the application's URL once it
    accepts connections. Its output goes to a file (never a full pipe); it is stopped by its own pid."""
    log_path = workdir / "app.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=workdir,
            env=shell_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: bash and the python it runs
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the application exited: {log_path.read_text()}")
            try:
                httpx.get(url, timeout=1)  # any answer (405 to a GET) means it serves
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the application did not start: {log_path.read_text()}") from None
                time.sleep(0.05)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def sessions(text: str) -> list[tuple[str, str]]:
    """``$ command`` lines of a ``text`` block and the output the doc shows under each."""
    found: list[tuple[str, str]] = []
    for chunk in re.split(r"^\$ ", text, flags=re.M)[1:]:
        command, _, output = chunk.partition("\n")
        found.append((command, output.strip("\n")))
    return found


def without_timings(output: str) -> str:
    """``simulate``'s output with what varies from run to run (durations, rates, latencies) blanked."""
    output = re.sub(r"\b\d+ ms\b", "<ms>", output)
    output = re.sub(r"\d+\.\d+ s \(\d+\.\d+/s\)", "<s> (<rate>/s)", output)
    return re.sub(r"\b(p50|p90|p99|max) \d+\.\d+", r"\1 <ms>", output)


@pytest.fixture
def echo_app(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """Section 2's application started as section 3 says; its directory and URL."""
    port = write_echo_app(tmp_path)
    with running_app(tmp_path, start_command(), port) as url:
        yield tmp_path, url


@pytest.mark.slow  # it starts processes
def test_simulate_answers_as_section_3_shows(echo_app: tuple[Path, str]) -> None:
    workdir, url = echo_app
    shown = [s for block in blocks("3. ", "text") for s in sessions(block)]
    assert len(shown) == 3, "section 3's sessions changed: adapt"
    # The doc's exit codes: a reply is 0, a 401 is 5 (the table of `mogateway simulate`).
    expected_codes = [0, 5, 0]
    for (command, output), code in zip(shown, expected_codes, strict=True):
        assert command.startswith("mogateway simulate http://127.0.0.1:9000/ "), command
        ran = bash(command.replace("http://127.0.0.1:9000/", url), workdir, shell_env())
        assert ran.returncode == code, (command, ran.stdout, ran.stderr)
        actual = ran.stdout.strip("\n").replace(url, "http://127.0.0.1:9000/")
        assert without_timings(actual) == without_timings(output), (command, actual)


@pytest.mark.slow  # it starts processes
def test_section_3_runs_under_uvicorn_factory_too(tmp_path: Path) -> None:
    # "any ASGI server runs it (`uvicorn --factory echo_app:create_app`)", with two tokens for rotation.
    write_echo_app(tmp_path)
    (factory,) = re.findall(r"`(uvicorn --factory [^`]+)`", section("2. "))
    port = free_port()
    command = f"MOGATEWAY_CLIENT_TOKEN=old,new {factory} --port {port}"
    with running_app(tmp_path, command, port) as url:
        for token in ("old", "new"):
            body, headers = make_callback("HI", token=token)
            answer = httpx.post(url, content=body, headers=headers, timeout=30)
            assert (answer.status_code, answer.text) == (200, "You said: HI")


@pytest.mark.slow  # it starts processes
def test_section_4_tests_pass_and_the_ci_check_fails_on_a_broken_app(echo_app: tuple[Path, str]) -> None:
    workdir, url = echo_app
    (tests,) = blocks("4. ", "python")
    (workdir / "test_echo.py").write_text(tests)
    pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_echo.py"]
    passed = subprocess.run(
        pytest_command, cwd=workdir, env=shell_env(), capture_output=True, text=True, timeout=120
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "2 passed" in passed.stdout, passed.stdout

    # The same tests against an echo that answers something else: both fail (they can).
    broken = workdir / "broken"
    broken.mkdir()
    (broken / "test_echo.py").write_text(tests)
    app = (workdir / "echo_app.py").read_text()
    (broken / "echo_app.py").write_text(app.replace('f"You said: ', 'f"You sent: '))
    failed = subprocess.run(
        pytest_command, cwd=broken, env=shell_env(), capture_output=True, text=True, timeout=120
    )
    assert failed.returncode == 1 and "2 failed" in failed.stdout, failed.stdout + failed.stderr

    # The CI line: exit 0 on a reply, and `exit 1` when the answer would not be one (a wrong token).
    ci = next(line for line in blocks("4. ", "sh")[0].splitlines() if "mogateway simulate" in line)
    good = bash(ci, workdir, shell_env(CALLBACK_URL=url, TOKEN="s3cret"))
    assert good.returncode == 0 and "You said: HELLO" in good.stdout, good.stdout + good.stderr
    bad = bash(ci, workdir, shell_env(CALLBACK_URL=url, TOKEN="not-the-token"))
    assert bad.returncode == 1 and "status 401" in bad.stdout, bad.stdout + bad.stderr


# --------------------------------------------------------------------------------- section 5: go live


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    """A gateway as an operator starts it on one machine: callbacks to loopback allowed, the admin and
    ingest tokens generated into ./mogateway.db, where the CLI run in the same directory finds them."""
    serve = start_serve(
        tmp_path, clean_env(MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true"), args=("--workers", "1")
    )
    try:
        yield serve
    finally:
        serve.stop()


@pytest.mark.slow  # it starts processes
def test_section_5_registers_and_an_mo_is_answered(served: ServeProcess, tmp_path: Path) -> None:
    (register,) = blocks("5. ", "sh")
    register = register.strip()
    assert register.startswith("mogateway clients add ") and "--shortcode 56767" in register
    # The operator registers the application where it will run: on this machine, on a free port.
    port = write_echo_app(tmp_path)
    assert "https://app.example.in/sms" in register
    register = register.replace("https://app.example.in/sms", f"http://127.0.0.1:{port}/sms")
    added = bash(register, tmp_path, shell_env(MOGATEWAY_URL=served.url))
    assert added.returncode == 0, added.stdout + added.stderr
    tokens = re.findall(r"^\s*token\s+(\S+)\s*$", added.stdout, flags=re.M)
    assert len(tokens) == 1, added.stdout
    # "Set that token as MOGATEWAY_CLIENT_TOKEN in your application": section 3's command with it.
    command = start_command().replace("MOGATEWAY_CLIENT_TOKEN=s3cret", f"MOGATEWAY_CLIENT_TOKEN={tokens[0]}")
    with running_app(tmp_path, command, port):
        sent = bash(
            'mogateway send --shortcode 56767 --msisdn 919812345678 "HELLO" --wait 30 --json',
            tmp_path,
            shell_env(MOGATEWAY_URL=served.url),
        )
    assert sent.returncode == 0, sent.stdout + sent.stderr
    outcome = json.loads(sent.stdout)
    assert outcome["state"] in {"replied", "delivered"}, outcome
    assert outcome["reply"] == "You said: HELLO", outcome


# ------------------------------------------------------------------------------------- the reference


SIGNING_SECRET = "docs-signing-secret"
BUSINESS = "919876543210"  # a WhatsApp business number: the `shortcode` of a WhatsApp callback


def post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers, timeout=30)


def test_what_your_endpoint_answers_example_problem() -> None:
    # The table's 422 example is what the endpoint answers to a 10-digit msisdn, exactly.
    from mogateway.client import CallbackApp
    from mogateway.testing.callback_apps import serve_asgi

    (example,) = re.findall(r"`(\{\"type\":\"about:blank\".*?\})`", section("What your endpoint answers"))
    body, headers = make_callback("HI", token="t")
    bad = json.loads(body)
    bad["msisdn"] = 9812345678
    with serve_asgi(CallbackApp(lambda m: "x", tokens=["t"])) as url:
        answer = post(url, json.dumps(bad).encode(), headers)
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json() == json.loads(example)


def test_whatsapp_answer_block_answers_as_documented() -> None:
    from mogateway.client import RichAnswerError, WhatsAppAnswer
    from mogateway.testing.callback_apps import serve_asgi

    code = block_with("Rich WhatsApp answers", "python", "WhatsAppAnswer")
    namespace = run_block(code, {}, "WhatsAppAnswer")
    handler = namespace["handler"]
    assert handler(make_message("PAY")) == "Reply PAY to pay your bill"
    wa_body, wa_headers = make_callback("PAY", token="s3cret", channel="whatsapp", shortcode=BUSINESS)
    assert isinstance(handler(parse_message(wa_body)), WhatsAppAnswer)
    with serve_asgi(namespace["app"]) as url:
        rich = post(url, wa_body, wa_headers)
        sms = post(url, *make_callback("PAY", token="s3cret"))
    assert rich.status_code == 200 and rich.headers["content-type"].startswith("application/json")
    document, buttons = rich.json()["whatsapp"]
    assert document["type"] == "document" and document["document"]["filename"] == "bill.pdf"
    assert [b["reply"]["id"] for b in buttons["interactive"]["action"]["buttons"]] == ["pay", "later"]
    assert (sms.status_code, sms.text) == (200, "Reply PAY to pay your bill")

    # Every builder of the table exists, and the error the doc quotes is the one raised.
    table = section("Rich WhatsApp answers")
    builders = set(re.findall(r"`(?:WhatsAppAnswer)?\.(\w+)[(/]", table))
    builders |= set(re.findall(r"/\.(\w+)\(", table))
    assert {"text", "buttons", "list", "image", "video", "document", "audio", "sticker"} <= builders
    assert [b for b in builders if not callable(getattr(WhatsAppAnswer, b, None))] == []
    (quoted,) = re.findall(r"`(whatsapp\[0\]\.interactive[^`]+)`", table.replace("\n", " "))
    with pytest.raises(RichAnswerError) as raised:
        WhatsAppAnswer.buttons("Pay?", [("pay", "x" * 24)])
    assert quoted in str(raised.value)
    assert len(WhatsAppAnswer.of(*[WhatsAppAnswer.text(str(i)) for i in range(5)]).messages) == 5


def test_inbound_message_table_is_what_the_sdk_gives() -> None:
    at = datetime(2022, 8, 8, 10, 20, 30, 123000, tzinfo=UTC)
    message = make_message(
        "BAL savings", msisdn="919812012345", operator="airtel", circle="delhi", at=at, message_id="01J"
    )
    table = section("`InboundMessage`")
    rows = dict(re.findall(r"^\| `([^`]+)`[^|]*\| `([^`]+)`", table, flags=re.M))
    assert rows["shortcode"] == '"56767"' and rows["msisdn"] == '"919812012345"'
    assert (message.shortcode, message.shortcode_number) == ("56767", 56767)
    assert (message.msisdn, message.msisdn_number) == ("919812012345", 919812012345)
    assert (message.message, message.keyword, message.argument) == ("BAL savings", "BAL", "savings")
    assert (message.sender.cc, message.sender.ndc, message.sender.sn) == (91, 9812, 12345)
    assert message.sender.sn_digits == "012345"
    assert (message.sender.operator, message.sender.circle) == ("airtel", "delhi")
    assert message.time == at and (message.tsunix, message.tsunix_unit) == (1659954030123, "ms")
    assert message.tsunix_ms == 1659954030123 and message.message_id == "01J"


def test_fetch_media_block_is_importable_and_asks_for_a_photo() -> None:
    code = block_with("WhatsApp media", "python", "fetch_media")
    namespace = run_block(code, {}, "fetch_media")  # self-contained: MY_TOKEN is read only for media
    assert namespace["handler"](make_message("HI")) == "Please send a photo of your bill"
    from mogateway.client import MediaError

    error = MediaError(404, "not-found", "no such message")
    assert (error.status, error.kind) == (404, "not-found")


def test_token_rotation_block() -> None:
    namespace = run_block(block_with("Tokens and rotation", "python", "TokenVerifier"), {}, "tokens")
    verifier = namespace["verifier"]
    assert verifier.verify("Bearer new-token") is True and verifier.verify("Bearer old-token") is True
    assert verifier.verify("Bearer other") is False


def test_signed_callbacks_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi import FastAPI
    from flask import Flask
    from starlette.datastructures import Headers as StarletteHeaders
    from werkzeug.datastructures import Headers as WerkzeugHeaders

    from mogateway.testing.callback_apps import serve_asgi, serve_wsgi

    monkeypatch.setenv("MOGATEWAY_SIGNING_SECRET", f"{SIGNING_SECRET},older-secret")
    plain = run_block(block_with("Signed callbacks", "python", "verify_signature"), {}, "on_callback")
    on_callback = plain["on_callback"]
    body, headers = make_callback("HI", signing_secret=SIGNING_SECRET, message_id="01JDOC")
    assert on_callback(body, headers) == (200, "You said: HI")
    # The frameworks' header mappings the comment names: the message id is read from them too.
    for framework_headers in (StarletteHeaders(headers), WerkzeugHeaders(list(headers.items()))):
        assert on_callback(body, framework_headers) == (200, "You said: HI")
    message_ids: list[str] = []
    plain["parse_message"] = lambda b, message_id: message_ids.append(message_id) or parse_message(b)
    on_callback(body, WerkzeugHeaders(list(headers.items())))
    assert message_ids == ["01JDOC"]
    assert on_callback(*make_callback("HI", signing_secret="older-secret")) == (200, "You said: HI")
    assert on_callback(*make_callback("HI")) == (401, "missing")
    assert on_callback(*make_callback("HI", signing_secret="leaked-token-only")) == (401, "no_match")
    stale = make_callback("HI", signing_secret=SIGNING_SECRET, signed_at=int(time.time()) - 3600)
    assert on_callback(*stale) == (401, "stale")

    def echo(message: InboundMessage) -> str:
        return f"You said: {message.message}"

    # What the reader has by now: the handler of section 2, a token and the secrets of the plain block.
    given = {"echo": echo, "handle": echo, "router": echo, "TOKEN": "s3cret", "SECRETS": plain["SECRETS"]}
    signed = make_callback("HI", token="s3cret", signing_secret=SIGNING_SECRET)
    unsigned = make_callback("HI", token="s3cret")

    asgi = run_block(block_with("Signed callbacks", "python", "CallbackApp"), dict(given), "plain ASGI")
    fastapi = run_block(
        block_with("Signed callbacks", "python", "mogateway.client.fastapi"),
        {**given, "app": FastAPI()},
        "FastAPI",
    )
    with serve_asgi(asgi["app"]) as url, serve_asgi(fastapi["app"]) as fastapi_url:
        for base in (url, f"{fastapi_url}/sms"):
            assert (post(base, *signed).status_code, post(base, *signed).text) == (200, "You said: HI")
            refused = post(base, *unsigned)
            assert refused.status_code == 401 and refused.json()["reason"] == "missing", refused.text
    assert callable(fastapi["verified"])
    flask = run_block(
        block_with("Signed callbacks", "python", "mogateway.client.flask"),
        {**given, "app": Flask(__name__)},
        "Flask",
    )
    with serve_wsgi(flask["app"]) as url:
        assert post(f"{url}/sms", *signed).text == "You said: HI"
        assert post(f"{url}/sms", *unsigned).status_code == 401


def test_keywords_and_frameworks_blocks() -> None:
    from mogateway.client import CallbackApp
    from mogateway.testing.callback_apps import serve_asgi, serve_wsgi

    code = block_with("Keywords", "python", "KeywordRouter")
    assert "tokens=[...]" in code
    keywords = run_block(
        code.replace("tokens=[...]", 'tokens=["s3cret"]'), {"CallbackApp": CallbackApp}, "Keywords"
    )
    with serve_asgi(keywords["app"]) as url:
        assert post(url, *make_callback("HELLO", token="s3cret")).text == "Send BAL or STOP"
        for text in ("bal", "Balance now", "STOP"):  # the handlers are `...`: they answer no reply
            answer = post(url, *make_callback(text, token="s3cret"))
            assert (answer.status_code, answer.text) == (200, ""), text

    # FastAPI, with the reader's `router` (the one just built) as the handler of the ready router.
    fastapi = run_block(
        block_with("Frameworks", "python", "from fastapi import"), {"router": keywords["router"]}, "FastAPI"
    )
    with serve_asgi(fastapi["app"]) as url:
        assert post(f"{url}/sms", *make_callback("HELLO", token="s3cret")).text == "Send BAL or STOP"
        by_hand = post(f"{url}/sms2", *make_callback("HI", token="s3cret", circle="delhi"))
        assert (by_hand.status_code, by_hand.text) == (200, "Hi delhi")
        refused = post(f"{url}/sms2", *make_callback("HI", token="wrong"))
        assert refused.status_code == 401 and refused.headers["content-type"].startswith(
            "application/problem+json"
        )

    flask = run_block(
        block_with("Frameworks", "python", "from flask import"),
        {"__name__": __name__, "handle": lambda m: "flask"},
        "Flask",
    )
    with serve_wsgi(flask["app"]) as url:
        assert post(f"{url}/sms", *make_callback("HI", token="s3cret")).text == "flask"


def test_testing_helpers_are_as_documented() -> None:
    from mogateway.testing import callback_apps, payloads
    from mogateway.testing.fake_graph import webhooks

    helpers = section("Testing helpers")
    (documented,) = re.findall(r"`payloads\.make_callback\((.*?)\)`", helpers, flags=re.S)
    names = set(re.findall(r"(\w+)=", documented)) | set(re.findall(r"`(\w+)=", helpers))
    parameters = set(inspect.signature(payloads.make_callback).parameters)
    assert names - {"signed_at"} <= parameters and "signed_at" in parameters, names - parameters
    for name in ("serve_asgi", "serve_wsgi", "answer_app", "RecordingApp"):
        assert hasattr(callback_apps, name), name
    assert callable(webhooks.image) and callable(webhooks.location)
    # A WhatsApp callback of a Meta image message carries the typed member the SDK reads.
    image = webhooks.image("919812345678", caption="my bill")
    body, _ = payloads.make_callback(
        "my bill", msisdn="919812345678", shortcode=BUSINESS, channel="whatsapp", whatsapp_message=image
    )
    message = parse_message(body)
    assert message.channel == "whatsapp" and message.whatsapp is not None and message.whatsapp.media


@pytest.mark.slow  # it starts processes
def test_simulate_synopsis_options_exist_and_whatsapp_examples_run(echo_app: tuple[Path, str]) -> None:
    workdir, url = echo_app
    reference = section("`mogateway simulate`")
    (synopsis,) = [b for b in re.findall(r"^```text\n(.*?)^```", reference, flags=re.M | re.S)]
    shown = bash("mogateway simulate --help", workdir, shell_env(COLUMNS="200"))
    assert shown.returncode == 0, shown.stderr
    missing = sorted(
        set(re.findall(r"--[a-z][a-z0-9-]*", synopsis)) - set(re.findall(r"--[a-z][a-z0-9-]*", shown.stdout))
    )
    assert missing == [], missing
    # `--json`: the members the doc lists, for a single exchange and for `--repeat`.
    prose = " ".join(reference.split())
    single, repeated = re.search(
        r"a single exchange: (.*?); with `--repeat`: (.*?)\), plus `exit_code`", prose
    ).groups()
    for options, listed in (("", single), ("--repeat 3 ", repeated)):
        ran = bash(f'mogateway simulate {url} --token s3cret {options}--json "HELLO"', workdir, shell_env())
        assert ran.returncode == 0, ran.stdout + ran.stderr
        document = json.loads(ran.stdout)
        # "`latency_ms` with `p50`/`p90`/…": members of the member.
        for member, inner in re.findall(r"`(\w+)` with ((?:`\w+`/?)+)", listed):
            assert set(re.findall(r"`(\w+)`", inner)) <= set(document[member]), (inner, document)
        keys = set(re.findall(r"`(\w+)`", re.sub(r" with (?:`\w+`/?)+", "", listed)))
        assert keys | {"exit_code"} <= set(document), (keys, document)
    # The examples of `--whatsapp --type`, against section 2's application (it answers on every path).
    (examples,) = blocks("`mogateway simulate`", "sh")
    for line in examples.strip().splitlines():
        line = line.replace("http://127.0.0.1:9000/mo", f"{url}mo")
        line = line.replace("mogateway simulate … ", f"mogateway simulate {url}mo --token s3cret ")
        line = line.replace("wamid.HBgM…", "wamid.HBgMDOC")
        ran = bash(line, workdir, shell_env())
        if "--type reaction" in line:  # the gateway never sends a reply to a reaction: exit 3
            assert ran.returncode == 3 and "withheld" in ran.stdout, (line, ran.stdout, ran.stderr)
        else:
            # A location or a document arrives with its text in the member: the echo still answers.
            assert ran.returncode == 0 and "reply (status 200)" in ran.stdout, (line, ran.stdout, ran.stderr)
            assert "whatsapp member: {" in ran.stdout, ran.stdout


def test_install_extras_examples_and_links_are_there() -> None:
    from importlib.metadata import metadata, requires

    # Section 1: the plain install brings FastAPI and uvicorn; "mogateway[flask]" is an extra.
    (install,) = blocks("1. ", "sh")
    extras = set(re.findall(r'"mogateway\[(\w+)\]"', install))
    assert extras == {"flask"} and extras <= set(metadata("mogateway").get_all("Provides-Extra") or [])
    base = {
        re.split(r"[\[<>=; ]", r, maxsplit=1)[0].lower()
        for r in requires("mogateway") or []
        if "extra" not in r
    }
    assert {"fastapi", "uvicorn"} <= base, base
    # "The three examples read MOGATEWAY_SIGNING_SECRET themselves", and every relative link resolves.
    text = DOC.text
    links = set(re.findall(r"\]\((\.\./[^)#]+|[\w./-]+\.md)(?:#[^)]*)?\)", text))
    assert {
        "../examples/echo_app.py",
        "../examples/fastapi_bot/bot.py",
        "../examples/flask_app/tracker.py",
    } <= links
    assert [link for link in links if not (DOC.path.parent / link).exists()] == []
    for example in ("echo_app.py", "fastapi_bot/bot.py", "flask_app/tracker.py"):
        assert "MOGATEWAY_SIGNING_SECRET" in (ROOT / "examples" / example).read_text(), example
