"""Readiness: whether this process takes traffic now, and if not, why (``GET /readyz``).

``/healthz`` is liveness — the process runs and answers; restart it only when that fails. ``/readyz``
is readiness — a load balancer or an orchestrator sends traffic only while it answers 200. It answers
503 with its reasons while:

* ``journal_not_writable``: journal writes fail (a full disk, an I/O error, PostgreSQL gone), or wait
  to be tried again (``service.journal_health``);
* ``free_space_low``: the free-space guard refuses new MOs;
* ``no_bind_up``: this process holds SMPP binds and none of them is bound.

Each worker process of a gateway answers for itself (and for the binds it holds; a worker that holds
none does not judge binds): ``/readyz`` goes to whichever worker the kernel hands the connection to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mogateway.core.immutable import immutable
from mogateway.service.journal_health import JournalHealth

__all__ = ["Reason", "readiness"]


@immutable
class Reason:
    """Why this process is not ready: a stable ``kind`` for scripts and a ``detail`` for people."""

    kind: str
    detail: str

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail}


def readiness(health: JournalHealth, binds: Iterable[Mapping[str, Any]] | None) -> list[Reason]:
    """The reasons this process is not ready (empty: ready). ``binds``: the status rows of the binds
    this process holds (None or empty: it holds none)."""
    reasons: list[Reason] = []
    if not health.writable:
        errors = health.last_errors()
        what = "; ".join(f"{kind}: {error}" for kind, error in errors.items()) or "writes wait"
        waiting = f" ({health.waiting} records wait to be written)" if health.waiting else ""
        reasons.append(Reason("journal_not_writable", f"the journal cannot write: {what}{waiting}"))
    refusing = health.refusing()
    if refusing is not None:
        reasons.append(Reason("free_space_low", refusing))
    rows = list(binds or ())
    if rows and not any(row.get("state") == "bound" for row in rows):
        names = ", ".join(str(row.get("name")) for row in rows)
        reasons.append(Reason("no_bind_up", f"none of the binds this process holds is bound ({names})"))
    return reasons
