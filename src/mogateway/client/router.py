"""Dispatch by keyword: the first word of the message, case-insensitive, with a default.

    router = KeywordRouter(default=help_text)
    router.add("BAL", balance)                 # or: @router.keyword("BAL", "BALANCE")
    app = CallbackApp(router, tokens=[...])   # a router is itself a handler

Handlers may be sync or async; the router returns what the chosen handler returns (an awaitable for
an async one), and the endpoint awaits it within the same budget.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mogateway.client.handler import Handler, Reply
from mogateway.client.message import InboundMessage

__all__ = ["KeywordRouter"]


def _normalize(keyword: str) -> str:
    word = keyword.strip()
    if not word or any(ch.isspace() for ch in word):
        raise ValueError(f"a keyword is one word, got {keyword!r}")
    return word.upper()


class KeywordRouter:
    """A handler that picks another handler by the message's first word."""

    def __init__(self, default: Handler | None = None) -> None:
        self._routes: dict[str, Handler] = {}
        self.default = default

    def add(self, keyword: str, handler: Handler, *aliases: str) -> None:
        """Route ``keyword`` (and ``aliases``) to ``handler``; a keyword may be routed only once."""
        for word in (keyword, *aliases):
            key = _normalize(word)
            if key in self._routes:
                raise ValueError(f"keyword {key!r} is already routed")
            self._routes[key] = handler

    def keyword(self, keyword: str, *aliases: str) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`add`."""

        def register(handler: Handler) -> Handler:
            self.add(keyword, handler, *aliases)
            return handler

        return register

    @property
    def keywords(self) -> list[str]:
        """The routed keywords, upper case, in the order they were added."""
        return list(self._routes)

    def route(self, message: InboundMessage) -> Handler | None:
        """The handler for ``message``: its keyword's, else the default (None if there is none)."""
        return self._routes.get(message.keyword, self.default)

    def __call__(self, message: InboundMessage) -> Reply | Awaitable[Reply]:
        handler = self.route(message)
        return None if handler is None else handler(message)
