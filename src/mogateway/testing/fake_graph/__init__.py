"""A fake of Meta's Graph API for rehearsing and testing WhatsApp number migrations.

Start it with ``mogateway waba fake-graph --port 8765`` (built-in fixtures, token
``rehearsal-token``) or in tests with :class:`FakeGraphServer`. See reference §9 for the model.

For WhatsApp messaging it also answers ``POST /{version}/{phone_number_id}/messages`` (sends and
mark-read, recorded; errors on request: :mod:`.messaging`), and :mod:`.webhooks` plays Meta's side of
webhooks: bodies shaped like Meta's, posted signed with ``X-Hub-Signature-256``.
"""

from mogateway.testing.fake_graph.fixtures import default_fixtures, load_fixtures
from mogateway.testing.fake_graph.runner import FakeGraphServer, serve_forever
from mogateway.testing.fake_graph.server import create_app
from mogateway.testing.fake_graph.webhooks import Delivery, WebhookSender

__all__ = [
    "Delivery",
    "FakeGraphServer",
    "WebhookSender",
    "create_app",
    "default_fixtures",
    "load_fixtures",
    "serve_forever",
]
