"""docs/whatsapp.md's reference sections name what exists: the settings with their defaults and bounds,
the numbers of "Limits" and "Overload", the metrics, the routes, the building blocks (modules, functions,
classes and their parameters, the table of send actions) and the sealed secrets, each checked against
the code, so a rename or a changed default shows up as a failing doc.

The pure building blocks are run as the doc describes them, and the Graph client and the media client
against the shipped fake Graph API (``mogateway.testing.fake_graph``). The walkthrough sections are run
as written by test_docs_whatsapp_walkthrough.py."""

from __future__ import annotations

import ast
import asyncio
import base64
import hashlib
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
from gateway_harness import mogateway_command

from markdown_doc import MarkdownDoc
from mogateway.api import admin, ingest, whatsapp, whatsapp_media
from mogateway.config import Settings
from mogateway.config.sealed import SealedValueError, seal_value
from mogateway.config.whatsapp import WhatsAppNumber, WhatsAppSettings
from mogateway.core import media_url, whatsapp_answer, whatsapp_send
from mogateway.core import whatsapp as core_whatsapp
from mogateway.core.whatsapp_media import META_MAX_BYTES
from mogateway.edges.whatsapp import graph_sender
from mogateway.edges.whatsapp.graph_sender import GraphSender, GraphSendError
from mogateway.edges.whatsapp.media import GraphMedia, MediaFetchError
from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh

ROOT = Path(__file__).resolve().parents[2]
DOC = MarkdownDoc("docs/whatsapp.md")
TEXT = DOC.text
REFERENCE = DOC.section("## From a migrated number to answered messages")
STEPS = DOC.section("## From a migrated number to answered messages", subsections=False)
LIMITS = DOC.section("## Limits")
OVERLOAD = DOC.section("## Overload")
BLOCKS = DOC.section("## Building blocks")
SECRETS = DOC.section("## Secrets at rest")

PNID, TOKEN, PERSON = "106540352242922", "rehearsal-token", "919812345678"  # the fake's default number
KiB, MiB = 1024, 1024 * 1024


def whatsapp_settings(**changes: Any) -> WhatsAppSettings:
    """A valid ``[whatsapp]`` table with ``changes``."""
    return WhatsAppSettings.model_validate(
        {"app_secret": "app-secret-1", "verify_token": "verify-token-1", **changes}
    )


def size(text: str) -> int:
    """``"1 MiB"``, ``"16 KiB"``, ``"4 MiB"`` as bytes."""
    number, unit = text.split()
    return int(number) * {"KiB": KiB, "MiB": MiB}[unit]


# ============================================================================ settings


def test_the_settings_blocks_keys_are_the_models_with_the_defaults_shown() -> None:
    """Every key of the ``[whatsapp]`` and ``[[whatsapp.numbers]]`` tables of step 1 is a field of the
    model; the values said to be defaults are; the verify token needs 8 characters as the comment says."""
    (block,) = fenced_toml(STEPS, "[whatsapp]\napp_secret")
    table, numbers = block.split("[[whatsapp.numbers]]")
    keys = re.findall(r"^(\w+) = ", table, re.M)
    assert keys == ["app_secret", "verify_token", "graph_url", "api_version"], keys
    assert set(keys) <= WhatsAppSettings.model_fields.keys()
    number_keys = re.findall(r"^(\w+) = ", numbers, re.M)
    assert set(number_keys) == set(WhatsAppNumber.model_fields), number_keys
    fields = WhatsAppSettings.model_fields
    graph_url = re.search(r'^graph_url = "([^"]+)"\s+# the default', table, re.M)
    assert graph_url and fields["graph_url"].default == graph_url[1]
    version = re.search(r'^api_version = "([^"]+)"', table, re.M)
    assert version and fields["api_version"].default == version[1]
    assert "mark_read = false" in numbers and WhatsAppNumber.model_fields["mark_read"].default is False
    assert "at least 8 characters" in table
    whatsapp_settings(verify_token="8-chars!")
    with pytest.raises(ValidationError):
        whatsapp_settings(verify_token="7-chars")
    # "+91 98765 43210" is normalised to its digits.
    shown = WhatsAppNumber(phone_number_id=PNID, display_phone_number="+91 98765 43210", access_token="t")
    assert shown.display_phone_number == "919876543210"


