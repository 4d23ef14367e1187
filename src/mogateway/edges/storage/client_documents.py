"""How a client application is stored: one JSON document per client, its secrets sealed.

Both journals write and read client documents through these two functions, so what a document holds
and which of its members are secrets (``storage.sealing``) is written once.
"""

from __future__ import annotations

import orjson

from mogateway.core.clients import ClientRecord
from mogateway.edges.storage.sealing import Sealer

__all__ = ["client_document", "client_from_document"]


def client_document(client: ClientRecord, sealer: Sealer) -> str:
    """The JSON document both journals store for ``client``, its secrets sealed by ``sealer``."""
    return orjson.dumps(sealer.seal_document(client.to_doc())).decode()


def client_from_document(doc: str | bytes, sealer: Sealer) -> ClientRecord:
    """The client a stored document holds (SecretKeyError when its secrets cannot be opened)."""
    return ClientRecord.from_doc(sealer.open_document(orjson.loads(doc)))
