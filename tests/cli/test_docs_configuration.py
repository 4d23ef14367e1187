"""docs/configuration.md is true and runs as written.

The settings table is the settings' model (``mogateway.config``): every setting it names exists with the
default it states, every setting of the model has a line, and the nested tables it leaves to other docs
(``[nats]``: docs/scaling.md, ``[smpp]``: docs/smpp.md, ``[whatsapp]``: docs/whatsapp.md) are named
there. Its TOML and environment examples load through the real loader. The client fields are those of
``POST /v1/clients`` in the gateway's own /openapi.json. The shell blocks of "Client secrets at rest" and
"Sealed secrets in the settings" run in bash as written against a real ``mogateway serve``, changing
only the key's directory (``/etc/mogateway/``) and the ports; what the doc says they print is what they
print (the shape: counts and key ids are this run's). The exit codes have their own test
(tests/test_docs_exit_codes.py)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_harness import (
    ADMIN_TOKEN,
    ServeProcess,
    clean_env,
    free_port,
    mogateway_command,
    serve_env,
    start_serve,
    wait_until,
)
from pydantic import BaseModel

from markdown_doc import MarkdownDoc, fenced_blocks
from mogateway.api.admin import ClientIn
from mogateway.config import ConfigError, Settings, load_settings
from mogateway.config.nats import NatsSettings, parse_settings
from mogateway.config.sealed import CONTEXTS, key_id
from mogateway.config.secret_key import parse_key
from mogateway.config.smpp import BindConfig
from mogateway.config.whatsapp import WhatsAppNumber, WhatsAppSettings

ROOT = Path(__file__).resolve().parents[2]
THIS_DOC = "docs/configuration.md"
DOC = ROOT / THIS_DOC
#: The settings that are tables of their own, and the doc each leaves its keys to.
TABLES = {"smpp": "docs/smpp.md", "nats": "docs/scaling.md", "whatsapp": "docs/whatsapp.md"}


def doc_text() -> str:
    return DOC.read_text()


def section(doc: str, heading: str) -> str:
    """The text of ``doc`` under ``heading`` (a line starting with it), up to the next heading of any
    level."""
    return MarkdownDoc(doc).section(heading, subsections=False)


def table_rows(text: str, first_header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table whose header's first cell is ``first_header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


blocks = fenced_blocks


def documented_settings() -> dict[str, list[str]]:
    """The settings table: setting name (``[nats]`` as ``nats``) -> its cells."""
    rows = table_rows(doc_text(), "setting")
    return {row[0].strip("`[]"): row for row in rows}


def first_code(cell: str) -> str | None:
    found = re.match(r"`([^`]*)`", cell)
    return found[1] if found else None


def toml_scalar(text: str) -> Any:
    """A documented default as TOML reads it (``true``, ``8080``, ``5``); a bare word is a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def is_empty(value: Any) -> bool:
    """Nothing set: what a default the doc describes in words ("none", "generated", "host name") is."""
    if isinstance(value, BaseModel):
        return all(is_empty(v) for v in value.model_dump().values())
    return value is None or value == "" or value == [] or value == {}


def model_default(model: type[BaseModel], name: str) -> Any:
    return model.model_fields[name].get_default(call_default_factory=True)


def bounds(model: type[BaseModel], name: str) -> tuple[float | None, float | None]:
    low = high = None
    for item in model.model_fields[name].metadata:
        low = getattr(item, "ge", None) if getattr(item, "ge", None) is not None else low
        high = getattr(item, "le", None) if getattr(item, "le", None) is not None else high
    return low, high


@pytest.fixture
def no_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings loaded in this process see no MOGATEWAY_* variable of the developer's shell."""
    for name in list(os.environ):
        if name.startswith("MOGATEWAY_"):
            monkeypatch.delenv(name)


# ------------------------------------------------------------------------------- the settings table


