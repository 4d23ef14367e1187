"""DLT over a real gateway: the client fields and templates through the API and the CLI, the CSV import,
and what happens to a reply (sent with the ids, sent with a note, or blocked) on the HTTP reply channel.

Most tests run on the module's shared multi-worker ``mogateway serve`` (``gw`` in conftest.py), each on
shortcodes of its own (``codes``), looking only at its own clients, messages and MT hand-overs
(``calls_for``); a test that needs another setting or a journal to restart from starts its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_harness import (
    ADMIN_TOKEN,
    Codes,
    ServeGateway,
    calls_for,
    events,
    metric,
    serve_gateway,
    state_from_timeline,
    wait_until,
)
from typer.testing import CliRunner

from mogateway.cli import app as cli
from mogateway.cli.common import console
from mogateway.testing.recorder import Answer, CallbackRecorder

SC = "56767"  # on the gateways of a test's own
PE = "1201159178420181234"
T_BAL = "1107161234567890001"
T_OTP = "1107161234567890002"
T_BYE = "1107161234567890003"


@pytest.fixture
def own_mt() -> Iterator[CallbackRecorder]:
    """An MT endpoint of the test's own, for the tests that start a gateway of their own."""
    answer = Answer(status=200, body=b'{"id": "mt-1"}', content_type="application/json")
    with CallbackRecorder.in_thread(answer, path="/mt") as recorder:
        yield recorder


def add_dlt_client(gw: ServeGateway, app: CallbackRecorder, shortcode: str = SC, **fields: Any) -> str:
    return str(gw.add_client(shortcodes=[shortcode], callback_url=app.url, dlt_pe_id=PE, **fields)["id"])


def mt_calls(mt: CallbackRecorder, message_id: str, count: int = 1) -> list[Any]:
    """The hand-overs of one message to the shared MT endpoint, once there are ``count``."""
    wait_until(lambda: len(calls_for(mt, message_id)) >= count, f"{count} MT call(s) for {message_id}")
    return calls_for(mt, message_id)


def add_template(gw: ServeGateway, cid: str, template_id: str, text: str) -> Any:
    return gw.admin(
        "POST", f"/v1/clients/{cid}/dlt-templates", json={"template_id": template_id, "text": text}
    )


def assert_problem(resp: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    body = dict(resp.json())
    if field is not None:
        assert body["field"] == field, body
    return body


# ------------------------------------------------------------------------------- client fields


def test_pe_id_and_enforcement_are_client_fields(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    plain = gw.add_client(shortcodes=[codes[0]], callback_url=app.url)
    assert (plain["dlt_pe_id"], plain["dlt_enforce"], plain["dlt_templates"]) == (None, False, 0)

    created = gw.add_client(shortcodes=[codes[1]], callback_url=app.url, dlt_pe_id=PE, dlt_enforce=True)
    assert (created["dlt_pe_id"], created["dlt_enforce"]) == (PE, True)
    cid = created["id"]
    shown = gw.admin("GET", f"/v1/clients/{cid}").json()
    assert (shown["dlt_pe_id"], shown["dlt_enforce"], shown["dlt_templates"]) == (PE, True, 0)
    listed = {c["id"]: c for c in gw.admin("GET", "/v1/clients").json()["clients"]}
    assert listed[cid]["dlt_pe_id"] == PE

    relaxed = gw.admin("PATCH", f"/v1/clients/{cid}", json={"dlt_enforce": False})
    assert relaxed.status_code == 200 and relaxed.json()["dlt_enforce"] is False
    assert relaxed.json()["dlt_pe_id"] == PE  # untouched fields stay
    # Removing the PE id of an enforcing client would block every reply with no way to match: refused.
    gw.admin("PATCH", f"/v1/clients/{cid}", json={"dlt_enforce": True})
    body = assert_problem(
        gw.admin("PATCH", f"/v1/clients/{cid}", json={"dlt_pe_id": None}), 422, "dlt_enforce"
    )
    assert "needs dlt_pe_id" in body["detail"]
    cleared = gw.admin("PATCH", f"/v1/clients/{cid}", json={"dlt_pe_id": None, "dlt_enforce": False})
    assert (cleared.json()["dlt_pe_id"], cleared.json()["dlt_enforce"]) == (None, False)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"dlt_pe_id": "12345"}, "dlt_pe_id"),
        ({"dlt_pe_id": "1201159178420181234x"}, "dlt_pe_id"),
        ({"dlt_pe_id": 1201159178420181234}, "dlt_pe_id"),
        ({"dlt_enforce": True}, "dlt_enforce"),
        ({"dlt_enforce": "sometimes"}, "dlt_enforce"),
    ],
)
def test_malformed_dlt_fields_are_422(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, fields: dict[str, Any], field: str
) -> None:
    body = {"name": "x", "shortcodes": [codes[0]], "callback_url": app.url, **fields}
    problem = assert_problem(gw.admin("POST", "/v1/clients", json=body), 422, field)
    assert problem["detail"].startswith(f"{field}:")
    clients = gw.admin("GET", "/v1/clients").json()["clients"]
    assert [c for c in clients if codes[0] in map(str, c["shortcodes"])] == []  # nothing was created


