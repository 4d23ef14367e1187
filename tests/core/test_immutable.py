"""``@immutable`` behaves as ``@dataclass(frozen=True, slots=True)`` does, except for the run-time guard:
the same equality and hash, identity where ``eq=False``, a ``__hash__`` of its own kept, keyword-only
fields, no ``__dict__``; and the type checker refuses an assignment to a field, as it does for a frozen
dataclass (that check is what replaces the guard)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from mypy import api as mypy_api

from mogateway.core.immutable import immutable
from mogateway.core.message import Message
from mogateway.core.timeline import Event, EventKind, Step

SRC = Path(__file__).resolve().parents[2] / "src"


@immutable
class Point:
    x: int
    y: int
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenPoint:
    x: int
    y: int
    tags: tuple[str, ...] = ()


def test_equal_and_hashed_by_fields_like_a_frozen_dataclass() -> None:
    a, b, c = Point(1, 2, ("a",)), Point(1, 2, ("a",)), Point(1, 3)
    assert a == b and a != c
    assert hash(a) == hash(b) == hash(FrozenPoint(1, 2, ("a",)))
    assert len({a, b, c}) == 2
    assert dataclasses.replace(a, y=3) == Point(1, 3, ("a",))
    assert a == Point(1, 2, ("a",))  # replace made a copy


def test_slotted() -> None:
    assert not hasattr(Point(1, 2), "__dict__")
    assert vars(Point)["__slots__"] == ("x", "y", "tags")


def test_without_eq_compares_and_hashes_by_identity() -> None:
    @immutable(eq=False)
    class Handle:
        name: str
        table: dict[str, int]  # unhashable field: a field-based hash would fail

    one, other = Handle("a", {}), Handle("a", {})
    assert one != other and one == one
    assert hash(one) == object.__hash__(one)
    assert len({one, other}) == 2


def test_a_hash_of_its_own_is_kept() -> None:
    @immutable
    class Keyed:
        key: str
        detail: str

        def __hash__(self) -> int:
            return hash(self.key)

    assert hash(Keyed("k", "one")) == hash("k")
    assert Keyed("k", "one") != Keyed("k", "two")


def test_keyword_only() -> None:
    @immutable(kw_only=True)
    class Options:
        a: int
        b: int = 0

    assert Options(a=1).b == 0
    with pytest.raises(TypeError):
        Options(1)  # type: ignore[call-arg]


def test_the_gateways_values_are_immutable_and_hashable() -> None:
    event = Event(EventKind.RECEIVED, 1.0)
    assert event == Event(EventKind.RECEIVED, 1.0)
    message = Message("id1", "56767", "919812345678", "HELLO", 1.0)
    assert len({message, dataclasses.replace(message)}) == 1
    assert Step.__hash__ is object.__hash__  # the table's steps are cached by identity


def test_the_type_checker_refuses_an_assignment(tmp_path: Path) -> None:
    snippet = (
        "from mogateway.core.message import Message\n"
        "from mogateway.core.immutable import immutable\n"
        "@immutable\n"
        "class Point:\n"
        "    x: int\n"
        "m = Message('id1', '56767', '919812345678', 'HELLO', 1.0)\n"
        "m.text = 'changed'\n"
        "p = Point(1)\n"
        "p.x = 2\n"
        "ok = {p}\n"
    )
    config = tmp_path / "mypy.ini"  # not the project's: it names the files to check
    config.write_text(f"[mypy]\nmypy_path = {SRC}\ncache_dir = {tmp_path / 'cache'}\n")
    out, err, status = mypy_api.run(
        ["--config-file", str(config), "--strict", "--no-error-summary", "--show-error-codes", "-c", snippet]
    )
    assert status == 1, out + err
    errors = [line for line in out.splitlines() if "error:" in line]
    assert len(errors) == 2, out
    assert 'Property "text" defined in "Message" is read-only' in errors[0]
    assert 'Property "x" defined in "Point" is read-only' in errors[1]