def test_every_documented_setting_is_the_models_with_its_default_and_variable() -> None:
    documented = documented_settings()
    assert len(documented) > 40, "the settings table was not found"
    for name, row in documented.items():
        assert name in Settings.model_fields, f"docs/configuration.md documents {name!r}, not a setting"
        _, env, default_cell = row[:3]
        if name in TABLES:
            assert TABLES[name] in row[3], f"the [{name}] line points to {TABLES[name]}"
        else:
            assert env == f"`MOGATEWAY_{name.upper()}`", f"{name}: the variable is MOGATEWAY_{name.upper()}"
        default = model_default(Settings, name)
        code = first_code(default_cell)
        if code is None:  # a default in words: the model has no fixed value
            assert is_empty(default), f"{name}: the doc says {default_cell!r}, the model {default!r}"
        else:
            value = toml_scalar(code)
            same = value == default and isinstance(value, bool) == isinstance(default, bool)
            assert same, f"{name}: the doc's default is {code!r}, the model's {default!r}"


def test_every_setting_of_the_model_has_a_line() -> None:
    missing = sorted(set(Settings.model_fields) - set(documented_settings()))
    assert not missing, f"settings without a line in docs/configuration.md: {missing}"


def test_the_documented_ranges_are_the_models() -> None:
    """A line that states its bounds (``(0–50)``, ``(5 to 10080)``, ``(0.5–60 s)``) states the model's."""
    checked = 0
    for name, row in documented_settings().items():
        for low, high in re.findall(r"\((\d[\d.]*)\s*(?:–|to)\s*(\d[\d.]*)(?: s)?[);]", row[3]):
            assert (float(low), float(high)) == bounds(Settings, name), f"{name}: ({low}–{high})"
            checked += 1
    assert checked >= 6


def test_the_nats_table_is_named_in_scaling_md() -> None:
    rows = table_rows(section("docs/scaling.md", "### `[nats]` settings"), "setting")
    named = {n for row in rows for n in re.findall(r"`([a-z_]+)`", row[0])}
    assert named == set(NatsSettings.model_fields), "docs/scaling.md's [nats] table is not the model"
    assert "MOGATEWAY_NATS__<KEY>" in documented_settings()["nats"][1]


def test_the_smpp_bind_settings_are_named_in_smpp_md() -> None:
    smpp = section("docs/smpp.md", "## Configuring binds")
    assert "[[smpp.binds]]" in smpp
    unnamed = [f for f in BindConfig.model_fields if not re.search(rf"\b{f}\b", smpp)]
    assert not unnamed, f"bind settings docs/smpp.md's 'Configuring binds' does not name: {unnamed}"


def test_the_whatsapp_settings_are_here_or_in_whatsapp_md() -> None:
    """The [whatsapp] line names its limits with their defaults (checked); the secrets, the Graph API
    and the numbers are left to docs/whatsapp.md, which names each."""
    row = documented_settings()["whatsapp"][3]
    assert "MOGATEWAY_WHATSAPP__<KEY>" in documented_settings()["whatsapp"][1]
    here = dict(re.findall(r"`([a-z_]+)` \((`[^`]*`|empty)", row))
    assert len(here) >= 8, here
    for name, given in here.items():
        assert name in WhatsAppSettings.model_fields, f"the [whatsapp] line names {name!r}, not a setting"
        default = model_default(WhatsAppSettings, name)
        if given == "empty":
            assert is_empty(default), name
        else:
            assert toml_scalar(given.strip("`")) == default, (
                f"whatsapp.{name}: doc {given}, model {default!r}"
            )
    whatsapp = (ROOT / "docs" / "whatsapp.md").read_text()
    for model in (WhatsAppSettings, WhatsAppNumber):
        for name in model.model_fields:
            if name not in here:
                named = f"`{name}`" in whatsapp or f"[[whatsapp.{name}]]" in whatsapp
                assert named or re.search(rf"^\s*{name} = ", whatsapp, re.M), (
                    f"whatsapp setting {name} is named neither here nor in docs/whatsapp.md"
                )


# ------------------------------------------------------------------------------- examples, loaded