# ----------------------------------------------------------------------------------- templates


def test_templates_round_trip_over_the_api(gw: ServeGateway, codes: Codes, app: CallbackRecorder) -> None:
    cid = add_dlt_client(gw, app, codes[0])
    created = add_template(gw, cid, T_BAL, "Your balance is {#var#}.")
    assert created.status_code == 201, created.text
    assert created.json()["template_id"] == T_BAL and created.json()["variables"] == 1
    assert add_template(gw, cid, T_BAL, "  Your balance is {#var#}.  ").status_code == 200  # the same again
    conflict = assert_problem(add_template(gw, cid, T_BAL, "Balance {#var#}"), 409)
    assert conflict["text"] == "Your balance is {#var#}."
    assert add_template(gw, cid, T_OTP, "OTP {#numeric#} valid for {#var#} min").status_code == 201

    listed = gw.admin("GET", f"/v1/clients/{cid}/dlt-templates").json()
    assert (listed["dlt_pe_id"], listed["count"]) == (PE, 2)
    assert [(t["template_id"], t["text"], t["variables"]) for t in listed["templates"]] == [
        (T_BAL, "Your balance is {#var#}.", 1),
        (T_OTP, "OTP {#numeric#} valid for {#var#} min", 2),
    ]
    assert all(t["added_at"].endswith("Z") for t in listed["templates"])
    assert gw.admin("GET", f"/v1/clients/{cid}").json()["dlt_templates"] == 2

    assert gw.admin("DELETE", f"/v1/clients/{cid}/dlt-templates/{T_BAL}").status_code == 204
    assert_problem(gw.admin("DELETE", f"/v1/clients/{cid}/dlt-templates/{T_BAL}"), 404)
    assert [
        t["template_id"] for t in gw.admin("GET", f"/v1/clients/{cid}/dlt-templates").json()["templates"]
    ] == [T_OTP]
    assert_problem(gw.admin("GET", "/v1/clients/cl_nobody/dlt-templates"), 404)
    assert_problem(add_template(gw, "cl_nobody", T_BAL, "Hi {#var#}"), 404)
    assert gw.request("GET", f"/v1/clients/{cid}/dlt-templates").status_code == 401


@pytest.mark.parametrize(
    ("template_id", "text", "field", "why"),
    [
        ("1107", "Hi {#var#}", "template_id", "19 digits"),
        (T_BAL, "", "text", "is empty"),
        (T_BAL, "{#var#}", "text", "no fixed text"),
        (T_BAL, "Your OTP is {#VAR#}", "text", "is not a DLT variable"),
        (T_BAL, "Your OTP is {#var}", "text", "is not a DLT variable"),
    ],
)
def test_malformed_templates_are_422_naming_the_field(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, template_id: str, text: str, field: str, why: str
) -> None:
    cid = add_dlt_client(gw, app, codes[0])
    problem = assert_problem(add_template(gw, cid, template_id, text), 422, field)
    assert why in problem["detail"]
    assert gw.admin("GET", f"/v1/clients/{cid}/dlt-templates").json()["count"] == 0


EXPORT = f"""Template Id,Template Name,Template Content,Status,Entity Id
{T_BAL},bal,Your balance is {{#var#}}.,Approved,{PE}
{T_OTP},otp,"OTP {{#numeric#}}
valid 10 min",Approved,{PE}
1107161234567890009,old,Old offer {{#var#}},Rejected,{PE}
1.10716E+18,rounded,Hi {{#var#}},Approved,{PE}
"""


