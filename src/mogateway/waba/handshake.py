"""Does a callback URL answer Meta's webhook handshake? Asked the way Meta asks it.

Rules this file keeps:
* the check is Meta's verification GET: ``hub.mode=subscribe``, the verify token and a fresh random
  challenge; it passes only for ``200`` with exactly the challenge as the body;
* the same GET with a wrong token must be refused (any answer but ``200`` with the challenge): an
  endpoint that echoes every challenge would take anyone's subscription, and would also pass the
  first check with any token;
* redirects are not followed (Meta does not), at most 1 KiB of an answer is read, one overall
  deadline per request; the verify token never appears in the outcome's words.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Final

import httpx

__all__ = ["HandshakeCheck", "check_handshake"]

MAX_ANSWER: Final = 1024


@dataclass(frozen=True)
class HandshakeCheck:
    """The outcome: ``ok``, or why not (``reachable`` False when no HTTP answer came at all)."""

    ok: bool
    reason: str
    reachable: bool = True


def _get(client: httpx.Client, url: str, token: str, challenge: str) -> tuple[int, str]:
    params = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge}
    with client.stream("GET", url, params=params) as answer:
        body = b""
        for chunk in answer.iter_bytes():
            body += chunk
            if len(body) > MAX_ANSWER:
                break
        return answer.status_code, body[:MAX_ANSWER].decode("utf-8", "replace")


def check_handshake(url: str, verify_token: str, *, timeout_s: float = 10.0) -> HandshakeCheck:
    """Send Meta's verification GET to ``url`` (then one with a wrong token) and judge the answers."""
    challenge = str(secrets.randbelow(9 * 10**9) + 10**9)
    wrong = "not-" + secrets.token_hex(8)
    try:
        with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
            status, body = _get(client, url, verify_token, challenge)
            if status != 200:
                return HandshakeCheck(False, f"the handshake was answered HTTP {status}, not 200")
            if body != challenge:
                return HandshakeCheck(
                    False, "the handshake was answered 200 without the challenge as the body"
                )
            status, body = _get(client, url, wrong, challenge)
            if status == 200 and body == challenge:
                return HandshakeCheck(
                    False, "a wrong verify token was accepted too: the endpoint checks nothing"
                )
    except httpx.HTTPError as exc:
        return HandshakeCheck(False, f"no answer from {url}: {type(exc).__name__}", reachable=False)
    return HandshakeCheck(True, f"{url} answered the handshake (and refused a wrong token)")