def fenced_toml(text: str, starts: str) -> list[str]:
    """The toml blocks of ``text`` (indented or not) that start with ``starts``."""
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    dedented = ["\n".join(line.strip() for line in b.splitlines()) for b in blocks]
    return [b for b in dedented if b.startswith(starts)]


def test_every_setting_the_page_names_is_a_field() -> None:
    """Each backquoted setting-like name of the page is a field of ``[whatsapp]``, of a number or of the
    gateway's settings; the defaults the page gives in passing are the code's."""
    setting = (
        r"max_\w+|graph_(?:max|queue|ca)_\w+|graph_timeout_s|whatsapp_media_\w+|reply_(?:validity|at)_\w+"
    )
    candidates = set(re.findall(rf"`(?:\[whatsapp\] )?({setting}|message_retention_days)`", TEXT))
    candidates |= {"public_url", "secret_key", "old_secret_key", "graph_ca_file", "mark_read"}
    known = WhatsAppSettings.model_fields.keys() | WhatsAppNumber.model_fields.keys()
    known |= Settings.model_fields.keys()
    assert {"max_webhook_bytes", "graph_queue_timeout_s", "whatsapp_media_store"} <= candidates
    for name in candidates:
        assert name in known, f"docs/whatsapp.md names a setting {name} the code does not have"
    wa = WhatsAppSettings.model_fields
    age = re.search(r"`\[whatsapp\] max_message_age_s` old \(default\s+(\d+) s, (\d+) days", REFERENCE)
    assert age and wa["max_message_age_s"].default == int(age[1]) == int(age[2]) * 86400
    ttl = re.search(r"`whatsapp_media_url_ttl_s` \((\d+) s by default\)", REFERENCE)
    assert ttl and Settings.model_fields["whatsapp_media_url_ttl_s"].default == int(ttl[1])
    assert "`whatsapp_media_max_bytes` (Meta's largest, 100 MiB, by default)" in REFERENCE
    assert Settings.model_fields["whatsapp_media_max_bytes"].default == META_MAX_BYTES == 100 * MiB
    assert "(`whatsapp_media_store`, off by default" in TEXT
    assert Settings.model_fields["whatsapp_media_store"].default is None


# ============================================================================ limits and overload


def test_the_limits_are_the_codes_defaults_and_bounds() -> None:
    """ "Limits": the webhook's body limit (default, bounds, 413 beyond), ``max_batch_bytes`` beside it,
    and the items taken from one body."""
    body = re.search(
        r"\*\*`max_webhook_bytes`, (\d+ [KM]iB) by default\*\* \((\d+ KiB) to (\d+ MiB)\)", LIMITS
    )
    assert body, LIMITS
    default, low, high = size(body[1]), size(body[2]), size(body[3])
    field = WhatsAppSettings.model_fields["max_webhook_bytes"]
    assert field.default == default
    assert whatsapp_settings(max_webhook_bytes=low).max_webhook_bytes == low
    assert whatsapp_settings(max_webhook_bytes=high).max_webhook_bytes == high
    for outside in (low - 1, high + 1):
        with pytest.raises(ValidationError):
            whatsapp_settings(max_webhook_bytes=outside)
    batch = re.search(r"`max_batch_bytes` \((\d+ MiB)\)", LIMITS)
    assert batch and Settings.model_fields["max_batch_bytes"].default == size(batch[1]) > default
    items = re.search(r"\*\*`max_webhook_items`, (\d+)\*\*", LIMITS)
    assert items and WhatsAppSettings.model_fields["max_webhook_items"].default == int(items[1])
    assert "one text is at most 4,096 characters" in LIMITS
    assert whatsapp_send.MAX_TEXT_UNITS == whatsapp_answer.LIMITS["text.body"] == 4096


