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
  metadata lives there), CGNAT, documentation, benchmarking, multicast and reserved ranges are refused
  unless the operator set ``allow_private_callbacks``. The ranges are this module's own tables, from
  IANA's special-purpose address registries (:data:`REFUSED_IPV4`, :data:`REFUSED_IPV6`), not the
  ``is_global`` of Python's ``ipaddress``: its tables changed between patch releases of one Python
  (3.11.2 calls ``2002::/16`` private, 3.11.7 global), and what the gateway calls must not depend on
  the interpreter an operator runs it on.
* IPv6: only global unicast (``2000::/3``) outside those ranges, and the forms that carry an IPv4
  address the network delivers to, judged by that address: IPv4-mapped (``::ffff:0:0/96``), NAT64
  (``64:ff9b::/96``, RFC 6052) and 6to4 (``2002::/16``). Refused whatever they carry:
  IPv4-compatible (``::/96``, deprecated by RFC 4291), the local-use NAT64 prefix ``64:ff9b:1::/48``
  (RFC 8215), Teredo and the other IETF protocol assignments (``2001::/23``), the deprecated
  site-local ``fec0::/10``.

Resolving names is I/O and lives at the edge (``edges.urlguard``: at registration; ``edges.http1``: at
every connect, so DNS rebinding is caught too); these functions judge what they are given.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from functools import lru_cache
from urllib.parse import quote, urlsplit, urlunsplit

__all__ = [
    "REFUSED_IPV4",
    "REFUSED_IPV6",
    "UrlRefused",
    "address_allowed",
    "check_literal_host",
    "check_url_shape",
    "literal_ip",
    "normalize_callback_url",
]

_MAX_URL = 2048

#: IPv4 addresses never called: the entries of IANA's IPv4 Special-Purpose Address Registry that are
#: not globally reachable (2025), the deprecated 6to4 relay anycast (RFC 7526), multicast, and the
#: reserved 240/4 with the limited broadcast. Conservative where IANA is finer: all of 192.0.0.0/24
#: (two anycast addresses in it are reachable; no application lives there).
REFUSED_IPV4: tuple[ipaddress.IPv4Network, ...] = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # this network
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared address space (CGNAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local: cloud metadata services
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.88.99.0/24",  # 6to4 relay anycast, deprecated
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and 255.255.255.255
    )
)
#: IPv6 addresses never called inside global unicast ``2000::/3`` (everything outside it is refused,
#: but for the IPv4-carrying forms judged by their IPv4 address): IANA's IPv6 Special-Purpose
#: Address Registry.
REFUSED_IPV6: tuple[ipaddress.IPv6Network, ...] = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "2001::/23",  # IETF protocol assignments, Teredo (2001::/32) among them
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
    )
)
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class UrlRefused(OSError):
    """A callback URL (or the address it resolves to) that the gateway will not call."""


# ------------------------------------------------------------------------------------ addresses


def _ipv4_allowed(ip: ipaddress.IPv4Address) -> bool:
    return not any(ip in net for net in REFUSED_IPV4)


def _ipv6_allowed(ip: ipaddress.IPv6Address) -> bool:
    if ip.ipv4_mapped is not None:
        return _ipv4_allowed(ip.ipv4_mapped)
    if ip in _NAT64:
        return _ipv4_allowed(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip not in _GLOBAL_UNICAST or any(ip in net for net in REFUSED_IPV6):
        return False
    if ip.sixtofour is not None:
        return _ipv4_allowed(ip.sixtofour)
    return True


def address_allowed(address: str, allow_private: bool) -> bool:
    """True when ``address`` (an IP literal) may be called."""
    if allow_private:
        return True
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return _ipv4_allowed(ip)
    return _ipv6_allowed(ip)


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
