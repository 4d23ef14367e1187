"""How the API shows messages (``api.views.messages``, where it lives so that the portal shares it
without an import cycle), under the name the API's modules import it by."""

from __future__ import annotations

from mogateway.api.views.messages import iso, message_json, shown_reply, timeline_json

__all__ = ["iso", "message_json", "shown_reply", "timeline_json"]