def test_the_overload_numbers_are_the_codes() -> None:
    """ "Overload": the admission bound, the Graph queue per number and its two deadlines, the last look."""
    wa = WhatsAppSettings.model_fields
    for name in ("max_pending_webhook_messages", "graph_max_connections", "graph_max_queued"):
        said = re.search(rf"`{name}` \(([\d,]+)\)", OVERLOAD)
        assert said, name
        assert wa[name].default == int(said[1].replace(",", "")), name
    for name in ("graph_queue_timeout_s", "graph_timeout_s"):
        assert f"`{name}`" in OVERLOAD and name in wa
    assert "(50 ms)" in OVERLOAD and graph_sender._LAST_LOOK_S == 0.05
    assert "`service/admission.py`" in OVERLOAD and (ROOT / "src/mogateway/service/admission.py").is_file()
    assert (ROOT / "tests/whatsapp/test_whatsapp_overload.py").is_file()


def test_the_numbers_of_the_reply_and_the_graph_client_are_the_codes() -> None:
    """A rich answer holds up to 5 messages; text parts are 4,096 characters; the Graph client reads at
    most 64 KiB of an answer; a media lookup has 10 s; the store prefetches two at a time."""
    assert '`{"whatsapp": [ ... up to 5 ... ]}`' in REFERENCE and whatsapp_answer.MAX_MESSAGES == 5
    assert "split at 4,096 characters" in REFERENCE
    assert "reads at most 64 KiB of an answer" in BLOCKS
    assert inspect.signature(GraphSender).parameters["max_answer_bytes"].default == 64 * KiB
    assert "(no answer to\n     the lookup within 10 s)" in REFERENCE
    assert inspect.signature(GraphMedia).parameters["lookup_timeout_s"].default == 10.0
    from mogateway.edges.whatsapp.media_store import MediaStore

    assert "(two at a time per process)" in REFERENCE
    assert inspect.signature(MediaStore).parameters["prefetch_at_once"].default == 2


# ============================================================================ metrics

METRIC_MAKERS = {
    "Counter": "counter",
    "LoopCounter": "counter",
    "CounterMetricFamily": "counter",
    "Gauge": "gauge",
    "LoopGauge": "gauge",
    "GaugeMetricFamily": "gauge",
    "Histogram": "histogram",
    "LoopHistogram": "histogram",
    "HistogramMetricFamily": "histogram",
}


