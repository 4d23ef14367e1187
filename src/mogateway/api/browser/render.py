"""How the console's and the portal's pages are rendered, once: a Jinja2 environment per UI, the display
filters both use, and the security headers every page carries.

Rules: templates autoescape everything; pages carry a Content-Security-Policy that allows scripts,
styles and connections from this gateway only (no inline script or style anywhere), may not be framed,
and are never cached (a client's token is shown once and must not come back from a cache).

Each UI reads its own ``templates/`` folder first; the markup both show (a message's details, the
message search) is written once in this package's ``templates/``, which both read as ``browser/...``
(``{% from "browser/message.html" import ... %}``).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from starlette.responses import HTMLResponse

from mogateway.core.timeline import NO_REPLY_STATES, tone

__all__ = ["SECURITY_HEADERS", "Pages", "ago", "ms", "num", "pct", "utc_offset", "when"]

#: The partials both UIs include, read under the prefix ``browser/``.
SHARED_TEMPLATES = Path(__file__).with_name("templates")

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


class Pages:
    """One UI's pages: its own templates (then the shared ones, as ``browser/...``), the filters both
    UIs use and the globals given, rendered with the security headers."""

    def __init__(self, templates: Path, **globals: Any) -> None:
        loader = jinja2.ChoiceLoader(
            [
                jinja2.FileSystemLoader(templates),
                jinja2.PrefixLoader({"browser": jinja2.FileSystemLoader(SHARED_TEMPLATES)}),
            ]
        )
        self.environment = jinja2.Environment(
            loader=loader,
            autoescape=True,
            undefined=jinja2.ChainableUndefined,  # optional fields of API documents render empty
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.environment.filters.update(when=when, ago=ago, num=num, pct=pct, ms=ms)
        self.environment.globals.update(
            utc_offset=utc_offset, tone=tone, NO_REPLY_STATES=NO_REPLY_STATES, **globals
        )

    def render(self, template: str, context: dict[str, Any]) -> str:
        return self.environment.get_template(template).render(context)

    def html(self, template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
        """A page (or fragment) with the security headers."""
        return HTMLResponse(self.render(template, context), status_code=status, headers=SECURITY_HEADERS)
