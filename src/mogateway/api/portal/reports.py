"""Reports: the client's messages of a day or a month as CSV, streamed.

The export reads the journal a page at a time (``ClientScope.export``, keyset paging on (received_at,
id)) and sends each page as it is written, so a month of a million messages never sits in memory: the
gateway holds one page of rows at a time. The page shows a progress bar while it downloads (portal.js
reads the stream and counts rows against ``/portal/reports/count``); without JavaScript the link
downloads the file directly. Cells that a spreadsheet would take for a formula (``=``, ``+``, ``-``,
``@`` first) are prefixed with ``'``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import AsyncIterator
from datetime import datetime

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from mogateway.api.browser.render import SECURITY_HEADERS
from mogateway.api.browser.routes import Answered
from mogateway.api.portal.web import PortalRoute, Visit, context, html, page
from mogateway.core.isotime import iso
from mogateway.core.ports import MessageRecord
from mogateway.service.client_scope import ClientScope

__all__ = ["COLUMNS", "csv_rows", "router"]

router = APIRouter(prefix="/portal", include_in_schema=False, route_class=PortalRoute)

COLUMNS = (
    "id",
    "received_at",
    "channel",
    "shortcode",
    "msisdn",
    "operator",
    "circle",
    "message",
    "state",
    "reply",
    "updated_at",
)
_DAY = re.compile(r"\A\d{4}-\d{2}-\d{2}\Z")
_MONTH = re.compile(r"\A\d{4}-\d{2}\Z")


def _cell(value: str) -> str:
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _row(r: MessageRecord) -> list[str]:
    m = r.message
    s = m.sender
    return [
        m.id,
        iso(m.received_at) or "",
        m.channel,
        m.shortcode,
        m.msisdn,
        s.operator if s else "",
        s.circle if s else "",
        _cell(m.text),
        r.state.value,
        _cell(r.reply_text or ""),
        iso(r.updated_at) or "",
    ]


def period(query: dict[str, str]) -> tuple[float, float, str]:
    """(since, until, name) of ``day=YYYY-MM-DD`` or ``month=YYYY-MM`` in the gateway's time zone."""
    day, month = query.get("day", "").strip(), query.get("month", "").strip()
    try:
        if _DAY.match(day):
            start = datetime.fromisoformat(day).astimezone()
            end = datetime.fromordinal(start.toordinal() + 1).astimezone()
            return start.timestamp(), end.timestamp(), day
        if _MONTH.match(month):
            start = datetime.fromisoformat(month + "-01").astimezone()
            year, mon = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
            end = start.replace(year=year, month=mon)
            return start.timestamp(), end.timestamp(), month
    except ValueError:
        pass
    raise ValueError("choose a day (YYYY-MM-DD) or a month (YYYY-MM)")


async def csv_rows(scope: ClientScope, since: float, until: float) -> AsyncIterator[bytes]:
    """The CSV, header first, one chunk per journal page."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    yield buffer.getvalue().encode("utf-8")
    async for records in scope.export(since, until):
        buffer.seek(0)
        buffer.truncate()
        writer.writerows(_row(r) for r in records)
        yield buffer.getvalue().encode("utf-8")


@router.get("/reports")
async def reports_page(request: Request) -> Response:
    visit = await page(request)
    today = datetime.now().astimezone()
    ctx = await context(
        request, visit, "reports", day=today.strftime("%Y-%m-%d"), month=today.strftime("%Y-%m")
    )
    return html("reports.html", ctx)


async def _period_of(request: Request) -> tuple[Visit, float, float, str]:
    """The visit and the period a report asks for; a period that is none is answered by the page."""
    visit = await page(request)
    try:
        since, until, name = period(dict(request.query_params))
    except ValueError as exc:
        ctx = await context(request, visit, "reports", day="", month="")
        ctx["error"] = str(exc)
        raise Answered(html("reports.html", ctx, 422)) from None
    return visit, since, until, name


@router.get("/reports/count")
async def count(request: Request) -> Response:
    visit, since, until, _ = await _period_of(request)
    return JSONResponse(
        {"rows": await visit.scope.count(since, until)}, headers={"cache-control": "no-store"}
    )


@router.get("/reports/export.csv")
async def export(request: Request) -> Response:
    visit, since, until, name = await _period_of(request)
    filename = f"messages-{name}.csv"
    return StreamingResponse(
        csv_rows(visit.scope, since, until),
        media_type="text/csv; charset=utf-8",
        headers={
            **SECURITY_HEADERS,
            "content-disposition": f'attachment; filename="{filename}"',
        },
    )