def defined_metrics() -> dict[str, set[str]]:
    """Every metric src/ defines, by the name /metrics shows (a counter's with ``_total``), with its label
    names (as far as they are written as a literal list)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "src" / "mogateway").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            maker = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            first = node.args[0]
            if maker not in METRIC_MAKERS or not isinstance(first, ast.Constant):
                continue
            name = str(first.value)
            if METRIC_MAKERS[maker] == "counter" and not name.endswith("_total"):
                name += "_total"
            given = [k.value for k in node.keywords if k.arg in ("labels", "labelnames")]
            given += node.args[2:3]
            labels = {
                str(e.value)
                for g in given
                if isinstance(g, (ast.List, ast.Tuple))
                for e in g.elts
                if isinstance(e, ast.Constant)
            }
            found.setdefault(name, set()).update(labels)
    return found


def test_every_metric_the_page_names_is_defined_with_its_labels() -> None:
    """Each ``mogateway_*`` of the page is a metric src/ defines, with the labels the page gives it."""
    defined = defined_metrics()
    named = re.findall(r"`(mogateway_[a-z_]+)(\{[^`]*\})?`", re.sub(r"\s*\n\s*", "", TEXT))
    assert len({n for n, _ in named}) >= 10, named
    for name, labels in named:
        assert name in defined, f"docs/whatsapp.md names {name}: no such metric in src/"
        for label in re.findall(r"[{,](\w+)", labels):
            assert label in defined[name], (name, label, defined[name])


def test_the_reasons_and_results_the_page_lists_are_the_codes() -> None:
    """The ``reason`` values of ``mogateway_whatsapp_left_out_total`` and the ``result`` values of the
    media fetches are labels the code counts."""
    source = (ROOT / "src/mogateway/api/whatsapp.py").read_text()
    source += (ROOT / "src/mogateway/core/whatsapp.py").read_text()
    flat = re.sub(r"\s+", " ", TEXT)
    reasons = set(re.findall(r'reason=\s?"(\w+)"', flat))
    listed = re.search(r"The reasons: (.*?)\. Only an unsigned", flat)
    assert listed
    reasons |= set(re.findall(r"`(\w+)` \(", listed[1])) | {"unknown_number"}
    assert {"too_old", "replayed", "other_number", "too_many", "body", "message"} <= reasons, reasons
    for reason in reasons:
        assert f'"{reason}"' in source, f"no left-out reason {reason!r} in the code"
    results = re.search(r"`mogateway_whatsapp_media_fetches_total\{result\}` \((.*?)\)", flat)
    assert results
    # A failure's kind is counted as its result: "media-expired" as expired, "graph-error" as graph_error.
    media_source = (ROOT / "src/mogateway/api/whatsapp_media.py").read_text()
    media_source += (ROOT / "src/mogateway/core/whatsapp_media.py").read_text()
    media_source += (ROOT / "src/mogateway/edges/whatsapp/media.py").read_text()
    for result in re.findall(r"`(\w+)`", results[1]):
        kinds = (f'"{result}"', f'"{result.replace("_", "-")}"', f'"media-{result.replace("_", "-")}"')
        assert any(k in media_source for k in kinds), f"no media fetch result {result!r} in the code"


# ============================================================================ routes


def routes_of(router: Any) -> set[tuple[str, str]]:
    """(method, path) of every route of ``router`` and of the routers it includes (without a prefix)."""
    found: set[tuple[str, str]] = set()
    for route in router.routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            found |= routes_of(included)
        else:
            found |= {(method, str(route.path)) for method in route.methods}
    return found


APP_ROUTES = set().union(*(routes_of(m.router) for m in (ingest, whatsapp, admin, whatsapp_media)))


def route_of(method: str | None, path: str) -> bool:
    """Whether ``path`` (``{x}`` for a value, a query string left off) is a route of the app."""
    path = re.sub(r"\{[^}]+\}", "x", path.split("?", 1)[0])
    for known_method, template in APP_ROUTES:
        if method is not None and known_method != method:
            continue
        if re.fullmatch(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)), path):
            return True
    return False


def test_every_route_the_page_names_is_a_route_of_the_app() -> None:
    """The webhook (``GET`` for the handshake, ``POST`` for messages), the media route and the admin
    routes the page names; the webhook's path is the one ``--gateway-url`` gets."""
    with_method = re.findall(r"`(GET|POST) (/v1/[^`\s]+)", TEXT)
    assert ("GET", "/v1/whatsapp/media/{message_id}") in with_method, with_method
    for method, path in with_method:
        assert route_of(method, path), f"{method} {path}"
    paths = set(re.findall(r"(?:^|[\s`(])(?:\{public_url\}|<URL>)?(/v1/[\w{}/.-]*)", TEXT, re.M))
    assert "/v1/whatsapp/webhook" in paths, paths
    for path in paths:
        assert route_of(None, path), path
    assert route_of("GET", whatsapp.WEBHOOK_PATH) and route_of("POST", whatsapp.WEBHOOK_PATH)
    assert "`<URL>/v1/whatsapp/webhook`" in REFERENCE and whatsapp.WEBHOOK_PATH == "/v1/whatsapp/webhook"


