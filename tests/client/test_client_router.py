"""KeywordRouter: first word, case-insensitive, default, sync and async handlers."""

from __future__ import annotations

import inspect

import pytest

from mogateway.client import InboundMessage, KeywordRouter
from mogateway.testing.payloads import make_message


def test_routes_by_first_word_case_insensitively() -> None:
    router = KeywordRouter(default=lambda m: "default")
    router.add("BAL", lambda m: f"balance {m.argument}", "balance")

    @router.keyword("help")
    def help_(_: InboundMessage) -> str:
        return "help"

    assert router(make_message("bal savings")) == "balance savings"
    assert router(make_message("  Balance")) == "balance "
    assert router(make_message("HELP me")) == "help"
    assert router(make_message("BALANCES")) == "default"  # whole word only
    assert router(make_message("")) == "default"
    assert router.keywords == ["BAL", "BALANCE", "HELP"]


def test_without_default_unknown_keywords_get_no_reply() -> None:
    router = KeywordRouter()
    router.add("STOP", lambda m: "bye")
    assert router(make_message("hello")) is None


async def test_async_handler_result_is_awaitable() -> None:
    router = KeywordRouter()

    async def stop(_: InboundMessage) -> str:
        return "bye"

    router.add("STOP", stop)
    result = router(make_message("stop"))
    assert inspect.isawaitable(result)
    assert await result == "bye"


@pytest.mark.parametrize("bad", ["", "  ", "TWO WORDS"])
def test_keyword_must_be_one_word(bad: str) -> None:
    with pytest.raises(ValueError):
        KeywordRouter().add(bad, lambda m: None)


def test_a_keyword_is_routed_once() -> None:
    router = KeywordRouter()
    router.add("BAL", lambda m: "a")
    with pytest.raises(ValueError, match="already routed"):
        router.add("bal", lambda m: "b")
