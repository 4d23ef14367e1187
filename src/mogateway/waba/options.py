"""What the user asked a migration for, and the forms Graph accepts for it.

Rules this file keeps:
* secrets (PIN, code, verify token) live in :class:`MigrationOptions` for one run and never in the
  state file, so a later run needs them again;
* values Graph would refuse anyway are refused before anything is sent, with exit status USAGE:
  a numeric WABA id, SMS or VOICE, a language like ``en_US``, a PIN and a code of exactly 6 digits,
  an ``https://`` callback URL of at most 200 characters that comes with a verify token (``http://``
  only to this machine, ``127.0.0.1``/``localhost``/``[::1]``: a rehearsal against the fake Graph API);
* a code may be typed with spaces or a dash ("123 456", "123-456"); only its 6 digits are sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from mogateway.waba import calls
from mogateway.waba.errors import ExitCode, MigrationStopped
from mogateway.waba.phone import PhoneNumber

CODE_RE = re.compile(r"^\d{6}$")
PIN_RE = re.compile(r"^\d{6}$")
LANGUAGE_RE = re.compile(r"^[a-z]{2,3}(_[A-Z]{2})?$")
MAX_CALLBACK_URL = 200
#: Where a mogateway gateway takes Meta's webhooks (``api.whatsapp.WEBHOOK_PATH``), for ``--gateway-url``.
GATEWAY_WEBHOOK_PATH = "/v1/whatsapp/webhook"
#: The gateway's own verify token setting: ``--gateway-url`` uses it when ``--verify-token`` is not given.
GATEWAY_VERIFY_TOKEN_ENV = "MOGATEWAY_WHATSAPP__VERIFY_TOKEN"


@dataclass
class MigrationOptions:
    """What the user asked for. Secrets (PIN, code, verify token) live here, never in the state."""

    waba_id: str
    phone: PhoneNumber
    code_method: str = "SMS"
    language: str = "en_US"
    pin: str | None = None
    code: str | None = None
    new_code: bool = False
    callback_url: str | None = None
    verify_token: str | None = None
    assume_yes: bool = False
    resend_cooldown_s: float = 60.0
    max_code_attempts: int = 5

    def validate(self) -> None:
        """Raise ``MigrationStopped(USAGE)`` for values Graph would refuse anyway."""
        if not self.waba_id.isdigit():
            raise MigrationStopped(
                ExitCode.USAGE, f"--waba-id must be the numeric WABA id, not {self.waba_id!r}"
            )
        if self.code_method not in calls.CODE_METHODS:
            raise MigrationStopped(ExitCode.USAGE, "--code-method must be SMS or VOICE")
        if not LANGUAGE_RE.match(self.language):
            raise MigrationStopped(ExitCode.USAGE, f"--language must look like en_US, not {self.language!r}")
        if self.pin is not None and not PIN_RE.match(self.pin):
            raise MigrationStopped(ExitCode.USAGE, "the PIN must be exactly 6 digits")
        if self.code is not None and normalize_code(self.code) is None:
            raise MigrationStopped(ExitCode.USAGE, "--code must be the 6 digits Meta sent")
        if self.callback_url is not None:
            if not callback_url_allowed(self.callback_url):
                raise MigrationStopped(ExitCode.USAGE, "--callback-url must be an https:// URL")
            if len(self.callback_url) > MAX_CALLBACK_URL:
                raise MigrationStopped(ExitCode.USAGE, f"--callback-url is longer than {MAX_CALLBACK_URL}")
            if not self.verify_token:
                raise MigrationStopped(ExitCode.USAGE, "--callback-url needs --verify-token")


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def callback_url_allowed(url: str) -> bool:
    """``https://`` anywhere; ``http://`` only to this machine (a rehearsal with the fake Graph API)."""
    if url.startswith("https://"):
        return True
    if not url.startswith("http://"):
        return False
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return host in LOOPBACK_HOSTS


def gateway_callback_url(gateway_url: str) -> str:
    """The webhook URL of the gateway at ``gateway_url`` (its public base, e.g. ``https://gw.example``)."""
    return gateway_url.strip().rstrip("/") + GATEWAY_WEBHOOK_PATH


def normalize_code(text: str) -> str | None:
    """The 6 digits of a code typed as "123456", "123 456" or "123-456"; None if it is not one."""
    compact = re.sub(r"[\s-]", "", text)
    return compact if CODE_RE.match(compact) else None