def test_every_fake_graph_route_the_page_names_is_a_route() -> None:
    """The ``/__fake/...`` paths of the page are routes of the fake Graph API."""
    from mogateway.testing.fake_graph import create_app, default_fixtures

    app = create_app(default_fixtures())
    routes = {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource is not None}
    named = set(re.findall(r"`(?:(GET|POST|PATCH|DELETE) )?(/__fake/[\w/{}]+)", TEXT))
    assert len(named) >= 6, named
    for method, path in named:
        path = path.replace("{id}", "{media_id}")
        assert any(p == path and (not method or m == method) for m, p in routes), (method, path, routes)


# ============================================================================ building blocks


def blocks_subsection(title: str) -> str:
    return DOC.section(f"### {title}")


SIGNATURE = re.compile(r"`(?:[\w.]+\.)?([A-Za-z_]\w*)\(([\w, =]*)\)")


def check_signatures(text: str, modules: list[Any]) -> int:
    """Each ``name(a, b, c)`` of ``text`` is a function or class of one of ``modules`` (or a method of
    one of their classes) whose parameters start with those the doc gives; returns how many."""
    checked = 0
    for name, args in SIGNATURE.findall(re.sub(r"\s*\n\s*", " ", text)):
        owners = [m for m in modules if hasattr(m, name)]
        owners += [
            cls
            for m in modules
            for cls in vars(m).values()
            if inspect.isclass(cls) and cls.__module__ == m.__name__ and name in vars(cls)
        ]
        assert owners, f"docs/whatsapp.md names {name}() of {[m.__name__ for m in modules]}: not there"
        said = [a.split("=")[0].strip() for a in args.split(",") if a.strip() and a.strip() != "…"]
        target = getattr(owners[0], name)
        params = [p for p in inspect.signature(target).parameters if p != "self"]
        assert params[: len(said)] == said, (name, said, params)
        checked += 1
    return checked


def test_each_building_block_imports_with_the_names_and_parameters_shown() -> None:
    """Each ``### `mogateway.…``` heading's modules import; every ``name(params)`` of its text is there
    with those parameters, and the other names it lists exist."""
    headings = re.findall(r"^### (.*)$", BLOCKS, re.M)
    assert len(headings) == 6, headings
    total = 0
    for heading in headings:
        dotted = re.findall(r"`(mogateway\.[\w.]+)`", heading)
        modules = [importlib.import_module(d) for d in dotted]
        text = blocks_subsection(heading)
        mentioned = re.findall(r"`((?:core|edges|api)\.[\w.]+)", text)
        for name in mentioned:
            module, _, attr = f"mogateway.{name}".rpartition(".")
            try:
                modules.append(importlib.import_module(f"mogateway.{name}"))
            except ModuleNotFoundError:
                modules.append(importlib.import_module(module))
                assert hasattr(modules[-1], attr), name
        if "fake_graph" in heading:
            modules += [wh, importlib.import_module("mogateway.testing.fake_graph.media")]
            modules.append(importlib.import_module("mogateway.testing.tls"))
        total += check_signatures(text, modules)
    assert total >= 25, total
    names = {
        core_whatsapp: "verify_signature sign_body handshake HandshakeAnswer parse_webhook Webhook "
        "InboundMessage Unread WebhookMalformed stored_only withholds_reply",
        whatsapp_send: "split_text message_request text_message_request mark_read_request action_for_code "
        "classify_answer SendFailure",
        whatsapp_answer: "check_answer check_message LIMITS RichAnswerError encode_reply decode_reply "
        "describe",
        graph_sender: "GraphSender GraphSendError",
        media_url: "signed_url check INVALID EXPIRED derive_key",
    }
    for module, listed in names.items():
        for name in listed.split():
            assert re.search(rf"\b{name}\b", BLOCKS) and hasattr(module, name), (module.__name__, name)
    for method in ("send_text", "send_message", "send_parts", "send_messages", "mark_read"):
        assert f"`{method}`" in BLOCKS and callable(getattr(GraphSender, method))
    builders = re.search(r"\*\*A builder for every inbound type\*\*(.*?)\n- |\Z", BLOCKS + "\n- ", re.S)
    assert builders
    for name in re.findall(r"`(\w+)`", builders[1]):
        if name in ("webhooks", "button", "WebhookSender", "context", "referral", "unknown"):
            continue
        assert callable(getattr(wh, name, None)), f"no webhooks.{name}"
    assert wh.unsupported(PERSON, kind="unknown")["type"] == "unknown"  # "or Meta's older `unknown`"


