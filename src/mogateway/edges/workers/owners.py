"""Which worker process owns an MO (``core.workers``), the plan's rule applied to a gateway's settings.

Each worker records the owner of the MOs it stores (``mogateway.modes``); the supervisor, before it
starts them, gives every unfinished MO to the worker the plan names now (the number of workers or a
client's cap may have changed since the last run). Here so that the supervisor applies the rule without
loading the modes and what they build.
"""

from __future__ import annotations

from collections.abc import Callable

from mogateway.config import Settings
from mogateway.core.clients import ClientRecord
from mogateway.core.message import Message
from mogateway.core.workers import WorkerPlan

__all__ = ["owner_rule"]


def owner_rule(
    plan: WorkerPlan, settings: Settings, route: Callable[[str, str], ClientRecord | None]
) -> Callable[[Message], int]:
    """The worker that owns an MO (``core.workers``), its client found by ``route(shortcode, text)`` and
    its bind by its origin (``smpp:<bind name>``, in the order of the settings)."""
    bind_at = {f"smpp:{bind.name}": j for j, bind in enumerate(settings.smpp.binds)}

    def owner_of(message: Message) -> int:
        client = route(message.shortcode, message.text) if message.accepted else None
        return plan.owner_of(message.id, client, bind_at.get(message.origin))

    return owner_of
