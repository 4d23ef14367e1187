"""docs/numbering.md and docs/contract.md, as written: their tables and examples are claims about the code.

The examples are taken from the docs by heading (as tests/ops/test_readme_quickstart.py takes README.md's
Quickstart), so a row added to a doc's table is checked without touching this file, and a row the test
cannot place fails it. The numbering claims are checked against the pure core
(``mogateway.core.numbering``); the callback body, headers and answer rules against
``mogateway.core.contract``; the few things only a running gateway shows (the headers as they go over the
wire, a late or oversized answer, the 422 of the ingest API) against one real ``mogateway serve`` with a
:class:`~mogateway.testing.recorder.CallbackRecorder` as the application.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from markdown_doc import MarkdownDoc
from mogateway import __version__
from mogateway.core.contract import (
    MAX_RESPONSE_BYTES,
    OutcomeKind,
    callback_body,
    callback_headers,
    judge_response,
    parse_tsiso,
)
from mogateway.core.message import Message, Sender
from mogateway.core.numbering import (
    CIRCLES,
    CURRENT_OPERATORS,
    DEFUNCT_OPERATORS,
    MAX_ID_CHARS,
    NumberRejected,
    normalize_circle,
    normalize_msisdn,
    normalize_operator,
    split_msisdn,
)
from mogateway.core.numbering import names as core_names
from mogateway.core.text import count_parts
from mogateway.edges.numbering_files import sender_resolver
from mogateway.service import caller
from mogateway.testing.recorder import Answer, CallbackRecorder

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import ServeGateway, closed_port_url, outcome, serve_gateway

ROOT = Path(__file__).resolve().parents[2]
NUMBERING = MarkdownDoc("docs/numbering.md")
CONTRACT = MarkdownDoc("docs/contract.md")


# ------------------------------------------------------------------------------------ reading the docs


def section(doc: MarkdownDoc, heading: str) -> str:
    """The text under ``heading`` (e.g. ``"## Refusals"``) up to the next heading of its level or above."""
    return doc.section(heading)


def table(text: str, first_column: str | None = None) -> list[list[str]]:
    """The body rows of the first markdown table in ``text`` (or the first whose header starts with
    ``first_column``), each a list of stripped cells."""
    rows: list[list[str]] = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        if len(lines) < 3 or not set(lines[1]) <= set("|-: "):
            continue
        head = [c.strip() for c in lines[0].strip("|").split("|")]
        if first_column is not None and head[0] != first_column:
            continue
        for line in lines[2:]:
            cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
            rows.append([c.strip() for c in cells])
        return rows
    raise AssertionError(f"no table (first column {first_column!r}) in: {text[:200]}")


def ticked(cell: str) -> list[str]:
    """The `code` spans of a cell, in order."""
    return re.findall(r"`([^`]*)`", cell)


def names_in(cell: str) -> list[str]:
    """A comma-separated list of names in a cell (an empty cell: none)."""
    return [n.strip() for n in cell.split(",") if n.strip()]


def code_block(text: str, lang: str = "") -> str:
    """The first fenced block of ``text`` whose opening fence is exactly ```` ```lang ````."""
    match = re.search(r"```" + re.escape(lang) + r"\n(.*?)```", text, flags=re.S)
    assert match, f"no ```{lang} block in: {text[:200]}"
    return match.group(1)