def test_the_send_actions_table_is_action_for_code() -> None:
    """Each code of the table has its action; unknown codes fail unless transient or 5xx; an answer
    without Graph's envelope is retried for 5xx, 408 and 429; the step-5 table agrees."""
    table = BLOCKS.split("| action | codes |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\s*\| `(\w+)` \| (.*) \|$", table, re.M)
    assert len(rows) == 5, rows
    for action, codes in rows:
        for code in re.findall(r"\b(\d+)\b(?! h)", codes):
            if code in ("408", "429"):
                continue
            assert whatsapp_send.action_for_code(int(code)) == action, (code, action)
    assert whatsapp_send.action_for_code(999_999) == "fail_now"
    assert whatsapp_send.action_for_code(999_999, is_transient=True) == "retry_backoff"
    for status in (500, 503, 408, 429):
        assert whatsapp_send.classify_answer(status, b"<html>").action == "retry_backoff", status
    assert whatsapp_send.classify_answer(400, b"<html>").action == "fail_now"
    envelope = json.dumps({"error": {"code": 131047, "message": "Re-engagement message"}}).encode()
    failure = whatsapp_send.classify_answer(400, envelope)
    assert (failure.action, failure.code, failure.http_status) == ("fail_now", 131047, 400)
    step5 = REFERENCE.split("| code | what the gateway does |", 1)[1].split("\n\n", 1)[0]
    said = {
        "`reply_failed` at once": {"fail_now"},
        "`reply_waiting`, retried with backoff": {"retry_backoff", "retry_this_recipient"},
        "`reply_failed`, and one operator log line per number": {"fail_and_alert_token"},
        "`reply_failed`, one log line per number and code": {"fail_and_alert_operator"},
    }
    for line in step5.splitlines()[2:]:
        for words, actions in said.items():
            if words in line:
                first = line.split("|")[1]
                for code in re.findall(r"\b(\d+)\b(?! h)", first):
                    assert whatsapp_send.action_for_code(int(code)) in actions, (code, line)


