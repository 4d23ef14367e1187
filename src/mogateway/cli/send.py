"""``mogateway send``: push one MO to a running gateway, as an operator would."""

from __future__ import annotations

import time
from typing import Any

import typer

from mogateway.cli.common import JSON_OPTION, TOKEN_OPTION, URL_OPTION, ApiClient, console, fail, print_json
from mogateway.cli.exit_codes import Exit
from mogateway.cli.messages import render_message
from mogateway.core.timeline import FINAL_STATES

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command()
    def send(
        message: str = typer.Argument(..., help="The text the subscriber sent."),
        shortcode: str = typer.Option(..., "--shortcode", "-s"),
        msisdn: str = typer.Option(..., "--msisdn", "-m", help="The sender, e.g. 919812345678."),
        source_id: str | None = typer.Option(None, "--id", help="The source's message id (deduplication)."),
        operator: str | None = typer.Option(None, "--operator"),
        circle: str | None = typer.Option(None, "--circle"),
        wait: float = typer.Option(0.0, "--wait", help="Wait up to this many seconds for the outcome."),
        url: str = URL_OPTION,
        token: str | None = TOKEN_OPTION,
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Push one MO to the gateway's ingest API (and optionally wait for its outcome)."""
        body: dict[str, Any] = {"shortcode": shortcode, "msisdn": msisdn, "message": message}
        for key, value in (("id", source_id), ("operator", operator), ("circle", circle)):
            if value is not None:
                body[key] = value
        result = ApiClient(url, token, "ingest").call("POST", "/v1/inbound", json_body=body)
        if wait <= 0:
            print_json(result) if as_json else console.print(
                f"{result['id']} {result['state']}" + (" (duplicate)" if result.get("duplicate") else "")
            )
            return
        admin = ApiClient(url, None, "admin")
        deadline = time.monotonic() + wait
        while True:
            data = admin.call("GET", f"/v1/messages/{result['id']}")
            if data["state"] in FINAL_STATES or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        print_json(data) if as_json else render_message(data)
        if data["state"] not in FINAL_STATES:
            fail(f"no outcome within {wait:g} s (state {data['state']})", Exit.NOT_YET)
