"""URLs as they may be shown: in logs, in ``mogateway doctor``'s settings and findings, in messages.

Rules:

* The password of the user-info (``postgresql://user:secret@host``) becomes ``***``; the user name
  stays (it tells which account), except in a ``nats://`` URL, where user-info without a password is a
  token (``nats://token@host``) and is hidden whole.
* Every query value whose key names a secret becomes ``***``: a key containing ``pass`` (password,
  passwd, sslpassword), ``pwd``, ``secret``, ``token`` (access_token), ``key`` (api_key, apikey,
  sslkey), ``auth``, ``sig`` (signature), ``credential``, ``session``, ``jwt`` or ``nkey``, in any case.
  Other keys and values, and the rest of the URL, are left exactly as written.
* A value holding several URLs separated by commas (NATS servers) has each one redacted.
* What does not parse as a URL is returned as it is when it holds no ``@`` and no query, and hidden
  whole (``***``) otherwise: a value that might hold a secret is never shown on a guess.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["REDACTED", "redact_url", "secret_name"]

REDACTED = "***"
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key|auth|sig|credential|session|jwt|nkey", re.I)


def secret_name(name: str) -> bool:
    """Whether a query key (or a setting's name) names a secret."""
    return _SECRET_KEY.search(name) is not None


def _query(query: str) -> str:
    kept: list[str] = []
    for item in query.split("&"):
        key, has_value, _ = item.partition("=")
        kept.append(f"{key}={REDACTED}" if has_value and secret_name(unquote(key)) else item)
    return "&".join(kept)


def _one(url: str) -> str:
    try:
        parts = urlsplit(url)
        password = parts.password
        username = parts.username
    except ValueError:
        return url if "@" not in url and "?" not in url else REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        if password is not None:
            netloc = f"{userinfo.split(':', 1)[0]}:{REDACTED}@{hostport}"
        elif username and parts.scheme.lower().startswith("nats"):
            netloc = f"{REDACTED}@{hostport}"
    query = _query(parts.query) if parts.query else parts.query
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def redact_url(url: str) -> str:
    """``url`` without its secrets (the module's rules)."""
    if "," in url and url.count("://") > 1:
        return ",".join(_one(part) for part in url.split(","))
    return _one(url)
