"""Rendering of console pages: the Jinja2 environment, display filters, the traffic chart, headers.

Rules: templates autoescape everything; pages carry a Content-Security-Policy that allows scripts,
styles and connections from this gateway only (no inline script or style anywhere), may not be framed,
and are never cached (a client's token is shown once and must not come back from a cache).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from starlette.responses import HTMLResponse

from mogateway.core.timeline import NO_REPLY_STATES, tone

__all__ = ["SECURITY_HEADERS", "chart", "environment", "html"]

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # (no-referrer would make browsers send Origin: null)
    "cache-control": "no-store",
}


def _moment(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value).astimezone()
    return datetime.fromisoformat(str(value)).astimezone()


def when(value: Any, precise: bool = False) -> str:
    """A time in the gateway's time zone: ``2026-11-23 14:05:09`` (``.123`` with ``precise``)."""
    moment = _moment(value)
    if moment is None:
        return "—"
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return text + f".{moment.microsecond // 1000:03d}" if precise else text


def ago(value: Any) -> str:
    """How long ago, in words a person reads at a glance: ``5 s``, ``3 min``, ``2 h``, ``4 d``."""
    moment = _moment(value)
    if moment is None:
        return "—"
    seconds = max(0, int(time.time() - moment.timestamp()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def num(value: Any) -> str:
    return "—" if value is None else f"{value:,}"


def pct(value: Any) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def ms(value: Any) -> str:
    if value is None:
        return "—"
    return (
        f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"
    )


def utc_offset() -> str:
    """The gateway's UTC offset now, e.g. ``UTC+05:30``."""
    offset = datetime.now().astimezone().strftime("%z")
    return f"UTC{offset[:3]}:{offset[3:]}"


def chart(series: dict[str, Any], width: int = 600, height: int = 120) -> dict[str, Any]:
    """Polyline points of the MO-in and replies-out series, scaled to a round maximum."""
    mo_in: list[int] = series["mo_in"]
    replies: list[int] = series["replies"]
    peak = max([*mo_in, *replies, 1])
    top = next(
        n for n in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10**4, 10**5, 10**9) if n >= peak
    )
    step = width / max(1, len(mo_in) - 1)

    def points(values: list[int]) -> str:
        return " ".join(f"{i * step:.1f},{height - v / top * height:.1f}" for i, v in enumerate(values))

    return {
        "width": width,
        "height": height,
        "top": top,
        "mo_in": points(mo_in),
        "replies": points(replies),
        "seconds": len(mo_in),
    }


environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,
    undefined=jinja2.ChainableUndefined,  # optional fields of API documents render empty
    trim_blocks=True,
    lstrip_blocks=True,
)
environment.filters.update(when=when, ago=ago, num=num, pct=pct, ms=ms)
environment.globals.update(utc_offset=utc_offset, chart=chart, tone=tone, NO_REPLY_STATES=NO_REPLY_STATES)


def render(template: str, context: dict[str, Any]) -> str:
    return environment.get_template(template).render(context)


def html(template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """A console page (or fragment) with the console's security headers."""
    return HTMLResponse(render(template, context), status_code=status, headers=SECURITY_HEADERS)