def prose(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) made one space, for phrases."""
    return " ".join(text.split())


def rejected(raw: str | int, **kw: int | None) -> NumberRejected:
    with pytest.raises(NumberRejected) as caught:
        normalize_msisdn(raw, **kw)
    return caught.value


# ------------------------------------------------------------------------------- numbering: msisdn


def test_every_accepted_form_becomes_the_number_the_doc_says() -> None:
    text = section(NUMBERING, "## Accepted forms")
    target = re.search(r"All of these become `(\d{12})`", text)
    assert target, "the doc names the form every example becomes"
    examples = [ex for _, cell in table(text, "form") for ex in ticked(cell)]
    assert len(examples) >= 7, examples
    for raw in examples:
        assert normalize_msisdn(raw) == target.group(1), raw
    # "Spaces (including no-break spaces), hyphens, dots, slashes and parentheses between digits".
    for sep in (" ", "\u00a0", "-", ".", "/"):
        assert normalize_msisdn(f"98{sep}100{sep}12345") == target.group(1), repr(sep)
    assert normalize_msisdn("(98100) 12345") == target.group(1)
    # "The HTTP ingest API also accepts the msisdn as a JSON number" (the core takes the int).
    assert normalize_msisdn(int(target.group(1))) == target.group(1)


def test_the_smpp_type_of_number_is_read_as_the_table_says() -> None:
    text = section(NUMBERING, "### SMPP type of number and numbering plan")
    rows = {row[0]: row[1] for row in table(text, "TON")}
    assert set(rows) == {
        "1 international",
        "2 national",
        "0 unknown, 3, 4, 6, or not given",
        "5 alphanumeric",
    }, rows
    accepted_forms = [ex for _, c in table(section(NUMBERING, "## Accepted forms")) for ex in ticked(c)]

    international = ticked(rows["1 international"])
    assert international == ["919810012345", "9810012345"]
    assert normalize_msisdn(international[0], ton=1) == "919810012345"
    refusal = rejected(international[1], ton=1)
    assert refusal.code == "not-indian" and "country code 98, IR" in refusal.reason, refusal.reason
    assert "country code 98 (Iran)" in rows["1 international"]

    national = ticked(rows["2 national"])
    assert national == ["9810012345", "09810012345", "91…"]
    national = national[:2]
    for raw in [*national, "919810012345"]:  # "a 12-digit `91…` is also accepted"
        assert normalize_msisdn(raw, ton=2) == "919810012345", raw

    for ton in (0, 3, 4, 6, None):  # "guessed from the form, as in the table above"
        for raw in accepted_forms:
            assert normalize_msisdn(raw, ton=ton) == "919810012345", (ton, raw)

    refusal = rejected("919810012345", ton=5)
    assert refusal.code == "alphanumeric"


def test_only_the_telephone_numbering_plans_the_doc_names_are_accepted() -> None:
    text = prose(section(NUMBERING, "### SMPP type of number and numbering plan"))
    sentence = re.search(r"NPI (\d+) \(unknown\), (\d+) \([^)]*\) and (\d+) \(national\) are accepted", text)
    assert sentence, "the doc names the accepted NPIs"
    accepted = {int(n) for n in sentence.groups()}
    assert accepted == {0, 1, 8}
    refused = {}
    for npi in range(19):
        if npi in accepted:
            assert normalize_msisdn("9810012345", npi=npi) == "919810012345"
        else:
            refusal = rejected("9810012345", npi=npi)
            assert refusal.code == "numbering-plan", npi
            refused[npi] = refusal.reason
    # The plans the doc lists by name are refused with that name.
    listed = re.search(r"any other plan \(([^)]*(?:\([^)]*\)[^)]*)*)\) is refused", text)
    assert listed, "the doc lists the refused plans"
    for word in ("data", "telex", "land mobile", "E.212", "private", "ERMES", "internet", "WAP"):
        assert word in listed.group(1)
        assert any(word.lower() in reason.lower() for reason in refused.values()), word


#: For each refusal code, the input that gives the doc's example reason (the doc gives the reason only).
REFUSAL_INPUTS: dict[str, tuple[str, dict[str, int]]] = {
    "empty": (" \t ", {}),
    "too-long": ("9" * 50, {}),
    "not-digits": ("98100*12345", {}),
    "alphanumeric": ("VK-HDFCBK", {}),
    "numbering-plan": ("9810012345", {"npi": 9}),
    "not-indian": ("+44 7911 123456", {}),
    "wrong-length": ("99999999999", {}),
    "m2m": ("5912345678901", {}),
    "special-series": ("1600123456", {}),
    "not-mobile": ("2212345678", {}),
}


def test_each_refusal_gives_the_code_and_the_reason_the_doc_names() -> None:
    rows = table(section(NUMBERING, "## Refusals"), "code")
    codes = [ticked(row[0])[0] for row in rows]
    # Every code the core can give (NumberRejected's documented list) has its row, and no more.
    core_codes = re.findall(r"``([a-z0-9-]+)``", (NumberRejected.__doc__ or "").split("(metrics):")[1])
    assert sorted(codes) == sorted(core_codes)
    assert set(codes) == set(REFUSAL_INPUTS)
    for code, when, example in rows:
        (code,) = ticked(code)
        raw, kw = REFUSAL_INPUTS[code]
        refusal = rejected(raw, **kw)
        assert (refusal.code, refusal.reason) == (code, ticked(example)[0]), (code, raw)
        # Every whole example of the "when" column is refused with that code too.
        for example_input in ticked(when):
            if "…" in example_input or example_input in ("91", "+91", "0"):
                continue
            assert rejected(example_input).code == code, example_input


def test_the_prefix_examples_of_the_refusals_table_are_refused() -> None:
    rows = {ticked(row[0])[0]: row[1] for row in table(section(NUMBERING, "## Refusals"), "code")}
    for prefix in ticked(rows["special-series"]):
        national = prefix.rstrip("…").ljust(10, "2")
        for raw in (national, "+91" + national):
            assert rejected(raw).code == "special-series", raw
    for prefix in ticked(rows["not-indian"]):
        if prefix.endswith("…"):  # `+44…`, `0044…`: a UK mobile after the prefix
            assert rejected(prefix.rstrip("…") + "7911123456").code == "not-indian", prefix
    m2m = "5912345678901"
    leads = ticked(rows["m2m"])
    assert leads == ["91", "+91", "0"]
    for lead in ["", *leads]:
        assert rejected(lead + m2m).code == "m2m", lead
    # "a national number starting 0–5"
    for first in "012345":
        assert rejected(first + "212345678").code in ("not-mobile", "special-series"), first


def test_foreign_only_when_a_real_number_of_another_country_and_fixed_lines_6_to_8_pass() -> None:
    text = section(NUMBERING, "## Refusals")
    for raw in ("14155552671", "447911123456"):
        assert f"`{raw}`" in text
        assert rejected(raw).code == "not-indian", raw
    assert rejected("99999999999").code == "wrong-length"
    landline = re.search(r"`(8\d{9})` is a landline", text)
    assert landline, "the doc names a landline example"
    assert normalize_msisdn(landline.group(1)) == "91" + landline.group(1)


def test_the_sender_members_are_split_as_the_doc_says() -> None:
    rows = {ticked(row[0])[0]: row[1] for row in table(NUMBERING.text, "member")}
    assert list(rows) == ["cc", "ndc", "sn", "operator", "circle"]
    ndc, msisdn = ticked(rows["ndc"])
    assert split_msisdn(msisdn)[:2] == (91, int(ndc))
    sent_as = ticked(rows["sn"])
    assert sent_as[:2] == ["012345", "12345"]
    assert split_msisdn("919810012345") == (91, 9810, int(sent_as[1]))
    assert f"{split_msisdn('919810012345')[2]:06d}" == sent_as[0]  # "pad to 6 digits to restore"


# ------------------------------------------------------------------------- numbering: circles, operators


def test_the_22_circles_are_exactly_the_cores() -> None:
    text = section(NUMBERING, "## Circles")
    rows = table(text, "id")
    assert len(rows) == 22 == len(CIRCLES)
    doc = [(ticked(r[0])[0], r[1], r[2], r[3]) for r in rows]
    assert doc == [(c.id, c.code, c.name, c.covers) for c in CIRCLES]
    for row in rows:
        circle_id = ticked(row[0])[0]
        spellings = names_in(row[4])
        assert set(spellings) == set(core_names._CIRCLE_ALIASES.get(circle_id, ())), circle_id
        for spelling in [circle_id, row[1], row[2], *spellings]:
            for variant in (spelling, spelling.upper(), spelling.lower().replace(" ", "_")):
                assert normalize_circle(variant) == circle_id, variant


def test_the_circle_spelling_examples_of_the_doc() -> None:
    text = prose(section(NUMBERING, "## Circles"))
    group = re.search(r"\(((?:`\"[^\"]+\"`, )+`\"[^\"]+\"`) → `([a-z-]+)`\)", text)
    assert group, "the doc's list of spellings of up-east"
    spellings = re.findall(r'"([^"]+)"', group.group(1))
    assert len(spellings) == 4
    for spelling in spellings:
        assert normalize_circle(spelling) == group.group(2), spelling
    passed = re.search(r'\(`"([^"]+)"` → `([a-z-]+)`, which is ambiguous', text)
    assert passed, "the doc's pass-through example"
    assert normalize_circle(passed.group(1)) == passed.group(2)
    assert re.search(rf"at most {MAX_ID_CHARS} characters", text)
    assert len(normalize_circle("Circle " * 20)) <= MAX_ID_CHARS


def test_the_operators_are_exactly_the_cores() -> None:
    text = section(NUMBERING, "## Operators")
    rows = table(text, "id")
    ids = [ticked(r[0])[0] for r in rows]
    assert set(ids) == set(CURRENT_OPERATORS) | DEFUNCT_OPERATORS
    assert [i for i, r in zip(ids, rows, strict=True) if r[1].startswith("current")] == list(
        CURRENT_OPERATORS
    )
    assert {i for i, r in zip(ids, rows, strict=True) if r[1].startswith("defunct")} == DEFUNCT_OPERATORS
    for op_id, row in zip(ids, rows, strict=True):
        listed = names_in(row[2])
        # The doc may list the id itself in another case (`Aircel`); the core's aliases are the rest.
        others = {n for n in listed if n.casefold() != op_id}
        assert others == set(core_names._OPERATOR_ALIASES.get(op_id, ())), op_id
        for name in [op_id, *listed]:
            for variant in (name, name.upper(), name.lower().replace(" ", "-")):
                assert normalize_operator(variant) == op_id, variant
    new = re.search(r'\(`"([^"]+)"` → `([a-z-]+)`, at most (\d+) characters\)', prose(text))
    assert new and int(new.group(3)) == MAX_ID_CHARS
    assert normalize_operator(new.group(1)) == new.group(2)
    assert '"Reliance" alone is ambiguous' in prose(text) and "passes through as `reliance`" in prose(text)
    assert normalize_operator("Reliance") == "reliance"


def test_a_series_split_at_the_fifth_digit_answers_as_the_doc_says() -> None:
    text = section(NUMBERING, "## The shipped series table")
    split = re.findall(r"`(\d{5})` (\w+)", text)
    assert [p for p, _ in split] == ["72290", "72298"]
    senders = sender_resolver(series_csv=None, ported_csv=None)
    for prefix, name in split:
        sender = senders.sender("91" + prefix + "12345")
        assert sender.operator == normalize_operator(name), prefix


# ------------------------------------------------------------------------------- contract: the request


def request_block() -> tuple[list[tuple[str, str]], bytes]:
    """The headers and the body of the example request in docs/contract.md, "The request"."""
    block = code_block(section(CONTRACT, "## The request"))
    head, body = block.split("\n\n", 1)
    lines = head.splitlines()
    assert lines[0] == "POST {callback_url}"
    headers = [tuple(line.split(": ", 1)) for line in lines[1:]]
    return [(k, v) for k, v in headers], body.strip().encode()


def example_message(body: bytes) -> Message:
    """The MO of the doc's example: what the gateway holds for it, from the doc's own values."""
    data = json.loads(body)
    s = data["sender"]
    return Message(
        id="06h2fq8noj3j84eraeo5ti88gk",
        shortcode=str(data["shortcode"]),
        msisdn=normalize_msisdn(str(data["msisdn"])),
        text=data["message"],
        received_at=parse_tsiso(data["tsiso"]).timestamp(),
        sender=Sender(*split_msisdn(str(data["msisdn"])), operator=s["operator"], circle=s["circle"]),
    )


def test_the_example_body_is_the_exact_bytes_the_core_builds() -> None:
    _, body = request_block()
    message = example_message(body)
    assert callback_body(message) == body  # key order, compact JSON, number types, tsiso, tsunix in ms
    data = json.loads(body)
    assert len(str(data["tsunix"])) == 13  # "milliseconds (13 digits, as the seed's sample)"
    in_seconds = json.loads(callback_body(message, "s"))
    assert in_seconds["tsunix"] == data["tsunix"] // 1000 and len(str(in_seconds["tsunix"])) == 10
    # tsiso is truncated, not rounded, to the millisecond.
    later = message.with_changes(received_at=message.received_at + 0.000999)
    assert json.loads(callback_body(later))["tsiso"] == data["tsiso"]


def test_the_member_table_gives_each_members_json_type_in_body_order() -> None:
    _, body = request_block()
    data = json.loads(body)
    flat: list[tuple[str, object]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            flat.extend((f"{key}.{k}", v) for k, v in value.items())
        else:
            flat.append((key, value))
    rows = table(section(CONTRACT, "## The request"), "member")
    assert [ticked(r[0])[0] for r in rows] == [k for k, _ in flat]
    kinds = {"number": int, "string": str}
    for (member, value), row in zip(flat, rows, strict=True):
        assert type(value) is kinds[row[1]], (member, value)
    # "All five sender keys are always present", also when nothing is known of operator and circle.
    unknown = example_message(body).with_changes(sender=Sender(91, 9810, 12, "", ""))
    assert json.loads(callback_body(unknown))["sender"] == {
        "cc": 91,
        "ndc": 9810,
        "sn": 12,
        "operator": "",
        "circle": "",
    }


def test_the_example_headers_are_what_the_core_builds() -> None:
    headers, _ = request_block()
    built = callback_headers("TOKEN", "MSGID", __version__)
    placeholders = {
        "<the client's token>": "TOKEN",
        "<the gateway's message id>": "MSGID",
        "<version>": __version__,
    }

    def filled(value: str) -> str:
        for placeholder, real in placeholders.items():
            value = value.replace(placeholder, real)
        return value

    assert [(k, filled(v)) for k, v in headers] == list(built.items())


# --------------------------------------------------------------------------- contract: the answer rules


def answer_rules() -> dict[str, str]:
    """The outcome table: the application's answer (first cell) → the outcome's first code span."""
    rows = table(section(CONTRACT, "## The answer: outcome rules"), "the application…")
    return {row[0]: ticked(row[1])[0] if ticked(row[1]) else row[1] for row in rows}


# What the core judges for each row, keyed by the start of the row's first cell. The rows that need a
# network or a router (cannot be reached, refused address, no application) are shown by a real gateway
# in test_the_answer_rules_on_a_real_gateway, or are routing (``unroutable``), not a judgement of an answer.
CORE_RULES: dict[str, Callable[[], list[OutcomeKind]]] = {
    "answers `200`, `text/plain`": lambda: [
        judge_response(200, "text/plain", b"Thanks").kind,
        judge_response(200, "text/plain; charset=iso-8859-1", "Danke schön".encode("latin-1")).kind,
        judge_response(200, None, b"Thanks").kind,
    ],
    "answers `200` with an empty": lambda: [
        judge_response(200, "text/plain", b"").kind,
        judge_response(200, "text/plain", b" \r\n\t").kind,
        judge_response(200, "text/plain", " \u3000\u00a0 ".encode()).kind,
        judge_response(200, "text/plain", b"\\n  \\n").kind,  # blank after unescaping
    ],
    "answers any other status": lambda: [
        judge_response(status, "text/plain", b"Thanks").kind for status in (204, 301, 302, 404, 500, 503)
    ],
    "(WhatsApp only) answers `200`, `application/json`": lambda: [
        judge_response(
            200,
            "application/json",
            b'{"whatsapp": {"type": "text", "text": {"body": "Hi"}}}',
            channel="whatsapp",
        ).kind
    ],
    "answers another content type": lambda: [
        judge_response(200, "application/json", b'{"whatsapp": {}}').kind,  # JSON on SMS
        judge_response(200, "text/html", b"<p>Hi</p>").kind,
        judge_response(200, "text/plain", b"\xff\xfe\xfa").kind,  # not UTF-8
        judge_response(200, "text/plain", b"x" * MAX_RESPONSE_BYTES, oversized=True).kind,
    ],
}
NETWORK_RULES = ("gives no complete answer", "cannot be reached", "has a URL pointing", "— no application")


def test_each_answer_rule_has_the_outcome_the_doc_names() -> None:
    rules = answer_rules()
    for answer, named in rules.items():
        keys = [k for k in (*CORE_RULES, *NETWORK_RULES) if answer.startswith(k)]
        assert len(keys) == 1, f"a row of the outcome table this test does not know: {answer}"
        if keys[0] in CORE_RULES:
            kinds = CORE_RULES[keys[0]]()
            assert {k.value for k in kinds} == {named}, (answer, kinds)
    assert set(CORE_RULES) <= {k for a in rules for k in CORE_RULES if a.startswith(k)}


def test_the_reply_is_unescaped_and_trimmed_as_the_doc_says() -> None:
    text = section(CONTRACT, "## The answer: outcome rules")
    assert "The reply that is sent is the body with leading and trailing whitespace removed" in text
    judged = judge_response(200, "text/plain", b"  Line one\\nLine two \n")
    assert judged.reply == "Line one\nLine two"
    assert "`unescape_newlines: false` gets its text sent as is" in text
    kept = judge_response(200, "text/plain", b"a\\nb", unescape_newlines=False)
    assert kept.reply == "a\\nb"
    assert "without one, UTF-8" in text
    assert judge_response(200, "text/plain", "नमस्ते".encode()).reply == "नमस्ते"
    assert judge_response(200, None, "नमस्ते".encode()).reply == "नमस्ते"


# ------------------------------------------------------------------------------- a real gateway


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeGateway, CallbackRecorder]]:
    """One ``mogateway serve`` (one worker) and a recording application, shared by this module's tests."""
    workdir = tmp_path_factory.mktemp("docs-contract")
    with CallbackRecorder.in_thread(Answer.text("OK")) as app, serve_gateway(workdir, workers=1) as gw:
        yield gw, app