def test_the_example_gateway_toml_loads(tmp_path: Path, no_settings_env: None) -> None:
    (example,) = [b for b in blocks(doc_text(), "toml") if "[[smpp.binds]]" in b]
    path = tmp_path / "gateway.toml"
    path.write_text(example)
    settings = load_settings(path)
    written = tomllib.loads(example)
    assert settings.port == written["port"] and settings.database == written["database"]
    assert settings.reply_max_parts == written["reply_max_parts"]
    assert settings.ported_csv == Path(written["ported_csv"])
    (bind,) = settings.smpp.binds
    assert bind.name == "airtel-dl" and bind.password.get_secret_value() == "secret"
    assert bind.operator == "airtel" and bind.circle == "delhi" and bind.port == 2775


def test_the_environment_examples_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_settings_env: None
) -> None:
    """Comma-separated ``trusted_proxies``, ``MOGATEWAY_NATS__<KEY>`` and ``MOGATEWAY_WHATSAPP__<KEY>``
    beside a ``[whatsapp]`` table in the file, as the table says."""
    row = documented_settings()["trusted_proxies"][3]
    proxies = re.search(r"\(`([^`]+)`", row)
    assert proxies is not None
    monkeypatch.setenv("MOGATEWAY_TRUSTED_PROXIES", proxies[1])
    monkeypatch.setenv("MOGATEWAY_NATS__REPLICAS", "3")
    monkeypatch.setenv("MOGATEWAY_WHATSAPP__MAX_WEBHOOK_ITEMS", "7")
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[whatsapp]\napp_secret = "app-secret-1234"\nverify_token = "verify-1234"\n'
        '[[whatsapp.numbers]]\nphone_number_id = "106540352242922"\n'
        'display_phone_number = "919876543210"\naccess_token = "token-1234"\n'
    )
    settings = load_settings(config)
    assert settings.trusted_proxies == ["10.0.0.5", "10.1.0.0/16"]
    assert parse_settings(settings.nats).replicas == 3
    assert settings.whatsapp is not None and settings.whatsapp.max_webhook_items == 7