def test_the_pure_blocks_do_what_the_page_says() -> None:
    """Signatures, the handshake, the parse of a body, the split, the rich-answer encoding and the
    signed media URL, each run on a small example."""
    body = wh.encode(wh.webhook_body([wh.text(PERSON, "HELLO")]))
    header = core_whatsapp.sign_body(body, "app-secret-1")
    assert header.startswith("sha256=") and core_whatsapp.verify_signature(body, header, "app-secret-1")
    assert not core_whatsapp.verify_signature(body, header, "other-secret")
    assert not core_whatsapp.verify_signature(body, None, "app-secret-1")
    assert not core_whatsapp.verify_signature(body, core_whatsapp.sign_body(body, ""), "")
    ok = core_whatsapp.handshake("subscribe", "verify-token-1", "1158201444", "verify-token-1")
    assert (ok.status, ok.body) == (200, "1158201444")
    assert core_whatsapp.handshake("subscribe", "wrong", "1158201444", "verify-token-1").status == 403
    assert core_whatsapp.handshake("subscribe", "", "1158201444", "").status == 403
    assert core_whatsapp.handshake("subscribe", "verify-token-1", "\x00bad", "verify-token-1").status == 403
    parsed = core_whatsapp.parse_webhook(body)
    (message,) = parsed.messages
    assert (message.sender, message.text, message.type, message.phone_number_id) == (
        PERSON,
        "HELLO",
        "text",
        PNID,
    )
    with pytest.raises(core_whatsapp.WebhookMalformed):
        core_whatsapp.parse_webhook(b"not json")
    assert core_whatsapp.parse_webhook(b'{"object": "page"}').unread  # JSON of another shape: left out
    text = ("word " * 1000 + "\n\n") * 2 + "😀" * 3000
    parts = whatsapp_send.split_text(text)
    assert "".join(parts) == text and len(parts) > 1
    assert all(whatsapp_send.utf16_units(p) <= 4096 for p in parts)
    buttons = {
        "type": "interactive",
        "interactive": {
            "type": "button",
            "body": {"text": "Pick one"},
            "action": {"buttons": [{"type": "reply", "reply": {"id": "a", "title": "A"}}]},
        },
    }
    messages = whatsapp_answer.check_answer({"whatsapp": [buttons]})
    assert whatsapp_answer.decode_reply(whatsapp_answer.encode_reply(messages)) == messages
    assert whatsapp_answer.encode_reply(messages).startswith("\x1e")
    assert whatsapp_answer.decode_reply("plain text") is None
    assert whatsapp_answer.describe(messages) == ["interactive button"]
    with pytest.raises(whatsapp_answer.RichAnswerError) as bad:
        whatsapp_answer.check_answer({"whatsapp": [{"type": "text", "text": {"body": "x" * 4097}}]})
    assert bad.value.path and bad.value.reason
    key = media_url.derive_key(b"a secret of the gateway")
    url = media_url.signed_url("https://gw.example", key, "m1", "cl_a", 2_000_000_000)
    query = dict(p.split("=", 1) for p in url.split("?", 1)[1].split("&"))
    assert url.startswith("https://gw.example/v1/whatsapp/media/m1?client=cl_a&exp=2000000000&sig=")
    assert media_url.check([key], "m1", "cl_a", query["exp"], query["sig"], 1_900_000_000) is None
    assert (
        media_url.check([key], "m2", "cl_a", query["exp"], query["sig"], 1_900_000_000) == media_url.INVALID
    )
    assert (
        media_url.check([key], "m1", "cl_a", query["exp"], query["sig"], 2_100_000_000) == media_url.EXPIRED
    )


def test_the_graph_client_and_the_media_client_against_the_fake_graph() -> None:
    """``GraphSender`` sends a split text in order (the first part a reply) and returns the wamids; an
    error scripted at the fake raises ``GraphSendError`` with its action and the parts already sent;
    ``GraphMedia`` streams a registered media (its sha256 the fake's) and a gone one is 410."""
    with FakeGraphServer() as graph:

        async def sends() -> None:
            async with GraphSender(graph.url, "v21.0") as sender:
                wamids = await sender.send_parts(
                    PNID, TOKEN, PERSON, ["one", "two"], context_wamid="wamid.IN"
                )
                assert len(wamids) == 2 and all(w.startswith("wamid.") for w in wamids)
                scripted = {"code": 131047, "after": 1}
                assert httpx.post(f"{graph.url}/__fake/messages/errors", json=scripted).status_code < 300
                with pytest.raises(GraphSendError) as failed:
                    await sender.send_parts(PNID, TOKEN, PERSON, ["three", "four"])
                assert failed.value.failure.action == "fail_now" and failed.value.failure.code == 131047
                assert len(failed.value.sent) == 1
                assert TOKEN not in str(failed.value)
                await sender.mark_read(PNID, TOKEN, "wamid.IN")

        asyncio.run(sends())
        sent = httpx.get(f"{graph.url}/__fake/messages").json()
        sent = sent["data"]
        texts = [m["message"]["text"]["body"] for m in sent if m["error"] is None]
        assert texts == ["one", "two", "three"], sent  # "four" was answered the scripted error
        assert [m["error"] for m in sent if m["error"] is not None] == [131047], sent
        assert sent[0]["context_message_id"] == "wamid.IN", sent[0]  # the first part, a reply
        assert sent[1]["context_message_id"] is None, sent[1]
        assert httpx.get(f"{graph.url}/__fake/messages/reads").json(), "the mark-read was not recorded"

        data = b"bytes of a voice note"
        registered = httpx.post(
            f"{graph.url}/__fake/media",
            json={"data_b64": base64.b64encode(data).decode(), "mime_type": "audio/ogg"},
        ).json()
        assert registered["sha256"] == base64.b64encode(hashlib.sha256(data).digest()).decode(), registered
        expected = hashlib.sha256(data).digest()

        async def media() -> None:
            client = GraphMedia(graph.url, "v21.0")
            try:
                download = await client.open(registered["id"], TOKEN)
                got = b"".join([chunk async for chunk in download.chunks()])
                await download.aclose()
                assert got == data and hashlib.sha256(got).digest() == expected
                with pytest.raises(MediaFetchError) as wrong_token:
                    await client.lookup(registered["id"], "not-the-token")
                assert wrong_token.value.failure.status == 502, wrong_token.value.failure
                patched = httpx.patch(f"{graph.url}/__fake/media/{registered['id']}", json={"expired": True})
                assert patched.status_code < 300
                with pytest.raises(MediaFetchError) as gone:
                    await client.lookup(registered["id"], TOKEN)
                assert (gone.value.failure.status, gone.value.failure.kind) == (410, "media-expired")
            finally:
                await client.aclose()

        asyncio.run(media())


