"""The rules the console's and the portal's sessions share (``api.browser.sessions``), pinned: the keys a
session's id derives are those the two copies derived before they became one module, so sessions,
CSRF tokens and sealed flashes made before an upgrade stay good after it, and one scope's are never
the other's."""

from __future__ import annotations

import base64
import hashlib
import hmac

from mogateway.api.browser.sessions import (
    CONSOLE,
    PORTAL,
    csrf_token,
    lookup_key,
    open_flashes,
    safe_next,
    seal_flashes,
    session_key,
)
from mogateway.api.console.sessions import token_tag

SESSION = "s" * 43


def _hmac(label: bytes) -> bytes:
    return hmac.new(SESSION.encode(), label, hashlib.sha256).digest()


def test_derived_keys_are_those_of_before_and_differ_per_scope() -> None:
    for scope, label in ((CONSOLE, b"mogateway console "), (PORTAL, b"mogateway portal ")):
        expected = base64.urlsafe_b64encode(_hmac(label + b"csrf")).decode().rstrip("=")
        assert csrf_token(scope, SESSION) == expected
    assert csrf_token(CONSOLE, SESSION) != csrf_token(PORTAL, SESSION)
    tag_key = _hmac(b"mogateway console admin token")
    assert token_tag(SESSION, "admin") == hmac.new(tag_key, b"admin", hashlib.sha256).hexdigest()
    assert session_key(SESSION) == hashlib.sha256(SESSION.encode()).hexdigest()


def test_flashes_open_only_in_their_scope_and_only_for_their_session() -> None:
    sealed = seal_flashes(PORTAL, SESSION, [{"kind": "info", "text": "new token"}])
    assert open_flashes(PORTAL, SESSION, sealed) == [{"kind": "info", "text": "new token"}]
    assert open_flashes(CONSOLE, SESSION, sealed) == []
    assert open_flashes(PORTAL, "t" * 43, sealed) == []
    assert open_flashes(PORTAL, SESSION, "not base64 at all!") == []


def test_lookups_and_redirects_stay_inside() -> None:
    assert lookup_key(None) is None and lookup_key("") is None and lookup_key("x" * 101) is None
    assert lookup_key(SESSION) == session_key(SESSION)
    assert safe_next(PORTAL, "/portal/messages?x=1") == "/portal/messages?x=1"
    assert safe_next(PORTAL, "/console/") == "/portal/"
    assert safe_next(CONSOLE, "//evil.example/console/") == "/console/"
    assert safe_next(CONSOLE, "/console/\\evil") == "/console/"