def test_the_headers_on_the_wire_are_the_docs(gateway: tuple[ServeGateway, CallbackRecorder]) -> None:
    gw, app = gateway
    client = gw.add_client(shortcodes=["56001"], callback_url=app.url, name="headers")
    pushed = gw.push("56001", "HELLO")
    assert gw.wait_state(pushed["id"], timeout=30)["state"] == "replied"
    (call,) = [c for c in app.calls if c.headers.get("x-mogateway-message-id") == pushed["id"]]
    headers, _ = request_block()
    expected = {
        "content-type": "application/json",
        "authorization": f"Bearer {client['token']}",
        "user-agent": f"mogateway/{__version__}",
        "x-mogateway-message-id": pushed["id"],
    }
    assert [k for k, _ in headers] == list(expected)
    # Besides the four, only what the doc says the HTTP client adds.
    transport = {k: v for k, v in call.headers.items() if k not in expected}
    assert set(transport) == {"host", "content-length", "accept-encoding"}, transport
    assert transport["accept-encoding"] == "identity"
    assert "`accept-encoding: identity`" in section(CONTRACT, "## The request")
    assert {k: call.headers[k] for k in expected} == expected
    body = json.loads(call.body)
    assert list(body) == ["shortcode", "msisdn", "message", "sender", "tsiso", "tsunix"]
    assert body["msisdn"] == 919810012345 and body["shortcode"] == 56001


