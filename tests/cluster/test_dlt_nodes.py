"""DLT templates are seen by every node: two ``mogateway serve`` nodes of a cluster (two workers each, the
cluster harness's nodes) on one PostgreSQL journal and one JetStream stream; templates added on one node
are listed by the other, a template removed on the other is gone for the first, and once the first node
has stopped, the other answers an MO with the templates the first registered."""

from __future__ import annotations

import sys
from pathlib import Path

from cluster_harness import ADMIN_TOKEN, INGEST_TOKEN, Cluster, register_client, running_cluster

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import GatewayClient, calls_for, events, wait_until

from mogateway.testing.recorder import Answer, CallbackRecorder

PE = "1201159178420181234"
T_BAL = "1107161234567890001"
T_OTP = "1107161234567890002"


def client_of(node: str) -> GatewayClient:
    """An operator's client of one node (a new connection per request: any of its workers answers)."""
    return GatewayClient(node, admin_token=ADMIN_TOKEN, ingest_token=INGEST_TOKEN, keep_alive=False)


def test_templates_added_on_one_node_are_used_by_another(tmp_path: Path) -> None:
    mt_answer = Answer(status=200, body=b'{"id": "mt-1"}', content_type="application/json")
    with (
        CallbackRecorder.in_thread(Answer.text("Your OTP is 4242")) as app,
        CallbackRecorder.in_thread(mt_answer, path="/mt") as mt,
    ):
        config = tmp_path / "reply.toml"
        config.write_text(f'reply_channel = "http"\nreply_http_url = "{mt.url}"\n')
        args = ("--config", str(config))

        def the_client(cluster: Cluster) -> None:  # on node 1, before node 2 starts and reads the clients
            register_client(cluster, app.url, dlt_pe_id=PE, dlt_enforce=True)

        with running_cluster(tmp_path, 2, node_args=[args, args], first=the_client) as cluster:
            a, b = (client_of(node.url) for node in cluster.nodes)
            (client,) = a.admin("GET", "/v1/clients").json()["clients"]
            cid = client["id"]
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

            # A template removed on node b is gone for node a.
            assert b.admin("DELETE", f"/v1/clients/{cid}/dlt-templates/{T_BAL}").status_code == 204
            assert a.admin("GET", f"/v1/clients/{cid}/dlt-templates").json()["count"] == 1

            # Node a stops: node b alone answers an MO, with the template node a registered (the client
            # enforces DLT, so a reply matching no template it knows would be blocked).
            cluster.nodes[0].stop()
            message = b.wait_state(b.push("56767", "OTP")["id"], frozenset({"replied"}), timeout=20)
            assert events(message, "reply_submitted")[0]["dlt_template"] == T_OTP
            wait_until(lambda: calls_for(mt, message["id"]), "the reply at the MT endpoint")
            assert calls_for(mt, message["id"])[0].json()["dlt_template_id"] == T_OTP
