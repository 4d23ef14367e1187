"""A ``graph_url`` of ``http://`` to a host that is not loopback sends every reply's text and the access
token in clear: ``mogateway serve`` warns once at start (whatever its workers), and says nothing for
``https://`` or a loopback fake Graph API."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mogateway.node import graph_url_in_clear

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import ADMIN_TOKEN, INGEST_TOKEN, clean_env, start_serve

WARNING = "is http:// to a host that is not loopback"


@pytest.mark.parametrize(
    ("url", "in_clear"),
    [
        ("https://graph.facebook.com", False),
        ("http://127.0.0.1:8765", False),
        ("http://127.8.9.10", False),
        ("http://[::1]:8765", False),
        ("http://localhost:8765", False),
        ("HTTP://graph.facebook.com", True),
        ("http://10.0.0.5:8080", True),
        ("http://graph.example.in", True),
        ("http://[2001:db8::1]", True),
    ],
)
def test_which_graph_urls_are_in_clear(url: str, in_clear: bool) -> None:
    assert graph_url_in_clear(url) is in_clear


def _serve_log(tmp_path: Path, graph_url: str) -> str:
    config = tmp_path / "m.toml"
    config.write_text(
        f"""
[whatsapp]
app_secret = "app-secret-0123456789"
verify_token = "verify-token-0123"
graph_url = "{graph_url}"

[[whatsapp.numbers]]
phone_number_id = "106540352242922"
display_phone_number = "919876543210"
access_token = "token-0123456789"
"""
    )
    env = clean_env(
        MOGATEWAY_DATABASE=str(tmp_path / "journal.db"),
        MOGATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
        MOGATEWAY_INGEST_TOKEN=INGEST_TOKEN,
        MOGATEWAY_LOG_LEVEL="info",  # the supervisor's start line: serve.wait_all_serving()
    )
    serve = start_serve(tmp_path, env, args=["--config", str(config), "--workers", "2"])
    serve.wait_all_serving()  # the warning is one worker's; /healthz answered from either
    assert serve.stop() == 0
    return serve.stderr()


def test_serve_warns_once_of_a_graph_url_in_clear_and_not_of_a_loopback_one(tmp_path: Path) -> None:
    (tmp_path / "far").mkdir()
    (tmp_path / "near").mkdir()
    far = [
        line for line in _serve_log(tmp_path / "far", "http://192.0.2.7:8080").splitlines() if WARNING in line
    ]
    assert len(far) == 1, far
    assert "whatsapp.graph_url http://192.0.2.7:8080" in far[0] and "use https://" in far[0]
    assert "token-0123456789" not in far[0]
    assert WARNING not in _serve_log(tmp_path / "near", "http://127.0.0.1:9")