@pytest.mark.parametrize(
    ("shortcode", "rule", "answer", "state"),
    [
        ("57001", "answers `200` with an empty", Answer.blank(b"  \n "), "no_reply"),
        ("57002", "gives no complete answer", Answer.late(4.0), "timed_out"),
        ("57003", "answers any other status", Answer.with_status(302, headers=(("location", "/x"),)), None),
        ("57004", "answers another content type", Answer.oversize(), None),
    ],
)
def test_the_answer_rules_on_a_real_gateway(
    gateway: tuple[ServeGateway, CallbackRecorder],
    shortcode: str,
    rule: str,
    answer: Answer,
    state: str | None,
) -> None:
    """Blank, late (the client's deadline: 1 s here), a redirect (not followed) and a body over 64 KiB,
    as the gateway judges them over a real connection."""
    gw, _ = gateway
    named = next(v for k, v in answer_rules().items() if k.startswith(rule))
    with CallbackRecorder.in_thread(answer) as app:
        gw.add_client(shortcodes=[shortcode], callback_url=app.url, name=shortcode, timeout_s=1)
        pushed = gw.push(shortcode, "HELLO")
        message = gw.wait_state(pushed["id"], timeout=30)
    assert outcome(message)["outcome"] == named, message["timeline"]
    if state is not None:
        assert message["state"] == state
    if named == "http_error":
        assert outcome(message)["status"] == 302
        assert len(app.calls) == 1  # the redirect is not followed