def test_importing_a_portal_export_reports_what_was_refused(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    cid = add_dlt_client(gw, app, codes[0])
    path = f"/v1/clients/{cid}/dlt-templates/import"
    dry = gw.admin("POST", path, params={"dry_run": "true"}, content=EXPORT.encode()).json()
    assert (dry["dry_run"], dry["added"], dry["total"]) == (True, [T_BAL, T_OTP], 2)
    assert gw.admin("GET", f"/v1/clients/{cid}/dlt-templates").json()["count"] == 0  # nothing changed

    report = gw.admin("POST", path, content=EXPORT.encode(), headers={"content-type": "text/csv"})
    assert report.status_code == 200, report.text
    body = report.json()
    assert (body["rows"], body["added"], body["updated"], body["unchanged"], body["total"]) == (
        4,
        [T_BAL, T_OTP],
        [],
        0,
        2,
    )
    assert [(r["line"], r["template_id"]) for r in body["refused"]] == [
        (5, "1107161234567890009"),
        (6, "1.10716E+18"),
    ]
    assert "status 'Rejected'" in body["refused"][0]["reason"]
    assert "Excel" in body["refused"][1]["reason"]
    assert body["entity_ids"] == [PE] and body["columns"]["text"] == "Template Content"
    texts = {
        t["template_id"]: t["text"]
        for t in gw.admin("GET", f"/v1/clients/{cid}/dlt-templates").json()["templates"]
    }
    assert texts == {T_BAL: "Your balance is {#var#}.", T_OTP: "OTP {#numeric#}\nvalid 10 min"}

    # Again: unchanged. With --replace semantics, templates not in the file go.
    add_template(gw, cid, T_BYE, "Bye {#var#}")
    again = gw.admin("POST", path, content=EXPORT.encode()).json()
    assert (again["added"], again["unchanged"], again["total"]) == ([], 2, 3)
    replaced = gw.admin("POST", path, params={"replace": "true"}, content=EXPORT.encode()).json()
    assert (replaced["removed"], replaced["total"]) == ([T_BYE], 2)


def test_an_unreadable_import_is_refused_as_a_whole(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    cid = add_dlt_client(gw, app, codes[0])
    path = f"/v1/clients/{cid}/dlt-templates/import"
    problem = assert_problem(
        gw.admin("POST", path, content="Template Id,Template Content\n1,café\n".encode("cp1252")), 422, "file"
    )
    assert "CSV UTF-8" in problem["detail"]
    assert_problem(gw.admin("POST", path, content=b"msisdn,operator\n1,2\n"), 422, "file")


def test_a_large_export_is_not_held_to_the_small_body_limit(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    cid = add_dlt_client(gw, app, codes[0])
    lines = ["Template ID,Template Content"] + [
        f"11071612345{i:08d},Offer {i}: {{#var#}} {'x' * 150}" for i in range(600)
    ]
    data = "\n".join(lines).encode()
    assert len(data) > 64 * 1024
    report = gw.admin("POST", f"/v1/clients/{cid}/dlt-templates/import", content=data)
    assert report.status_code == 200, report.text
    assert report.json()["total"] == 600


# ----------------------------------------------------------------------------------- the reply


def test_a_matched_reply_carries_the_ids_and_names_the_template(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    cid = add_dlt_client(gw, app, codes[0])
    add_template(gw, cid, T_BAL, "Your balance is {#var#}.")
    app.answer = Answer.text("Your balance is Rs 42.")
    message = gw.wait_state(gw.push(codes[0], "BAL")["id"], frozenset({"replied"}))
    (call,) = mt_calls(mt, message["id"])
    assert call.json()["dlt_pe_id"] == PE and call.json()["dlt_template_id"] == T_BAL
    (submitted,) = events(message, "reply_submitted")
    assert (submitted["dlt_template"], submitted["dlt_pe_id"]) == (T_BAL, PE)
    assert state_from_timeline(message) == "replied"


def test_an_unmatched_reply_without_enforcement_goes_out_with_a_note(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    cid = add_dlt_client(gw, app, codes[0])
    add_template(gw, cid, T_BAL, "Your balance is {#var#}.")
    app.answer = Answer.text("Balance: 42")
    message = gw.wait_state(gw.push(codes[0], "BAL")["id"], frozenset({"replied"}))
    (call,) = mt_calls(mt, message["id"])
    assert "dlt_pe_id" not in call.json() and call.json()["text"] == "Balance: 42"
    (submitted,) = events(message, "reply_submitted")
    assert submitted["dlt"] == "no DLT template matches; sent without the client's DLT ids"


def test_a_blocked_reply_is_not_sent_says_why_is_counted_and_can_be_replayed(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder, mt: CallbackRecorder
) -> None:
    cid = add_dlt_client(gw, app, codes[0], dlt_enforce=True)
    add_template(gw, cid, T_BAL, "Your balance is {#var#}.")
    app.answer = Answer.text("Your OTP is 1234")
    message_id = gw.push(codes[0], "OTP")["id"]
    message = gw.wait_state(message_id, frozenset({"reply_blocked"}))
    (blocked,) = events(message, "reply_blocked")
    assert blocked["reason"] == "no DLT template matches"
    assert blocked["templates"] == 1 and blocked["closest"][0]["template_id"] == T_BAL
    assert "character 6" in blocked["closest"][0]["why"]
    assert message["reply"] == "Your OTP is 1234"  # what the application answered is kept
    assert state_from_timeline(message) == "reply_blocked"
    assert calls_for(mt, message_id) == []  # nothing reached the operator
    metrics = gw.admin("GET", "/metrics").text
    assert metric(metrics, "mogateway_dlt_replies_total", client=cid, result="blocked") == 1  # all workers
    listed = gw.admin("GET", "/v1/messages", params={"state": "reply_blocked", "shortcode": codes[0]})
    listed = listed.json()["messages"]
    assert [m["id"] for m in listed] == [message_id]

    # The aggregator registers the missing template; the operator replays the message.
    add_template(gw, cid, T_OTP, "Your OTP is {#numeric#}")
    assert gw.admin("POST", f"/v1/messages/{message_id}/replay").status_code == 202
    replayed = gw.wait_state(message_id, frozenset({"replied"}))
    assert events(replayed, "reply_submitted")[-1]["dlt_template"] == T_OTP
    assert mt_calls(mt, message_id)[0].json()["dlt_template_id"] == T_OTP
    metrics = gw.admin("GET", "/metrics").text
    assert metric(metrics, "mogateway_dlt_replies_total", client=cid, result="matched") == 1


def test_dlt_check_says_which_template_a_reply_would_match(
    gw: ServeGateway, codes: Codes, app: CallbackRecorder
) -> None:
    cid = add_dlt_client(gw, app, codes[0], dlt_enforce=True)
    add_template(gw, cid, T_BAL, "Your balance is {#var#}.")
    hit = gw.admin("POST", f"/v1/clients/{cid}/dlt-check", json={"text": "Your balance is 5."}).json()
    assert (hit["verdict"], hit["template_id"]) == ("matched", T_BAL)
    miss = gw.admin("POST", f"/v1/clients/{cid}/dlt-check", json={"text": "Your balance: 5"}).json()
    assert (miss["verdict"], miss["template_id"]) == ("blocked", None)
    assert miss["closest"][0]["template_id"] == T_BAL


# ----------------------------------------------------------------------------------------- CLI


@pytest.fixture
def run(gw: ServeGateway, monkeypatch: pytest.MonkeyPatch) -> Any:
    runner = CliRunner()
    env = {"MOGATEWAY_URL": gw.url, "MOGATEWAY_ADMIN_TOKEN": ADMIN_TOKEN}
    monkeypatch.setattr(console, "_width", 200)  # not the property: see test_gateway_cli.py

    def invoke(*args: str, code: int = 0) -> Any:
        result = runner.invoke(cli, list(args), env=env)
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
        return result

    return invoke


def test_the_cli_round_trips_the_templates(
    run: Any, gw: ServeGateway, codes: Codes, app: CallbackRecorder, tmp_path: Path
) -> None:
    cid = gw.add_client(shortcodes=[codes[0]], callback_url=app.url)["id"]
    shown = json.loads(run("clients", "dlt-set", cid, "--pe-id", PE, "--enforce", "--json").stdout)
    assert (shown["dlt_pe_id"], shown["dlt_enforce"]) == (PE, True)
    assert "dlt_pe_id" in run("clients", "show", cid).stdout

    assert T_BYE in run("clients", "dlt-add", cid, T_BYE, "Bye {#var#}").stdout
    bad = run("clients", "dlt-add", cid, "123", "Bye {#var#}", code=4)
    assert "template_id" in bad.stderr and "19 digits" in bad.stderr

    export = tmp_path / "templates.csv"
    export.write_text(EXPORT, encoding="utf-8")
    imported = run("clients", "dlt-import", cid, str(export), code=1)  # 1: some rows were refused
    out = imported.stdout
    assert "added 2" in out and "refused 2" in out
    assert "status 'Rejected'" in out and "1.10716E+18" in out and "Excel" in out

    listed = json.loads(run("clients", "dlt-templates", cid, "--json").stdout)
    assert sorted(t["template_id"] for t in listed["templates"]) == [T_BAL, T_OTP, T_BYE]
    assert T_OTP in run("clients", "dlt-templates", cid).stdout

    assert T_BAL in run("clients", "dlt-check", cid, "Your balance is 7.").stdout
    miss = run("clients", "dlt-check", cid, "Balance 7", code=1).stdout
    assert "no template matches (blocked)" in miss

    assert "removed" in run("clients", "dlt-remove", cid, T_BYE).stdout
    run("clients", "dlt-remove", cid, T_BYE, code=5)
    clean = tmp_path / "clean.csv"
    clean.write_text("Template ID,Template Content\n" + f"{T_BYE},Bye {{#var#}}\n", encoding="utf-8")
    assert "added 1" in run("clients", "dlt-import", cid, str(clean)).stdout
    run("clients", "dlt-import", cid, str(tmp_path / "missing.csv"), code=2)
    run("clients", "dlt-set", cid, code=2)  # nothing to change


def test_the_variable_limit_is_a_setting(
    tmp_path: Path, app: CallbackRecorder, own_mt: CallbackRecorder
) -> None:
    """A gateway of its own: the setting differs from the shared one's."""
    with serve_gateway(
        tmp_path, reply_channel="http", reply_http_url=own_mt.url, dlt_var_max_chars=5
    ) as small:
        cid = add_dlt_client(small, app, dlt_enforce=True)
        add_template(small, cid, T_BAL, "Your balance is {#var#}.")
        app.answer = Answer.text("Your balance is 123456.")  # 6 characters in the variable
        message = small.wait_state(small.push(SC, "BAL")["id"], frozenset({"reply_blocked"}))
        assert (
            events(message, "reply_blocked")[0]["closest"][0]["why"]
            == "a variable would need more than 5 characters"
        )
        check = small.admin("POST", f"/v1/clients/{cid}/dlt-check", json={"text": "Your balance is 12345."})
        assert check.json()["verdict"] == "matched"


def test_the_dlt_routes_are_in_the_openapi_document(gw: ServeGateway) -> None:
    paths = gw.request("GET", "/openapi.json").json()["paths"]
    assert {
        "/v1/clients/{client_id}/dlt-templates",
        "/v1/clients/{client_id}/dlt-templates/{template_id}",
        "/v1/clients/{client_id}/dlt-templates/import",
        "/v1/clients/{client_id}/dlt-check",
    } <= set(paths)
    assert (
        "text/csv" in paths["/v1/clients/{client_id}/dlt-templates/import"]["post"]["requestBody"]["content"]
    )


def test_a_reply_resumed_after_a_restart_gets_the_same_dlt_decision(
    tmp_path: Path, app: CallbackRecorder, own_mt: CallbackRecorder
) -> None:
    """A message the application answered just before the gateway stopped is in state ``answered``: the
    next start sends its reply, through the same DLT decision as a fresh one (gateways of its own: the
    journal is written while they are stopped)."""
    mt = own_mt
    import asyncio
    import time as clock

    from mogateway.core.contract import OutcomeKind
    from mogateway.core.message import Message, Sender
    from mogateway.core.timeline import Change, Event, EventKind
    from mogateway.edges.storage.sqlite import SqliteJournal

    database = tmp_path / "journal.db"
    settings: dict[str, Any] = {"reply_channel": "http", "reply_http_url": mt.url}
    with serve_gateway(tmp_path, log_name="first", **settings) as first:
        cid = add_dlt_client(first, app, dlt_enforce=True)
        add_template(first, cid, T_BAL, "Your balance is {#var#}.")

    async def answered_before_the_stop() -> None:
        journal = SqliteJournal(database)
        await journal.open()
        now = clock.time()
        for message_id, reply in (("m-match", "Your balance is 42."), ("m-none", "Balance 42")):
            await journal.store(
                [Message(message_id, SC, "919810012345", "BAL", now, sender=Sender(91, 9810, 12345))]
            )
            outcome = Event(EventKind.OUTCOME, now, {"outcome": OutcomeKind.REPLY.value, "reply": reply})
            change = Change(message_id, outcome, client_id=cid, reply_text=reply)
            assert await journal.apply([change]) == [True]
        await journal.close()

    asyncio.run(answered_before_the_stop())
    with serve_gateway(tmp_path, log_name="second", **settings) as second:
        matched = second.wait_state("m-match", frozenset({"replied"}))
        blocked = second.wait_state("m-none", frozenset({"reply_blocked"}))
    assert events(matched, "recovered") and events(matched, "reply_submitted")[0]["dlt_template"] == T_BAL
    assert (
        events(blocked, "recovered")
        and events(blocked, "reply_blocked")[0]["reason"] == "no DLT template matches"
    )
    assert [call.json()["message_id"] for call in mt.calls] == ["m-match"]
