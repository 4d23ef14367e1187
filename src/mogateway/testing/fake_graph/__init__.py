"""A fake of Meta's Graph API for rehearsing and testing WhatsApp number migrations.

Start it with ``mogateway waba fake-graph --port 8765`` (built-in fixtures, token
``rehearsal-token``) or in tests with :class:`FakeGraphServer`. See reference §9 for the model.

For WhatsApp messaging it also answers ``POST /{version}/{phone_number_id}/messages`` (sends and
mark-read, recorded; errors on request: :mod:`.messaging`), and :mod:`.webhooks` plays Meta's side of
webhooks: bodies shaped like Meta's, posted signed with ``X-Hub-Signature-256``.

The names below are imported on first use (PEP 562), so the webhook builders (``.webhooks``, which
``mogateway simulate --whatsapp`` uses) load without the fake server's web stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mogateway.testing.fake_graph.fixtures import default_fixtures, load_fixtures
    from mogateway.testing.fake_graph.runner import FakeGraphServer, serve_forever
    from mogateway.testing.fake_graph.server import create_app
    from mogateway.testing.fake_graph.webhooks import Delivery, WebhookSender

_WHERE = {
    "Delivery": "webhooks",
    "FakeGraphServer": "runner",
    "WebhookSender": "webhooks",
    "create_app": "server",
    "default_fixtures": "fixtures",
    "load_fixtures": "fixtures",
    "serve_forever": "runner",
}

__all__ = [
    "Delivery",
    "FakeGraphServer",
    "WebhookSender",
    "create_app",
    "default_fixtures",
    "load_fixtures",
    "serve_forever",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
