"""``@immutable``: the dataclass of the gateway's values (messages, events, PDUs, results). The type
checker treats it as read-only; at run time it is a plain slotted class.

``@dataclass(frozen=True)`` guards against assignment at run time. Its ``__init__`` writes every field
through ``object.__setattr__``, which takes about ten times as long as a plain slot write (130 against
13 ns per field on the machine of docs/benchmarks.md §0.7). An SMPP MO builds about 190 fields of such
values on its way through the gateway, so the guard alone was about 9 % of a worker's CPU.

An ``@immutable`` class is checked as frozen: ``dataclass_transform(frozen_default=True)`` makes mypy
refuse an assignment to a field, as it does for ``frozen=True``. It is also hashed from its fields as a
frozen dataclass is: ``unsafe_hash`` is set where ``frozen=True`` would have added ``__hash__``, that is
with ``eq`` and no ``__hash__`` of its own. The one difference: an assignment the type check already
refused no longer raises at run time. ``dataclasses.replace`` makes changed copies, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["immutable"]

T = TypeVar("T")


@overload
def immutable(cls: type[T], /) -> type[T]: ...


@overload
def immutable(*, eq: bool = True, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def immutable(cls: Any = None, /, *, eq: bool = True, kw_only: bool = False) -> Any:
    """``@immutable`` or ``@immutable(eq=..., kw_only=...)``: a slotted dataclass, frozen to the type
    checker (module docstring)."""

    def make(c: Any) -> Any:
        hashed = eq and "__hash__" not in c.__dict__
        return dataclass(c, eq=eq, kw_only=kw_only, slots=True, unsafe_hash=hashed)

    return make if cls is None else make(cls)