def test_an_unreachable_application_fails_when_the_deadline_ends(
    gateway: tuple[ServeGateway, CallbackRecorder],
) -> None:
    gw, _ = gateway
    named = next(v for k, v in answer_rules().items() if k.startswith("cannot be reached"))
    assert named == "failed"
    row = next(r for r in table(section(CONTRACT, "## The answer: outcome rules")) if "cannot be" in r[0])
    assert "retried with backoff (50 ms doubling to 2 s)" in row[1]
    assert (caller._FIRST_BACKOFF_S, caller._MAX_BACKOFF_S) == (0.05, 2.0)
    gw.add_client(shortcodes=["56999"], callback_url=closed_port_url(), name="gone", timeout_s=1)
    pushed = gw.push("56999", "HELLO")
    message = gw.wait_state(pushed["id"], timeout=30)
    assert outcome(message)["outcome"] == "failed", message["timeline"]


def test_a_refused_msisdn_is_a_422_naming_the_field_and_the_reason(
    gateway: tuple[ServeGateway, CallbackRecorder],
) -> None:
    """docs/numbering.md: refused numbers are answered ``422`` naming ``msisdn`` and the reason."""
    gw, _ = gateway
    rows = {ticked(row[0])[0]: row[2] for row in table(section(NUMBERING, "## Refusals"), "code")}
    raw, _ = REFUSAL_INPUTS["not-indian"]
    resp = gw.ingest("POST", "/v1/inbound", json={"shortcode": "56001", "msisdn": raw, "message": "x"})
    assert resp.status_code == 422, resp.text
    problem = resp.json()
    assert problem["field"] == "msisdn" and problem["reason"] == ticked(rows["not-indian"])[0]
    assert problem["state"] == "rejected"


