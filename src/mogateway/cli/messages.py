"""``mogateway messages``: find messages, read their timelines, replay them."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Column, Table

from mogateway.cli.common import JSON_OPTION, TOKEN_OPTION, URL_OPTION, ApiClient, console, print_json

__all__ = ["register", "render_message"]

messages_app = typer.Typer(help="Find messages, read their timelines, replay them.", no_args_is_help=True)

_STATE_STYLE = {
    "replied": "green",
    "delivered": "green",
    "answered": "green",
    "no_reply": "cyan",
    "queued": "yellow",
    "replying": "yellow",
    "reply_unknown": "magenta",
    "rejected": "red",
    "unroutable": "red",
}


def render_message(m: dict[str, Any]) -> None:
    style = _STATE_STYLE.get(m["state"], "red")
    console.print(f"[bold]{m['id']}[/bold]  [{style}]{m['state']}[/{style}]")
    head = Table(show_header=False, box=None)
    head.add_row("from", m["msisdn"])
    head.add_row("to", m["shortcode"])
    head.add_row("message", repr(m["message"]))
    if m.get("sender"):
        s = m["sender"]
        head.add_row(
            "sender",
            f"cc {s['cc']} ndc {s['ndc']} sn {s['sn']:06d} "
            f"operator {s['operator'] or '-'} circle {s['circle'] or '-'}",
        )
    if m.get("reply") is not None:
        head.add_row("reply", repr(m["reply"]))
    if m.get("rejection"):
        head.add_row("rejected", f"{m['rejection']['field']}: {m['rejection']['reason']}")
    console.print(head)
    table = Table("at", "event", "details")
    for ev in m.get("timeline", []):
        details = {k: v for k, v in ev.items() if k not in ("at", "event")}
        table.add_row(ev["at"], ev["event"], " ".join(f"{k}={v}" for k, v in details.items()))
    console.print(table)


@messages_app.command("list")
def list_(
    shortcode: str | None = typer.Option(None, "--shortcode"),
    msisdn: str | None = typer.Option(None, "--msisdn"),
    state: str | None = typer.Option(None, "--state"),
    since: str | None = typer.Option(None, "--since", help="ISO 8601 with offset, or unix seconds."),
    limit: int = typer.Option(50, "--limit"),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List messages, newest first."""
    params = {"shortcode": shortcode, "msisdn": msisdn, "state": state, "since": since, "limit": limit}
    data = ApiClient(url, token, "admin").call("GET", "/v1/messages", params=params)
    if as_json:
        print_json(data)
        return
    # Ids must stay whole (people copy them), whatever the terminal's width.
    table = Table(
        Column("id", no_wrap=True, min_width=26), "received", "from", "to", "state", "message", "reply"
    )
    for m in data["messages"]:
        style = _STATE_STYLE.get(m["state"], "red")
        table.add_row(
            m["id"],
            m["received_at"],
            m["msisdn"],
            m["shortcode"],
            f"[{style}]{m['state']}[/{style}]",
            m["message"][:40],
            (m.get("reply") or "")[:40],
        )
    console.print(table)


@messages_app.command("show")
def show(
    message_id: str, url: str = URL_OPTION, token: str | None = TOKEN_OPTION, as_json: bool = JSON_OPTION
) -> None:
    """Show one message with its whole timeline."""
    data = ApiClient(url, token, "admin").call("GET", f"/v1/messages/{message_id}")
    print_json(data) if as_json else render_message(data)


@messages_app.command("replay")
def replay(
    message_id: str, url: str = URL_OPTION, token: str | None = TOKEN_OPTION, as_json: bool = JSON_OPTION
) -> None:
    """Call the callback again for a finished message (a reply, if any, is sent)."""
    data = ApiClient(url, token, "admin").call("POST", f"/v1/messages/{message_id}/replay")
    print_json(data) if as_json else console.print(f"{data['id']} {data['state']}")


def register(app: typer.Typer) -> None:
    app.add_typer(messages_app, name="messages")
