"""Running an application's handler within a time budget, from asyncio or from a WSGI thread.

The gateway gives an application 30 s for the whole exchange and then records a timeout. A handler
that overruns its budget (set below 30 s) is therefore answered for: the endpoint replies 200 with an
empty body (no reply) in time, so the gateway records a clean "blank" instead of a timeout and the
connection is not left hanging. Python cannot kill a thread: an overrunning sync handler keeps its
worker thread until it returns; its result is then discarded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from mogateway.client.message import InboundMessage
from mogateway.client.whatsapp_answer import WhatsAppAnswer

__all__ = ["BudgetExceeded", "Handler", "HandlerRunner", "Reply", "is_async_handler"]

#: What a handler answers: the reply text, a rich WhatsApp answer (``client.whatsapp_answer``), or None
#: (or "") for no reply.
Reply: TypeAlias = str | WhatsAppAnswer | None
#: A handler: sync or async callable taking the message. A sync callable may also return an awaitable
#: (a router dispatching to an async handler does), which is then awaited within the same budget.
Handler: TypeAlias = Callable[[InboundMessage], Reply | Awaitable[Reply]]


class BudgetExceeded(Exception):
    """The handler did not answer within its budget."""


def is_async_handler(handler: Handler) -> bool:
    """True for ``async def`` functions and objects whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - we want the async-ness of __call__, not callability
    )


def _checked(result: object) -> Reply:
    if result is None or isinstance(result, str | WhatsAppAnswer):
        return result
    raise TypeError(f"a handler must return str, WhatsAppAnswer or None, not {type(result).__name__}")


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class HandlerRunner:
    """Calls one handler under a budget; sync handlers run on a bounded pool of worker threads."""

    def __init__(self, handler: Handler, *, budget_s: float, max_threads: int = 32) -> None:
        if budget_s <= 0:
            raise ValueError("budget_s must be positive")
        self.handler = handler
        self.budget_s = budget_s
        self._is_async = is_async_handler(handler)
        self._max_threads = max_threads
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The worker threads for sync handlers (created on first use)."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._max_threads, thread_name_prefix="mogateway-handler"
            )
        return self._executor

    def close(self) -> None:
        """Release the worker threads (running handlers finish on their own)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # ------------------------------------------------------------------------------------ asyncio

    async def run(self, message: InboundMessage) -> Reply:
        """The handler's answer, or BudgetExceeded; the handler's own exceptions propagate."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.budget_s
        first: Awaitable[Any]
        if self._is_async:
            first = self.handler(message)  # type: ignore[assignment]
        else:
            first = loop.run_in_executor(self.executor, self.handler, message)
        result = await self._within(first, deadline)
        if inspect.isawaitable(result):
            result = await self._within(result, deadline)
        return _checked(result)

    @staticmethod
    async def _within(awaitable: Awaitable[Any], deadline: float) -> Any:
        task = asyncio.ensure_future(awaitable)
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            # asyncio.wait, not wait_for: we answer at the deadline even if the handler swallows
            # its cancellation, instead of waiting for it to give up.
            done, _ = await asyncio.wait({task}, timeout=max(remaining, 0))
        except asyncio.CancelledError:
            task.cancel()  # the request itself went away (client disconnected, server stopping)
            raise
        if not done:
            task.cancel()
            task.add_done_callback(_discard_outcome)
            raise BudgetExceeded
        return task.result()

    # ------------------------------------------------------------------------------------ threads

    def run_sync(self, message: InboundMessage) -> Reply:
        """Blocking variant for WSGI servers: same budget, same answers."""
        future = self.executor.submit(self._call_to_completion, message)
        try:
            return future.result(timeout=self.budget_s)
        except concurrent.futures.TimeoutError:
            future.cancel()  # still queued behind busy threads: never start it
            raise BudgetExceeded from None

    def _call_to_completion(self, message: InboundMessage) -> Reply:
        result = self.handler(message)
        if inspect.isawaitable(result):
            # An async handler under WSGI gets its own short-lived event loop in the worker thread,
            # bounded by the budget so an overrun does not hold the thread forever.
            result = asyncio.run(asyncio.wait_for(_await(result), timeout=self.budget_s))
        return _checked(result)


def _discard_outcome(task: asyncio.Future[Any]) -> None:
    # Retrieve the late outcome so asyncio does not log "exception was never retrieved".
    if not task.cancelled():
        task.exception()
