"""A fake of Meta's Graph API for rehearsing and testing WhatsApp number migrations.

Start it with ``mogateway waba fake-graph --port 8765`` (built-in fixtures, token
``rehearsal-token``) or in tests with :class:`FakeGraphServer`. See reference §9 for the model.
"""

from mogateway.testing.fake_graph.fixtures import default_fixtures, load_fixtures
from mogateway.testing.fake_graph.runner import FakeGraphServer, serve_forever
from mogateway.testing.fake_graph.server import create_app

__all__ = ["FakeGraphServer", "create_app", "default_fixtures", "load_fixtures", "serve_forever"]
