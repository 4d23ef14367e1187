"""Where the migration calls Meta's Graph API unless told otherwise, on its own so that the CLI shows
these defaults in its help without loading the HTTP client (``waba.graph`` re-exports them)."""

from __future__ import annotations

__all__ = ["DEFAULT_GRAPH_URL", "DEFAULT_VERSION"]

DEFAULT_GRAPH_URL = "https://graph.facebook.com"
DEFAULT_VERSION = "v25.0"