def test_long_replies_are_split_and_capped_as_the_doc_says() -> None:
    """The SMS part sizes of the long-replies rule, in the core's count."""
    rule = prose(section(CONTRACT, "## The answer: outcome rules"))
    assert "GSM-7: 160 septets single, 153 per part; UCS-2: 70 characters single, 67 per part" in rule
    escapes = re.search(r"escape characters `([^`]+)` take two septets", rule)
    assert escapes, "the doc names the escape characters"
    assert (count_parts("a" * 160).parts, count_parts("a" * 161).parts, count_parts("a" * 307).parts) == (
        1,
        2,
        3,
    )
    assert (count_parts("अ" * 70).parts, count_parts("अ" * 71).parts, count_parts("अ" * 135).parts) == (
        1,
        2,
        3,
    )
    for ch in escapes.group(1):  # GSM-7 escapes: ^ { } \ [ ~ ] | €
        assert count_parts(ch * 80) == count_parts("a" * 160), ch
    assert "capped at `reply_max_parts` parts (default 6)" in rule


def test_a_reply_over_the_cap_is_cut_and_the_cut_recorded(
    gateway: tuple[ServeGateway, CallbackRecorder],
) -> None:
    """A 2,000-character answer: sent as 6 parts, the timeline says how long it was."""
    gw, _ = gateway
    with CallbackRecorder.in_thread(Answer.text("x" * 2000)) as app:
        gw.add_client(shortcodes=["57010"], callback_url=app.url, name="long")
        message = gw.wait_state(gw.push("57010", "HELLO")["id"], timeout=30)
    said = outcome(message)
    assert said["outcome"] == "reply" and said["parts"] == 6, said
    assert said["truncated_from_chars"] == 2000
