"""What the WhatsApp tests share: a ``mogateway serve`` whose ``[whatsapp]`` settings name one number at
a Graph API (the fake, or a recorder standing in for it), and the client that number routes to.

Each test module keeps what it is about (its limits, its stack, its answers) and takes the rest from
here, so a setting every WhatsApp gateway of the tests has is written once."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parents[1] / "gateway"))
from gateway_harness import GatewayClient, ServeProcess, serve_env, start_serve

from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import CallbackRecorder

APP_SECRET = "app-secret-for-tests-0123456789"
VERIFY_TOKEN = "verify-token-for-tests"
PNID = "106540352242922"  # the fake's default cloud number
BUSINESS = "919876543210"


def whatsapp_config(
    graph_url: str, *, settings: str = "", whatsapp: str = "", app_secret: str = APP_SECRET
) -> str:
    """The TOML of a gateway with one WhatsApp number (``PNID``, shown as ``BUSINESS``) at ``graph_url``;
    ``settings`` are more top-level lines, ``whatsapp`` more lines of the ``[whatsapp]`` table."""
    return f"""
{settings}

[whatsapp]
app_secret = "{app_secret}"
verify_token = "{VERIFY_TOKEN}"
graph_url = "{graph_url}"
{whatsapp}

[[whatsapp.numbers]]
phone_number_id = "{PNID}"
display_phone_number = "{BUSINESS}"
access_token = "rehearsal-token"
"""


def start_whatsapp_serve(
    workdir: Path, config: str, *, log_name: str = "serve", args: Sequence[str] = (), **env: str
) -> ServeProcess:
    """``mogateway serve`` in ``workdir`` with ``config`` as its mogateway.toml and the environment of
    ``serve_env`` (plus ``env``); ``args`` are more options of ``serve`` (``--workers 1``).

    Retention is off unless ``env`` sets it: the fixtures pin Meta's timestamps of 2025-11-27, older than
    any retention, so a sweep (one every five minutes) would delete a message a test has yet to read."""
    env = {"MOGATEWAY_MESSAGE_RETENTION_DAYS": "0", **env}
    path = workdir / "mogateway.toml"
    path.write_text(config)
    return start_serve(
        workdir, serve_env(workdir, **env), log_name=log_name, args=["--config", str(path), *args]
    )


def add_whatsapp_client(
    gw: GatewayClient, callback_url: str, *, name: str = "shop", **fields: Any
) -> dict[str, Any]:
    """A client of the number ``BUSINESS`` calling back ``callback_url``; the gateway's answer (its
    token and id)."""
    body = {"name": name, "whatsapp_numbers": [BUSINESS], "callback_url": callback_url, **fields}
    resp = gw.admin("POST", "/v1/clients", json=body)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


class WhatsAppStack:
    """A running gateway with its admin client, the fake Graph API, the client application and Meta's
    webhook sender (signing with ``app_secret``); :meth:`close` stops them in turn."""

    def __init__(
        self, serve: ServeProcess, graph: FakeGraphServer, app: CallbackRecorder, app_secret: str = APP_SECRET
    ) -> None:
        self.serve = serve
        self.gw = GatewayClient(serve.url)
        self.graph = graph
        self.app = app
        self.meta = wh.WebhookSender(serve.url + "/v1/whatsapp/webhook", app_secret)

    def register(self, **body: Any) -> dict[str, Any]:
        """A media at the fake Graph API (fake_graph.media): its id, type, size and digests."""
        media: dict[str, Any] = (
            httpx.post(self.graph.url + "/__fake/media", json=body).raise_for_status().json()
        )
        return media

    def change(self, media_id: str, **body: Any) -> None:
        """What the fake Graph API does with that media from now on (expired, broken after N bytes...)."""
        httpx.patch(f"{self.graph.url}/__fake/media/{media_id}", json=body).raise_for_status()

    def close(self) -> None:
        self.meta.close()
        self.gw.close()
        self.serve.stop()
