"""Logging: readable text on a terminal, one JSON object per line for log collectors. No secrets."""

from __future__ import annotations

import logging
import sys
import time

import orjson

__all__ = ["setup_logging"]


class JsonFormatter(logging.Formatter):
    def __init__(self, worker: str = "") -> None:
        super().__init__()
        self._worker = worker

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if self._worker:
            doc["worker"] = self._worker
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc).decode()


def setup_logging(level: str = "info", fmt: str = "text", *, worker: str = "") -> None:
    """Log to stderr at ``level`` as ``fmt``; ``worker`` names the worker process on every line."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(worker))
    else:
        tag = f"[{worker}] " if worker else ""
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)-7s {tag}%(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn's error logger is useful (bind failures); its access log is not wanted on the hot path.
    logging.getLogger("uvicorn.access").disabled = True
    # httpx logs every request's URL, query string and all, at INFO (the console's in-process API calls
    # carry the numbers searched for): no subscriber number in the log at INFO, only its warnings.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    # asyncpg's pool logs a traceback each time it fails to reconnect while PostgreSQL is away: an
    # expected failure of the environment, said in one line a minute (service.journal_health says the rest).
    logging.getLogger("asyncpg.pool").addFilter(_OneLineAMinute())


class _OneLineAMinute(logging.Filter):
    """Connection failures without their traceback, each message at most once a minute."""

    def __init__(self, every_s: float = 60.0) -> None:
        super().__init__()
        self._every_s = every_s
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and not isinstance(exc, OSError | ConnectionError):
            module = type(exc).__module__.split(".", 1)[0]
            if module != "asyncpg":
                return True  # something else: kept whole
        if exc is not None:
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        key = record.getMessage()[:80]
        now = time.monotonic()
        if now - self._last.get(key, -self._every_s) < self._every_s:
            return False
        self._last[key] = now
        return True
