"""What the CLI's exit status means, one definition for every command (``docs/configuration.md`` lists
them; a test keeps the two in step). ``mogateway simulate`` and ``mogateway waba`` add codes of their own
above these, documented with them."""

from __future__ import annotations

import enum

__all__ = ["Exit"]


class Exit(enum.IntEnum):
    OK = 0  # done
    FAILED = 1  # the command failed (e.g. the gateway could not start)
    USAGE = 2  # bad usage or invalid settings
    UNREACHABLE = 3  # the gateway's API (or the database) could not be reached
    REFUSED = 4  # the API refused the request (the problem's detail is printed)
    NOT_FOUND = 5  # not found
    NOT_YET = 6  # what was waited for is not there: send --wait without an outcome, migrate --check behind
