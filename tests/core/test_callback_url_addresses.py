"""Which addresses a callback may go to, from the gateway's own tables (``core.callback_url``): the
same verdicts on every Python, whatever its ``ipaddress`` module's tables say."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mogateway.core.callback_url import REFUSED_IPV4, REFUSED_IPV6, address_allowed

#: (address, may it be called). The first group are where Python releases disagree with each other
#: (3.11.2 calls 2002::/16 private, 3.11.7 global; 3.12.4 and later name exceptions inside 2001::/23).
VERDICTS = [
    ("2002:5db8:d822::1", True),  # 6to4 carrying 93.184.216.34
    ("2002:7f00:1::", False),  # 6to4 carrying 127.0.0.1
    ("2001:1::1", False),  # PCP anycast, inside the IETF protocol assignments: refused with them
    ("2001:3::1", False),  # AMT
    ("2001:4:112::1", False),  # AS112-v6
    ("2001:20::1", False),  # ORCHIDv2
    ("3fff::1", False),  # documentation, RFC 9637 (2024): newer than the tables of most Pythons
    ("::5db8:d822", False),  # IPv4-compatible, deprecated: refused whatever it carries
    ("192.0.0.9", False),  # an anycast address in 192.0.0.0/24, refused with the block
    ("192.88.99.1", False),  # 6to4 relay anycast, deprecated
    # the usual ranges
    ("93.184.216.34", True),
    ("8.8.8.8", True),
    ("100.63.255.255", True),
    ("100.64.0.1", False),  # CGNAT
    ("100.127.255.255", False),
    ("100.128.0.0", True),
    ("10.1.2.3", False),
    ("172.15.255.255", True),
    ("172.16.0.1", False),
    ("172.31.255.255", False),
    ("172.32.0.0", True),
    ("192.168.1.1", False),
    ("127.0.0.1", False),
    ("0.0.0.0", False),
    ("169.254.169.254", False),  # cloud metadata
    ("192.0.2.1", False),
    ("198.18.0.1", False),
    ("198.19.255.255", False),
    ("198.20.0.0", True),
    ("198.51.100.7", False),
    ("203.0.113.9", False),
    ("224.0.0.1", False),
    ("239.255.255.250", False),
    ("240.0.0.1", False),
    ("255.255.255.255", False),
    ("2606:4700:4700::1111", True),
    ("2a00:1450:4001:80b::200e", True),
    ("2620:4f:8000::1", True),  # AS112 direct delegation: globally reachable
    ("::1", False),
    ("::", False),
    ("::ffff:93.184.216.34", True),  # IPv4-mapped: judged by its IPv4 address
    ("::ffff:127.0.0.1", False),
    ("64:ff9b::5db8:d822", True),  # NAT64 carrying a public address
    ("64:ff9b::a9fe:a9fe", False),  # NAT64 carrying cloud metadata
    ("64:ff9b:1::5db8:d822", False),  # NAT64 local use (RFC 8215)
    ("100::1", False),  # discard-only
    ("2001:db8::1", False),
    ("2001:0:5db8:d822:0:0:80ff:fffe", False),  # Teredo
    ("fc00::1", False),
    ("fd12:3456::1", False),
    ("fe80::1", False),
    ("fe80::1%eth0", False),
    ("fec0::1", False),
    ("ff02::1", False),
    ("4000::1", False),  # outside global unicast
    ("not an address", False),
]


@pytest.mark.parametrize(("address", "allowed"), VERDICTS, ids=[a for a, _ in VERDICTS])
def test_verdicts(address: str, allowed: bool) -> None:
    assert address_allowed(address, False) is allowed
    assert address_allowed(address, True)  # the operator's switch allows everything


ipv4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)


@given(ipv4)
def test_every_form_carrying_an_ipv4_address_gets_that_address_verdict(v4: ipaddress.IPv4Address) -> None:
    verdict = address_allowed(str(v4), False)
    assert verdict is not any(v4 in net for net in REFUSED_IPV4)
    n = int(v4)
    assert address_allowed(f"::ffff:{v4}", False) is verdict
    assert address_allowed(str(ipaddress.IPv6Address((0x64FF9B << 96) | n)), False) is verdict
    assert address_allowed(str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1)), False) is verdict
    assert not address_allowed(str(ipaddress.IPv6Address(n)), False) or n <= 1  # ::/96 never (:: and ::1 too)


@given(st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address))
def test_ipv6_is_called_only_in_global_unicast_outside_the_refused_ranges(ip: ipaddress.IPv6Address) -> None:
    carries_ipv4 = ip.ipv4_mapped is not None or ip in ipaddress.IPv6Network("64:ff9b::/96")
    if carries_ipv4 or ip.sixtofour is not None:
        return  # judged by the IPv4 address (above)
    expected = ip in ipaddress.IPv6Network("2000::/3") and not any(ip in net for net in REFUSED_IPV6)
    assert address_allowed(str(ip), False) is expected