# ============================================================================ secrets at rest


def test_sealed_secrets_open_only_for_their_setting_and_number() -> None:
    """A token sealed for one number opens for it and stops the start in another's entry; a sealed app
    secret opens for ``whatsapp.app_secret``, not as a verify token; the contexts the page names exist."""
    for context in ("whatsapp.access_token", "whatsapp.app_secret", "whatsapp.verify_token"):
        assert f"`{context}`" in SECRETS or f"--context {context}" in SECRETS, context
    assert "`sealed:v1:<key id>:…`" in SECRETS
    key = bytes(range(32))
    token = seal_value(key, "the-access-token", "whatsapp.access_token", bound_to=PNID)
    assert token.startswith("sealed:v1:")
    secret = seal_value(key, "app-secret-sealed", "whatsapp.app_secret")

    def numbers(pnid: str) -> list[dict[str, str]]:
        return [{"phone_number_id": pnid, "display_phone_number": "919876543210", "access_token": token}]

    opened = whatsapp_settings(app_secret=secret, numbers=numbers(PNID)).opened([key])
    assert opened.app_secret.get_secret_value() == "app-secret-sealed"
    assert opened.numbers[0].access_token.get_secret_value() == "the-access-token"
    with pytest.raises(SealedValueError, match="106540352242923"):
        whatsapp_settings(numbers=numbers("106540352242923")).opened([key])
    with pytest.raises(SealedValueError, match="verify_token"):
        whatsapp_settings(verify_token=secret).opened([key])
    with pytest.raises(SealedValueError):
        whatsapp_settings(app_secret=secret).opened([])  # no key


def test_the_seal_command_and_the_key_rotation_link_the_page_gives() -> None:
    """``mogateway secrets seal`` takes the ``--context`` and ``--number`` the page shows, and the page
    it sends to for replacing the key has that heading."""
    command = re.search(r"`(mogateway secrets seal [^`]+)`", re.sub(r"\s*\n\s*", " ", SECRETS))
    assert command, SECRETS
    shown = subprocess.run(
        [*mogateway_command(), "secrets", "seal", "--help"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    for option in re.findall(r"(--[a-z][a-z-]*)", command[1]):
        assert option in shown.stdout, option
    link = re.search(r"\]\((configuration\.md)#([\w-]+)\)", SECRETS)
    assert link, SECRETS
    headings = re.findall(r"^#+ (.*)$", (ROOT / "docs" / link[1]).read_text(), re.M)
    assert link[2] in {re.sub(r"[^\w -]", "", h).strip().lower().replace(" ", "-") for h in headings}
