"""Joining the parts of a long MO back into one message (pure: the clock is passed in).

Rules stated before the code:

* A part is recognised from a User Data Header (IEI 0x00: 8-bit reference, IEI 0x08: 16-bit reference)
  or from SAR TLVs (sar_msg_ref_num, sar_total_segments, sar_segment_seqnum). A header that is not a
  valid concatenation (total or sequence 0, sequence beyond total) makes the message a single part.
* A set is identified by the caller's key (sender, recipient, link...) plus reference and total. Parts
  may arrive in any order and more than once; a repeated sequence number keeps the first payload.
* Payloads are joined as **bytes** before decoding, so a UCS-2 surrogate pair or a GSM-7 escape cut
  across two parts decodes correctly.
* A set not complete ``timeout_s`` after its first part is handed out by :meth:`Reassembler.expire` with
  the parts received, marked incomplete. Nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from mogateway.core.immutable import immutable

__all__ = ["Assembled", "PartInfo", "Reassembler", "parse_udh", "split_udh"]

T = TypeVar("T")

_IEI_CONCAT_8: Final = 0x00
_IEI_CONCAT_16: Final = 0x08


@immutable
class PartInfo:
    """Where one part sits in its set: reference number, parts in total, this part's number (1-based)."""

    reference: int
    total: int
    sequence: int

    @property
    def is_multipart(self) -> bool:
        """True when this is a real part of a longer message (not a 1-of-1 or an invalid header)."""
        return self.total > 1 and 1 <= self.sequence <= self.total


def split_udh(data: bytes) -> tuple[bytes, bytes]:
    """(UDH including its length byte, the rest). Raises ValueError if the UDH length overruns."""
    if not data:
        raise ValueError("empty message has no UDH")
    udhl = data[0]
    if udhl + 1 > len(data):
        raise ValueError(f"UDH length {udhl} exceeds the {len(data) - 1} bytes present")
    return data[: udhl + 1], data[udhl + 1 :]


def parse_udh(data: bytes) -> tuple[PartInfo | None, bytes]:
    """The concatenation info in ``data``'s UDH (None if absent) and the payload after the UDH.

    ``data`` must be a short message whose esm_class has UDHI (0x40) set.
    """
    udh, payload = split_udh(data)
    pos, end = 1, len(udh)
    info: PartInfo | None = None
    while pos + 2 <= end:
        iei, length = udh[pos], udh[pos + 1]
        value = udh[pos + 2 : pos + 2 + length]
        if len(value) != length:
            raise ValueError(f"UDH element 0x{iei:02X} overruns the header")
        if iei == _IEI_CONCAT_8 and length == 3:
            info = PartInfo(value[0], value[1], value[2])
        elif iei == _IEI_CONCAT_16 and length == 4:
            info = PartInfo((value[0] << 8) | value[1], value[2], value[3])
        pos += 2 + length
    return info, payload


@immutable
class Assembled(Generic[T]):
    """A joined message. ``items`` are the callers' per-part values (duplicates included), in arrival
    order; ``received`` lists the part numbers present; ``complete`` is False for a timed-out set."""

    key: Hashable
    payload: bytes
    total: int
    received: tuple[int, ...]
    complete: bool
    items: tuple[T, ...]

    @property
    def note(self) -> str:
        """``incomplete: 2 of 3 parts`` for the timeline, "" when complete."""
        return "" if self.complete else f"incomplete: {len(self.received)} of {self.total} parts"


@dataclass(slots=True)
class _PartSet(Generic[T]):
    total: int
    deadline: float
    parts: dict[int, bytes] = field(default_factory=dict)
    items: list[T] = field(default_factory=list)


class Reassembler(Generic[T]):
    """Collects parts of long messages; ``add`` returns the message when its last part arrives."""

    def __init__(self, timeout_s: float = 60.0, max_sets: int = 10_000) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.timeout_s = timeout_s
        self.max_sets = max_sets
        self._sets: dict[Hashable, _PartSet[T]] = {}

    def __len__(self) -> int:
        return len(self._sets)

    def add(self, key: Hashable, part: PartInfo, payload: bytes, now: float, item: T) -> Assembled[T] | None:
        """Add one part; the joined message when the set is now complete, else None."""
        if not part.is_multipart:
            return Assembled(key, payload, 1, (1,), True, (item,))
        set_key = (key, part.reference, part.total)
        entry = self._sets.get(set_key)
        if entry is None:
            entry = _PartSet(total=part.total, deadline=now + self.timeout_s)
            self._sets[set_key] = entry
        entry.items.append(item)
        entry.parts.setdefault(part.sequence, payload)
        if len(entry.parts) < entry.total:
            return None
        del self._sets[set_key]
        return self._joined(set_key, entry, complete=True)

    def expire(self, now: float) -> list[Assembled[T]]:
        """Every set whose time is up (or beyond ``max_sets``, oldest first), joined as incomplete."""
        due = [k for k, v in self._sets.items() if v.deadline <= now]
        overflow = len(self._sets) - len(due) - self.max_sets
        if overflow > 0:
            rest = sorted((v.deadline, i, k) for i, (k, v) in enumerate(self._sets.items()) if k not in due)
            due += [k for _, _, k in rest[:overflow]]
        out = []
        for set_key in due:
            entry = self._sets.pop(set_key)
            out.append(self._joined(set_key, entry, complete=False))
        return out

    def next_deadline(self) -> float | None:
        """When :meth:`expire` will next have something to hand out (None: nothing pending)."""
        return min((v.deadline for v in self._sets.values()), default=None)

    @staticmethod
    def _joined(set_key: Hashable, entry: _PartSet[T], *, complete: bool) -> Assembled[T]:
        numbers = tuple(sorted(entry.parts))
        payload = b"".join(entry.parts[n] for n in numbers)
        key = set_key[0] if isinstance(set_key, tuple) else set_key
        return Assembled(key, payload, entry.total, numbers, complete, tuple(entry.items))