def test_an_invalid_setting_stops_with_the_documented_line(tmp_path: Path) -> None:
    """The intro's example line, exactly, and exit 2; an unknown key of the file is refused the same way."""
    text = " ".join(doc_text().split("\n## ", 1)[0].split())
    line = re.search(r"`(mogateway: invalid setting port [^`]*)`, exit 2", text)
    assert line is not None
    env = clean_env(MOGATEWAY_PORT="abc", MOGATEWAY_DATABASE=str(tmp_path / "j.db"))
    ran = subprocess.run(
        [*mogateway_command(), "serve"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert (ran.returncode, ran.stderr.strip()) == (2, line[1])
    (tmp_path / "typo.toml").write_text("reply_max_part = 4\n")
    ran = subprocess.run(
        [*mogateway_command(), "serve", "--config", "typo.toml"],
        cwd=tmp_path,
        env=clean_env(MOGATEWAY_DATABASE=str(tmp_path / "j.db")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2
    refused = "invalid setting reply_max_part (MOGATEWAY_REPLY_MAX_PART): is not a known setting (got 4)"
    assert ran.stderr.strip() == f"mogateway: {refused}", ran.stderr


# ------------------------------------------------------------------------------- client applications


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One ``mogateway serve`` for the API's answers (its own journal; one worker is enough to read
    /openapi.json and register two clients)."""
    workdir = tmp_path_factory.mktemp("api")
    serve = start_serve(workdir, serve_env(workdir), args=("--workers", "1"))
    try:
        yield serve
    finally:
        serve.stop()


def openapi(serve: ServeProcess) -> dict[str, Any]:
    return dict(httpx.get(serve.url + "/openapi.json", timeout=30).json())


def test_the_client_fields_are_the_apis(served: ServeProcess) -> None:
    """The table is the body of ``POST /v1/clients`` in /openapi.json (names, what is required, the
    defaults); a real call shows the secrets once and a view's ``dlt_templates`` and
    ``signing_grace_until``, as the paragraphs under the table say."""
    serve = served
    api = openapi(serve)
    body = api["paths"]["/v1/clients"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    schema = api["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    made = httpx.post(
        serve.url + "/v1/clients",
        headers=admin,
        json={
            "name": "app",
            "shortcodes": ["56767"],
            "callback_url": "http://127.0.0.1:9/mo",
            "sign_callbacks": True,
        },
        timeout=30,
    )
    assert made.status_code == 201, made.text
    plain = httpx.post(
        serve.url + "/v1/clients",
        headers=admin,
        json={"name": "plain", "shortcodes": ["56768"], "callback_url": "http://127.0.0.1:9/mo"},
        timeout=30,
    ).json()
    shown = httpx.get(serve.url + f"/v1/clients/{made.json()['id']}", headers=admin, timeout=30).json()
    rows = {
        row[0].strip("`"): row for row in table_rows(section(THIS_DOC, "## Client applications"), "field")
    }
    assert set(rows) == set(schema["properties"]), "the client table is not POST /v1/clients' body"
    required = {name for name, row in rows.items() if row[1] == "required"}
    assert required == set(schema.get("required", []))
    for name, row in rows.items():
        if name in required:
            continue
        code = first_code(row[1])
        assert code is not None, name
        # The schema states a default unless it is made per request (a list): ClientIn's is then the one.
        api_default = schema["properties"][name].get("default", model_default(ClientIn, name))
        if code in Settings.model_fields:  # a setting's value, e.g. default_client_concurrency
            assert api_default is None, name
        else:
            value = None if code == "null" else toml_scalar(code)
            assert api_default == value, f"{name}: the doc's default is {code}, the API's {api_default!r}"
    created = made.json()
    assert created["token"] and created["signing_secret"], "the answer holds the token and the signing secret"
    assert plain["token"] and "signing_secret" not in plain, "no signing secret without sign_callbacks"
    assert "token" not in shown and "signing_secret" not in shown, "a view never shows a secret"
    assert shown["sign_callbacks"] is True and shown["signing_grace_until"] is None
    assert shown["dlt_templates"] == 0


# ------------------------------------------------------------------------------- client secrets at rest

#: Where the doc keeps the key; the test keeps it in its own directory.
KEY_DIR = "/etc/mogateway/"


def as_written(block: str, workdir: Path) -> str:
    """A shell block with the key's directory in ``workdir`` (the only change), stopping at an error."""
    assert KEY_DIR in block, "the doc's key moved: adapt the test"
    return "set -euo pipefail\n" + block.replace(KEY_DIR, f"{workdir}/etc/")


def bash(script: str, workdir: Path, env: dict[str, str], stdin: str | None = None) -> str:
    """``script`` in bash in ``workdir`` with ``mogateway`` on the PATH, as the reader's shell has it."""
    env = dict(env, PATH=f"{Path(sys.executable).parent}:{os.defpath}")
    ran = subprocess.run(
        ["bash", "-c", script], cwd=workdir, env=env, input=stdin, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout


def printed_shape(comment: str) -> re.Pattern[str]:
    """What a doc's ``# …`` line under a command says it prints, with its numbers and key ids free."""
    parts = re.split(r"\b([0-9a-f]{8}|[0-9]+)\b", comment.removeprefix("# "))
    pattern = "".join(
        re.escape(part) if i % 2 == 0 else "([0-9a-f]{8})" if re.search("[a-f]", part) else "([0-9]+)"
        for i, part in enumerate(parts)
    )
    return re.compile(pattern)


def failed_start(workdir: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    """``mogateway serve`` that is expected to stop at start: its exit code and what it said."""
    ran = subprocess.run(
        [*mogateway_command(), "serve", "--host", "127.0.0.1", "--port", str(free_port()), *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return ran.returncode, ran.stderr.strip()


def new_key() -> str:
    """A key from ``mogateway secrets new-key``."""
    made = subprocess.run(
        [*mogateway_command(), "secrets", "new-key"], capture_output=True, text=True, timeout=60, check=True
    )
    return made.stdout.strip()


def journal_bytes(database: Path) -> bytes:
    return b"".join(p.read_bytes() for p in database.parent.glob(database.name + "*"))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "etc").mkdir()
    return tmp_path


def test_client_secrets_at_rest_as_written(workdir: Path) -> None:
    """Make a key, register clients without it (their secrets in plain text in the journal), restart
    with it (a warning), ``reencrypt`` (the line the doc shows; nothing in plain text left), the two
    start-up refusals, and replacing the key with ``old_secret_key``."""
    doc = section(THIS_DOC, "## Client secrets at rest")
    make_key, turn_on = blocks(doc, "sh")
    # Making a key: a file only its owner reads; the one-liner without mogateway makes the same shape.
    bash(as_written(make_key, workdir), workdir, clean_env())
    key_file = workdir / "etc" / "secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    kid = key_id(parse_key(key))
    one_liner = re.search(r"# or, without mogateway installed: (.+)", make_key)
    assert one_liner is not None
    parse_key(bash(one_liner[1], workdir, clean_env()).strip())

    # Without secret_key: the secrets are in the journal as they are.
    env = serve_env(workdir)
    database = Path(env["MOGATEWAY_DATABASE"])
    serve = start_serve(workdir, env, args=("--workers", "1"))  # the restart below runs the default
    try:
        admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        secrets = []
        for n, sign in enumerate((True, True, False)):
            made = httpx.post(
                serve.url + "/v1/clients",
                headers=admin,
                json={
                    "name": f"app{n}",
                    "shortcodes": [f"5676{n}"],
                    "callback_url": "http://127.0.0.1:9/mo",
                    "sign_callbacks": sign,
                },
                timeout=30,
            ).json()
            secrets += [made["token"], *([made["signing_secret"]] if sign else [])]
    finally:
        serve.stop()
    assert all(s.encode() in journal_bytes(database) for s in secrets), "plain text without a key"

    # Turning encryption on: restart with the key (the plain-text secrets still read, a warning), then
    # the doc's command while the gateway runs.
    command, said = turn_on.strip().split("\n")
    with_key = dict(env, MOGATEWAY_SECRET_KEY=key)
    serve = start_serve(workdir, with_key)
    try:
        warning = "some client secrets are stored in plain text although secret_key"
        wait_until(lambda: warning in serve.stderr(), "the warning about secrets in plain text", 30)
        assert "run `mogateway secrets reencrypt`" in serve.stderr()
        out = bash(as_written(command, workdir), workdir, env).splitlines()
        listed = httpx.get(serve.url + "/v1/clients", headers=admin, timeout=30).json()["clients"]
        assert len(listed) == 3
    finally:
        serve.stop()
    shape = printed_shape(said)
    line = shape.fullmatch(out[0])
    assert line is not None, f"{out[0]!r} is not {said!r}"
    assert line.groups() == ("3", kid, "5"), out[0]
    assert all(o.startswith("note: the journal's write-ahead log could not be emptied") for o in out[1:]), out
    stored = journal_bytes(database)
    assert not [s for s in secrets if s.encode() in stored], "a client secret left in plain text"

    # A journal the gateway cannot open: one line naming the setting, exit 2.
    refusals = blocks(doc, "")[0].strip().split("\n")
    code, said_now = failed_start(workdir, env)
    assert code == 2 and printed_shape(refusals[0]).fullmatch(said_now), said_now
    assert kid in said_now
    other = new_key()
    code, said_now = failed_start(workdir, dict(env, MOGATEWAY_SECRET_KEY=other))
    wrong = printed_shape(refusals[1]).fullmatch(said_now)
    assert code == 2 and wrong is not None, said_now
    assert wrong.groups() == (kid, key_id(parse_key(other))), said_now

    # Replacing the key: reencrypt with the new key and the old one; the gateway then needs the new only.
    replacing = dict(env, MOGATEWAY_SECRET_KEY=other, MOGATEWAY_OLD_SECRET_KEY=key)
    out = bash("mogateway secrets reencrypt", workdir, replacing).splitlines()
    assert out == [
        f"rewrote the secrets of 3 clients under key id {key_id(parse_key(other))} "
        f"(they were: 5 under key id {kid})"
    ], out
    serve = start_serve(workdir, dict(env, MOGATEWAY_SECRET_KEY=other), args=("--workers", "1"))
    try:
        assert len(httpx.get(serve.url + "/v1/clients", headers=admin, timeout=30).json()["clients"]) == 3
    finally:
        serve.stop()


def whatsapp_toml(app_secret: str, verify_token: str, numbers: dict[str, str]) -> str:
    """A ``[whatsapp]`` table like docs/whatsapp.md's, with these secrets (the numbers: id -> token)."""
    text = f'[whatsapp]\napp_secret = "{app_secret}"\nverify_token = "{verify_token}"\n'
    for n, (number_id, token) in enumerate(numbers.items()):
        text += (
            f'[[whatsapp.numbers]]\nphone_number_id = "{number_id}"\n'
            f'display_phone_number = "91987654321{n}"\naccess_token = "{token}"\n'
        )
    return text


def test_sealed_secrets_in_the_settings_as_written(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, no_settings_env: None
) -> None:
    """``secrets seal`` as written prints ``sealed:v1:<key id>:…``; the settings open what it printed (the
    doc's ``[whatsapp]`` example with a real sealed value); a value sealed for another setting or another
    number does not open; ``serve`` stops on them with the doc's lines and exit 2; after a key change
    ``reencrypt`` lists what to seal again and ``seal`` moves a sealed value to the new key."""
    doc = section(THIS_DOC, "### Sealed secrets in the settings")
    (example,) = blocks(doc, "toml")
    (sealing,) = blocks(doc, "sh")
    (refusals,) = blocks(doc, "")
    assert set(re.findall(r"`(whatsapp\.[a-z_]+)`", doc.split("`--context` is", 1)[1][:80])) == set(CONTEXTS)
    key = new_key()
    (workdir / "etc" / "secret.key").write_text(key + "\n")
    kid = key_id(parse_key(key))
    number = re.search(r"--number (\d+)", sealing)
    assert number is not None
    (workdir / "token.txt").write_text("EAAG-the-access-token\n")
    command, said = sealing.strip().rsplit("\n", 1)
    sealed_token = bash(as_written(command, workdir), workdir, clean_env()).strip()
    assert said == "# sealed:v1:1a2b3c4d:…"
    assert re.fullmatch(rf"sealed:v1:{kid}:[A-Za-z0-9_-]+", sealed_token), sealed_token
    seal = "mogateway secrets seal --context whatsapp.app_secret <<< 'the-app-secret'"
    sealed_app = bash(seal, workdir, clean_env(MOGATEWAY_SECRET_KEY=key)).strip()

    # The doc's example, its placeholder replaced by a real sealed app secret, opens when settings load.
    placeholder = re.search(r'"(sealed:v1:[0-9a-f]{8}:[^"]*)"', example)
    assert placeholder is not None and example.startswith("[whatsapp]\n")
    config = workdir / "whatsapp.toml"
    table = whatsapp_toml(sealed_app, "verify-token", {number[1]: sealed_token})
    config.write_text(example.replace(placeholder[1], sealed_app) + table.split("\n", 2)[2])
    monkeypatch.setenv("MOGATEWAY_SECRET_KEY", key)
    settings = load_settings(config)
    assert settings.whatsapp is not None
    assert settings.whatsapp.app_secret.get_secret_value() == "the-app-secret"
    assert settings.whatsapp.numbers[0].access_token.get_secret_value() == "EAAG-the-access-token"
    # Number A's sealed token in number B's entry does not open.
    config.write_text(whatsapp_toml(sealed_app, "verify-token", {"106540352242923": sealed_token}))
    with pytest.raises(ConfigError, match=r"does not open under key id .*another phone_number_id"):
        load_settings(config)
    monkeypatch.delenv("MOGATEWAY_SECRET_KEY")

    # What stops the start, as the doc's lines say, exit 2.
    env = serve_env(workdir)
    no_key, wrong_setting = refusals.strip().split("\n")
    config.write_text(whatsapp_toml(sealed_app, "verify-token", {number[1]: "clear-token"}))
    code, said_now = failed_start(workdir, dict(env), "--config", str(config))
    assert code == 2 and printed_shape(no_key).fullmatch(said_now), said_now
    config.write_text(whatsapp_toml("app-secret", sealed_app, {number[1]: "clear-token"}))
    code, said_now = failed_start(workdir, dict(env, MOGATEWAY_SECRET_KEY=key), "--config", str(config))
    assert code == 2 and printed_shape(wrong_setting).fullmatch(said_now), said_now
    assert "the-app-secret" not in said_now

    # Replacing the key: reencrypt names each setting not sealed under the new key and how to seal it;
    # seal takes the old sealed value on standard input and seals it under the new key.
    new = new_key()
    config.write_text(whatsapp_toml(sealed_app, "verify-token", {number[1]: sealed_token}))
    replacing = dict(env, MOGATEWAY_SECRET_KEY=new, MOGATEWAY_OLD_SECRET_KEY=key)
    out = bash(f"mogateway secrets reencrypt --config {config}", workdir, replacing)
    assert (
        f"whatsapp.app_secret (MOGATEWAY_WHATSAPP__APP_SECRET), sealed under key id {kid}: "
        "mogateway secrets seal --context whatsapp.app_secret" in out
    ), out
    assert (
        "whatsapp.verify_token (MOGATEWAY_WHATSAPP__VERIFY_TOKEN), in clear: mogateway secrets seal "
        "--context whatsapp.verify_token" in out
    ), out
    assert f"--context whatsapp.access_token --number {number[1]}" in out, out
    again = bash(
        f"mogateway secrets seal --context whatsapp.access_token --number {number[1]}",
        workdir,
        replacing,
        stdin=sealed_token,
    ).strip()
    assert again.startswith(f"sealed:v1:{key_id(parse_key(new))}:"), again
    config.write_text(whatsapp_toml("app-secret", "verify-token", {number[1]: again}))
    monkeypatch.setenv("MOGATEWAY_SECRET_KEY", new)
    opened = load_settings(config).whatsapp
    assert opened is not None and opened.numbers[0].access_token.get_secret_value() == "EAAG-the-access-token"


def test_the_messages_and_stats_parameters_are_the_apis(served: ServeProcess) -> None:
    """``GET /v1/messages``' query parameters, ``limit``'s range and default, ``next``; the ``window`` of
    ``GET /v1/stats`` defaults to ``1h``."""
    api = openapi(served)
    doc = section(THIS_DOC, "## Messages")
    listed = set(re.findall(r"`([a-z_]+)`", doc.split("Newest first", 1)[0]))
    parameters = {p["name"]: p["schema"] for p in api["paths"]["/v1/messages"]["get"]["parameters"]}
    assert listed - {"sms", "whatsapp"} == set(parameters) - {"before"}
    assert (
        "pass it as `before`" in doc and "next" in api["components"]["schemas"]["MessagePage"]["properties"]
    )
    limit = parameters["limit"]
    assert "`limit` (1–1000, default 50)" in doc
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 1000, 50)
    channels = {c for c in parameters["channel"]["enum"] if c}
    assert "`channel` (`sms` or `whatsapp`)" in doc and channels == {"sms", "whatsapp"}
    (window,) = api["paths"]["/v1/stats"]["get"]["parameters"]
    assert "Default `1h`." in section(THIS_DOC, "## Traffic figures") and window["schema"]["default"] == "1h"
