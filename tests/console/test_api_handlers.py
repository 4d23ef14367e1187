"""The API's handlers share one client lookup (api.common): every route that names a client reads the
journal's current copy, and answers 503 — not a 500 with a traceback — when this node cannot open the
stored secrets (another node wrote them under a key this one does not have)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gateway_harness import in_process_gateway

from mogateway.edges.storage.sealing import new_key

TEMPLATE = {"template_id": "1107160000000000001", "text": "Your balance is {#var#}"}


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("GET", "/dlt-templates", None),
        ("POST", "/dlt-templates", TEMPLATE),
        ("POST", "/dlt-check", {"text": "Your balance is 42"}),
        ("DELETE", "/dlt-templates/1107160000000000001", None),
        ("POST", "/token", None),
    ],
)
def test_a_node_without_the_key_the_clients_were_sealed_with_answers_503_on_every_client_route(
    tmp_path: Path, method: str, suffix: str, body: dict[str, str] | None
) -> None:
    journal = tmp_path / "shared.db"
    with (
        in_process_gateway(journal, secret_key=new_key()) as stale_node,
        in_process_gateway(journal, secret_key=new_key()) as node,
    ):
        client = node.add_client(shortcodes=["56767"], callback_url="http://127.0.0.1:9/cb")
        answer = stale_node.admin(method, f"/v1/clients/{client['id']}{suffix}", json=body)
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["type"] == "urn:mogateway:problem:secret-key"
        assert "MOGATEWAY_SECRET_KEY" in answer.json()["detail"]
        missing = node.admin(method, f"/v1/clients/cl_nobody{suffix}", json=body)
        assert missing.status_code == 404 and missing.json()["detail"] == "no client cl_nobody"
