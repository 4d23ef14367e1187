"""Unix seconds as people read them: ISO 8601 in UTC with milliseconds (the callback's ``tsiso`` shape).

Total on purpose: every stored time reads back, whatever it is (see :func:`iso`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from mogateway.core.contract import format_tsiso

__all__ = ["iso"]


def iso(ts: float | None) -> str | None:
    """ISO 8601 UTC with milliseconds (the tsiso shape) for API output. Total: no stored time breaks it.

    Intake refuses times before 2000 or more than a day ahead, but a row written before that rule may
    hold any float; such a time is written out by arithmetic (years outside 0000-9999 with a sign, as
    ISO 8601's expanded form does), and a non-finite one as None, instead of failing the whole listing.
    """
    if ts is None:
        return None
    try:
        return format_tsiso(datetime.fromtimestamp(ts, UTC))
    except (OverflowError, OSError, ValueError):
        return _iso_any_year(ts)


def _iso_any_year(ts: float) -> str | None:
    if not math.isfinite(ts):
        return None
    # Split and round to microseconds as datetime.fromtimestamp does, so both paths agree to the digit.
    frac, whole = math.modf(ts)
    micros = int(whole) * 1_000_000 + round(frac * 1e6)
    days, ms = divmod(micros // 1000, 86_400_000)
    # Civil date from days since 1970-01-01, proleptic Gregorian (H. Hinnant's days_from_civil inverse).
    era, doe = divmod(days + 719_468, 146_097)
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    seconds, millis = divmod(ms, 1000)
    return (
        f"{shown}-{month:02d}-{day:02d}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        f".{millis:03d}Z"
    )
