"""The gateway as the web layer sees it: what the API's handlers and the console use of ``node.Gateway``.

A module of its own, outside ``api``, so that ``api`` (which assembles the application and mounts the
console) and ``api.console`` (which renders pages) both depend on it and not on each other; mypy checks
``node.Gateway`` against it where the application is built (``api.app``).
"""

from __future__ import annotations

from typing import Any, Protocol

from mogateway.config import Settings
from mogateway.core.ports import Journal, MessageRecord
from mogateway.service.intake import Intake
from mogateway.service.registry import Registry
from mogateway.service.stats import ClusterView, StatsService

__all__ = ["ClusterView", "GatewayView"]


class GatewayView(Protocol):
    """The gateway as the API's handlers (and the console) use it; ``node.Gateway`` is one."""

    @property
    def settings(self) -> Settings: ...

    @property
    def admin_token(self) -> str: ...

    @property
    def ingest_token(self) -> str: ...

    @property
    def journal(self) -> Journal: ...

    @property
    def media_url_keys(self) -> list[bytes]:
        """The keys of signed media URLs (core.media_url), the signing one first."""
        ...

    @property
    def registry(self) -> Registry: ...

    @property
    def intake(self) -> Intake: ...

    @property
    def stats(self) -> StatsService | None: ...

    @property
    def cluster(self) -> ClusterView | None: ...

    async def replay(self, message_id: str) -> MessageRecord | None: ...

    async def binds_status(self) -> list[dict[str, Any]]: ...

    async def live_binds(self) -> list[dict[str, Any]]: ...

    async def metrics_exposition(self) -> bytes: ...

    def health(self) -> dict[str, Any]: ...
