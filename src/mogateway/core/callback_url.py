"""The rules a callback URL must keep: its shape, and the addresses the gateway will call (no SSRF).

Rules:

* Only http and https, no credentials, at most 2048 characters.
* No control characters (C0, DEL, C1) and no white space anywhere in the URL: they would either be
  dropped silently by URL parsers or end up in the request line. They must be percent-encoded.
* Non-ASCII is made ASCII the way browsers do it, once, at registration (the stored URL is that form):
  an international host name is written in IDNA ("xn--…"), every other non-ASCII character is
  percent-encoded as UTF-8. The HTTP client applies the same normalization to a URL stored by an older
  version, so such a URL is never a failure at send time.
* Every address a host resolves to must be globally routable: loopback, private, link-local (cloud
  metadata lives there), CGNAT, multicast and reserved ranges are refused unless the operator set
  ``allow_private_callbacks``. An IPv6 address that carries an IPv4 address — IPv4-mapped and
  IPv4-compatible (``::ffff:0:0/96``, ``::/96``), NAT64 (``64:ff9b::/96``, RFC 6052), 6to4
  (``2002::/16``), Teredo (``2001::/32``, server and client) — is judged by the IPv4 address it carries
  too, because the network delivers it there. The local-use NAT64 prefix ``64:ff9b:1::/48`` (RFC 8215)
  and the deprecated site-local ``fec0::/10`` are refused outright: they never leave the site.

Resolving names is I/O and lives at the edge (``edges.urlguard``: at registration; ``edges.http1``: at
every connect, so DNS rebinding is caught too); these functions judge what they are given.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from functools import lru_cache
from urllib.parse import quote, urlsplit, urlunsplit

__all__ = [
    "UrlRefused",
    "address_allowed",
    "check_literal_host",
    "check_url_shape",
    "literal_ip",
    "normalize_callback_url",
]

_MAX_URL = 2048

_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")


class UrlRefused(OSError):
    """A callback URL (or the address it resolves to) that the gateway will not call."""


# ------------------------------------------------------------------------------------ addresses


def _ipv4_allowed(ip: ipaddress.IPv4Address) -> bool:
    return ip.is_global and not ip.is_multicast


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, where the network would deliver it to them."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_COMPATIBLE or ip in _NAT64:
        return [low32]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)  # (server, client); the client address is already de-obfuscated
    return []


def address_allowed(address: str, allow_private: bool) -> bool:
    """True when ``address`` (an IP literal) may be called."""
    if allow_private:
        return True
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return _ipv4_allowed(ip.ipv4_mapped)
        if ip in _NAT64_LOCAL_USE or ip in _SITE_LOCAL:
            return False
        if not all(_ipv4_allowed(v4) for v4 in _embedded_ipv4(ip)):
            return False
    return ip.is_global and not ip.is_multicast


# ------------------------------------------------------------------------------------ URL text


def _refuse_controls(url: str) -> None:
    for index, ch in enumerate(url):
        if ch.isspace() or unicodedata.category(ch) == "Cc":
            raise UrlRefused(
                f"character {ch!r} at position {index} is not allowed in a URL "
                "(control characters and spaces must be percent-encoded)"
            )


def _ascii_host(host: str) -> str:
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        raise UrlRefused(f"host {host!r} is not a valid host name") from None


def _percent_encode_non_ascii(text: str) -> str:
    if text.isascii():
        return text
    try:
        return "".join(ch if ch.isascii() else quote(ch, safe="") for ch in text)
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for it
        raise UrlRefused("URL contains a character that has no UTF-8 form") from None


def check_url_shape(url: str) -> tuple[str, str]:
    """Scheme and host of a well-formed http(s) URL, or UrlRefused with the reason."""
    if len(url) > _MAX_URL:
        raise UrlRefused(f"URL longer than {_MAX_URL} characters")
    _refuse_controls(url)
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
def normalize_callback_url(url: str) -> str:
    """The ASCII form of a well-formed http(s) URL that the gateway stores and calls, or UrlRefused.

    The host name is written in IDNA, other non-ASCII characters are percent-encoded as UTF-8; an ASCII
    URL comes back unchanged (its host name checked).
    """
    _, host = check_url_shape(url)
    ascii_host = host if literal_ip(host) is not None else _ascii_host(host)
    if url.isascii():
        return url
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not hostport.startswith("["):  # an IPv6 literal is ASCII already (or refused below)
        _, colon, port = hostport.partition(":")
        hostport = ascii_host + colon + port
    normalized = urlunsplit(
        (
            parts.scheme,
            userinfo + at + hostport,
            _percent_encode_non_ascii(parts.path),
            _percent_encode_non_ascii(parts.query),
            _percent_encode_non_ascii(parts.fragment),
        )
    )
    if not normalized.isascii():
        raise UrlRefused("URL has non-ASCII characters where they cannot be encoded")
    check_url_shape(normalized)  # still within the length limit
    return normalized


@lru_cache(maxsize=4096)
def literal_ip(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def check_literal_host(url: str, allow_private: bool) -> None:
    """Refuse a URL whose host is an IP literal in a refused range (no DNS is involved for those)."""
    host = urlsplit(url).hostname or ""
    ip = literal_ip(host)
    if ip is not None and not address_allowed(ip, allow_private):
        raise UrlRefused(f"address {ip} is private, loopback or reserved")
