"""Refuse callback URLs that point into the gateway's own network (SSRF), at registration and at connect.

Only http and https are allowed, and every address a host resolves to must be globally routable:
loopback, private, link-local (cloud metadata lives there), CGNAT, multicast and reserved ranges are
refused unless the operator set ``allow_private_callbacks``. The check runs again when connecting (in
:mod:`mogateway.service.http1`, on every address a name resolves to), so a name that resolved to a
public address at registration cannot later be pointed at 127.0.0.1 (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from functools import lru_cache
from urllib.parse import urlsplit

__all__ = ["UrlRefused", "address_allowed", "check_callback_url", "check_literal_host", "check_url_shape"]

_MAX_URL = 2048


class UrlRefused(OSError):
    """A callback URL (or the address it resolves to) that the gateway will not call."""


def address_allowed(address: str, allow_private: bool) -> bool:
    """True when ``address`` (an IP literal) may be called."""
    if allow_private:
        return True
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def check_url_shape(url: str) -> tuple[str, str]:
    """Scheme and host of a well-formed http(s) URL, or UrlRefused with the reason."""
    if len(url) > _MAX_URL:
        raise UrlRefused(f"URL longer than {_MAX_URL} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise UrlRefused(f"malformed URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise UrlRefused("only http and https URLs are allowed")
    if not parts.hostname:
        raise UrlRefused("URL has no host")
    if parts.username or parts.password:
        raise UrlRefused("credentials in the URL are not allowed; the gateway sends a bearer token")
    return parts.scheme, parts.hostname


@lru_cache(maxsize=4096)
def _literal_ip(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def check_literal_host(url: str, allow_private: bool) -> None:
    """Refuse a URL whose host is an IP literal in a refused range (no DNS is involved for those)."""
    host = urlsplit(url).hostname or ""
    ip = _literal_ip(host)
    if ip is not None and not address_allowed(ip, allow_private):
        raise UrlRefused(f"address {ip} is private, loopback or reserved")


async def check_callback_url(url: str, allow_private: bool) -> None:
    """Full check at registration: shape, then every resolved address. Raises UrlRefused."""
    _, host = check_url_shape(url)
    if allow_private:
        return
    ip = _literal_ip(host)
    if ip is not None:
        if not address_allowed(ip, False):
            raise UrlRefused(f"address {ip} is private, loopback or reserved")
        return
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UrlRefused(f"host {host!r} does not resolve: {exc.strerror or exc}") from None
    for info in infos:
        address = str(info[4][0])
        if not address_allowed(address, False):
            raise UrlRefused(f"host {host!r} resolves to {address}, a private, loopback or reserved address")
