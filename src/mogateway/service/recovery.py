"""Recovery at start: every MO the journal holds as unfinished is queued again.

On the embedded default the work queue lives in memory, so after a stop (SIGKILL or a plain SIGTERM)
the journal is the only record of what is left. :func:`recover` runs before any source can deliver
(binds and the HTTP API start after it), so each unfinished MO is queued exactly once, whatever its
state — queued, answered, or replying (its reply being handed over) — and however many there are:
pages follow the primary key (keyset paging), so none is read twice or skipped. Each is queued as
redelivered: the dispatcher reads the journal first and does only what is left.

With several worker processes (``core.workers``) each recovers the MOs it owns (``owner``), after it
listens for its siblings' dispatch hints: an MO a sibling stored for it is then either in what it reads
or hinted to it.
"""

from __future__ import annotations

import logging

from mogateway.core.ports import MessageStore, WorkQueue

__all__ = ["PAGE", "recover"]

log = logging.getLogger("mogateway")

#: Unfinished MOs read per journal query.
PAGE = 1000


async def recover(
    store: MessageStore, queue: WorkQueue, page: int = PAGE, *, owner: int | None = None
) -> int:
    """Queue every unfinished MO (of ``owner``) again (see the module docstring); how many."""
    total = 0
    after = ""
    while True:
        records = await store.unfinished(page, after=after, owner=owner)
        if not records:
            break
        await queue.put([r.message for r in records], redelivered=True)
        total += len(records)
        after = records[-1].id
    if total:
        log.info("recovery: %d unfinished messages queued again", total)
    return total
