"""Talking with the person who runs a migration: the front end the flow draws on, and its dialogues.

Rules this file keeps:
* the flow asks only when ``ui.interactive()`` is true; without a terminal it stops instead and says
  which option to pass (the callers check that: the dialogues here assume a person is there);
* a typo (not 6 digits) is asked again and costs nothing; only a code Graph refused counts toward
  the limit of refused codes;
* ``r`` and ``v`` ask Meta for another code (``v`` by voice call) only once the resend cool-down is
  over; ``q`` stops, and the run continues later with ``--code``;
* the PIN is read hidden, and neither the PIN nor a code is ever shown or saved.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

from mogateway.waba.options import PIN_RE, normalize_code

PIN_TRIES = 3


class Mark(enum.Enum):
    """How a checklist line is shown."""

    OK = "ok"
    FAIL = "fail"
    UNKNOWN = "unknown"
    WARN = "warn"


class MigrationUI(Protocol):
    """What the orchestration needs from a front end (the CLI's is rich; a script's may be silent)."""

    def step(self, title: str) -> None:
        """A step starts."""

    def check(self, mark: Mark, text: str) -> None:
        """One checked fact."""

    def info(self, text: str) -> None:
        """Progress or advice."""

    def interactive(self) -> bool:
        """True when a person can answer prompts."""

    def confirm(self, question: str) -> bool:
        """Ask yes/no (only called when interactive)."""

    def ask(self, prompt: str) -> str:
        """Ask for a line of text (only called when interactive)."""

    def ask_secret(self, prompt: str) -> str:
        """Ask for a hidden line of text (only called when interactive)."""


class CodeDialogEnd(enum.Enum):
    """How the code dialogue ended."""

    VERIFIED = "verified"
    QUIT = "quit"
    TOO_MANY_REFUSED = "too_many_refused"


def ask_code(
    ui: MigrationUI,
    method: str,
    *,
    request_code: Callable[[str], None],
    verify: Callable[[str], bool],
    cooldown_left: Callable[[], float],
    max_refused: int,
) -> CodeDialogEnd:
    """Ask for the code until Graph accepts one, the person quits, or ``max_refused`` were refused.

    ``request_code(method)`` asks Meta for another code, ``verify(code)`` answers whether Graph
    accepted it, ``cooldown_left()`` is how many seconds remain before another code may be asked.
    """
    refused = 0
    ui.info("Type the 6 digits, or: r = send again, v = voice call instead, q = stop here")
    while True:
        answer = ui.ask(f"Code sent by {method}").strip().lower()
        if answer == "q":
            return CodeDialogEnd.QUIT
        if answer in ("r", "v"):
            left = cooldown_left()
            if left > 0:
                ui.info(f"Meta limits code requests: you can ask again in {left:.0f} s")
                continue
            method = "VOICE" if answer == "v" else method
            request_code(method)
            continue
        code = normalize_code(answer)
        if code is None:
            ui.info("A code is exactly 6 digits; type it again")
            continue
        if verify(code):
            return CodeDialogEnd.VERIFIED
        refused += 1
        if refused >= max_refused:
            return CodeDialogEnd.TOO_MANY_REFUSED
        hint = "v for a voice call" if method == "SMS" else "r for a new call"
        ui.info(f"Code refused (wrong or expired). Type it again, r for a new code, or {hint}")


def ask_pin(ui: MigrationUI) -> str | None:
    """The two-step PIN typed (hidden) by the person, or None after :data:`PIN_TRIES` invalid ones."""
    ui.info(
        "register needs the number's 6-digit two-step PIN. If two-step verification is off, "
        "choose one: it becomes the new PIN."
    )
    for _ in range(PIN_TRIES):
        pin = ui.ask_secret("Two-step PIN (6 digits)").strip()
        if PIN_RE.match(pin):
            return pin
        ui.info("The PIN is exactly 6 digits")
    return None
