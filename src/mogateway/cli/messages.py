"""``mogateway messages``: find messages, read their timelines, replay them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import typer
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from mogateway.cli.admin_command import admin_command
from mogateway.cli.common import JSON_OPTION, TOKEN_OPTION, URL_OPTION, ApiClient, console, print_json
from mogateway.core.timeline import STATES, tone

__all__ = ["messages_table", "register", "render_message"]

messages_app = typer.Typer(help="Find messages, read their timelines, replay them.", no_args_is_help=True)

#: The colour of each tone of a state (core.timeline.tone), so that no state is listed here.
_TONE_STYLE = {"waiting": "yellow", "good": "green", "unsure": "magenta", "bad": "red"}


def _styled(state: str) -> str:
    try:
        style = _TONE_STYLE[tone(state)]
    except ValueError:  # a state this CLI does not know yet (a newer gateway): shown plain
        return escape(state)
    return f"[{style}]{escape(state)}[/{style}]"


def render_message(m: dict[str, Any]) -> None:
    console.print(f"[bold]{m['id']}[/bold]  {_styled(m['state'])}")
    head = Table(show_header=False, box=None)
    head.add_row("from", m["msisdn"])
    head.add_row("to", m["shortcode"])
    channel = m.get("channel", "sms")
    if channel == "whatsapp":  # the wamid is what Meta's own tools and statuses name it by
        head.add_row("channel", f"whatsapp (origin {m['origin']}, wamid {m.get('source_id') or '-'})")
    else:
        head.add_row("channel", channel)
    head.add_row("message", repr(m["message"]))
    if m.get("whatsapp"):  # the callback's member: the type and its details (docs/contract.md)
        member = m["whatsapp"]
        head.add_row("whatsapp", escape(f"{member.get('type')} {json.dumps(member, ensure_ascii=False)}"))
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


#: From this width on, the list shows every column; below it, only what a person scans for.
WIDE = 140
#: How the list marks each channel (``ch``): short, so that 80 columns still leave room for the text.
_CHANNEL_MARK = {"sms": "sms", "whatsapp": "wa"}


def _when(value: str | None, wide: bool) -> str:
    """The time received: whole when there is room; else the time alone for today, the day and minute
    for this year, the date for earlier years (in the gateway's time zone, as the API gives it)."""
    if not value:
        return "-"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:  # a time out of any calendar (a poisoned row: '+10000-01-01…'): shown as stored
        return value
    if wide:
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    today = datetime.now(moment.tzinfo).date()
    if moment.date() == today:
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%m-%d %H:%M" if moment.year == today.year else "%Y-%m-%d")


def messages_table(messages: list[dict[str, Any]], width: int) -> Table:
    """The list of messages for a terminal ``width`` columns wide.

    The id, the sender and the state are always whole (people copy ids, look for a number, scan the
    states); the text takes the room that is left and ends in an ellipsis. Narrower than :data:`WIDE`,
    the shortcode and the reply are left out (``messages show`` has them) and the time is short. A
    column ``ch`` (``sms``/``wa``, :data:`_CHANNEL_MARK`) is there when a listed message came by
    WhatsApp: a gateway without WhatsApp lists as it always did."""
    wide = width >= WIDE
    marked = any(m.get("channel", "sms") != "sms" for m in messages)
    rows = []
    for m in messages:
        # Texts are the subscriber's and the application's: escaped, so that "[b]" stays "[b]".
        cells = {
            "id": m["id"],
            "received": _when(m.get("received_at"), wide),
            "from": escape(m["msisdn"]),
            "to": escape(m["shortcode"]),
            "ch": escape(_CHANNEL_MARK.get(m.get("channel", "sms"), m.get("channel", "sms"))),
            "state": _styled(m["state"]),
            "message": escape(" ".join(m["message"].split())),  # one line each
            "reply": escape(" ".join((m.get("reply") or "").split())),
        }
        rows.append(cells)
    whole = ["id", "received", "from", *(["to"] if wide else []), *(["ch"] if marked else []), "state"]
    texts = ["message", *(["reply"] if wide else [])]

    def room(name: str) -> int:  # the widest cell, so that the column is never cut
        plain = [Text.from_markup(row[name]).cell_len for row in rows]
        return max([len(name), *plain])

    widths = {name: room(name) for name in whole}
    # What is left (one space between columns) goes to the texts; rich cannot shrink whole columns.
    left = max(10 * len(texts), width - sum(widths.values()) - len(whole) - len(texts) + 1)
    widths |= {name: min(left // len(texts), room(name)) for name in texts}
    table = Table(
        *(Column(name, width=widths[name], no_wrap=True) for name in whole),
        *(Column(name, width=widths[name], no_wrap=True, overflow="ellipsis") for name in texts),
        box=None,
        pad_edge=False,
        collapse_padding=True,
        header_style="bold",
    )
    for row in rows:
        table.add_row(*(row[name] for name in (*whole, *texts)))
    return table


@messages_app.command("list")
def list_(
    shortcode: str | None = typer.Option(None, "--shortcode"),
    msisdn: str | None = typer.Option(None, "--msisdn"),
    state: str | None = typer.Option(None, "--state", help="One of: " + ", ".join(STATES) + "."),
    channel: str | None = typer.Option(None, "--channel", help="sms or whatsapp."),
    since: str | None = typer.Option(None, "--since", help="ISO 8601 with offset, or unix seconds."),
    limit: int = typer.Option(50, "--limit"),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List messages, newest first."""
    params = {
        "shortcode": shortcode,
        "msisdn": msisdn,
        "state": state,
        "channel": channel,
        "since": since,
        "limit": limit,
    }
    data = ApiClient(url, token, "admin").call("GET", "/v1/messages", params=params)
    if as_json:
        print_json(data)
        return
    console.print(messages_table(data["messages"], console.width))


def _print_state(data: dict[str, Any]) -> None:
    console.print(f"{data['id']} {data['state']}")


# The commands that are one call about a message, its answer shown: name, method, path, how, help.
for _name, _method, _path, _render, _help in (
    ("show", "GET", "/v1/messages/{}", render_message, "Show one message with its whole timeline."),
    (
        "replay",
        "POST",
        "/v1/messages/{}/replay",
        _print_state,
        "Call the callback again for a finished message (a reply, if any, is sent).",
    ),
):
    admin_command(messages_app, _name, _help, key="message_id", method=_method, path=_path, render=_render)


def register(app: typer.Typer) -> None:
    app.add_typer(messages_app, name="messages")
