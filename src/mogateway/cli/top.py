"""``mogateway top``: the console's Overview in the terminal, refreshed every second from ``/v1/stats``.

It only reads the stats API of a running gateway (admin token from ``--token``, the environment or the
local journal, like the other commands), so it works against any node of a cluster. A gateway that stops
answering is shown as such and polled again; Ctrl-C ends it.
"""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mogateway.cli.common import TOKEN_OPTION, URL_OPTION, ApiClient, console

__all__ = ["register", "render"]

_BLOCKS = " ▁▂▃▄▅▆▇█"
_OUTCOMES = (
    ("reply", "reply"),
    ("blank", "blank"),
    ("timeout", "timeout"),
    ("http_error", "http error"),
    ("bad_response", "bad response"),
    ("failed", "conn. failed"),
    ("unroutable", "unroutable"),
    ("rejected", "rejected"),
)


def sparkline(values: list[int], width: int = 60) -> str:
    """``values`` squeezed into ``width`` block characters (each the sum of its share of the values)."""
    if not values:
        return ""
    size = max(1, -(-len(values) // width))
    buckets = [sum(values[i : i + size]) for i in range(0, len(values), size)]
    top = max(buckets) or 1
    return "".join(_BLOCKS[min(8, round(b / top * 8))] if b else _BLOCKS[0] for b in buckets)


def _ms(value: float | None) -> str:
    return "—" if value is None else (f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.1f} ms")


def render(doc: dict[str, Any], note: str = "") -> RenderableType:
    """One screen of ``top`` from a ``/v1/stats`` document."""
    totals = doc["totals"]
    rates = doc["rates"]
    series = doc["series"]
    head = Text.assemble(
        ("mogateway top", "bold"),
        f"  node {doc['node']}  ·  window {doc['window']['name']} since {doc['window']['since'][:19]}Z",
        ("  " + note, "bold red") if note else "",
    )
    traffic = Table.grid(padding=(0, 2))
    traffic.add_row(
        Text.assemble("MO in   ", (f"{rates['mo_in_per_s']:>8.1f}/s", "bold cyan")),
        Text(sparkline(series["mo_in"]), style="cyan"),
    )
    traffic.add_row(
        Text.assemble("replies ", (f"{rates['replies_per_s']:>8.1f}/s", "bold yellow")),
        Text(sparkline(series["replies"]), style="yellow"),
    )
    figures = Table(title="in the window", title_justify="left", expand=False, box=None, padding=(0, 2))
    # MO in by channel, once a WhatsApp message came (an older gateway's figures have no channels)
    whatsapp = totals.get("channels", {}).get("whatsapp", {}).get("mo_in", 0)
    labels = ["MO in", *(["SMS", "WhatsApp"] if whatsapp else []), "replies", "callback p50", "p99"]
    for label in labels:
        figures.add_column(label, justify="right")
    by_channel = [f"{totals['channels']['sms']['mo_in']:,}", f"{whatsapp:,}"] if whatsapp else []
    figures.add_row(
        f"{totals['mo_in']:,}",
        *by_channel,
        f"{totals['replies']:,}",
        _ms(totals["latency_ms"]["p50"]),
        _ms(totals["latency_ms"]["p99"]),
    )
    outcomes = Table(title="outcomes", title_justify="left", box=None, padding=(0, 2))
    for _, label in _OUTCOMES:
        outcomes.add_column(label, justify="right")
    outcomes.add_row(
        *(
            Text(f"{totals['outcomes'][key]:,}", style="green" if key == "reply" else "red" if n else "")
            for key, label in _OUTCOMES
            for n in [totals["outcomes"][key]]
        )
    )
    now = Text.assemble(
        (
            "ready   " if doc.get("ready", True) else "NOT READY: ",
            "bold green" if doc.get("ready", True) else "bold red",
        ),
        "; ".join(r["kind"] for r in doc.get("not_ready", [])) + ("   " if doc.get("not_ready") else ""),
        "queue lag ",
        (f"{doc['queue_lag']:,}", "bold"),
        "   in flight ",
        (f"{doc['inflight']:,}", "bold"),
        "   binds up ",
        (str(doc["binds_summary"]["up"]), "bold green"),
        " down ",
        (str(doc["binds_summary"]["down"]), "bold red" if doc["binds_summary"]["down"] else "bold"),
        f"   nodes {len(doc['nodes'])}" if len(doc["nodes"]) > 1 else "",
    )
    clients = Table(title="clients", title_justify="left", padding=(0, 1))
    for name, justify in (
        ("name", "left"),
        ("MOs", "right"),
        ("reply rate", "right"),
        ("timeouts", "right"),
        ("p50", "right"),
        ("p99", "right"),
    ):
        clients.add_column(name, justify=justify)  # type: ignore[arg-type]
    for c in doc["clients"][:12]:
        rate = "—" if c["reply_rate"] is None else f"{c['reply_rate'] * 100:.1f} %"
        clients.add_row(
            c["name"] or c["id"],
            f"{c['callbacks']:,}",
            rate,
            Text(f"{c['timeouts']:,}", style="red" if c["timeouts"] else ""),
            _ms(c["latency_ms"]["p50"]),
            _ms(c["latency_ms"]["p99"]),
        )
    parts: list[RenderableType] = [head, Panel(traffic, title="last 5 minutes", title_align="left"), figures]
    parts += [outcomes, now, clients]
    if doc["binds"]:
        binds = Table(title="binds", title_justify="left", padding=(0, 1))
        for name in ("bind", "node", "state", "MOs/min", "replies/min", "last error"):
            binds.add_column(name)
        for b in doc["binds"]:
            binds.add_row(
                b["name"],
                b.get("node", ""),
                Text(b["state"], style="green" if b["state"] == "bound" else "red"),
                str(b.get("mo_last_minute", "")),
                str(b.get("replies_last_minute", "")),
                b.get("last_error") or "",
            )
        parts.append(binds)
    return Group(*parts)


def register(app: typer.Typer) -> None:
    @app.command()
    def top(
        window: str = typer.Option("today", "--window", "-w", help="today, or a duration: 15m, 1h, 2d."),
        interval: float = typer.Option(1.0, "--interval", help="Seconds between refreshes."),
        once: bool = typer.Option(False, "--once", help="Print one screen and exit (for scripts, tests)."),
        url: str = URL_OPTION,
        token: str | None = TOKEN_OPTION,
    ) -> None:
        """The Overview in the terminal: live MO/s and replies/s, outcomes, clients, binds."""
        api = ApiClient(url, token, "admin")
        doc = api.call("GET", "/v1/stats", params={"window": window})  # exits with a clear error if not
        if once:
            console.print(render(doc))
            return
        import httpx  # the live view keeps one connection; --once answers without the HTTP stack

        with httpx.Client(base_url=api.url, headers=api.headers, timeout=5.0) as http:
            note = ""
            try:
                with Live(render(doc), console=console, screen=False, auto_refresh=False) as live:
                    while True:
                        time.sleep(max(0.2, interval))
                        try:
                            resp = http.get("/v1/stats", params={"window": window})
                            resp.raise_for_status()
                            doc, note = resp.json(), ""
                        except (httpx.HTTPError, ValueError) as exc:
                            note = f"no answer from {api.url} ({type(exc).__name__}); retrying"
                        live.update(render(doc, note), refresh=True)
            except KeyboardInterrupt:
                pass
