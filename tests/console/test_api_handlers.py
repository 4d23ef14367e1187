"""The API's handlers share one client lookup (api.common): every route that names a client reads the
journal's current copy, and answers 503 — not a 500 with a traceback — when this node cannot open the
stored secrets (another node wrote them under a key this one does not have).

The two nodes are two ``mogateway serve`` (default workers, at least two each) on one SQLite journal,
started with different secret keys, shared by the module: no route tried here changes the client (the
stale node refuses them all, and the other node is asked about a client that does not exist)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from gateway_harness import ServeGateway, serve_gateway

from mogateway.edges.storage.sealing import new_key

TEMPLATE = {"template_id": "1107160000000000001", "text": "Your balance is {#var#}"}


@dataclass
class Pair:
    node: ServeGateway  # has the key the client was sealed with
    stale_node: ServeGateway  # has another key
    client_id: str


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    workdir = tmp_path_factory.mktemp("pair")
    journal = str(workdir / "shared.db")
    with (
        serve_gateway(workdir, log_name="stale", database=journal, secret_key=new_key()) as stale_node,
        serve_gateway(workdir, log_name="node", database=journal, secret_key=new_key()) as node,
    ):
        client = node.add_client(shortcodes=["56767"], callback_url="http://127.0.0.1:9/cb")
        yield Pair(node, stale_node, client["id"])
    assert "Traceback" not in stale_node.stderr() + node.stderr()


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
    pair: Pair, method: str, suffix: str, body: dict[str, str] | None
) -> None:
    for _ in range(2 * pair.stale_node.workers):  # a new connection each: every worker answers alike
        answer = pair.stale_node.admin(method, f"/v1/clients/{pair.client_id}{suffix}", json=body)
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["type"] == "urn:mogateway:problem:secret-key"
        assert "MOGATEWAY_SECRET_KEY" in answer.json()["detail"]
    missing = pair.node.admin(method, f"/v1/clients/cl_nobody{suffix}", json=body)
    assert missing.status_code == 404 and missing.json()["detail"] == "no client cl_nobody"
