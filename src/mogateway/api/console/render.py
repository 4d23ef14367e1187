"""Rendering of console pages: the console's templates and the traffic chart (the environment, filters
and security headers both UIs share are ``api.browser.render``'s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.responses import HTMLResponse

from mogateway.api.browser.render import Pages

__all__ = ["chart", "environment", "html", "console_pages", "render"]


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


console_pages = Pages(Path(__file__).with_name("templates"), chart=chart)
environment = console_pages.environment


def render(template: str, context: dict[str, Any]) -> str:
    return console_pages.render(template, context)


def html(template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """A console page (or fragment) with the security headers."""
    return console_pages.html(template, context, status)
