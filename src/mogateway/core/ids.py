"""Ids in URLs: the one shape every id has, checked at the edge, before anything looks one up.

Every path parameter named ``*_id`` (``client_id``, ``message_id``, ``template_id``) of the admin API
and the console must be an id: 1 to 128 characters, ASCII letters, digits, ``_`` and ``-``, starting
with a letter or digit. Anything else — ``.`` and ``..`` (which a URL built from them would turn into
another path: ``/v1/clients/.`` is the client list), blanks, ``%``, ``?``, ``/``, a leading ``-``,
anything longer — is answered 404 like an id that exists nowhere (a problem document from the API, the
not-found page from the console) and reaches no handler. Every id the gateway makes has this shape
(``cl_`` and base32 for clients, base32hex for messages, 19 digits for DLT templates), and ids of
messages stored from a source keep to it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["ID_SHAPE", "not_an_id", "what_id"]

ID_SHAPE: Final = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_-]{0,127}\Z")


def not_an_id(path_params: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first path parameter named ``*_id`` whose value is not an id: (its name, its value)."""
    for name, value in path_params.items():
        if name.endswith("_id") and not ID_SHAPE.match(str(value)):
            return name, str(value)
    return None


def what_id(name: str) -> str:
    """What a parameter's id names, for people: ``client_id`` -> ``client``."""
    return name.removesuffix("_id").replace("_", " ")
