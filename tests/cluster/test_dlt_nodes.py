"""DLT templates are seen by every node: two gateways on one PostgreSQL journal, templates added on one,
listed and used for replies by the other."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import events, in_process_gateway

from mogateway.testing.recorder import Answer, CallbackRecorder
from postgres_databases import throwaway_database

PE = "1201159178420181234"
T_BAL = "1107161234567890001"
T_OTP = "1107161234567890002"


def test_templates_added_on_one_node_are_used_by_another(tmp_path: Path) -> None:
    mt_answer = Answer(status=200, body=b'{"id": "mt-1"}', content_type="application/json")
    with (
        throwaway_database("mogw_dlt") as database,
        CallbackRecorder.in_thread(Answer.text("Your OTP is 4242")) as app,
        CallbackRecorder.in_thread(mt_answer, path="/mt") as mt,
    ):
        settings = {"reply_channel": "http", "reply_http_url": mt.url}
        with (
            in_process_gateway(database, node_name="a", **settings) as a,
            in_process_gateway(database, node_name="b", **settings) as b,
        ):
            cid = a.add_client(shortcodes=["56767"], callback_url=app.url, dlt_pe_id=PE, dlt_enforce=True)[
                "id"
            ]
            for template_id, text in (
                (T_BAL, "Your balance is {#var#}."),
                (T_OTP, "Your OTP is {#numeric#}"),
            ):
                resp = a.admin(
                    "POST",
                    f"/v1/clients/{cid}/dlt-templates",
                    json={"template_id": template_id, "text": text},
                )
                assert resp.status_code == 201, resp.text

            listed = b.admin("GET", f"/v1/clients/{cid}/dlt-templates").json()
            assert [t["template_id"] for t in listed["templates"]] == [T_BAL, T_OTP]
            assert b.admin("GET", f"/v1/clients/{cid}").json()["dlt_templates"] == 2

            # Node b answers an MO with the templates node a registered.
            message = b.wait_state(b.push("56767", "OTP")["id"], frozenset({"replied"}))
            assert events(message, "reply_submitted")[0]["dlt_template"] == T_OTP
            assert mt.wait_for_calls(1)[0].json()["dlt_template_id"] == T_OTP

            # A template removed on node b is gone for node a.
            assert b.admin("DELETE", f"/v1/clients/{cid}/dlt-templates/{T_OTP}").status_code == 204
            assert a.admin("GET", f"/v1/clients/{cid}/dlt-templates").json()["count"] == 1
