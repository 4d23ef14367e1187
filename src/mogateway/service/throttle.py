"""Log lines for operational events, rate-limited: the first at once, then one per period with a count.

Rules: an event that can come by the thousand in an outage (a reply given up, a bind down, a client
failing) is logged through a :class:`Throttle`, so the operator sees at once that it happens and then
how much, and the log stays readable. The timeline and /metrics keep every single one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["Throttle"]


class Throttle:
    """At most one log line per key every ``every_s`` seconds, counting the lines it held back."""

    def __init__(self, every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._last: dict[object, float] = {}
        self._held: dict[object, int] = {}

    def ready(self, key: object) -> int | None:
        """None: say nothing now. Otherwise log now: how many lines for ``key`` were held back since the
        last one (0 the first time)."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)

    def forget(self, key: object) -> int:
        """Start ``key`` afresh (the condition ended); how many lines were held back since its last one."""
        self._last.pop(key, None)
        return self._held.pop(key, 0)

    def more(self, held: int) -> str:
        """`` (N more like it in the last S s)`` for a line after ``held`` silent ones, else ''."""
        return f" ({held} more like it in the last {self.every_s:g} s)" if held else ""

    def round_failed(self, log: logging.Logger, what: str, exc: Exception) -> None:
        """A periodic task's round failed (the journal or the queue away; the next round tries again):
        ``<what> failed: <type>: <error>``, one line a minute while it lasts."""
        held = self.ready("failed")
        if held is not None:
            log.warning("%s failed: %s: %s%s", what, type(exc).__name__, exc, self.more(held))
