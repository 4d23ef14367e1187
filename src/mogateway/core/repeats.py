"""Redeliveries: when an MO a source hands over is one the gateway already holds.

A source that names its messages is deduplicated by the message id its name gives
(``core.message.id_for_source``). An SMSC may name an MO (its message id, source id ``s:<id>``) or not;
then the bind names it by its content, ``c:<digest>:<ms>`` (:func:`content_source_id`), seen at its own
time on every delivery. And an SMSC redelivers an MO it had no answer for over any bind of the account,
which may sit in another worker or node. So, for an arrival with a repeat window (SMPP), the journal
looks, inside the write that would store it, for an MO from the same number whose source id is of the
same family (:func:`repeat_family`: the same content, or the same SMSC id) received within the window,
and answers the arrival as that MO (:func:`repeat_lookups` says what to read, :func:`find_repeats`
decides). Doing it inside the write, which the workers (or, on PostgreSQL, the nodes, under a lock per
number) take in turn, is what keeps two writers from both taking one redelivery for new.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mogateway.core.message import Message

__all__ = ["content_digest", "content_source_id", "find_repeats", "repeat_family", "repeat_lookups"]


def content_source_id(digest: str, seen_ms: int) -> str:
    """The source id of a message known only by its content: ``c:<digest>:<ms>`` (the digest names the
    content, the unix milliseconds when it was seen date the id)."""
    return f"c:{digest}:{seen_ms}"


def content_digest(source_id: str | None) -> str | None:
    """The digest of a content source id (:func:`content_source_id`); None for any other source id."""
    if source_id is None or not source_id.startswith("c:"):
        return None
    digest, sep, seen_ms = source_id[2:].partition(":")
    return digest if digest and sep and seen_ms.isdigit() else None


def repeat_family(source_id: str | None) -> str | None:
    """What the source id of an MO shares with every delivery of that MO, over any bind: for a content
    id (:func:`content_source_id`) its ``c:<digest>:`` (each delivery is seen at its own time), for any
    other source id (an SMSC's message id) the source id itself; None without one."""
    if source_id is None:
        return None
    digest = content_digest(source_id)
    return source_id if digest is None else f"c:{digest}:"


def repeat_lookups(batch: Sequence[tuple[Message, float | None]]) -> list[tuple[str, str, str, float]]:
    """What a journal reads for :func:`find_repeats`: for each number and family
    (:func:`repeat_family`) in ``batch`` (the messages with a source id and a ``since``), the number,
    the range of the source ids of that family (from ``low`` included to ``high`` excluded, in byte
    order) and the earliest ``since``."""
    wanted: dict[tuple[str, str], float] = {}
    for message, since in batch:
        family = None if since is None else repeat_family(message.source_id)
        if family is not None and since is not None:
            key = (message.msisdn, family)
            wanted[key] = min(since, wanted.get(key, since))
    return [
        (msisdn, family, family[:-1] + ";" if family.startswith("c:") else family + "\x01", since)
        for (msisdn, family), since in wanted.items()
    ]


def find_repeats(
    batch: Sequence[tuple[Message, float | None]], earlier: Iterable[tuple[str, str, str | None, float]]
) -> dict[int, str]:
    """The MOs of ``batch`` that repeat an earlier MO: position -> that MO's id.

    Each batch entry is a message and ``since``: the earliest ``received_at`` an MO it repeats may have
    (None: it repeats nothing). A message repeats the first MO from the same msisdn whose source id is
    of the same family (:func:`repeat_family`: the same content, or the same SMSC message id) received
    at or after its ``since``: one stored before, from ``earlier`` (rows of id, msisdn, source id,
    received_at, in any order), or one before it in the batch. The journal calls this inside the
    transaction that stores the batch, with the rows :func:`repeat_lookups` names.
    """
    seen: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for mid, msisdn, source_id, received_at in earlier:
        family = repeat_family(source_id)
        if family is not None:
            seen.setdefault((msisdn, family), []).append((received_at, mid))
    repeats: dict[int, str] = {}
    for n, (message, since) in enumerate(batch):
        family = None if since is None else repeat_family(message.source_id)
        if family is None or since is None:
            continue
        known = seen.setdefault((message.msisdn, family), [])
        first = min((entry for entry in known if entry[0] >= since), default=None)
        if first is None:
            known.append((message.received_at, message.id))
        else:
            repeats[n] = first[1]
    return repeats
