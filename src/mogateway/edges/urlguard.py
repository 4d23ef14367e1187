"""The callback URL check at registration: the rules of ``core.callback_url`` applied to every address
the host name resolves to (through a :data:`Resolver`, the event loop's by default). The HTTP client
(``edges.http1``) applies the same rules again at every connect, so a name that resolved to a public
address at registration cannot later be pointed at 127.0.0.1 (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from mogateway.core.callback_url import UrlRefused, address_allowed, literal_ip, normalize_callback_url

__all__ = ["Resolver", "check_callback_url", "system_resolver"]

#: Resolves ``(host, port)`` to the ``(address family, address)`` pairs to try, in order, without
#: duplicates. Raises OSError when the name does not resolve.
Resolver = Callable[[str, int], Awaitable[list[tuple[int, str]]]]


async def system_resolver(host: str, port: int) -> list[tuple[int, str]]:
    """The event loop's getaddrinfo, as a :data:`Resolver`."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except UnicodeError as exc:  # the idna codec refuses the name before any lookup
        raise OSError(f"not a valid host name ({exc})") from None
    found: list[tuple[int, str]] = []
    for family, _, _, _, sockaddr in infos:
        pair = (int(family), str(sockaddr[0]))
        if pair not in found:
            found.append(pair)
    return found


async def check_callback_url(url: str, allow_private: bool, resolve: Resolver = system_resolver) -> str:
    """Full check at registration: shape, then every resolved address. Returns the URL's ASCII form
    (:func:`normalize_callback_url`); raises UrlRefused."""
    normalized = normalize_callback_url(url)
    if allow_private:
        return normalized
    host = urlsplit(normalized).hostname or ""
    ip = literal_ip(host)
    if ip is not None:
        if not address_allowed(ip, False):
            raise UrlRefused(f"address {ip} is private, loopback or reserved")
        return normalized
    try:
        found = await resolve(host, 0)
    except OSError as exc:
        raise UrlRefused(f"host {host!r} does not resolve: {exc.strerror or exc}") from None
    for _, address in found:
        if not address_allowed(address, False):
            raise UrlRefused(f"host {host!r} resolves to {address}, a private, loopback or reserved address")
    return normalized
