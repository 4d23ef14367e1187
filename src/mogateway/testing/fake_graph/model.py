"""The fake Graph API's data, apart from its endpoints (``world``): Graph's limits and formats, the
clock tests move forward, and the record of a number being migrated.

Migration record states: REQUESTED → CODE_SENT → VERIFIED → REGISTERED.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CODE_RE",
    "DELETION_WAIT_S",
    "LANGUAGE_RE",
    "REGIONS",
    "REGISTER_LIMIT",
    "REGISTER_WINDOW_S",
    "Clock",
    "Migration",
    "truthy",
]

REGISTER_WINDOW_S = 72 * 3600
REGISTER_LIMIT = 10
DELETION_WAIT_S = 300
LANGUAGE_RE = re.compile(r"^[a-z]{2,3}([_-][A-Z]{2})?$")
CODE_RE = re.compile(r"^\d{6}$")
REGIONS = {"AU", "ID", "IN", "JP", "SG", "KR", "DE", "CH", "GB", "BR", "BH", "ZA", "AE", "CA"}


class Clock:
    """Wall time plus an offset tests move forward (``POST /__fake/clock``)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        """Virtual epoch seconds."""
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        """Move virtual time forward."""
        self.offset += seconds


@dataclass
class Migration:
    """A number being migrated into a destination WABA, keyed by its new phone number id."""

    pid: str
    e164: str
    dest_waba: str
    state: str = "REQUESTED"
    code: str | None = None
    code_expires: float = 0.0
    attempts: int = 0
    code_requests: list[float] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """For ``/__fake/state`` (the code is shown: this is a test server)."""
        return dict(self.__dict__)


def truthy(value: Any) -> bool:
    """Graph booleans: ``true`` or ``"true"``."""
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))
