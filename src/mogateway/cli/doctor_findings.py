"""What a check of ``mogateway doctor`` returns: a finding, one line — what was found, and what to do
when it is not ``ok``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["TIMEOUT_S", "Finding", "Status", "size"]

Status = Literal["ok", "warn", "fail"]

#: How long any one check waits for an answer (a database, NATS, a bind's host, the gateway).
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    action: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def size(n: float) -> str:
    """Bytes for people: 512 B, 3.4 MiB, 74.6 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
